#include "format/codec.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include "core/random.h"

namespace stoke {
namespace {

using parquet::Codec;

std::vector<uint8_t> SampleBytes(size_t n) {
  std::vector<uint8_t> v(n);
  Rng rng(7);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 7 == 0 ? rng.Next() : i / 100);
  return v;
}

class CodecRoundTrip : public ::testing::TestWithParam<Codec> {};

TEST_P(CodecRoundTrip, CompressesAndDecompressesExactly) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{360000}}) {
    auto in = SampleBytes(n);
    AlignedBuffer c;
    ASSERT_TRUE(Compress(GetParam(), ByteView(in), 0, &c).ok());
    std::vector<uint8_t> out(n);
    ASSERT_TRUE(Decompress(GetParam(), c.view(), MutableByteView(out)).ok()) << n;
    EXPECT_EQ(in, out);
  }
}

TEST_P(CodecRoundTrip, RejectsWrongExpectedSizeAndGarbage) {
  auto in = SampleBytes(5000);
  AlignedBuffer c;
  ASSERT_TRUE(Compress(GetParam(), ByteView(in), 0, &c).ok());
  std::vector<uint8_t> small(4999), big(5001);
  EXPECT_FALSE(Decompress(GetParam(), c.view(), MutableByteView(small)).ok());
  EXPECT_FALSE(Decompress(GetParam(), c.view(), MutableByteView(big)).ok());
  if (GetParam() != Codec::kUncompressed) {
    std::vector<uint8_t> garbage(100, 0xAB);
    std::vector<uint8_t> out(5000);
    EXPECT_FALSE(Decompress(GetParam(), ByteView(garbage), MutableByteView(out)).ok());
    // A truncated stream never succeeds.
    std::vector<uint8_t> out2(5000);
    EXPECT_FALSE(Decompress(GetParam(), c.view().subspan(0, c.size() / 2), MutableByteView(out2)).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecRoundTrip,
                         ::testing::Values(Codec::kUncompressed, Codec::kZstd, Codec::kSnappy, Codec::kLz4Raw, Codec::kGzip),
                         [](const auto& info) { return std::string(parquet::CodecName(info.param)); });

TEST(Codec, GzipWritesAGzipMember) {
  auto in = SampleBytes(100);
  AlignedBuffer c;
  ASSERT_TRUE(Compress(Codec::kGzip, ByteView(in), 0, &c).ok());
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c.data()[0], 0x1f);  // gzip magic, not a zlib header
  EXPECT_EQ(c.data()[1], 0x8b);
}

TEST(Codec, ParsesNamesAndRejectsUnknownOnes) {
  EXPECT_EQ(*CodecFromName("ZSTD"), Codec::kZstd);
  EXPECT_EQ(*CodecFromName("lz4"), Codec::kLz4Raw);
  EXPECT_EQ(*CodecFromName("none"), Codec::kUncompressed);
  EXPECT_FALSE(CodecFromName("brotli").ok());
  std::vector<uint8_t> out(1);
  EXPECT_EQ(Decompress(Codec::kLzo, ByteView(out), MutableByteView(out)).code(), StatusCode::kUnsupported);
}

TEST(Crc32, MatchesZlib) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{360004}}) {
    auto v = SampleBytes(n);
    uint32_t expected = static_cast<uint32_t>(crc32(0, v.data(), static_cast<uInt>(v.size())));
    EXPECT_EQ(Crc32(ByteView(v)), expected) << n;
  }
  EXPECT_EQ(Crc32(AsBytes("123456789")), 0xCBF43926u);  // the standard check value
}

TEST(Crc32, CombinedFromPiecesEqualsTheWhole) {
  auto v = SampleBytes(100003);
  const ByteView all(v);
  for (size_t split : {size_t{0}, size_t{1}, size_t{4}, size_t{4096}, size_t{99999}, v.size()}) {
    const ByteView a = all.first(split), b = all.subspan(split);
    EXPECT_EQ(Crc32Combine(Crc32(a), Crc32(b), b.size()), Crc32(all)) << split;
    EXPECT_EQ(Crc32Combine(Crc32(a), Crc32(b), b.size()), Crc32(b, Crc32(a))) << split;
  }
  // A flipped byte in either piece changes the combination.
  std::vector<uint8_t> w = v;
  w[70000] ^= 0x10;
  EXPECT_NE(Crc32Combine(Crc32(ByteView(w).first(4)), Crc32(ByteView(w).subspan(4)), w.size() - 4), Crc32(all));
}

}  // namespace
}  // namespace stoke
