// Encoded images: JPEG (libturbojpeg) and PNG (libpng). Formats are told by their magic bytes, never
// by file names; width, height and channels come from the header alone (ReadImageInfo), or the pixels
// from a decode (DecodeImage, into a caller's reusable buffer). Encoders exist for synthetic datasets
// and tests.
#pragma once

#include <cstdint>
#include <cstddef>
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

// What DecodeImage produces. Pixels are 8 bits per component, interleaved, row-major: height rows of
// width * channels bytes (HWC).
struct DecodeImageOptions {
  // Components per output pixel. Default 3, RGB, as PIL's Image.convert("RGB") (torchvision's
  // ImageFolder loader): gray is replicated, alpha dropped (not composited), a palette expanded.
  // 1: gray, as PIL's convert("L") (L = (19595 R + 38470 G + 7471 B + 32768) >> 16 over the decoded
  // RGB; a gray image as it is). 4: RGBA (alpha 255 where the image has none; a PNG's tRNS becomes
  // alpha).
  int channels = 3;
  // JPEG only: decode at scale_eighths / 8 of the full size in the DCT domain (TurboJPEG's scaling:
  // an extent e becomes ceil(e * scale_eighths / 8)); 1..8, default 8 (full size). PNG ignores it.
  int scale_eighths = 8;
  // Default 1 GiB. An image whose decoded bytes (width * height * channels, after scaling) would
  // exceed this is refused before anything is allocated (a small file can declare 65535 x 65535).
  int64_t max_bytes = int64_t{1} << 30;
  // JPEG only: the region of the (scaled) image the caller will read, [region_left, region_left +
  // region_width) x [region_top, region_top + region_height); region_width 0 (the default): the whole
  // image. Only the region's pixels are then written; the rest of the output keeps what it held. The
  // decoder skips the rows above the region (entropy-decoded only: no IDCT, upsampling or colour
  // conversion), reconstructs only the iMCU columns that cover it and stops after its last row
  // (libjpeg-turbo's jpeg_skip_scanlines and jpeg_crop_scanline); the region's pixels equal those of
  // a full decode. A colour JPEG decoded to gray (channels 1) ignores the region.
  int32_t region_left = 0, region_top = 0, region_width = 0, region_height = 0;
};

struct DecodedImage {
  int32_t width = 0;
  int32_t height = 0;
  int32_t channels = 0;
  ImageFormat format = ImageFormat::kJpeg;
};

// The extent of a JPEG dimension decoded at scale_eighths / 8 (TurboJPEG's TJSCALED).
inline int32_t JpegScaledExtent(int32_t extent, int scale_eighths) {
  return static_cast<int32_t>((int64_t{extent} * scale_eighths + 7) / 8);
}

// Decodes a JPEG (libturbojpeg: accurate integer DCT and fancy upsampling, the library's defaults and
// PIL's, so the pixels equal PIL's decode with the same libjpeg-turbo; baseline and progressive;
// warnings such as a truncated scan are errors) or a PNG (libpng: 1/2/4/8/16-bit, gray, gray+alpha,
// RGB, RGBA, palette, interlaced; 16-bit samples keep their high byte) into `out` (resized to
// width * height * channels; grown, never shrunk, so a reused buffer stops allocating). Errors name
// `path`: InvalidArgument for bytes that are neither format or bad options, Corruption for damaged
// or truncated data (with the library's reason), Unsupported for CMYK/YCCK JPEGs and for images
// past max_bytes. Thread-safe (one TurboJPEG handle per thread, replaced after a
// failure: a handle that failed mid-stream misreads the next file).
Result<DecodedImage> DecodeImage(ByteView bytes, std::string_view path, const DecodeImageOptions& options,
                                 AlignedBuffer* out);

// Encodes 8-bit interleaved pixels (height rows of width * channels bytes) as a baseline JPEG with
// 4:2:0 chroma subsampling (grayscale when channels is 1). channels 1 or 3; quality 1..100.
Result<std::string> EncodeJpeg(ByteView pixels, int width, int height, int channels, int quality);

// Encodes 8-bit interleaved pixels as a PNG (channels 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA).
Result<std::string> EncodePng(ByteView pixels, int width, int height, int channels);

}  // namespace stoke
