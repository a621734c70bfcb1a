// Conversions to and from the 16-bit floating-point formats, float16 (IEEE 754 binary16: 5 exponent
// bits, 10 mantissa bits) and bfloat16 (8 and 7), rounding to nearest even. Used by the loader's cast
// and by readers of FLOAT16 columns and float16 arrays.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace stoke {

uint16_t Float32ToFloat16Bits(float f);
// Exact: every float16 value is a float32 value.
float Float16BitsToFloat32(uint16_t h);
uint16_t Float32ToBFloat16Bits(float f);
float BFloat16BitsToFloat32(uint16_t b);
// Straight from double: one rounding, never two through float32.
uint16_t Float64ToFloat16Bits(double d);
uint16_t Float64ToBFloat16Bits(double d);

// Rounds the exact value (-1)^neg * m * 2^k to nearest even in a binary format with kExp exponent
// bits and kMant stored mantissa bits (float16: 5, 10; bfloat16: 8, 7) and returns its bits; beyond
// the largest finite value the result is infinite. The slow, exact path: float64 and wide integer
// sources, where going through float32 first could round twice.
template <int kExp, int kMant>
uint16_t RoundToSmallFloat(bool neg, uint64_t m, int k) {
  constexpr int kBias = (1 << (kExp - 1)) - 1;
  constexpr uint32_t kInf = ((1u << kExp) - 1) << kMant;
  const uint32_t sign = neg ? (1u << (kExp + kMant)) : 0;
  if (m == 0) return static_cast<uint16_t>(sign);
  const int p = 63 - std::countl_zero(m);  // the leading one's position
  const int e = p + k;                      // the value's binary exponent
  if (e > kBias) return static_cast<uint16_t>(sign | kInf);
  // The result's mantissa (with the leading one for normals) is m >> shift, rounded.
  int shift = p - kMant;
  uint32_t base = 0;  // the exponent field minus one for normals (the leading one of q adds it back)
  if (e >= 1 - kBias) {
    base = static_cast<uint32_t>(e + kBias - 1) << kMant;
  } else {
    shift += (1 - kBias) - e;  // subnormal: fewer mantissa bits
  }
  uint64_t q;
  if (shift <= 0) {
    q = m << -shift;  // exact
  } else if (shift > p + 1) {
    q = 0;  // below half the smallest subnormal
  } else {
    q = shift == 64 ? 0 : m >> shift;
    const uint64_t rem = shift == 64 ? m : m & ((uint64_t{1} << shift) - 1);
    const uint64_t half = uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (q & 1) != 0)) ++q;
  }
  // A carry out of the mantissa moves into the exponent field, up to infinity: still correct.
  return static_cast<uint16_t>(sign | (base + static_cast<uint32_t>(q)));
}

template <int kExp, int kMant>
uint16_t Float64ToSmallFloat(double d) {
  constexpr uint32_t kInf = ((1u << kExp) - 1) << kMant;
  uint64_t x = std::bit_cast<uint64_t>(d);
  const bool neg = (x >> 63) != 0;
  x &= ~(uint64_t{1} << 63);
  if (x >= 0x7ff0000000000000ULL) {
    const uint32_t sign = neg ? (1u << (kExp + kMant)) : 0;
    if (x == 0x7ff0000000000000ULL) return static_cast<uint16_t>(sign | kInf);
    // NaN: quiet, with the top payload bits kept.
    const uint32_t payload = static_cast<uint32_t>(x >> (52 - kMant)) & ((1u << kMant) - 1);
    return static_cast<uint16_t>(sign | kInf | (1u << (kMant - 1)) | payload);
  }
  const uint64_t exponent = x >> 52, mantissa = x & ((uint64_t{1} << 52) - 1);
  if (exponent == 0) return RoundToSmallFloat<kExp, kMant>(neg, mantissa, -1074);
  return RoundToSmallFloat<kExp, kMant>(neg, mantissa | (uint64_t{1} << 52), static_cast<int>(exponent) - 1075);
}

template <int kExp, int kMant, typename I>
uint16_t IntegerToSmallFloat(I v) {
  if constexpr (std::is_signed_v<I>) {
    const bool neg = v < 0;
    // Magnitude without overflow for the most negative value.
    const uint64_t m = neg ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
    return RoundToSmallFloat<kExp, kMant>(neg, m, 0);
  } else {
    return RoundToSmallFloat<kExp, kMant>(false, static_cast<uint64_t>(v), 0);
  }
}

}  // namespace stoke
