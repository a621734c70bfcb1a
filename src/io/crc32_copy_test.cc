#include "io/crc32_copy.h"

#include <gtest/gtest.h>
#include <isa-l/crc.h>

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

// Copies `n` bytes from src + src_shift to a destination at dst_shift with `copy`, and checks the
// CRC against ISA-L's, the copied bytes, and that no byte around the destination changed.
template <typename Copy>
void ExpectCopiesAndChecksums(Copy copy, const std::vector<uint8_t>& src, size_t n, size_t src_shift, size_t dst_shift,
                              uint32_t seed) {
  constexpr uint8_t kGuard = 0xA5;
  std::vector<uint8_t> dst(n + dst_shift + 64, kGuard);
  const uint32_t expected = crc32_gzip_refl(seed, const_cast<uint8_t*>(src.data() + src_shift), n);
  ASSERT_EQ(copy(dst.data() + dst_shift, src.data() + src_shift, n, seed), expected)
      << "n " << n << " src+" << src_shift << " dst+" << dst_shift << " seed " << seed;
  ASSERT_EQ(std::memcmp(dst.data() + dst_shift, src.data() + src_shift, n), 0) << "n " << n;
  for (size_t i = 0; i < dst_shift; ++i) ASSERT_EQ(dst[i], kGuard) << "byte before the copy, n " << n;
  for (size_t i = dst_shift + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], kGuard) << "byte after the copy, n " << n;
}

TEST(Crc32CopyTest, EveryLengthUpToTwiceTheFoldsMatchesIsaL) {
  if (!Crc32CopyFolds()) std::cerr << "this CPU does not fold the CRC into the copy: the plain copy is tested\n";
  const size_t most = 2 * kCrc32CopyFoldBytes + 300;
  const std::vector<uint8_t> src = RandomBytes(most + 64, 1);
  for (size_t n = 0; n <= most; ++n) {
    ExpectCopiesAndChecksums(Crc32Copy, src, n, n % 32, (n * 7) % 32, n % 3 == 0 ? 0 : static_cast<uint32_t>(n * 2654435761u));
  }
}

TEST(Crc32CopyTest, EveryAlignmentMatchesIsaL) {
  const std::vector<uint8_t> src = RandomBytes(70000, 2);
  for (size_t n : {kCrc32CopyFoldBytes, size_t{16388}, size_t{65536}, size_t{65536 + 77}}) {
    for (size_t src_shift = 0; src_shift < 32; ++src_shift) {
      ExpectCopiesAndChecksums(Crc32Copy, src, n, src_shift, 31 - src_shift, 0xFFFFFFFFu);
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

TEST(Crc32CopyTest, PlainCopyMatchesIsaL) {
  const std::vector<uint8_t> src = RandomBytes(20000, 4);
  for (size_t n : {size_t{0}, size_t{1}, size_t{255}, size_t{256}, size_t{16384}, size_t{19999}}) {
    ExpectCopiesAndChecksums(Crc32CopyPlain, src, n, 1, 2, 7);
  }
}

TEST(Crc32CopyTest, SaysWhetherTheCpuFolds) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(Crc32CopyFolds(), __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
                                  __builtin_cpu_supports("vpclmulqdq"));
#else
  EXPECT_FALSE(Crc32CopyFolds());
#endif
}

}  // namespace
}  // namespace stoke
