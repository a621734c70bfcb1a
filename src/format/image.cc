// See image.h. libpng reports errors by longjmp: the functions that call it keep only plain data on
// their frames (no destructors skipped), and turn the saved message into a Status in their callers.
#include "format/image.h"

#include <fmt/format.h>
#include <png.h>
#include <turbojpeg.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>

// jpeglib.h needs FILE and size_t declared before it (cstdio above).
#include <jpeglib.h>

namespace stoke {
namespace {

constexpr uint8_t kJpegMagic[] = {0xFF, 0xD8, 0xFF};
constexpr uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

// One TurboJPEG handle per thread and kind, made on first use: a handle is not thread-safe, and
// making one per call costs an allocation of the codec's state.
struct TjHandle {
  tjhandle h = nullptr;
  ~TjHandle() { Reset(); }
  void Reset() {
    if (h != nullptr) tjDestroy(h);
    h = nullptr;
  }
};
thread_local TjHandle t_decompress;
tjhandle DecompressHandle() {
  if (t_decompress.h == nullptr) t_decompress.h = tjInitDecompress();
  return t_decompress.h;
}
tjhandle CompressHandle() {
  thread_local TjHandle handle;
  if (handle.h == nullptr) handle.h = tjInitCompress();
  return handle.h;
}

// libpng's I/O and error hooks: plain data only (see the file comment).
struct PngState {
  const uint8_t* in = nullptr;
  size_t in_size = 0, pos = 0;
  std::string* out = nullptr;
  char error[200] = {0};
};

void PngOnError(png_structp png, png_const_charp message) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->error, sizeof(st->error), "%s", message != nullptr ? message : "unknown error");
  png_longjmp(png, 1);
}
void PngOnWarning(png_structp, png_const_charp) {}  // ancillary damage: not an error for a header

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* st = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > st->in_size - st->pos) png_error(png, "truncated file");
  std::memcpy(out, st->in + st->pos, n);
  st->pos += n;
}
void PngWrite(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngState*>(png_get_io_ptr(png))->out->append(reinterpret_cast<const char*>(data), n);
}
void PngFlush(png_structp) {}

// 0 on success, with width, height and channels set; -1 with st->error set.
int ReadPngHeader(PngState* st, int32_t* width, int32_t* height, int32_t* channels) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, PngOnError, PngOnWarning);
  if (png == nullptr) {
    std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    if (st->error[0] == '\0') std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_set_read_fn(png, st, PngRead);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int color = png_get_color_type(png, info);
  const bool transparency = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  int c = 0;
  switch (color) {
    case PNG_COLOR_TYPE_GRAY: c = transparency ? 2 : 1; break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: c = 2; break;
    case PNG_COLOR_TYPE_RGB: c = transparency ? 4 : 3; break;
    case PNG_COLOR_TYPE_RGB_ALPHA: c = 4; break;
    case PNG_COLOR_TYPE_PALETTE: c = transparency ? 4 : 3; break;
    default: c = 0; break;
  }
  png_destroy_read_struct(&png, &info, nullptr);
  if (c == 0 || w == 0 || h == 0 || w > INT32_MAX || h > INT32_MAX) {
    std::snprintf(st->error, sizeof(st->error), "bad header (colour type %d, %ux%u)", color, w, h);
    return -1;
  }
  *width = static_cast<int32_t>(w);
  *height = static_cast<int32_t>(h);
  *channels = c;
  return 0;
}

// Resizes the caller's output buffer for DecodePngRows without letting an exception reach a frame
// that libpng may longjmp over: null when the allocation failed.
uint8_t* GrowOutput(AlignedBuffer* out, size_t bytes) noexcept {
  try {
    out->Resize(bytes);
    return out->data();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

// PIL's RGB to L conversion (Convert.c, rgb2l): L = (19595 R + 38470 G + 7471 B + 2^15) >> 16. In
// place: pixel i's gray byte goes where its red byte was read from or before it.
void RgbToGrayInPlace(uint8_t* p, size_t pixels) {
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t* rgb = p + 3 * i;
    p[i] = static_cast<uint8_t>((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
  }
}

// Decodes the PNG in st->in into *out as `want` channels (1: gray or, for colour images, RGB that the
// caller converts; 3 RGB; 4 RGBA). 0 on success with *width, *height, *channels set (channels as
// decoded: 3 when want is 1 and the image has colour); -1 with st->error set. Plain data only on this
// frame (libpng longjmps to it).
int DecodePngRows(PngState* st, int want, int64_t max_bytes, AlignedBuffer* out, int32_t* width, int32_t* height,
                  int32_t* channels) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, st, PngOnError, PngOnWarning);
  if (png == nullptr) {
    std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
    if (st->error[0] == '\0') std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_set_read_fn(png, st, PngRead);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  const bool gray = (color & PNG_COLOR_MASK_COLOR) == 0;
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);  // also turns tRNS into alpha
  if (gray && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);  // the high byte, as PIL's RGB;16B unpacker
  if (want == 4) {
    if (png_get_valid(png, info, PNG_INFO_tRNS) != 0) png_set_tRNS_to_alpha(png);
    if (gray) png_set_gray_to_rgb(png);
    png_set_add_alpha(png, 0xFF, PNG_FILLER_AFTER);  // only where the image has no alpha
  } else {
    png_set_strip_alpha(png);
    if (want == 3 && gray) png_set_gray_to_rgb(png);
  }
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int c = png_get_channels(png, info);
  const size_t row_bytes = png_get_rowbytes(png, info);
  const int expected = want == 1 ? (gray ? 1 : 3) : want;
  if (c != expected || w == 0 || h == 0 || w > INT32_MAX || h > INT32_MAX ||
      row_bytes != static_cast<size_t>(w) * static_cast<size_t>(c)) {
    std::snprintf(st->error, sizeof(st->error), "unexpected layout after conversion (colour type %d, depth %d: %d "
                  "channels, %zu bytes per row of %u pixels)", color, depth, c, row_bytes, w);
    png_destroy_read_struct(&png, &info, nullptr);
    return -1;
  }
  const double bytes = static_cast<double>(row_bytes) * h;
  if (bytes > static_cast<double>(max_bytes)) {
    std::snprintf(st->error, sizeof(st->error), "too large: %ux%u pixels x %d channels = %.0f bytes decoded, over the "
                  "limit of %lld", w, h, c, bytes, static_cast<long long>(max_bytes));
    png_destroy_read_struct(&png, &info, nullptr);
    return -2;
  }
  uint8_t* pixels = GrowOutput(out, row_bytes * h);
  if (pixels == nullptr) {
    std::snprintf(st->error, sizeof(st->error), "out of memory for %.0f decoded bytes", bytes);
    png_destroy_read_struct(&png, &info, nullptr);
    return -1;
  }
  // Interlaced images: each pass refines every row in place.
  for (int pass = 0; pass < passes; ++pass) {
    for (png_uint_32 y = 0; y < h; ++y) png_read_row(png, pixels + static_cast<size_t>(y) * row_bytes, nullptr);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  *width = static_cast<int32_t>(w);
  *height = static_cast<int32_t>(h);
  *channels = c;
  return 0;
}

// 0 on success (st->out holds the file); -1 with st->error set.
int WritePng(PngState* st, const uint8_t* pixels, int width, int height, int color_type, size_t row_bytes) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, st, PngOnError, PngOnWarning);
  if (png == nullptr) {
    std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
    if (st->error[0] == '\0') std::snprintf(st->error, sizeof(st->error), "out of memory");
    return -1;
  }
  png_set_write_fn(png, st, PngWrite, PngFlush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8, color_type,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) png_write_row(png, pixels + static_cast<size_t>(y) * row_bytes);
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return 0;
}

// libjpeg's error hooks for the region decoder: plain data only (the decoder longjmps out of the
// library, as libpng does above). Warnings (a truncated scan, corrupt entropy data) are errors, as
// TJFLAG_STOPONWARNING makes them on the TurboJPEG path.
struct JpegErrors {
  jpeg_error_mgr pub;  // first: libjpeg hands its err pointer back to the hooks
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void JpegOnError(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void JpegOnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) JpegOnError(cinfo);  // a warning; trace messages (level >= 0) are ignored
}

// What DecodeJpegRegionRows needs, as plain data. `out` holds full_height rows of full_width *
// channels bytes (the scaled image); the region's rows land at their places in it.
struct JpegRegionJob {
  const uint8_t* in = nullptr;
  size_t in_size = 0;
  J_COLOR_SPACE colour = JCS_EXT_RGB;
  int channels = 3;
  int scale_eighths = 8;
  uint32_t left = 0, top = 0, width = 0, height = 0;  // the region, inside the scaled image
  uint32_t full_width = 0, full_height = 0;           // the scaled image, as the header gave it
  uint8_t* out = nullptr;
  JpegErrors errors;
};

// Decodes the region's rows with libjpeg's scanline API: skip the rows above, crop the columns to
// the iMCUs that cover the region, read down to the region's last row and abort (the rest of the
// stream is never decoded). Returns 0, or 1 with job->errors.message set. No destructors on this
// frame (longjmp).
int DecodeJpegRegionRows(JpegRegionJob* job) {
  jpeg_decompress_struct cinfo;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&job->errors.pub);
  job->errors.pub.error_exit = JpegOnError;
  job->errors.pub.emit_message = JpegOnMessage;
  job->errors.message[0] = '\0';
  if (setjmp(job->errors.jump) != 0) {
    jpeg_destroy_decompress(&cinfo);  // safe on a struct that jpeg_create_decompress did not finish
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, job->in, static_cast<unsigned long>(job->in_size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = job->colour;
  cinfo.scale_num = static_cast<unsigned int>(job->scale_eighths);
  cinfo.scale_denom = 8;
  cinfo.dct_method = JDCT_ISLOW;  // TurboJPEG's default (the accurate integer DCT), and PIL's
  cinfo.do_fancy_upsampling = TRUE;
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_width != job->full_width || cinfo.output_height != job->full_height ||
      cinfo.output_components != job->channels) {
    std::snprintf(job->errors.message, sizeof(job->errors.message),
                  "the scanline decoder gives %ux%u x %d, the header %ux%u x %d", cinfo.output_width,
                  cinfo.output_height, cinfo.output_components, job->full_width, job->full_height, job->channels);
    jpeg_destroy_decompress(&cinfo);
    return 1;
  }
  // Fancy upsampling treats the cropped columns' edges as the image's edges (it replicates the last
  // chroma sample instead of reading the next one), so the crop asked for reaches one iMCU beyond
  // the region on both sides, where the image goes on: the region's pixels are then interior.
  const JDIMENSION imcu = static_cast<JDIMENSION>(cinfo.max_h_samp_factor * cinfo.min_DCT_scaled_size);
  JDIMENSION x = job->left > imcu ? job->left - imcu : 0;
  JDIMENSION w = std::min<JDIMENSION>(cinfo.output_width, job->left + job->width + imcu) - x;
  if (x > 0 || w < cinfo.output_width) jpeg_crop_scanline(&cinfo, &x, &w);  // widened to whole iMCUs
  if (job->top > 0) jpeg_skip_scanlines(&cinfo, job->top);
  const size_t stride = static_cast<size_t>(job->full_width) * static_cast<size_t>(job->channels);
  const JDIMENSION end = job->top + job->height;
  while (cinfo.output_scanline < end) {
    JSAMPROW row = job->out + static_cast<size_t>(cinfo.output_scanline) * stride +
                   static_cast<size_t>(x) * static_cast<size_t>(job->channels);
    if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {  // cannot happen with a memory source; never loop on it
      std::snprintf(job->errors.message, sizeof(job->errors.message), "no row %u from the scanline decoder",
                    cinfo.output_scanline);
      jpeg_destroy_decompress(&cinfo);
      return 1;
    }
  }
  jpeg_abort_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return 0;
}

}  // namespace

std::string_view ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "jpeg";
    case ImageFormat::kPng: return "png";
  }
  return "unknown";
}

std::optional<ImageFormat> DetectImageFormat(ByteView bytes) {
  if (bytes.size() >= sizeof(kJpegMagic) && std::memcmp(bytes.data(), kJpegMagic, sizeof(kJpegMagic)) == 0) {
    return ImageFormat::kJpeg;
  }
  if (bytes.size() >= sizeof(kPngMagic) && std::memcmp(bytes.data(), kPngMagic, sizeof(kPngMagic)) == 0) {
    return ImageFormat::kPng;
  }
  return std::nullopt;
}

Result<ImageInfo> ReadImageInfo(ByteView bytes, std::string_view path) {
  const std::optional<ImageFormat> format = DetectImageFormat(bytes);
  if (!format) {
    return Status::InvalidArgument(fmt::format("{}: not a JPEG or PNG image (the file does not start with either's "
                                               "magic bytes)", path));
  }
  ImageInfo info;
  info.format = *format;
  if (*format == ImageFormat::kJpeg) {
    tjhandle h = DecompressHandle();
    if (h == nullptr) return Status::Internal(fmt::format("{}: TurboJPEG: {}", path, tjGetErrorStr2(nullptr)));
    int width = 0, height = 0, subsamp = 0, colorspace = 0;
    if (tjDecompressHeader3(h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                            &colorspace) != 0) {
      Status error = Status::Corruption(fmt::format("{}: bad JPEG header: {}", path, tjGetErrorStr2(h)));
      // A failed header read can leave the handle's decoder mid-stream (the next file then reads as
      // "Bogus DQT index"): start the next call from a fresh handle.
      t_decompress.Reset();
      return error;
    }
    if (width <= 0 || height <= 0) {
      // A stream that ends before its frame header reads as 0 x 0 (the library supplies an end marker).
      t_decompress.Reset();
      return Status::Corruption(fmt::format("{}: bad JPEG header: {}x{} pixels (truncated before the frame header?)", path,
                                            width, height));
    }
    info.width = width;
    info.height = height;
    switch (colorspace) {
      case TJCS_GRAY: info.channels = 1; break;
      case TJCS_RGB:
      case TJCS_YCbCr: info.channels = 3; break;
      case TJCS_CMYK:
      case TJCS_YCCK: info.channels = 4; break;
      default:
        t_decompress.Reset();
        return Status::Corruption(fmt::format("{}: bad JPEG header: unknown colour space {}", path, colorspace));
    }
    return info;
  }
  PngState st;
  st.in = bytes.data();
  st.in_size = bytes.size();
  if (ReadPngHeader(&st, &info.width, &info.height, &info.channels) != 0) {
    return Status::Corruption(fmt::format("{}: bad PNG header: {}", path, st.error));
  }
  return info;
}

namespace {

// A PNG decoded into `out` as `want` channels; sets image->width, height and channels.
Status DecodePng(ByteView bytes, std::string_view path, int want, int64_t max_bytes, AlignedBuffer* out,
                 DecodedImage* image) {
  PngState st;
  st.in = bytes.data();
  st.in_size = bytes.size();
  int32_t decoded_channels = 0;
  const int rc = DecodePngRows(&st, want, max_bytes, out, &image->width, &image->height, &decoded_channels);
  if (rc == -2) return Status::Unsupported(fmt::format("{}: PNG {}", path, st.error));
  if (rc != 0) return Status::Corruption(fmt::format("{}: bad PNG: {}", path, st.error));
  if (want == 1 && decoded_channels == 3) {
    RgbToGrayInPlace(out->data(), static_cast<size_t>(image->width) * static_cast<size_t>(image->height));
    out->Resize(static_cast<size_t>(image->width) * static_cast<size_t>(image->height));
  }
  image->channels = want;
  return Status::OK();
}

// The region options.region_* of a JPEG of image.width x image.height pixels (at its scale),
// decoded as `decoded` channels into `out` (sized for the whole image) by libjpeg's scanline decoder,
// which skips the rows above the region and crops the columns.
Status DecodeJpegRegion(ByteView bytes, std::string_view path, int decoded, const DecodeImageOptions& options,
                        const DecodedImage& image, AlignedBuffer* out) {
  if (options.region_left < 0 || options.region_top < 0 || options.region_height <= 0 ||
      int64_t{options.region_left} + options.region_width > image.width ||
      int64_t{options.region_top} + options.region_height > image.height) {
    return Status::InvalidArgument(fmt::format("{}: a region of {}x{} pixels at ({}, {}) outside the {}x{} image",
                                               path, options.region_width, options.region_height,
                                               options.region_left, options.region_top, image.width, image.height));
  }
  JpegRegionJob job;  // plain data: the longjmp stays inside DecodeJpegRegionRows
  job.in = bytes.data();
  job.in_size = bytes.size();
  job.colour = decoded == 1 ? JCS_GRAYSCALE : decoded == 3 ? JCS_EXT_RGB : JCS_EXT_RGBA;
  job.channels = decoded;
  job.scale_eighths = options.scale_eighths;
  job.left = static_cast<uint32_t>(options.region_left);
  job.top = static_cast<uint32_t>(options.region_top);
  job.width = static_cast<uint32_t>(options.region_width);
  job.height = static_cast<uint32_t>(options.region_height);
  job.full_width = static_cast<uint32_t>(image.width);
  job.full_height = static_cast<uint32_t>(image.height);
  job.out = out->data();
  if (DecodeJpegRegionRows(&job) != 0) {
    return Status::Corruption(fmt::format("{}: bad JPEG data: {}", path, job.errors.message));
  }
  return Status::OK();
}

}  // namespace

Result<DecodedImage> DecodeImage(ByteView bytes, std::string_view path, const DecodeImageOptions& options,
                                 AlignedBuffer* out) {
  const int want = options.channels;
  if (want != 1 && want != 3 && want != 4) {
    return Status::InvalidArgument(fmt::format("{}: decode to {} channels (1 gray, 3 RGB or 4 RGBA)", path, want));
  }
  if (options.scale_eighths < 1 || options.scale_eighths > 8) {
    return Status::InvalidArgument(fmt::format("{}: JPEG scale {}/8 (1/8 to 8/8)", path, options.scale_eighths));
  }
  const std::optional<ImageFormat> format = DetectImageFormat(bytes);
  if (!format) {
    return Status::InvalidArgument(fmt::format("{}: not a JPEG or PNG image (the bytes do not start with either's "
                                               "magic bytes)", path));
  }
  DecodedImage image;
  image.format = *format;
  if (*format == ImageFormat::kPng) {
    STOKE_RETURN_IF_ERROR(DecodePng(bytes, path, want, options.max_bytes, out, &image));
    return image;
  }
  tjhandle h = DecompressHandle();
  if (h == nullptr) return Status::Internal(fmt::format("{}: TurboJPEG: {}", path, tjGetErrorStr2(nullptr)));
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(h, bytes.data(), static_cast<unsigned long>(bytes.size()), &width, &height, &subsamp,
                          &colorspace) != 0) {
    Status error = Status::Corruption(fmt::format("{}: bad JPEG header: {}", path, tjGetErrorStr2(h)));
    t_decompress.Reset();  // see ReadImageInfo
    return error;
  }
  if (width <= 0 || height <= 0) {
    t_decompress.Reset();
    return Status::Corruption(fmt::format("{}: bad JPEG header: {}x{} pixels (truncated before the frame header?)", path,
                                          width, height));
  }
  const bool gray = colorspace == TJCS_GRAY;
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return Status::Unsupported(fmt::format("{}: a CMYK JPEG ({} colour space); stoke decodes RGB (YCbCr) and grayscale "
                                           "JPEGs (convert the file to RGB)", path,
                                           colorspace == TJCS_CMYK ? "CMYK" : "YCCK"));
  }
  if (!gray && colorspace != TJCS_RGB && colorspace != TJCS_YCbCr) {
    t_decompress.Reset();
    return Status::Corruption(fmt::format("{}: bad JPEG header: unknown colour space {}", path, colorspace));
  }
  // A colour image wanted as gray is decoded to RGB and converted as PIL's convert("L") does.
  const int decoded = want == 1 ? (gray ? 1 : 3) : want;
  const int pixel_format = decoded == 1 ? TJPF_GRAY : decoded == 3 ? TJPF_RGB : TJPF_RGBA;
  image.width = JpegScaledExtent(width, options.scale_eighths);
  image.height = JpegScaledExtent(height, options.scale_eighths);
  const double decoded_bytes = static_cast<double>(image.width) * image.height * decoded;
  if (decoded_bytes > static_cast<double>(options.max_bytes)) {
    return Status::Unsupported(fmt::format("{}: JPEG too large: {}x{} pixels x {} channels = {:.0f} bytes decoded, over "
                                           "the limit of {}", path, image.width, image.height, decoded, decoded_bytes,
                                           options.max_bytes));
  }
  out->Resize(static_cast<size_t>(decoded_bytes));
  if (options.region_width > 0 && decoded == want &&
      (options.region_width < image.width || options.region_height < image.height)) {
    STOKE_RETURN_IF_ERROR(DecodeJpegRegion(bytes, path, decoded, options, image, out));
    image.channels = want;
    return image;
  }
  // Warnings (a truncated scan, corrupt entropy data) are errors: the library would otherwise return
  // an image with a grey or garbage tail.
  if (tjDecompress2(h, bytes.data(), static_cast<unsigned long>(bytes.size()), out->data(), image.width, 0,
                    image.height, pixel_format, TJFLAG_STOPONWARNING) != 0) {
    Status error = Status::Corruption(fmt::format("{}: bad JPEG data: {}", path, tjGetErrorStr2(h)));
    t_decompress.Reset();
    return error;
  }
  if (want == 1 && decoded == 3) {
    RgbToGrayInPlace(out->data(), static_cast<size_t>(image.width) * static_cast<size_t>(image.height));
    out->Resize(static_cast<size_t>(image.width) * static_cast<size_t>(image.height));
  }
  image.channels = want;
  return image;
}

Result<std::string> EncodeJpeg(ByteView pixels, int width, int height, int channels, int quality) {
  if (width <= 0 || height <= 0 || (channels != 1 && channels != 3) || quality < 1 || quality > 100 ||
      pixels.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(channels)) {
    return Status::InvalidArgument(fmt::format("EncodeJpeg: {} bytes for {}x{}x{} at quality {}", pixels.size(), width,
                                               height, channels, quality));
  }
  tjhandle h = CompressHandle();
  if (h == nullptr) return Status::Internal(fmt::format("TurboJPEG: {}", tjGetErrorStr2(nullptr)));
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(h, pixels.data(), width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &out, &size,
                             channels == 1 ? TJSAMP_GRAY : TJSAMP_420, quality, 0);
  std::unique_ptr<unsigned char, void (*)(unsigned char*)> owned(out, tjFree);
  if (rc != 0) return Status::Internal(fmt::format("EncodeJpeg: {}", tjGetErrorStr2(h)));
  return std::string(reinterpret_cast<const char*>(out), size);
}

Result<std::string> EncodePng(ByteView pixels, int width, int height, int channels) {
  static constexpr int kColorTypes[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                        PNG_COLOR_TYPE_RGB_ALPHA};
  if (width <= 0 || height <= 0 || channels < 1 || channels > 4 ||
      pixels.size() != static_cast<size_t>(width) * static_cast<size_t>(height) * static_cast<size_t>(channels)) {
    return Status::InvalidArgument(fmt::format("EncodePng: {} bytes for {}x{}x{}", pixels.size(), width, height, channels));
  }
  std::string out;
  PngState st;
  st.out = &out;
  if (WritePng(&st, pixels.data(), width, height, kColorTypes[channels - 1], static_cast<size_t>(width) * channels) != 0) {
    return Status::Internal(fmt::format("EncodePng: {}", st.error));
  }
  return out;
}

}  // namespace stoke
