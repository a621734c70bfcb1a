// A copy that takes the CRC-32 of the bytes it copies, in the same pass over them: the CRC of a
// sample copied out of a mapping (io/mapped_file.h) costs no second pass.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoke {

// Copies n bytes from `src` to `dst` (which must not overlap) and returns the CRC-32 (the zlib/gzip
// polynomial, Parquet's page CRC) of those bytes, continuing from `crc`: the same value as ISA-L's
// crc32_gzip_refl(crc, src, n), so 0 starts a CRC and a result continues it over the next bytes.
//
// On x86-64 CPUs with AVX2 and VPCLMULQDQ, copies of at least kCrc32CopyFoldBytes fold the CRC
// 256 bits at a time in the registers that carry the copy, so the bytes are read once: a CRC after
// the copy reads them again, from memory where they are larger than the core's caches. Elsewhere,
// and for shorter copies, it is memcpy followed by ISA-L's CRC over the destination. Thread-safe;
// no allocation, no lock, no system call (a copy out of a mapping may run under MappedFile's SIGBUS
// guard).
uint32_t Crc32Copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc);

// Copies this long and longer fold the CRC in the copy's registers (where the CPU can). Shorter ones
// take memcpy and ISA-L's CRC over the destination, still in the core's cache: there the fold's
// set-up and reduction cost more than the second pass (the loader's 512-byte samples ran 0.89x as
// fast folded; its 16 KiB samples 1.06x, 115 KB to 4 MiB 1.5-1.6x: docs/benchmarks.md).
inline constexpr size_t kCrc32CopyFoldBytes = 4096;

// Whether this CPU runs Crc32Copy's folding kernel (for tests and benchmarks).
bool Crc32CopyFolds();

// Crc32Copy as on a CPU without the folding kernel (memcpy, then ISA-L's CRC): for tests that compare
// the two.
uint32_t Crc32CopyPlain(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc);

}  // namespace stoke
