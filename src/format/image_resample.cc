#include "format/image_resample.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace stoke {
namespace {

// Pillow's fixed point for 8-bit resampling: PRECISION_BITS = 32 - 8 - 2.
constexpr int kPrecisionBits = 22;
constexpr int32_t kHalf = 1 << (kPrecisionBits - 1);
inline uint8_t Clip8(int32_t v) { return static_cast<uint8_t>(std::clamp(v >> kPrecisionBits, 0, 255)); }

inline double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs + normalize_coeffs_8bpc for the outputs [first, first + count) of a
// resize of the box [in0, in1) of an axis of in_size pixels to out_size: per output, the first input
// pixel and the tap count (bounds[2i], bounds[2i + 1]; count -1 for an output outside [0, out_size),
// which is padding) and `ksize` fixed-point weights. Returns ksize.
int ComputeCoefficients(int32_t in_size, double in0_d, double in1_d, int32_t out_size, int32_t first, int32_t count,
                        std::vector<int32_t>* bounds, std::vector<int32_t>* coeffs, std::vector<double>* weights) {
  // Pillow takes the box as floats.
  const float in0 = static_cast<float>(in0_d), in1 = static_cast<float>(in1_d);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;  // BILINEAR's support is 1
  const int ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  bounds->resize(static_cast<size_t>(count) * 2);
  coeffs->assign(static_cast<size_t>(count) * ksize, 0);
  weights->resize(static_cast<size_t>(ksize));
  for (int32_t i = 0; i < count; ++i) {
    const int32_t xx = first + i;
    if (xx < 0 || xx >= out_size) {
      (*bounds)[2 * i] = 0;
      (*bounds)[2 * i + 1] = -1;
      continue;
    }
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    double* k = weights->data();
    int x = 0;
    for (; x < xmax && x < ksize; ++x) {
      const double w = BilinearFilter((x + xmin - center + 0.5) * ss);
      k[x] = w;
      ww += w;
    }
    xmax = x;
    int32_t* fixed = coeffs->data() + static_cast<size_t>(i) * ksize;
    for (x = 0; x < xmax; ++x) {
      const double v = ww != 0.0 ? k[x] / ww : k[x];
      fixed[x] = v < 0 ? static_cast<int32_t>(-0.5 + v * (1 << kPrecisionBits))
                       : static_cast<int32_t>(0.5 + v * (1 << kPrecisionBits));
    }
    (*bounds)[2 * i] = xmin;
    (*bounds)[2 * i + 1] = xmax;
  }
  return ksize;
}

// One row of the horizontal pass: `row` points at the clip region's first pixel.
template <int C>
void HorizontalRow(const uint8_t* row, const int32_t* bounds, const int32_t* coeffs, int ksize, int32_t count,
                   uint8_t* out) {
  for (int32_t x = 0; x < count; ++x) {
    const int32_t xmin = bounds[2 * x], n = bounds[2 * x + 1];
    if (n < 0) {
      std::memset(out + x * C, 0, C);
      continue;
    }
    const int32_t* k = coeffs + static_cast<size_t>(x) * ksize;
    const uint8_t* p = row + static_cast<size_t>(xmin) * C;
    int32_t ss[C];
    for (int c = 0; c < C; ++c) ss[c] = kHalf;
    for (int32_t t = 0; t < n; ++t) {
      for (int c = 0; c < C; ++c) ss[c] += p[t * C + c] * k[t];
    }
    for (int c = 0; c < C; ++c) out[x * C + c] = Clip8(ss[c]);
  }
}

void HorizontalRowAny(int channels, const uint8_t* row, const int32_t* bounds, const int32_t* coeffs, int ksize,
                      int32_t count, uint8_t* out) {
  switch (channels) {
    case 1: HorizontalRow<1>(row, bounds, coeffs, ksize, count, out); break;
    case 2: HorizontalRow<2>(row, bounds, coeffs, ksize, count, out); break;
    case 3: HorizontalRow<3>(row, bounds, coeffs, ksize, count, out); break;
    default: HorizontalRow<4>(row, bounds, coeffs, ksize, count, out); break;
  }
}

// Writes one output row (`bytes` = ww * C values in window order) into `dst`, mirrored when `flip`.
void StoreRowImpl(const uint8_t* values, int32_t ww, int channels, bool flip, uint8_t* dst) {
  if (!flip) {
    std::memcpy(dst, values, static_cast<size_t>(ww) * channels);
    return;
  }
  for (int32_t x = 0; x < ww; ++x) std::memcpy(dst + (ww - 1 - x) * channels, values + x * channels, channels);
}

// The geometry of one resampling: the clip region, which passes it needs, and the rows of the clip
// region the vertical pass reads, [first_row, last_row).
struct ResampleShape {
  int c = 0;
  int32_t clip_w = 0, clip_h = 0;
  bool need_h = false, need_v = false;
  size_t src_stride = 0, row_bytes = 0;
  const uint8_t* clip_origin = nullptr;
  int y_ksize = 0;
  int32_t first_row = 0, last_row = 0;
};

// Rows of ww pixels that the vertical pass reads: row y of the clip region at data + (y - first_row) * stride.
struct ResampleRows {
  const uint8_t* data = nullptr;
  size_t stride = 0;
};

// The shape of request `r`, with the vertical pass's coefficients in scratch when it needs one.
ResampleShape PlanResample(const ResampleRequest& r, ResampleScratch* scratch) {
  ResampleShape p;
  p.c = r.channels;
  p.clip_w = r.clip_right - r.clip_left;
  p.clip_h = r.clip_bottom - r.clip_top;
  const double in0x = r.x0 - r.clip_left, in1x = r.x1 - r.clip_left;
  const double in0y = r.y0 - r.clip_top, in1y = r.y1 - r.clip_top;
  // Pillow: a pass is needed unless the box already is the whole (clipped) image at the output size.
  p.need_h = r.out_width != p.clip_w || in0x != 0 || in1x != p.clip_w;
  p.need_v = r.out_height != p.clip_h || in0y != 0 || in1y != p.clip_h;
  p.src_stride = static_cast<size_t>(r.src_width) * p.c;
  p.row_bytes = static_cast<size_t>(r.ww) * p.c;
  p.clip_origin = r.src + static_cast<size_t>(r.clip_top) * p.src_stride + static_cast<size_t>(r.clip_left) * p.c;
  if (!p.need_v) {
    p.first_row = std::clamp(r.wy, 0, p.clip_h);
    p.last_row = std::clamp(r.wy + r.wh, 0, p.clip_h);
    return p;
  }
  p.y_ksize = ComputeCoefficients(p.clip_h, in0y, in1y, r.out_height, r.wy, r.wh, &scratch->y_bounds, &scratch->y_coeffs,
                                  &scratch->weights);
  p.first_row = INT32_MAX;
  for (int32_t i = 0; i < r.wh; ++i) {
    if (scratch->y_bounds[2 * i + 1] < 0) continue;
    p.first_row = std::min(p.first_row, scratch->y_bounds[2 * i]);
    p.last_row = std::max(p.last_row, scratch->y_bounds[2 * i] + scratch->y_bounds[2 * i + 1]);
  }
  if (p.first_row > p.last_row) p.first_row = p.last_row = 0;  // the whole window is padding
  return p;
}

// The horizontal pass (or, without one, the window's columns of the clip rows, padded with zeros
// where the window leaves the image): rows [first_row, last_row) of ww pixels.
ResampleRows HorizontalPass(const ResampleRequest& r, const ResampleShape& p, ResampleScratch* scratch) {
  const size_t rows_bytes = p.row_bytes * static_cast<size_t>(std::max(p.last_row - p.first_row, 1));
  if (p.need_h) {
    const double in0x = r.x0 - r.clip_left, in1x = r.x1 - r.clip_left;
    const int x_ksize = ComputeCoefficients(p.clip_w, in0x, in1x, r.out_width, r.wx, r.ww, &scratch->x_bounds,
                                            &scratch->x_coeffs, &scratch->weights);
    scratch->horizontal.Resize(rows_bytes);
    for (int32_t y = p.first_row; y < p.last_row; ++y) {
      HorizontalRowAny(p.c, p.clip_origin + static_cast<size_t>(y) * p.src_stride, scratch->x_bounds.data(),
                       scratch->x_coeffs.data(), x_ksize, r.ww,
                       scratch->horizontal.data() + static_cast<size_t>(y - p.first_row) * p.row_bytes);
    }
    return {scratch->horizontal.data(), p.row_bytes};
  }
  if (r.wx >= 0 && r.wx + r.ww <= p.clip_w) {
    return {p.clip_origin + static_cast<size_t>(p.first_row) * p.src_stride + static_cast<size_t>(r.wx) * p.c, p.src_stride};
  }
  scratch->horizontal.Resize(rows_bytes);
  const int32_t lo = std::clamp(r.wx, 0, p.clip_w), hi = std::clamp(r.wx + r.ww, 0, p.clip_w);
  for (int32_t y = p.first_row; y < p.last_row; ++y) {
    uint8_t* out = scratch->horizontal.data() + static_cast<size_t>(y - p.first_row) * p.row_bytes;
    std::memset(out, 0, p.row_bytes);
    if (hi > lo) {
      std::memcpy(out + static_cast<size_t>(lo - r.wx) * p.c, p.clip_origin + static_cast<size_t>(y) * p.src_stride + lo * p.c,
                  static_cast<size_t>(hi - lo) * p.c);
    }
  }
  return {scratch->horizontal.data(), p.row_bytes};
}

// Output row i without a vertical pass: the clip row it lands on, or zeros outside the image.
void CopyRow(const ResampleRequest& r, const ResampleShape& p, ResampleRows rows, int32_t i, uint8_t* out) {
  const int32_t y = r.wy + i;
  if (y < 0 || y >= p.clip_h) {
    std::memset(out, 0, p.row_bytes);
  } else {
    StoreRowImpl(rows.data + static_cast<size_t>(y - p.first_row) * rows.stride, r.ww, p.c, r.flip, out);
  }
}

// The vertical pass, row by row, accumulating over the taps, into dst (wh rows of ww pixels).
void VerticalPass(const ResampleRequest& r, const ResampleShape& p, ResampleRows rows, ResampleScratch* scratch,
                  uint8_t* dst) {
  std::vector<int32_t>& acc = scratch->accumulator;
  std::vector<uint8_t>& values = scratch->row;
  values.resize(p.row_bytes);
  for (int32_t i = 0; i < r.wh; ++i) {
    uint8_t* out = dst + static_cast<size_t>(i) * p.row_bytes;
    if (!p.need_v) {
      CopyRow(r, p, rows, i, out);
      continue;
    }
    const int32_t ymin = scratch->y_bounds[2 * i], n = scratch->y_bounds[2 * i + 1];
    if (n < 0) {
      std::memset(out, 0, p.row_bytes);
      continue;
    }
    const int32_t* k = scratch->y_coeffs.data() + static_cast<size_t>(i) * p.y_ksize;
    acc.assign(p.row_bytes, kHalf);
    for (int32_t t = 0; t < n; ++t) {
      const uint8_t* row = rows.data + static_cast<size_t>(ymin + t - p.first_row) * rows.stride;
      const int32_t w = k[t];
      int32_t* a = acc.data();
      for (size_t j = 0; j < p.row_bytes; ++j) a[j] += row[j] * w;
    }
    for (size_t j = 0; j < p.row_bytes; ++j) values[j] = Clip8(acc[j]);
    StoreRowImpl(values.data(), r.ww, p.c, r.flip, out);
  }
}

}  // namespace

void ResampleBilinear(const ResampleRequest& r, uint8_t* dst, ResampleScratch* scratch) {
  const ResampleShape shape = PlanResample(r, scratch);
  const ResampleRows rows = HorizontalPass(r, shape, scratch);
  VerticalPass(r, shape, rows, scratch, dst);
}

void StorePixelRow(const uint8_t* values, int32_t width, int channels, bool flip, uint8_t* dst) {
  StoreRowImpl(values, width, channels, flip, dst);
}

}  // namespace stoke
