// Images finished on the GPU (LoaderOptions::transforms_on = kCuda). A decode worker writes one record
// per image instead of the transformed pixels: a header with the geometry, the tensor part's lookup
// table, and the pixels the resampling reads (the crop box's clip region as decoded, at the JPEG DCT
// scale where one was used). The device then resamples, mirrors and applies the table, one thread per
// output pixel. The per-pixel arithmetic below is Pillow's fixed point exactly as
// format/image_resample.cc computes it, and the table is the CPU path's own, so a finished record
// equals the CPU path's output byte for byte. This header is compiled by the host compiler and by nvcc
// (gpu_image_cuda.cu): the per-pixel functions are __host__ __device__ there.
//
// Record layout (little-endian, record_bytes per row of the batch column, fixed per column):
//   GpuImageHeader (128 bytes) | table (table_bytes) | pixels (staged_height rows of staged_width * channels)
// The pixel area holds at most kGpuImageAreaFactor x the output's pixels: a clip region larger than
// that (a large PNG, or a JPEG without DCT scaling) is resampled on the CPU into the window, and the
// record then says resample = 0 (the GPU copies it through the table).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define STOKE_HOST_DEVICE __host__ __device__
#else
#define STOKE_HOST_DEVICE
#endif

namespace stoke {

inline constexpr uint32_t kGpuImageMagic = 0x49474b53;  // "SKGI"
inline constexpr int kGpuImageAreaFactor = 4;            // pixel area per record, in output images

struct GpuImageHeader {
  uint32_t magic = kGpuImageMagic;
  int32_t channels = 3;
  int32_t out_height = 0, out_width = 0;   // the output image (the window)
  int32_t out_dtype = 0;                   // a DType: kUInt8 ([H, W, C] pixels) or the table's element type
  int32_t element_bytes = 1;               // of out_dtype
  int32_t table_bytes = 0;                 // channels * 256 * element_bytes; 0 for uint8 output
  int32_t staged_width = 0, staged_height = 0;
  int32_t resample = 0;                    // 1: resample the box below; 0: the pixels are the window
  int32_t flip = 0;                        // mirror the window horizontally (resample only)
  int32_t virtual_width = 0, virtual_height = 0;  // the size the box is resampled to
  int32_t window_left = 0, window_top = 0; // the output's offset in the resampled image
  int32_t reserved0 = 0;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;   // the box, in staged pixels (the clip region is all of them)
  uint8_t reserved1[32] = {};
};
static_assert(sizeof(GpuImageHeader) == 128, "the record header is 128 bytes");

// The bytes of one record for an output of out_height x out_width x channels through a table of
// table_bytes.
inline size_t GpuImageRecordBytes(int64_t out_height, int64_t out_width, int channels, size_t table_bytes) {
  const size_t area = static_cast<size_t>(out_height) * static_cast<size_t>(out_width) * kGpuImageAreaFactor;
  return (sizeof(GpuImageHeader) + table_bytes + area * static_cast<size_t>(channels) + 63) / 64 * 64;
}

// True when a record's header is one, for an image of channels x out_height x out_width, and its
// table and pixels lie within record_bytes.
STOKE_HOST_DEVICE inline bool GpuImageRecordFits(const GpuImageHeader& h, size_t record_bytes) {
  // uint8 pixels without a table, or a table of 2- or 4-byte elements (float16, bfloat16, float32).
  const bool elements = h.table_bytes == 0 ? h.element_bytes == 1
                                           : (h.element_bytes == 2 || h.element_bytes == 4) &&
                                                 h.table_bytes == h.channels * 256 * h.element_bytes;
  const bool dims = h.channels >= 1 && h.channels <= 4 && h.out_height >= 1 && h.out_width >= 1 &&
                    h.staged_width >= 0 && h.staged_height >= 0 && elements;
  if (h.magic != kGpuImageMagic || !dims) return false;
  const size_t pixels = static_cast<size_t>(h.staged_width) * static_cast<size_t>(h.staged_height) * h.channels;
  const size_t window = static_cast<size_t>(h.out_width) * static_cast<size_t>(h.out_height) * h.channels;
  return sizeof(GpuImageHeader) + static_cast<size_t>(h.table_bytes) + (h.resample ? pixels : window) <= record_bytes &&
         (h.resample || (h.staged_width == h.out_width && h.staged_height == h.out_height));
}

namespace gpu_image_internal {

// Pillow's 8-bit fixed point: PRECISION_BITS = 32 - 8 - 2.
inline constexpr int kPrecisionBits = 22;
inline constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);

STOKE_HOST_DEVICE inline uint8_t Clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;
  return static_cast<uint8_t>(s < 0 ? 0 : s > 255 ? 255 : s);
}

// One output index's taps on one axis, as ComputeCoefficients (format/image_resample.cc) makes them:
// the first input pixel, the tap count (-1: the index lies outside the resampled image: padding), and
// what the weights need.
struct AxisTaps {
  int32_t first = 0, count = -1;
  double center = 0, ss = 1, sum = 0;
};

STOKE_HOST_DEVICE inline double BilinearWeight(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

STOKE_HOST_DEVICE inline AxisTaps Taps(double in0_d, double in1_d, int32_t in_size, int32_t out_size, int32_t index) {
  AxisTaps t;
  if (index < 0 || index >= out_size) return t;
  const float in0 = static_cast<float>(in0_d), in1 = static_cast<float>(in1_d);  // Pillow takes floats
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = scale > 1.0 ? scale : 1.0;
  const double support = filterscale;
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.center = in0 + (index + 0.5) * scale;
  t.ss = 1.0 / filterscale;
  int xmin = static_cast<int>(t.center - support + 0.5);
  if (xmin < 0) xmin = 0;
  int xmax = static_cast<int>(t.center + support + 0.5);
  if (xmax > in_size) xmax = in_size;
  xmax -= xmin;
  int n = 0;
  for (; n < xmax && n < ksize; ++n) t.sum += BilinearWeight((n + xmin - t.center + 0.5) * t.ss);
  t.first = xmin;
  t.count = n;
  return t;
}

// Tap k's fixed-point weight.
STOKE_HOST_DEVICE inline int32_t TapWeight(const AxisTaps& t, int k) {
  const double w = BilinearWeight((k + t.first - t.center + 0.5) * t.ss);
  const double v = t.sum != 0.0 ? w / t.sum : w;
  return v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits)) : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
}

// The horizontal pass's value of staged row `row` at resampled column `vx`, channel c.
STOKE_HOST_DEVICE inline uint8_t HorizontalValue(const GpuImageHeader& h, const uint8_t* pixels, bool need_h,
                                                 const AxisTaps& tx, int32_t vx, int32_t row, int c) {
  const uint8_t* line = pixels + static_cast<size_t>(row) * h.staged_width * h.channels;
  if (!need_h) return vx >= 0 && vx < h.staged_width ? line[static_cast<size_t>(vx) * h.channels + c] : 0;
  if (tx.count < 0) return 0;
  int32_t ss = kHalf;
  for (int k = 0; k < tx.count; ++k) ss += line[static_cast<size_t>(tx.first + k) * h.channels + c] * TapWeight(tx, k);
  return Clip8(ss);
}

}  // namespace gpu_image_internal

// The output pixel (ox, oy) of a record, its `channels` values before the table, into `out`.
STOKE_HOST_DEVICE inline void GpuImagePixel(const GpuImageHeader& h, const uint8_t* pixels, int32_t ox, int32_t oy,
                                            uint8_t* out) {
  using namespace gpu_image_internal;
  const int c = h.channels;
  if (!h.resample) {
    for (int k = 0; k < c; ++k) out[k] = pixels[(static_cast<size_t>(oy) * h.staged_width + ox) * c + k];
    return;
  }
  const int32_t vx = h.window_left + (h.flip ? h.out_width - 1 - ox : ox), vy = h.window_top + oy;
  const bool need_h = h.virtual_width != h.staged_width || h.x0 != 0 || h.x1 != h.staged_width;
  const bool need_v = h.virtual_height != h.staged_height || h.y0 != 0 || h.y1 != h.staged_height;
  const AxisTaps tx = need_h ? Taps(h.x0, h.x1, h.staged_width, h.virtual_width, vx) : AxisTaps{};
  if (!need_v) {
    const bool inside = vy >= 0 && vy < h.staged_height;
    for (int k = 0; k < c; ++k) out[k] = inside ? HorizontalValue(h, pixels, need_h, tx, vx, vy, k) : 0;
    return;
  }
  const AxisTaps ty = Taps(h.y0, h.y1, h.staged_height, h.virtual_height, vy);
  for (int k = 0; k < c; ++k) {
    if (ty.count < 0) {
      out[k] = 0;
      continue;
    }
    int32_t ss = kHalf;
    for (int t = 0; t < ty.count; ++t) ss += HorizontalValue(h, pixels, need_h, tx, vx, ty.first + t, k) * TapWeight(ty, t);
    out[k] = Clip8(ss);
  }
}

// Writes output pixel (ox, oy) of a record into the batch's output for its row: [H, W, C] uint8, or
// [C, H, W] of the table's elements.
STOKE_HOST_DEVICE inline void FinishGpuImagePixel(const uint8_t* record, int32_t ox, int32_t oy, uint8_t* out_image) {
  const GpuImageHeader& h = *reinterpret_cast<const GpuImageHeader*>(record);
  const uint8_t* table = record + sizeof(GpuImageHeader);
  uint8_t values[4];
  GpuImagePixel(h, table + h.table_bytes, ox, oy, values);
  const size_t plane = static_cast<size_t>(h.out_height) * h.out_width, at = static_cast<size_t>(oy) * h.out_width + ox;
  if (h.table_bytes == 0) {
    for (int k = 0; k < h.channels; ++k) out_image[at * h.channels + k] = values[k];
    return;
  }
  const int e = h.element_bytes;
  for (int k = 0; k < h.channels; ++k) {
    const uint8_t* from = table + (static_cast<size_t>(k) * 256 + values[k]) * e;
    uint8_t* to = out_image + (static_cast<size_t>(k) * plane + at) * e;
    for (int b = 0; b < e; ++b) to[b] = from[b];
  }
}

// What every record of a launch finishes to, and where: FinishGpuImages (include/stoke/gpu_images.h)
// fills it from a GpuImagesShape.
struct GpuImageLaunch {
  const uint8_t* records = nullptr;  // device memory: rows records of record_bytes
  size_t record_bytes = 0;
  int64_t rows = 0;
  int32_t channels = 0, height = 0, width = 0, element_bytes = 1, table_bytes = 0;
  size_t image_bytes = 0;           // per row of `out`
  uint8_t* out = nullptr;           // device memory: rows images
  void* stream = nullptr;           // a cudaStream_t
  int device = -1;                  // made current first when >= 0
};

#if defined(STOKE_CUDA_KERNELS) || defined(__CUDACC__)
// Queues the kernel (gpu_images_cuda.cu). False with the CUDA runtime's message in `error`.
bool LaunchFinishGpuImages(const GpuImageLaunch& launch, const char** error);
#endif

}  // namespace stoke
