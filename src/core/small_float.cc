#include "core/small_float.h"

namespace stoke {

uint16_t Float32ToFloat16Bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  uint32_t h;
  if (x >= 0x47800000) {  // |f| >= 65536 (overflow, as is [65520, 65536) below), inf or NaN
    h = x > 0x7f800000 ? 0x7e00 | ((x >> 13) & 0x3ff) : 0x7c00;
  } else if (x < 0x38800000) {  // |f| < 2^-14: a half subnormal or zero
    // Adding 0.5 puts the value's bits in a float whose ulp, 2^-24, is half's subnormal unit, so the
    // FPU does the round to nearest even; the low bits are then the half's mantissa (0x400 when it
    // rounds up to the smallest normal, which is right too).
    const float v = std::bit_cast<float>(x) + 0.5f;
    h = std::bit_cast<uint32_t>(v) - 0x3f000000;
  } else {
    // Rebias the exponent and round to nearest even on the 13 dropped bits; a mantissa carry moves
    // into the exponent (up to 0x7c00, infinity, for [65520, 65536)).
    const uint32_t odd = (x >> 13) & 1;
    x = x - (112u << 23) + 0xfff + odd;
    h = x >> 13;
  }
  return static_cast<uint16_t>(h | sign);
}

float Float16BitsToFloat32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t em = h & 0x7fff;
  if (em >= 0x7c00) return std::bit_cast<float>(sign | 0x7f800000 | ((em & 0x3ff) << 13));
  if (em < 0x400) {  // zero or subnormal: mantissa * 2^-24, exact in float
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(static_cast<float>(em) * 0x1p-24f));
  }
  return std::bit_cast<float>(sign | ((em << 13) + (112u << 23)));
}

uint16_t Float32ToBFloat16Bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even; a carry reaches inf past bfloat16's max
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16BitsToFloat32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t Float64ToFloat16Bits(double d) { return Float64ToSmallFloat<5, 10>(d); }
uint16_t Float64ToBFloat16Bits(double d) { return Float64ToSmallFloat<8, 7>(d); }

}  // namespace stoke
