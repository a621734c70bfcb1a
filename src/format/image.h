// Encoded images: JPEG (libturbojpeg) and PNG (libpng). Formats are told by their magic bytes, never
// by file names; width, height and channels come from the header alone (nothing is decoded).
// Encoders exist for synthetic datasets and tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/buffer.h"
#include "stoke/status.h"

namespace stoke {

// Persisted (by name, in the `stoke.images` metadata): append only.
enum class ImageFormat : uint8_t { kJpeg, kPng };

// "jpeg", "png".
std::string_view ImageFormatName(ImageFormat format);

struct ImageInfo {
  ImageFormat format = ImageFormat::kJpeg;
  int32_t width = 0;
  int32_t height = 0;
  // Components per pixel once decoded to 8 bits: JPEG 1 (grayscale), 3 (YCbCr or RGB) or 4 (CMYK,
  // YCCK); PNG 1 (gray), 2 (gray + alpha), 3 (RGB) or 4 (RGBA); a palette PNG counts its palette's
  // colours: 3, or 4 when it has transparency.
  int32_t channels = 0;
};

// The format whose magic bytes `bytes` start with: JPEG FF D8 FF, PNG 89 50 4E 47 0D 0A 1A 0A.
std::optional<ImageFormat> DetectImageFormat(ByteView bytes);

// Width, height and channels from the header of an encoded JPEG or PNG. Errors name `path`: bytes
// that are neither (InvalidArgument), or a damaged or truncated header (Corruption, with the
// library's reason). Thread-safe.
Result<ImageInfo> ReadImageInfo(ByteView bytes, std::string_view path);

// Encodes 8-bit interleaved pixels (height rows of width * channels bytes) as a baseline JPEG with
// 4:2:0 chroma subsampling (grayscale when channels is 1). channels 1 or 3; quality 1..100.
Result<std::string> EncodeJpeg(ByteView pixels, int width, int height, int channels, int quality);

// Encodes 8-bit interleaved pixels as a PNG (channels 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA).
Result<std::string> EncodePng(ByteView pixels, int width, int height, int channels);

}  // namespace stoke
