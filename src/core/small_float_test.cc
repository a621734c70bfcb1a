#include "core/small_float.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "core/random.h"
#include "core/small_float_testing.h"

namespace stoke {
namespace {

using testing_support::RefRoundSmallFloat;
using testing_support::SmallFloatValue;

TEST(SmallFloat, Float16EdgeValues) {
  struct Case {
    double value;
    uint16_t bits;
  };
  // Expected bits checked against numpy's float16 conversion.
  const Case cases[] = {
      {0.0, 0x0000},         {-0.0, 0x8000},          {1.0, 0x3c00},           {-2.5, 0xc100},
      {0.1, 0x2e66},         {65504.0, 0x7bff},       {65519.99, 0x7bff},      {65520.0, 0x7c00},
      {-65520.0, 0xfc00},    {1e9, 0x7c00},           {INFINITY, 0x7c00},      {-INFINITY, 0xfc00},
      {0x1p-14, 0x0400},     {6.1e-5, 0x03ff},        {0x1p-24, 0x0001},       {0x1p-25, 0x0000},  // tie: even 0
      {0x1.0004p-25, 0x0001}, {0x3p-25, 0x0002},      {-0x1p-24, 0x8001},      {1e-8, 0x0000},
      {1.0 + 0x1p-11, 0x3c00},  // tie: even
      {1.0 + 0x3p-11, 0x3c02},  // tie: even (up)
      {2049.0, 0x6800},      {2051.0, 0x6802},        {0x1p-14 - 0x1p-25, 0x0400},  // rounds up to the smallest normal
      {1e-40, 0x0000},       {-1e-45, 0x8000},        // float32 subnormals
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Float32ToFloat16Bits(static_cast<float>(c.value)), c.bits) << c.value;
    EXPECT_EQ(Float64ToFloat16Bits(c.value), c.bits) << c.value;
  }
  // NaN stays NaN (and keeps its sign).
  for (float nan : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                    std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0x7fc01234u)}) {
    const uint16_t h = Float32ToFloat16Bits(nan);
    EXPECT_EQ(h & 0x7c00, 0x7c00);
    EXPECT_NE(h & 0x3ff, 0);
    EXPECT_EQ(h >> 15, std::signbit(nan) ? 1 : 0);
    EXPECT_TRUE(std::isnan(Float16BitsToFloat32(h)));
    EXPECT_TRUE(std::isnan(SmallFloatValue(Float64ToFloat16Bits(static_cast<double>(nan)), false)));
  }
  // Straight from double: no double rounding through float32 (1 + 2^-11 + 2^-40 is above the tie).
  EXPECT_EQ(Float64ToFloat16Bits(1.0 + 0x1p-11 + 0x1p-40), 0x3c01);
}

TEST(SmallFloat, BFloat16EdgeValues) {
  struct Case {
    double value;
    uint16_t bits;
  };
  const Case cases[] = {
      {0.0, 0x0000},         {-0.0, 0x8000},           {1.0, 0x3f80},           {-2.0, 0xc000},
      {1.0 + 0x1p-8, 0x3f80},  // tie: even
      {1.0 + 0x3p-8, 0x3f82},  // tie: even (up)
      {1.0 + 0x1.0002p-8, 0x3f81},
      {INFINITY, 0x7f80},    {-INFINITY, 0xff80},
      {0x1.fep127, 0x7f7f},  // the largest bfloat16
      {3.4028234663852886e38, 0x7f80},  // float32 max rounds up to inf
      {0x1p-126, 0x0080},    {0x1p-133, 0x0001},       {1e-40, 0x0001},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Float32ToBFloat16Bits(static_cast<float>(c.value)), c.bits) << c.value;
    EXPECT_EQ(Float64ToBFloat16Bits(c.value), c.bits) << c.value;
  }
  for (float nan : {std::numeric_limits<float>::quiet_NaN(), std::bit_cast<float>(0x7f800001u),
                    std::bit_cast<float>(0xff800001u)}) {
    EXPECT_TRUE(std::isnan(BFloat16BitsToFloat32(Float32ToBFloat16Bits(nan))));
    EXPECT_TRUE(std::isnan(BFloat16BitsToFloat32(Float64ToBFloat16Bits(static_cast<double>(nan)))));
  }
  EXPECT_EQ(BFloat16BitsToFloat32(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16BitsToFloat32(0xc000), -2.0f);
}

TEST(SmallFloat, EveryFloat16DecodesAndRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float f = Float16BitsToFloat32(h);
    const double want = SmallFloatValue(h, false);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_EQ(Float32ToFloat16Bits(f), h | 0x0200) << b;  // quieted, payload kept
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), want) << b;
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << b;
    ASSERT_EQ(Float32ToFloat16Bits(f), h) << b;
    ASSERT_EQ(Float64ToFloat16Bits(want), h) << b;
  }
}

TEST(SmallFloat, RoundingMatchesExhaustiveSearch) {
  // Float32 bit patterns spread over the whole range (every sign, exponent and many mantissas),
  // plus the midpoints between neighbouring float16 values and their float32 neighbours.
  std::vector<float> values;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 65537 * 3) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double mid = (SmallFloatValue(static_cast<uint16_t>(h), false) + SmallFloatValue(static_cast<uint16_t>(h + 1), false)) / 2;
    const float f = static_cast<float>(mid);  // exact: a midpoint needs 12 significant bits
    values.push_back(f);
    values.push_back(std::nextafter(f, 0.0f));
    values.push_back(std::nextafter(f, INFINITY));
  }
  for (float f : values) {
    if (std::isnan(f)) continue;
    ASSERT_EQ(Float32ToFloat16Bits(f), RefRoundSmallFloat(f, false)) << f;
    ASSERT_EQ(Float64ToFloat16Bits(f), RefRoundSmallFloat(f, false)) << f;
    ASSERT_EQ(Float32ToBFloat16Bits(f), RefRoundSmallFloat(f, true)) << f;
    ASSERT_EQ(Float64ToBFloat16Bits(f), RefRoundSmallFloat(f, true)) << f;
  }
  // Doubles that float32 cannot hold: the double paths round once.
  Rng rng(3);
  for (int i = 0; i < 200000; ++i) {
    const double d = std::ldexp(1.0 + rng.Uniform(), static_cast<int>(rng.Below(300)) - 150) * (rng.Below(2) ? 1 : -1);
    ASSERT_EQ(Float64ToFloat16Bits(d), RefRoundSmallFloat(d, false)) << d;
    ASSERT_EQ(Float64ToBFloat16Bits(d), RefRoundSmallFloat(d, true)) << d;
  }
}

}  // namespace
}  // namespace stoke
