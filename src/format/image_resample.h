// Image resampling as Pillow does it (src/libImaging/Resample.c: the BILINEAR filter, support 1
// widened by the reduction factor, i.e. antialiased; coefficients normalised and rounded to 22-bit
// fixed point; the horizontal pass first, over the rows the vertical pass needs, rounded to 8 bits in
// between), on interleaved 8-bit pixels. With the box on whole pixels and the clip region equal to
// it, the result is byte-identical to PIL's `img.crop(box).resize(size, BILINEAR)` (tested against
// PIL in python/tests/test_images_loader.py). Used by the loader's image transforms.
#pragma once

#include <cstdint>
#include <vector>

#include "core/buffer.h"

namespace stoke {

// Working memory of ResampleBilinear, grow-only: reuse one per thread. Not thread-safe.
struct ResampleScratch {
  AlignedBuffer horizontal;  // the horizontal pass's rows
  std::vector<int32_t> x_bounds, y_bounds, x_coeffs, y_coeffs, accumulator;
  std::vector<double> weights;
  std::vector<uint8_t> row;
};

// Resamples the box [x0, x1) x [y0, y1) (fractional source coordinates) of `src` (src_height rows of
// src_width * channels bytes), its filter clipped to [clip_left, clip_right) x [clip_top, clip_bottom)
// (inside the source), to a virtual out_width x out_height image as Pillow's BILINEAR resize does,
// and writes the window [wx, wx + ww) x [wy, wy + wh) of it to `dst` (wh rows of ww * channels bytes),
// mirrored horizontally when `flip`; window pixels outside the virtual image are 0.
struct ResampleRequest {
  const uint8_t* src = nullptr;
  int32_t src_width = 0, src_height = 0, channels = 3;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  int32_t clip_left = 0, clip_top = 0, clip_right = 0, clip_bottom = 0;
  int32_t out_width = 0, out_height = 0;
  int32_t wx = 0, wy = 0, ww = 0, wh = 0;
  bool flip = false;
};
void ResampleBilinear(const ResampleRequest& request, uint8_t* dst, ResampleScratch* scratch);

// Writes one row of `width` pixels of `channels` bytes to `dst`, mirrored when `flip`.
void StorePixelRow(const uint8_t* values, int32_t width, int channels, bool flip, uint8_t* dst);

}  // namespace stoke
