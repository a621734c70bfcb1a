// Test references for the 16-bit float formats, by formula and by searching the table of all
// finite values: nothing here shares code with small_float.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace stoke::testing_support {

// Value of small-float bits (float16: 5 exponent bits, 10 mantissa; bfloat16: 8 and 7), by formula.
inline double SmallFloatValue(uint16_t bits, bool bf16) {
  const int mant_bits = bf16 ? 7 : 10, exp_bits = bf16 ? 8 : 5;
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int e = (bits >> mant_bits) & ((1 << exp_bits) - 1);
  const int m = bits & ((1 << mant_bits) - 1);
  const double sign = (bits >> (mant_bits + exp_bits)) ? -1.0 : 1.0;
  if (e == (1 << exp_bits) - 1) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mant_bits);
  return sign * std::ldexp((1 << mant_bits) + m, e - bias - mant_bits);
}

// Nearest float16 / bfloat16 bits to x, ties to the even mantissa, by binary search over the values.
inline uint16_t RefRoundSmallFloat(double x, bool bf16) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const uint16_t inf = bf16 ? 0x7f80 : 0x7c00;
  const uint16_t max = inf - 1;
  if (std::isnan(x)) return inf | 1;  // callers compare NaN-ness only
  const double a = std::fabs(x);
  const double top = SmallFloatValue(max, bf16);
  const double overflow = top + (top - SmallFloatValue(max - 1, bf16)) / 2;
  if (a >= overflow) return sign | inf;
  // Largest bits lo with value(lo) <= a (positive values increase with their bits).
  uint32_t lo = 0, hi = max;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (SmallFloatValue(static_cast<uint16_t>(mid), bf16) <= a) lo = mid; else hi = mid - 1;
  }
  uint32_t result = lo;
  const double vlo = SmallFloatValue(static_cast<uint16_t>(lo), bf16);
  if (vlo != a) {
    const double vhi = lo == max ? overflow * 2 : SmallFloatValue(static_cast<uint16_t>(lo + 1), bf16);
    const double dlo = a - vlo, dhi = vhi - a;  // exact (Sterbenz)
    if (dhi < dlo || (dhi == dlo && (lo & 1))) result = lo + 1;
  }
  return static_cast<uint16_t>(sign | result);
}

}  // namespace stoke::testing_support
