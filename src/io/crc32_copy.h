// A copy that takes the CRC-32 of the bytes it copies, in the same pass over them: the CRC of a
// sample copied out of a mapping (io/mapped_file.h) costs no second pass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoke {

// Where a copy's stores go.
enum class CopyStores {
  kCached,        // as ordinary stores do: the destination's lines are read into the cache first
  kAroundCaches,  // non-temporal stores: for data nobody reads before it has left the caches anyway
};

// Copies n bytes from `src` to `dst` (which must not overlap) and returns the CRC-32 (the zlib/gzip
// polynomial, Parquet's page CRC) of those bytes, continuing from `crc`: the same value as ISA-L's
// crc32_gzip_refl(crc, src, n), so 0 starts a CRC and a result continues it over the next bytes.
//
// On x86-64 CPUs with VPCLMULQDQ, copies of at least kCrc32CopyFoldBytes fold the CRC in the
// registers that carry the copy (Crc32CopyBestKernel), so the bytes are read once: a CRC after the
// copy reads them again, from memory where they are larger than the core's caches. Elsewhere, and
// for shorter copies, it is memcpy followed by ISA-L's CRC over the destination. A folded copy to a
// 64-byte aligned `dst` stores around the caches where `stores` says so (fenced before it returns,
// or, cut short by a fault, by MappedFile's guard; other copies store as usual). Thread-safe;
// no allocation, no lock, no system call (a copy out of a mapping may run under MappedFile's SIGBUS
// guard).
uint32_t Crc32Copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc, CopyStores stores = CopyStores::kCached);

// Copies this long and longer fold the CRC in the copy's registers (where the CPU can). Shorter ones
// take memcpy and ISA-L's CRC over the destination, still in the core's cache: there the fold's
// set-up and reduction cost more than the second pass (the loader's 512-byte samples ran 0.89x as
// fast folded; its 16 KiB samples 1.06x, 115 KB to 4 MiB 1.5-1.6x: docs/benchmarks.md).
inline constexpr size_t kCrc32CopyFoldBytes = 4096;

// How a copy takes its CRC.
enum class Crc32CopyKernel {
  kPlain,    // memcpy, then ISA-L's CRC over the destination
  kFold256,  // folded 256 bits at a time (AVX2 and VPCLMULQDQ)
  kFold512,  // folded 512 bits at a time (AVX-512F and VPCLMULQDQ): 1.1-1.2x kFold256 from memory
};

// The kernel this CPU runs for Crc32Copy's long copies, decided when the program loads.
Crc32CopyKernel Crc32CopyBestKernel();

// Crc32Copy with the given kernel, whatever the length (a copy shorter than the kernel's block is
// plain): for tests that compare the kernels. REQUIRES: the CPU runs `kernel` (kPlain runs anywhere;
// a kernel runs where Crc32CopyBestKernel is that one or a wider one).
uint32_t Crc32CopyWith(Crc32CopyKernel kernel, CopyStores stores, uint8_t* dst, const uint8_t* src, size_t n,
                       uint32_t crc);

}  // namespace stoke
