#include "format/image.h"

#include <gtest/gtest.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <cstring>
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

// ---------------------------------------------------------------------------------------------
// Decoding.

// A PNG of any layout libpng writes (bit depth, colour type, interlacing, palette, tRNS), for the
// decoder's conversions. `samples`: height rows of width * components samples (16-bit as values
// up to 65535), palette indexes for palette images.
struct PngSpec {
  int width = 0, height = 0, color_type = PNG_COLOR_TYPE_RGB, bit_depth = 8;
  bool interlaced = false;
  std::vector<uint32_t> samples;
  std::vector<png_color> palette;
  std::vector<uint8_t> palette_alpha;  // tRNS for palette images
};

void AppendPng(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}

std::string WritePng(const PngSpec& spec) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    ADD_FAILURE() << "libpng failed to write the test image";
    png_destroy_write_struct(&png, &info);
    return "";
  }
  png_set_write_fn(png, &out, AppendPng, nullptr);
  png_set_IHDR(png, info, spec.width, spec.height, spec.bit_depth, spec.color_type,
               spec.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!spec.palette.empty()) png_set_PLTE(png, info, spec.palette.data(), static_cast<int>(spec.palette.size()));
  if (!spec.palette_alpha.empty()) {
    png_set_tRNS(png, info, spec.palette_alpha.data(), static_cast<int>(spec.palette_alpha.size()), nullptr);
  }
  png_write_info(png, info);
  const int components = spec.color_type == PNG_COLOR_TYPE_GRAY || spec.color_type == PNG_COLOR_TYPE_PALETTE ? 1
                         : spec.color_type == PNG_COLOR_TYPE_GRAY_ALPHA                                        ? 2
                         : spec.color_type == PNG_COLOR_TYPE_RGB                                               ? 3
                                                                                                               : 4;
  // Pack each row at the bit depth.
  std::vector<std::vector<uint8_t>> rows(spec.height);
  const size_t per_row = static_cast<size_t>(spec.width) * components;
  for (int y = 0; y < spec.height; ++y) {
    auto& row = rows[y];
    row.assign((per_row * spec.bit_depth + 7) / 8, 0);
    for (size_t i = 0; i < per_row; ++i) {
      const uint32_t v = spec.samples[y * per_row + i];
      if (spec.bit_depth == 16) {
        row[2 * i] = static_cast<uint8_t>(v >> 8);
        row[2 * i + 1] = static_cast<uint8_t>(v);
      } else if (spec.bit_depth == 8) {
        row[i] = static_cast<uint8_t>(v);
      } else {
        const size_t bit = i * spec.bit_depth;
        row[bit / 8] |= static_cast<uint8_t>(v << (8 - spec.bit_depth - bit % 8));
      }
    }
  }
  std::vector<png_bytep> pointers;
  for (auto& r : rows) pointers.push_back(r.data());
  png_write_image(png, pointers.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::vector<uint8_t> Decode(const std::string& file, int channels, int scale = 8, DecodedImage* info = nullptr) {
  AlignedBuffer out;
  DecodeImageOptions o;
  o.channels = channels;
  o.scale_eighths = scale;
  auto d = DecodeImage(AsBytes(file), "t.img", o, &out);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return {};
  EXPECT_EQ(out.size(), static_cast<size_t>(d->width) * d->height * d->channels);
  if (info != nullptr) *info = *d;
  return std::vector<uint8_t>(out.data(), out.data() + out.size());
}

uint8_t Luma(uint32_t r, uint32_t g, uint32_t b) { return static_cast<uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16); }

TEST(DecodeImage, PngConversionsToGrayRgbAndRgba) {
  const int w = 5, h = 3;
  Rng rng(3);
  for (bool interlaced : {false, true}) {
    // RGB 8-bit.
    PngSpec rgb{w, h, PNG_COLOR_TYPE_RGB, 8, interlaced};
    for (int i = 0; i < w * h * 3; ++i) rgb.samples.push_back(static_cast<uint32_t>(rng.Below(256)));
    const std::string rgb_png = WritePng(rgb);
    DecodedImage info;
    const auto as_rgb = Decode(rgb_png, 3, 8, &info);
    EXPECT_EQ(info.width, w);
    EXPECT_EQ(info.height, h);
    EXPECT_EQ(info.format, ImageFormat::kPng);
    EXPECT_EQ(as_rgb, std::vector<uint8_t>(rgb.samples.begin(), rgb.samples.end())) << interlaced;
    const auto as_gray = Decode(rgb_png, 1);
    const auto as_rgba = Decode(rgb_png, 4);
    for (int p = 0; p < w * h; ++p) {
      EXPECT_EQ(as_gray[p], Luma(rgb.samples[3 * p], rgb.samples[3 * p + 1], rgb.samples[3 * p + 2]));
      for (int c = 0; c < 3; ++c) EXPECT_EQ(as_rgba[4 * p + c], rgb.samples[3 * p + c]);
      EXPECT_EQ(as_rgba[4 * p + 3], 255);
    }
    // Gray + alpha, 16-bit: the high byte; gray replicated; alpha dropped or kept.
    PngSpec la{w, h, PNG_COLOR_TYPE_GRAY_ALPHA, 16, interlaced};
    for (int i = 0; i < w * h * 2; ++i) la.samples.push_back(static_cast<uint32_t>(rng.Below(65536)));
    const std::string la_png = WritePng(la);
    const auto la_rgb = Decode(la_png, 3), la_gray = Decode(la_png, 1), la_rgba = Decode(la_png, 4);
    for (int p = 0; p < w * h; ++p) {
      const uint8_t g = static_cast<uint8_t>(la.samples[2 * p] >> 8), a = static_cast<uint8_t>(la.samples[2 * p + 1] >> 8);
      EXPECT_EQ(la_gray[p], g);
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(la_rgb[3 * p + c], g);
        EXPECT_EQ(la_rgba[4 * p + c], g);
      }
      EXPECT_EQ(la_rgba[4 * p + 3], a);
    }
    // 1-, 2- and 4-bit gray: expanded to 8 bits by bit replication (libpng's, and PIL's "L;1/L;2/L;4").
    for (int depth : {1, 2, 4}) {
      PngSpec g{w, h, PNG_COLOR_TYPE_GRAY, depth, interlaced};
      const uint32_t max = (1u << depth) - 1;
      for (int i = 0; i < w * h; ++i) g.samples.push_back(static_cast<uint32_t>(rng.Below(max + 1)));
      const auto px = Decode(WritePng(g), 1);
      for (int p = 0; p < w * h; ++p) EXPECT_EQ(px[p], g.samples[p] * 255 / max) << depth;
    }
    // Palette with transparency: RGB ignores it, RGBA takes it as alpha.
    PngSpec pal{w, h, PNG_COLOR_TYPE_PALETTE, 8, interlaced};
    pal.palette = {{10, 20, 30}, {200, 100, 0}, {7, 7, 7}};
    pal.palette_alpha = {255, 128};
    for (int i = 0; i < w * h; ++i) pal.samples.push_back(static_cast<uint32_t>(rng.Below(3)));
    const std::string pal_png = WritePng(pal);
    const auto pal_rgb = Decode(pal_png, 3), pal_rgba = Decode(pal_png, 4), pal_gray = Decode(pal_png, 1);
    for (int p = 0; p < w * h; ++p) {
      const png_color& c = pal.palette[pal.samples[p]];
      EXPECT_EQ(pal_rgb[3 * p], c.red);
      EXPECT_EQ(pal_rgb[3 * p + 1], c.green);
      EXPECT_EQ(pal_rgb[3 * p + 2], c.blue);
      EXPECT_EQ(pal_rgba[4 * p + 3], pal.samples[p] < 2 ? pal.palette_alpha[pal.samples[p]] : 255);
      EXPECT_EQ(pal_gray[p], Luma(c.red, c.green, c.blue));
    }
  }
}

TEST(DecodeImage, JpegDecodesCloseToItsPixelsAndScalesInTheDctDomain) {
  // A smooth image survives JPEG at quality 100 within a few levels.
  const int w = 64, h = 48;
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      px[(y * w + x) * 3] = static_cast<uint8_t>(x * 4);
      px[(y * w + x) * 3 + 1] = static_cast<uint8_t>(y * 5);
      px[(y * w + x) * 3 + 2] = 128;
    }
  }
  auto jpeg = EncodeJpeg(ByteView(px.data(), px.size()), w, h, 3, 100);
  ASSERT_TRUE(jpeg.ok());
  DecodedImage info;
  const auto rgb = Decode(*jpeg, 3, 8, &info);
  ASSERT_EQ(rgb.size(), px.size());
  int worst = 0;
  for (size_t i = 0; i < px.size(); ++i) worst = std::max(worst, std::abs(int{rgb[i]} - int{px[i]}));
  EXPECT_LE(worst, 6);
  EXPECT_EQ(info.format, ImageFormat::kJpeg);
  // Gray from a colour JPEG is PIL's convert("L") of the decoded RGB.
  const auto gray = Decode(*jpeg, 1);
  for (int p = 0; p < w * h; ++p) EXPECT_EQ(gray[p], Luma(rgb[3 * p], rgb[3 * p + 1], rgb[3 * p + 2]));
  const auto rgba = Decode(*jpeg, 4);
  for (int p = 0; p < w * h; ++p) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(rgba[4 * p + c], rgb[3 * p + c]);
    EXPECT_EQ(rgba[4 * p + 3], 255);
  }
  // DCT scaling: ceil(extent * n / 8).
  for (int n = 1; n <= 8; ++n) {
    DecodedImage scaled;
    const auto s = Decode(*jpeg, 3, n, &scaled);
    EXPECT_EQ(scaled.width, (w * n + 7) / 8);
    EXPECT_EQ(scaled.height, (h * n + 7) / 8);
    EXPECT_EQ(JpegScaledExtent(w, n), scaled.width);
  }
  // A grayscale JPEG decodes to its one channel, or replicated.
  std::vector<uint8_t> g(static_cast<size_t>(w) * h, 77);
  auto gray_jpeg = EncodeJpeg(ByteView(g.data(), g.size()), w, h, 1, 95);
  ASSERT_TRUE(gray_jpeg.ok());
  const auto g1 = Decode(*gray_jpeg, 1), g3 = Decode(*gray_jpeg, 3);
  for (int p = 0; p < w * h; ++p) {
    EXPECT_EQ(g1[p], 77);
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g3[3 * p + c], g1[p]);
  }
}

// A JPEG of smooth gradients plus noise (so that every block has AC energy), baseline or progressive,
// with the given chroma subsampling.
std::string TexturedJpeg(int width, int height, int channels, int subsamp, bool progressive, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int v = (x * (c + 2) + y * (3 - c)) % 256 + static_cast<int>(rng.Below(40)) - 20;
        px[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
      }
    }
  }
  tjhandle h = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h, px.data(), width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &out, &size,
                             channels == 1 ? TJSAMP_GRAY : subsamp, 90, progressive ? TJFLAG_PROGRESSIVE : 0);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(h);
  std::string file(reinterpret_cast<const char*>(out), size);
  tjFree(out);
  tjDestroy(h);
  return file;
}

TEST(DecodeImage, ARegionDecodesToTheFullDecodesPixels) {
  // Regions at random places and sizes (odd offsets, iMCU-straddling, one pixel, edges), for 4:2:0,
  // 4:2:2, 4:4:4 and gray, baseline and progressive, at full size and DCT scales, to 1, 3 and 4
  // channels: the region's pixels equal the whole image's decode; outside it the buffer is untouched.
  Rng rng(11);
  int checked = 0;
  for (int subsamp : {TJSAMP_420, TJSAMP_422, TJSAMP_444}) {
    for (int channels : {3, 1}) {
      for (bool progressive : {false, true}) {
        const int w = 97 + static_cast<int>(rng.Below(120)), h = 61 + static_cast<int>(rng.Below(120));
        const std::string jpeg = TexturedJpeg(w, h, channels, subsamp, progressive, rng.Next());
        for (int want : {3, 4, 1}) {
          if (want == 1 && channels == 3) continue;  // colour to gray ignores the region (tested below)
          for (int scale : {8, 4, 3, 1}) {
            DecodeImageOptions full;
            full.channels = want;
            full.scale_eighths = scale;
            AlignedBuffer whole;
            auto d = DecodeImage(AsBytes(jpeg), "t.jpg", full, &whole);
            ASSERT_TRUE(d.ok()) << d.status().ToString();
            for (int k = 0; k < 6; ++k) {
              DecodeImageOptions o = full;
              o.region_width = 1 + static_cast<int32_t>(rng.Below(static_cast<uint64_t>(d->width)));
              o.region_height = 1 + static_cast<int32_t>(rng.Below(static_cast<uint64_t>(d->height)));
              if (k == 0) o.region_width = o.region_height = 1;
              o.region_left = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(d->width - o.region_width + 1)));
              o.region_top = static_cast<int32_t>(rng.Below(static_cast<uint64_t>(d->height - o.region_height + 1)));
              if (k == 1) o.region_top = d->height - o.region_height;  // down to the last row
              AlignedBuffer part;
              part.Resize(whole.size());
              std::memset(part.data(), 0xA5, part.size());
              auto r = DecodeImage(AsBytes(jpeg), "t.jpg", o, &part);
              ASSERT_TRUE(r.ok()) << r.status().ToString();
              ASSERT_EQ(r->width, d->width);
              ASSERT_EQ(r->height, d->height);
              ASSERT_EQ(part.size(), whole.size());
              const size_t stride = static_cast<size_t>(d->width) * want;
              for (int y = 0; y < o.region_height; ++y) {
                const size_t at = (static_cast<size_t>(o.region_top + y)) * stride + static_cast<size_t>(o.region_left) * want;
                ASSERT_EQ(0, std::memcmp(part.data() + at, whole.data() + at, static_cast<size_t>(o.region_width) * want))
                    << "subsamp " << subsamp << " channels " << channels << " progressive " << progressive << " to "
                    << want << " scale " << scale << "/8, region " << o.region_width << "x" << o.region_height << " at ("
                    << o.region_left << ", " << o.region_top << ") of " << d->width << "x" << d->height << ", row " << y;
              }
              if (o.region_top > 0) {
                EXPECT_EQ(part.data()[0], 0xA5);  // rows above: never written
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 400);
}

TEST(DecodeImage, ARegionOutsideTheImageOrOfDamagedDataIsAnError) {
  const std::string jpeg = TexturedJpeg(64, 48, 3, TJSAMP_420, false, 5);
  AlignedBuffer out;
  DecodeImageOptions o;
  o.region_left = 60;
  o.region_top = 0;
  o.region_width = 10;
  o.region_height = 5;
  auto r = DecodeImage(AsBytes(jpeg), "cat/0007.jpg", o, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("cat/0007.jpg"), std::string::npos) << r.status().ToString();
  o.region_left = -1;
  EXPECT_FALSE(DecodeImage(AsBytes(jpeg), "x.jpg", o, &out).ok());
  // Truncated inside the entropy-coded data that the region needs: Corruption naming the file; also
  // a truncation below the region (the decoder stops before it: no error, as it never reads it).
  o.region_left = 8;
  o.region_top = 30;
  o.region_width = 20;
  o.region_height = 10;
  const std::string cut = jpeg.substr(0, jpeg.size() / 3);
  r = DecodeImage(AsBytes(cut), "cat/0007.jpg", o, &out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("cat/0007.jpg"), std::string::npos);
  // Garbage in the scan: an error (libjpeg's warnings are errors), never a crash.
  std::string bad = jpeg;
  for (size_t i = bad.size() / 2; i < bad.size() - 2; i += 7) bad[i] = static_cast<char>(0xFF);
  o.region_top = 0;
  o.region_height = 48;
  EXPECT_FALSE(DecodeImage(AsBytes(bad), "bad.jpg", o, &out).ok());
  // A colour JPEG to gray ignores the region: the whole image is decoded.
  DecodeImageOptions gray;
  gray.channels = 1;
  AlignedBuffer whole;
  ASSERT_TRUE(DecodeImage(AsBytes(jpeg), "x.jpg", gray, &whole).ok());
  gray.region_left = 8;
  gray.region_top = 8;
  gray.region_width = 8;
  gray.region_height = 8;
  AlignedBuffer part;
  ASSERT_TRUE(DecodeImage(AsBytes(jpeg), "x.jpg", gray, &part).ok());
  ASSERT_EQ(part.size(), whole.size());
  EXPECT_EQ(0, std::memcmp(part.data(), whole.data(), part.size()));
}

TEST(DecodeImage, BadInputsAreErrorsNamingTheFile) {
  const std::string jpeg = Jpeg(64, 64, 3);
  const std::string png = Png(64, 64, 3);
  AlignedBuffer out;
  auto decode = [&](const std::string& bytes, DecodeImageOptions o = {}) {
    return DecodeImage(AsBytes(bytes), "cat/0007.jpg", o, &out);
  };
  struct Case {
    std::string bytes;
    StatusCode code;
    const char* what;
  };
  std::string bad_scan = jpeg;
  for (size_t i = bad_scan.size() / 2; i < bad_scan.size() / 2 + 64; ++i) bad_scan[i] = '\xFF';
  std::string bad_idat = png;
  bad_idat[png.size() - 20] ^= 0x55;  // inside the IDAT data (its CRC then mismatches)
  for (const Case& c : {Case{"GIF89a", StatusCode::kInvalidArgument, "not JPEG or PNG"},
                        Case{jpeg.substr(0, jpeg.size() / 2), StatusCode::kCorruption, "truncated JPEG"},
                        Case{jpeg.substr(0, 30), StatusCode::kCorruption, "JPEG cut in its header"},
                        Case{bad_scan, StatusCode::kCorruption, "JPEG with a damaged scan"},
                        Case{png.substr(0, png.size() - 30), StatusCode::kCorruption, "truncated PNG"},
                        Case{bad_idat, StatusCode::kCorruption, "PNG with a damaged IDAT"}}) {
    auto d = decode(c.bytes);
    ASSERT_FALSE(d.ok()) << c.what;
    EXPECT_EQ(d.status().code(), c.code) << c.what << ": " << d.status().ToString();
    EXPECT_NE(d.status().message().find("cat/0007.jpg"), std::string::npos) << d.status().message();
    // The thread's decoder is fresh again after a failure: the next good image decodes.
    ASSERT_TRUE(decode(jpeg).ok()) << "after " << c.what;
    ASSERT_TRUE(decode(png).ok()) << "after " << c.what;
  }
  // A decode past the byte limit is refused before allocating.
  DecodeImageOptions small;
  small.max_bytes = 64 * 64 * 3 - 1;
  EXPECT_EQ(decode(jpeg, small).status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(decode(png, small).status().code(), StatusCode::kUnsupported);
  small.scale_eighths = 4;  // 32 x 32 fits
  EXPECT_TRUE(decode(jpeg, small).ok());
  DecodeImageOptions two;
  two.channels = 2;
  EXPECT_EQ(decode(jpeg, two).status().code(), StatusCode::kInvalidArgument);
  DecodeImageOptions nine;
  nine.scale_eighths = 9;
  EXPECT_EQ(decode(jpeg, nine).status().code(), StatusCode::kInvalidArgument);
}

TEST(DecodeImage, CmykJpegsAreRefused) {
  const int w = 16, h = 16;
  std::vector<uint8_t> cmyk(static_cast<size_t>(w) * h * 4, 40);
  tjhandle tj = tjInitCompress();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  ASSERT_EQ(tjCompress2(tj, cmyk.data(), w, 0, h, TJPF_CMYK, &buf, &size, TJSAMP_444, 90, 0), 0) << tjGetErrorStr2(tj);
  const std::string file(reinterpret_cast<const char*>(buf), size);
  tjFree(buf);
  tjDestroy(tj);
  AlignedBuffer out;
  auto d = DecodeImage(AsBytes(file), "print.jpg", {}, &out);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(d.status().message().find("CMYK"), std::string::npos) << d.status().message();
  EXPECT_NE(d.status().message().find("print.jpg"), std::string::npos);
}

TEST(DecodeImage, AReusedBufferStopsGrowing) {
  const std::string big = Jpeg(80, 60, 3), small = Jpeg(20, 10, 3);
  AlignedBuffer out;
  ASSERT_TRUE(DecodeImage(AsBytes(big), "a", {}, &out).ok());
  const size_t capacity = out.capacity();
  const uint8_t* data = out.data();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(DecodeImage(AsBytes(small), "b", {}, &out).ok());
    ASSERT_TRUE(DecodeImage(AsBytes(big), "a", {}, &out).ok());
  }
  EXPECT_EQ(out.capacity(), capacity);
  EXPECT_EQ(out.data(), data);
}

}  // namespace
}  // namespace stoke
