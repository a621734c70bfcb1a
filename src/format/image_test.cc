#include "format/image.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/random.h"

namespace stoke {
namespace {

std::vector<uint8_t> Pixels(int width, int height, int channels, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(width) * height * channels);
  for (auto& v : p) v = static_cast<uint8_t>(rng.Next());
  return p;
}

std::string Jpeg(int width, int height, int channels) {
  auto p = Pixels(width, height, channels, 1);
  auto r = EncodeJpeg(ByteView(p.data(), p.size()), width, height, channels, 90);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

std::string Png(int width, int height, int channels) {
  auto p = Pixels(width, height, channels, 2);
  auto r = EncodePng(ByteView(p.data(), p.size()), width, height, channels);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::string();
}

TEST(ImageInfo, ReadsJpegHeaders) {
  for (int channels : {1, 3}) {
    const std::string jpeg = Jpeg(123, 45, channels);
    EXPECT_EQ(DetectImageFormat(AsBytes(jpeg)), ImageFormat::kJpeg);
    auto info = ReadImageInfo(AsBytes(jpeg), "a.jpg");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->format, ImageFormat::kJpeg);
    EXPECT_EQ(info->width, 123);
    EXPECT_EQ(info->height, 45);
    EXPECT_EQ(info->channels, channels);
  }
}

TEST(ImageInfo, ReadsPngHeaders) {
  for (int channels : {1, 2, 3, 4}) {
    const std::string png = Png(7, 300, channels);
    EXPECT_EQ(DetectImageFormat(AsBytes(png)), ImageFormat::kPng);
    auto info = ReadImageInfo(AsBytes(png), "a.png");
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->format, ImageFormat::kPng);
    EXPECT_EQ(info->width, 7);
    EXPECT_EQ(info->height, 300);
    EXPECT_EQ(info->channels, channels);
  }
  EXPECT_EQ(ImageFormatName(ImageFormat::kJpeg), "jpeg");
  EXPECT_EQ(ImageFormatName(ImageFormat::kPng), "png");
}

TEST(ImageInfo, GarbageIsNotAnImageAndTheErrorNamesTheFile) {
  for (const std::string& bytes : {std::string(), std::string("GIF89a......"), std::string("\xFF\xD8", 2),
                                   std::string("\x89PNG\r\n\x1a", 7), std::string(100, '\0')}) {
    EXPECT_FALSE(DetectImageFormat(AsBytes(bytes)).has_value());
    auto info = ReadImageInfo(AsBytes(bytes), "dir/x.jpg");
    ASSERT_FALSE(info.ok());
    EXPECT_EQ(info.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(info.status().message().find("dir/x.jpg"), std::string::npos) << info.status().message();
  }
}

TEST(ImageInfo, TruncatedOrDamagedHeadersAreCorruption) {
  const std::string jpeg = Jpeg(64, 64, 3);
  const std::string png = Png(64, 64, 3);
  struct Case {
    std::string bytes;
    std::string what;
  };
  std::string bad_ihdr_crc = png;
  bad_ihdr_crc[29] ^= 0x5A;  // inside the IHDR chunk's CRC (signature 8, length 4, type 4, data 13)
  std::string zero_width = png;
  zero_width[16] = zero_width[17] = zero_width[18] = zero_width[19] = 0;
  std::string jpeg_garbage = jpeg.substr(0, 3) + std::string(200, '\x17');
  for (const Case& c : {Case{jpeg.substr(0, 20), "truncated JPEG"}, Case{png.substr(0, 20), "truncated PNG"},
                        Case{bad_ihdr_crc, "PNG IHDR CRC"}, Case{zero_width, "PNG of width 0"},
                        Case{jpeg_garbage, "JPEG magic then garbage"}}) {
    auto info = ReadImageInfo(AsBytes(c.bytes), "cat/0001.img");
    ASSERT_FALSE(info.ok()) << c.what;
    EXPECT_EQ(info.status().code(), StatusCode::kCorruption) << c.what << ": " << info.status().ToString();
    EXPECT_NE(info.status().message().find("cat/0001.img"), std::string::npos) << info.status().message();
  }
}

TEST(ImageInfo, EveryPrefixOfAHeaderIsAnAnswerNotACrash) {
  // The header parsers never read past the bytes given: each prefix is either read or refused, and a
  // decoder that refused a prefix reads the next one afresh (the whole file, at the end, is read).
  const std::string jpeg = Jpeg(40, 30, 3);
  const std::string png = Png(40, 30, 4);
  for (const std::string* image : {&jpeg, &png}) {
    size_t first_ok = 0;
    for (size_t n = 0; n <= std::min<size_t>(image->size(), 2000); ++n) {
      auto info = ReadImageInfo(ByteView(AsBytes(*image).data(), n), "p");
      if (info.ok()) {
        if (first_ok == 0) first_ok = n;
        EXPECT_EQ(info->width, 40);
        EXPECT_EQ(info->height, 30);
      }
    }
    EXPECT_GT(first_ok, 8u);  // a header takes more than the magic bytes
  }
}

TEST(ImageInfo, EncodersRefuseBadArguments) {
  std::vector<uint8_t> p(12);
  EXPECT_FALSE(EncodeJpeg(ByteView(p.data(), p.size()), 2, 2, 2, 90).ok());    // two channels
  EXPECT_FALSE(EncodeJpeg(ByteView(p.data(), p.size()), 2, 2, 3, 0).ok());     // quality 0
  EXPECT_FALSE(EncodeJpeg(ByteView(p.data(), p.size()), 3, 2, 3, 90).ok());    // wrong size
  EXPECT_FALSE(EncodePng(ByteView(p.data(), p.size()), 2, 2, 5).ok());         // five channels
  EXPECT_TRUE(EncodePng(ByteView(p.data(), p.size()), 2, 2, 3).ok());
}

}  // namespace
}  // namespace stoke
