#include <gtest/gtest.h>

#include "format/parquet_writer.h"
#include "stoke/codec.h"

namespace stoke {
namespace {

TEST(CodecNames, EveryCodecReadsBackFromItsName) {
  for (Codec c : {Codec::kAuto, Codec::kZstd, Codec::kLz4Raw, Codec::kSnappy, Codec::kGzip, Codec::kUncompressed}) {
    auto parsed = ParseCodec(CodecName(c));
    ASSERT_TRUE(parsed.ok()) << CodecName(c);
    EXPECT_EQ(*parsed, c);
  }
  EXPECT_EQ(CodecName(Codec::kLz4Raw), "lz4_raw");
  EXPECT_EQ(CodecName(Codec::kUncompressed), "uncompressed");
}

TEST(CodecNames, AnyCaseAndTheOldAliasesAreAccepted) {
  EXPECT_EQ(*ParseCodec("ZSTD"), Codec::kZstd);
  EXPECT_EQ(*ParseCodec("Auto"), Codec::kAuto);
  EXPECT_EQ(*ParseCodec("lz4"), Codec::kLz4Raw);
  EXPECT_EQ(*ParseCodec("none"), Codec::kUncompressed);
}

TEST(CodecNames, AnUnknownNameListsTheNames) {
  auto bad = ParseCodec("brotli9");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown codec 'brotli9' (expected auto, zstd, lz4_raw, snappy, gzip or uncompressed)");
  EXPECT_FALSE(ParseCodec("").ok());
}

TEST(CodecNames, WriterPolicyOfEachCodec) {
  WriterOptions o;
  ASSERT_TRUE(SetCodecPolicy(Codec::kAuto, &o).ok());
  EXPECT_EQ(o.codec, parquet::Codec::kZstd);
  EXPECT_DOUBLE_EQ(o.min_codec_saving, WriterOptions{}.min_codec_saving);
  const std::pair<Codec, parquet::Codec> forced[] = {{Codec::kZstd, parquet::Codec::kZstd},
                                                     {Codec::kLz4Raw, parquet::Codec::kLz4Raw},
                                                     {Codec::kSnappy, parquet::Codec::kSnappy},
                                                     {Codec::kGzip, parquet::Codec::kGzip},
                                                     {Codec::kUncompressed, parquet::Codec::kUncompressed}};
  for (const auto& [codec, parquet_codec] : forced) {
    ASSERT_TRUE(SetCodecPolicy(codec, &o).ok()) << CodecName(codec);
    EXPECT_EQ(o.codec, parquet_codec) << CodecName(codec);
    EXPECT_EQ(o.min_codec_saving, 0) << CodecName(codec);
  }
}

}  // namespace
}  // namespace stoke
