#include "io/crc32_copy.h"

#include <gtest/gtest.h>
#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

namespace stoke {
namespace {

// Random bytes, the same on every run.
std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// Copies `n` bytes from src + src_shift to a destination dst_shift bytes past a 64-byte boundary
// with `copy`, and checks the CRC against ISA-L's, the copied bytes, and that no byte around the
// destination changed.
template <typename Copy>
void ExpectCopiesAndChecksums(Copy copy, const std::vector<uint8_t>& src, size_t n, size_t src_shift, size_t dst_shift,
                              uint32_t seed) {
  constexpr uint8_t kGuard = 0xA5;
  std::vector<uint8_t> buffer(n + dst_shift + 192, kGuard);
  const size_t base = 64 + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;  // 64 guard bytes before
  uint8_t* dst = buffer.data() + base + dst_shift;
  const uint32_t expected = crc32_gzip_refl(seed, const_cast<uint8_t*>(src.data() + src_shift), n);
  ASSERT_EQ(copy(dst, src.data() + src_shift, n, seed), expected)
      << "n " << n << " src+" << src_shift << " dst+" << dst_shift << " seed " << seed;
  ASSERT_EQ(std::memcmp(dst, src.data() + src_shift, n), 0) << "n " << n;
  for (size_t i = 0; i < base + dst_shift; ++i) ASSERT_EQ(buffer[i], kGuard) << "byte before the copy, n " << n;
  for (size_t i = base + dst_shift + n; i < buffer.size(); ++i) {
    ASSERT_EQ(buffer[i], kGuard) << "byte after the copy, n " << n;
  }
}

// The kernels this CPU runs, the plain one first.
std::vector<Crc32CopyKernel> RunnableKernels() {
  std::vector<Crc32CopyKernel> kernels{Crc32CopyKernel::kPlain};
  if (Crc32CopyBestKernel() != Crc32CopyKernel::kPlain) kernels.push_back(Crc32CopyKernel::kFold256);
  if (Crc32CopyBestKernel() == Crc32CopyKernel::kFold512) kernels.push_back(Crc32CopyKernel::kFold512);
  if (kernels.size() < 3) {
    std::cerr << "this CPU runs " << kernels.size() << " of the 3 kernels: the others are not tested\n";
  }
  return kernels;
}

// Crc32CopyWith(kernel, stores), as a copy function.
auto CopyWith(Crc32CopyKernel kernel, CopyStores stores) {
  return [kernel, stores](uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
    return Crc32CopyWith(kernel, stores, dst, src, n, crc);
  };
}

// Crc32Copy with its default stores, as a copy function.
uint32_t CachedCopy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) { return Crc32Copy(dst, src, n, crc); }

constexpr CopyStores kBothStores[] = {CopyStores::kCached, CopyStores::kAroundCaches};

TEST(Crc32CopyTest, EveryLengthUpToTwiceTheFoldsMatchesIsaL) {
  const size_t most = 2 * kCrc32CopyFoldBytes + 300;
  const std::vector<uint8_t> src = RandomBytes(most + 64, 1);
  for (size_t n = 0; n <= most; ++n) {
    const uint32_t seed = n % 3 == 0 ? 0 : static_cast<uint32_t>(n * 2654435761u);
    ExpectCopiesAndChecksums(CachedCopy, src, n, n % 32, (n * 7) % 32, seed);
    for (Crc32CopyKernel kernel : RunnableKernels()) {
      SCOPED_TRACE(static_cast<int>(kernel));
      ExpectCopiesAndChecksums(CopyWith(kernel, CopyStores::kCached), src, n, (n * 3) % 64, (n * 5) % 64, seed);
      // Aligned: around the caches where the kernel folds.
      ExpectCopiesAndChecksums(CopyWith(kernel, CopyStores::kAroundCaches), src, n, (n * 3) % 64, 0, seed);
    }
  }
}

TEST(Crc32CopyTest, EveryAlignmentMatchesIsaL) {
  const std::vector<uint8_t> src = RandomBytes(70000, 2);
  for (Crc32CopyKernel kernel : RunnableKernels()) {
    for (CopyStores stores : kBothStores) {  // around the caches only where the destination is 64-byte aligned
      SCOPED_TRACE(::testing::Message() << static_cast<int>(kernel) << " stores " << static_cast<int>(stores));
      for (size_t n : {kCrc32CopyFoldBytes, size_t{16388}, size_t{65536}, size_t{65536 + 77}}) {
        for (size_t src_shift = 0; src_shift < 64; ++src_shift) {
          ExpectCopiesAndChecksums(CopyWith(kernel, stores), src, n, src_shift, 63 - src_shift, 0xFFFFFFFFu);
        }
      }
    }
  }
}

TEST(Crc32CopyTest, CopiesAroundTheCachesMatchIsaLAlignedOrNot) {
  const std::vector<uint8_t> src = RandomBytes(400000, 5);
  auto around = [](uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
    return Crc32Copy(dst, src, n, crc, CopyStores::kAroundCaches);
  };
  for (size_t n : {size_t{1}, kCrc32CopyFoldBytes - 1, kCrc32CopyFoldBytes, size_t{115200}, size_t{368640 + 77}}) {
    for (size_t dst_shift : {size_t{0}, size_t{32}, size_t{7}}) {
      ExpectCopiesAndChecksums(around, src, n, dst_shift + 1, dst_shift, 0x12345678u);
    }
  }
}

TEST(Crc32CopyTest, ContinuesACrcAcrossPieces) {
  const std::vector<uint8_t> src = RandomBytes(40000, 3);
  std::vector<uint8_t> dst(src.size());
  const size_t cut = 12345;
  uint32_t crc = Crc32Copy(dst.data(), src.data(), cut, 0);
  crc = Crc32Copy(dst.data() + cut, src.data() + cut, src.size() - cut, crc);
  EXPECT_EQ(crc, crc32_gzip_refl(0, const_cast<uint8_t*>(src.data()), src.size()));
  EXPECT_EQ(dst, src);
}

TEST(Crc32CopyTest, KnownValues) {
  // The CRC-32 check value of the standard ("123456789"), and of 256 bytes 0..255 (zlib's crc32).
  const char* check = "123456789";
  uint8_t out[9];
  EXPECT_EQ(Crc32Copy(out, reinterpret_cast<const uint8_t*>(check), 9, 0), 0xCBF43926u);
  std::vector<uint8_t> ramp(256), copy(256);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32Copy(copy.data(), ramp.data(), ramp.size(), 0), 0x29058C73u);
  EXPECT_EQ(copy, ramp);
}

TEST(Crc32CopyTest, EveryKernelContinuesACrcAcrossPieces) {
  const std::vector<uint8_t> src = RandomBytes(300000, 4);
  const uint32_t whole = crc32_gzip_refl(0, const_cast<uint8_t*>(src.data()), src.size());
  for (Crc32CopyKernel kernel : RunnableKernels()) {
    std::vector<uint8_t> dst(src.size());
    uint32_t crc = 0;
    for (size_t at = 0, piece = 1; at < src.size(); at += piece, piece = piece * 3 + 1) {
      const size_t n = std::min(piece, src.size() - at);
      crc = Crc32CopyWith(kernel, kBothStores[at % 2], dst.data() + at, src.data() + at, n, crc);
    }
    EXPECT_EQ(crc, whole) << static_cast<int>(kernel);
    EXPECT_EQ(dst, src) << static_cast<int>(kernel);
  }
}

TEST(Crc32CopyTest, SaysWhichKernelTheCpuRuns) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool folds = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                     __builtin_cpu_supports("vpclmulqdq");
  const Crc32CopyKernel best = !folds                               ? Crc32CopyKernel::kPlain
                               : __builtin_cpu_supports("avx512f") ? Crc32CopyKernel::kFold512
                                                                   : Crc32CopyKernel::kFold256;
  EXPECT_EQ(Crc32CopyBestKernel(), best);
#else
  EXPECT_EQ(Crc32CopyBestKernel(), Crc32CopyKernel::kPlain);
#endif
}

}  // namespace
}  // namespace stoke
