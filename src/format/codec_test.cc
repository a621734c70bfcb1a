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

AlignedBuffer CompressedWith(Codec codec, const std::vector<uint8_t>& in) {
  AlignedBuffer c;
  EXPECT_TRUE(Compress(codec, ByteView(in), 0, &c).ok());
  return c;
}

void AppendBigEndian32(uint32_t v, std::vector<uint8_t>* out) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

TEST(Codec, ReadsLegacyLz4InHadoopFramingAndAsARawBlock) {
  auto a = SampleBytes(3000), b = SampleBytes(1000);
  std::vector<uint8_t> framed;  // two Hadoop frames: [raw size, packed size, block] each
  for (const auto* part : {&a, &b}) {
    AlignedBuffer block = CompressedWith(Codec::kLz4Raw, *part);
    AppendBigEndian32(static_cast<uint32_t>(part->size()), &framed);
    AppendBigEndian32(static_cast<uint32_t>(block.size()), &framed);
    framed.insert(framed.end(), block.data(), block.data() + block.size());
  }
  std::vector<uint8_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  std::vector<uint8_t> out(both.size());
  ASSERT_TRUE(Decompress(Codec::kLz4, ByteView(framed), MutableByteView(out)).ok());
  EXPECT_EQ(out, both);
  // Older Arrow wrote one raw block under the same codec.
  AlignedBuffer raw = CompressedWith(Codec::kLz4Raw, both);
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(Decompress(Codec::kLz4, raw.view(), MutableByteView(out)).ok());
  EXPECT_EQ(out, both);
  // A frame that claims more than the page holds is neither framing.
  framed[3] ^= 0x40;
  EXPECT_FALSE(Decompress(Codec::kLz4, ByteView(framed), MutableByteView(out)).ok());
  EXPECT_FALSE(CodecWritable(Codec::kLz4));
}

TEST(Codec, ReadsConcatenatedGzipMembers) {
  auto a = SampleBytes(4096), b = SampleBytes(8);
  AlignedBuffer ca = CompressedWith(Codec::kGzip, a), cb = CompressedWith(Codec::kGzip, b);
  std::vector<uint8_t> stream(ca.data(), ca.data() + ca.size());
  stream.insert(stream.end(), cb.data(), cb.data() + cb.size());
  std::vector<uint8_t> out(a.size() + b.size());
  ASSERT_TRUE(Decompress(Codec::kGzip, ByteView(stream), MutableByteView(out)).ok());
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 4096), a);
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + 4096, out.end()), b);
  std::vector<uint8_t> only_first(a.size());  // the second member does not fit
  EXPECT_FALSE(Decompress(Codec::kGzip, ByteView(stream), MutableByteView(only_first)).ok());
  stream.insert(stream.end(), 8, 0);  // padding after the last member is ignored, as before
  EXPECT_TRUE(Decompress(Codec::kGzip, ByteView(stream), MutableByteView(out)).ok());
  stream.push_back(0x1f);  // but a member cut short is an error
  stream.push_back(0x8b);
  std::vector<uint8_t> cut(stream.begin(), stream.end());
  cut.erase(cut.end() - 10, cut.end() - 2);  // drop the padding: the magic follows the second member
  EXPECT_FALSE(Decompress(Codec::kGzip, ByteView(cut), MutableByteView(out)).ok());
}

TEST(Codec, ReadsBrotliAndNeverWritesIt) {
  // "stoke reads brotli pages, stoke reads brotli pages", compressed by Node's zlib.brotliCompressSync.
  const std::vector<uint8_t> stream = {0x1b, 0x31, 0x00, 0xf8, 0xc5, 0x6d, 0x6c, 0x5d, 0xf7, 0x2d, 0x72,
                                       0x44, 0x81, 0x90, 0x15, 0x33, 0x13, 0x55, 0x0a, 0x2b, 0x85, 0x5f,
                                       0x43, 0x1c, 0xa3, 0x8c, 0x3c, 0xfd, 0x76, 0x43, 0x88, 0x01};
  const std::string text = "stoke reads brotli pages, stoke reads brotli pages";
  std::string out(text.size(), '\0');
  MutableByteView view(reinterpret_cast<uint8_t*>(out.data()), out.size());
  ASSERT_TRUE(Decompress(Codec::kBrotli, ByteView(stream), view).ok());
  EXPECT_EQ(out, text);
  std::string short_out(text.size() - 1, '\0');
  EXPECT_FALSE(Decompress(Codec::kBrotli, ByteView(stream),
                          MutableByteView(reinterpret_cast<uint8_t*>(short_out.data()), short_out.size()))
                   .ok());
  EXPECT_FALSE(Decompress(Codec::kBrotli, ByteView(stream).subspan(0, 20), view).ok());
  EXPECT_FALSE(CodecWritable(Codec::kBrotli));
  AlignedBuffer c;
  EXPECT_EQ(Compress(Codec::kBrotli, ByteView(stream), 0, &c).code(), StatusCode::kUnsupported);
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
