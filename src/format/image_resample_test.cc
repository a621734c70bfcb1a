#include "format/image_resample.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "core/random.h"

namespace stoke {
namespace {

std::vector<uint8_t> Noise(int w, int h, int c, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * c);
  for (auto& v : p) v = static_cast<uint8_t>(rng.Below(256));
  return p;
}

// Resampling a box of a w x h image (3 channels) to ow x oh; window = everything.
std::vector<uint8_t> Resample(const std::vector<uint8_t>& src, int w, int h, int bx, int by, int bw, int bh, int ow,
                              int oh, int wx, int wy, int ww, int wh, bool flip = false) {
  ResampleRequest r;
  r.src = src.data();
  r.src_width = w;
  r.src_height = h;
  r.channels = 3;
  r.x0 = bx;
  r.y0 = by;
  r.x1 = bx + bw;
  r.y1 = by + bh;
  r.clip_left = bx;
  r.clip_top = by;
  r.clip_right = bx + bw;
  r.clip_bottom = by + bh;
  r.out_width = ow;
  r.out_height = oh;
  r.wx = wx;
  r.wy = wy;
  r.ww = ww;
  r.wh = wh;
  r.flip = flip;
  std::vector<uint8_t> out(static_cast<size_t>(ww) * wh * 3, 0xAB);
  ResampleScratch scratch;
  ResampleBilinear(r, out.data(), &scratch);
  return out;
}

TEST(ResampleBilinear, SameSizeIsACopyAndConstantsStayConstant) {
  const auto src = Noise(17, 11, 3, 1);
  EXPECT_EQ(Resample(src, 17, 11, 0, 0, 17, 11, 17, 11, 0, 0, 17, 11), src);
  const std::vector<uint8_t> gray(40 * 30 * 3, 93);
  for (auto [ow, oh] : {std::pair{7, 5}, std::pair{40, 12}, std::pair{99, 71}}) {
    const auto out = Resample(gray, 40, 30, 3, 2, 31, 27, ow, oh, 0, 0, ow, oh);
    for (uint8_t v : out) ASSERT_EQ(v, 93) << ow << "x" << oh;
  }
}

TEST(ResampleBilinear, AWindowIsThatPartOfTheWholeResize) {
  // Crop after resize (resize(256) then center_crop(224)) must equal cropping the whole resize.
  const auto src = Noise(50, 40, 3, 2);
  const auto whole = Resample(src, 50, 40, 4, 3, 41, 33, 29, 23, 0, 0, 29, 23);
  const auto part = Resample(src, 50, 40, 4, 3, 41, 33, 29, 23, 5, 7, 13, 9);
  for (int y = 0; y < 9; ++y) {
    for (int x = 0; x < 13 * 3; ++x) {
      ASSERT_EQ(part[y * 13 * 3 + x], whole[(y + 7) * 29 * 3 + 5 * 3 + x]) << y << "," << x;
    }
  }
  // Flipped: the same rows mirrored.
  const auto flipped = Resample(src, 50, 40, 4, 3, 41, 33, 29, 23, 0, 0, 29, 23, true);
  for (int y = 0; y < 23; ++y) {
    for (int x = 0; x < 29; ++x) {
      for (int c = 0; c < 3; ++c) ASSERT_EQ(flipped[(y * 29 + x) * 3 + c], whole[(y * 29 + 28 - x) * 3 + c]);
    }
  }
  // A window beyond the resized image is zero there (padding).
  const auto padded = Resample(src, 50, 40, 4, 3, 41, 33, 29, 23, -2, -1, 33, 25);
  for (int y = 0; y < 25; ++y) {
    for (int x = 0; x < 33; ++x) {
      const bool inside = y >= 1 && y < 24 && x >= 2 && x < 31;
      for (int c = 0; c < 3; ++c) {
        const uint8_t want = inside ? whole[((y - 1) * 29 + (x - 2)) * 3 + c] : 0;
        ASSERT_EQ(padded[(y * 33 + x) * 3 + c], want) << y << "," << x;
      }
    }
  }
}

TEST(ResampleBilinear, ReadsOnlyTheBox) {
  // The filter is clipped to the box (PIL's crop, then resize): pixels outside it never matter.
  auto a = Noise(30, 30, 3, 3), b = a;
  for (int y = 0; y < 30; ++y) {
    for (int x = 0; x < 30; ++x) {
      if (x >= 5 && x < 25 && y >= 6 && y < 20) continue;
      for (int c = 0; c < 3; ++c) b[(y * 30 + x) * 3 + c] ^= 0xFF;
    }
  }
  EXPECT_EQ(Resample(a, 30, 30, 5, 6, 20, 14, 9, 31, 0, 0, 9, 31), Resample(b, 30, 30, 5, 6, 20, 14, 9, 31, 0, 0, 9, 31));
}

}  // namespace
}  // namespace stoke
