// The element-wise kernels of the transforms (transform_kernels.h): cast, normalize, to_tensor.
#include "loader/transform_kernels.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/small_float.h"

namespace stoke::transform_internal {

using Kind = TransformSpec::Kind;

namespace {

// ---------------------------------------------------------------------------------------------
// Elementwise kernels (cast, normalize). Elements are loaded and stored with memcpy: sample bytes
// come straight from pages and need not be aligned.

struct BoolElem { uint8_t v; };
struct HalfElem { uint16_t bits; };
struct BHalfElem { uint16_t bits; };

inline float AsFloat(BoolElem b) { return b.v != 0 ? 1.0f : 0.0f; }
inline float AsFloat(HalfElem h) { return Float16BitsToFloat32(h.bits); }
inline float AsFloat(BHalfElem h) { return BFloat16BitsToFloat32(h.bits); }
// Integers, float and double: one correctly rounded conversion.
template <typename S>
inline float AsFloat(S v) { return static_cast<float>(v); }

template <typename S>
inline double AsDouble(S v) {
  if constexpr (std::is_arithmetic_v<S>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(AsFloat(v));
  }
}

template <typename S>
inline uint16_t ToHalfBits(S v) {
  if constexpr (std::is_same_v<S, double>) {
    return Float64ToFloat16Bits(v);
  } else {
    // Exact in float32 except for integers beyond 2^24, which overflow float16 either way.
    return Float32ToFloat16Bits(AsFloat(v));
  }
}

template <typename S>
inline uint16_t ToBHalfBits(S v) {
  if constexpr (std::is_same_v<S, double>) {
    return Float64ToBFloat16Bits(v);
  } else if constexpr (std::is_integral_v<S> && sizeof(S) >= 4) {
    return IntegerToSmallFloat<8, 7>(v);  // float32 would round first for |v| > 2^24
  } else {
    return Float32ToBFloat16Bits(AsFloat(v));  // exact in float32
  }
}

template <typename S, typename F>
void MapElements(const uint8_t* src, uint8_t* dst, size_t n, F f) {
  using O = decltype(f(S{}));
  for (size_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    const O o = f(v);
    std::memcpy(dst + i * sizeof(O), &o, sizeof(O));
  }
}

template <typename S>
void CastFrom(const uint8_t* src, uint8_t* dst, size_t n, DType to) {
  switch (to) {
    case DType::kFloat32: MapElements<S>(src, dst, n, [](S v) { return AsFloat(v); }); break;
    case DType::kFloat16: MapElements<S>(src, dst, n, [](S v) { return ToHalfBits(v); }); break;
    case DType::kBFloat16: MapElements<S>(src, dst, n, [](S v) { return ToBHalfBits(v); }); break;
    default: break;  // Create admits no other target
  }
}

// Calls f(S{}) with S the element type that stands for `dtype`.
template <typename F>
void DispatchElementType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBool: f(BoolElem{}); break;
    case DType::kInt8: f(int8_t{}); break;
    case DType::kInt16: f(int16_t{}); break;
    case DType::kInt32: f(int32_t{}); break;
    case DType::kInt64: f(int64_t{}); break;
    case DType::kUInt8: f(uint8_t{}); break;
    case DType::kUInt16: f(uint16_t{}); break;
    case DType::kUInt32: f(uint32_t{}); break;
    case DType::kUInt64: f(uint64_t{}); break;
    case DType::kFloat16: f(HalfElem{}); break;
    case DType::kFloat32: f(float{}); break;
    case DType::kFloat64: f(double{}); break;
    case DType::kBFloat16: f(BHalfElem{}); break;
  }
}


// dst[o, c, i] = (src[o, c, i] - mean[c]) / std[c] over an [outer, channels, inner] view.
template <typename S, typename O>
void NormalizeLoop(const uint8_t* src, uint8_t* dst, int64_t outer, int64_t channels, int64_t inner,
                   const double* mean, const double* std) {
  size_t i = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const double m = mean[c], s = std[c];
      for (int64_t j = 0; j < inner; ++j, ++i) {
        S v;
        std::memcpy(&v, src + i * sizeof(S), sizeof(S));
        const double y = (AsDouble(v) - m) / s;
        if constexpr (std::is_same_v<O, double>) {
          std::memcpy(dst + i * sizeof(double), &y, sizeof(double));
        } else {
          const float f = static_cast<float>(y);
          if constexpr (std::is_same_v<O, float>) {
            std::memcpy(dst + i * sizeof(float), &f, sizeof(float));
          } else {
            const uint16_t h = std::is_same_v<O, HalfElem> ? Float32ToFloat16Bits(f) : Float32ToBFloat16Bits(f);
            std::memcpy(dst + i * sizeof(uint16_t), &h, sizeof(uint16_t));
          }
        }
      }
    }
  }
}

// to_tensor, unfused: [H, W, C] uint8 to [C, H, W] of float32(x) / 255 in the output dtype.
void ToTensorPlain(const Step& step, const uint8_t* src, uint8_t* dst) {
  const int64_t hw = step.in_shape[0] * step.in_shape[1], c = step.in_shape[2];
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t i = 0; i < hw; ++i) {
      const float v = static_cast<float>(src[i * c + ch]) / 255.0f;
      const int64_t o = ch * hw + i;
      switch (step.out_dtype) {
        case DType::kFloat32: std::memcpy(dst + o * 4, &v, 4); break;
        case DType::kFloat16: { const uint16_t h = Float32ToFloat16Bits(v); std::memcpy(dst + o * 2, &h, 2); break; }
        default: { const uint16_t h = Float32ToBFloat16Bits(v); std::memcpy(dst + o * 2, &h, 2); break; }
      }
    }
  }
}

// to_tensor fused with what follows it: out[c, i] = lut[c][in[i, c]].
template <size_t E>
void LookupToTensor(const Step& step, const uint8_t* src, uint8_t* dst) {
  const int64_t hw = step.in_shape[0] * step.in_shape[1], c = step.in_shape[2];
  const uint8_t* lut = step.lut.data();
  for (int64_t ch = 0; ch < c; ++ch) {
    const uint8_t* table = lut + ch * 256 * E;
    uint8_t* out = dst + ch * hw * static_cast<int64_t>(E);
    const uint8_t* in = src + ch;
    for (int64_t i = 0; i < hw; ++i) std::memcpy(out + i * E, table + in[i * c] * E, E);
  }
}

}  // namespace

void CastElements(DType from, DType to, const uint8_t* src, uint8_t* dst, size_t n) {
  DispatchElementType(from, [&](auto tag) { CastFrom<decltype(tag)>(src, dst, n, to); });
}

void NormalizeElements(const Step& step, const uint8_t* src, uint8_t* dst) {
  const auto& shape = step.in_shape;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < step.axis; ++d) outer *= shape[d];
  for (size_t d = step.axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t channels = shape[step.axis];
  DispatchElementType(step.in_dtype, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (!std::is_same_v<S, BoolElem>) {  // Create rejects bool
      switch (step.out_dtype) {
        case DType::kFloat32:
          NormalizeLoop<S, float>(src, dst, outer, channels, inner, step.mean.data(), step.std.data());
          break;
        case DType::kFloat64:
          NormalizeLoop<S, double>(src, dst, outer, channels, inner, step.mean.data(), step.std.data());
          break;
        case DType::kFloat16:
          NormalizeLoop<S, HalfElem>(src, dst, outer, channels, inner, step.mean.data(), step.std.data());
          break;
        case DType::kBFloat16:
          NormalizeLoop<S, BHalfElem>(src, dst, outer, channels, inner, step.mean.data(), step.std.data());
          break;
        default: break;
      }
    }
  });
}

void ToTensorElements(const Step& step, const uint8_t* src, uint8_t* dst) {
  if (step.lut.empty()) {
    ToTensorPlain(step, src, dst);
  } else if (DTypeSize(step.out_dtype) == 4) {
    LookupToTensor<4>(step, src, dst);
  } else if (DTypeSize(step.out_dtype) == 2) {
    LookupToTensor<2>(step, src, dst);
  } else {
    LookupToTensor<8>(step, src, dst);
  }
}

}  // namespace stoke::transform_internal
