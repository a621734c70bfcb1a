#include "loader/transform.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/random.h"

namespace stoke {

using transform_internal::Step;
using Kind = TransformSpec::Kind;

namespace {

// The stream constant of the transform Rng derivation (see transform.h). Arbitrary; never change it.
constexpr uint64_t kTransformStream = 0x7472616e73666f72ULL;  // "transfor"
constexpr int kMaxRank = TransformPipeline::kMaxRank;

// ---------------------------------------------------------------------------------------------
// Scalar conversions.

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

}  // namespace

uint64_t TransformSeed(uint64_t seed, int64_t epoch, int64_t row, uint32_t column) {
  uint64_t h = SplitMix64(SplitMix64(SplitMix64(seed) ^ kTransformStream) + static_cast<uint64_t>(epoch));
  h = SplitMix64(h + static_cast<uint64_t>(row));
  return SplitMix64(h + column);
}

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

void CastElements(DType from, DType to, const uint8_t* src, uint8_t* dst, size_t n) {
  DispatchElementType(from, [&](auto tag) { CastFrom<decltype(tag)>(src, dst, n, to); });
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

// to_tensor, unfused: [H, W, C] uint8 to [C, H, W] of float32(x) / 255 in the output dtype.
void ToTensorElements(const Step& step, const uint8_t* src, uint8_t* dst) {
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

// ---------------------------------------------------------------------------------------------
// Geometric kernels: every geometric transform is one strided copy. For each output dimension d,
// the element at output index (o_0, ..) comes from input byte src_offset + sum o_d * src_stride[d]
// (strides may be negative: flips) and goes to output byte dst_offset + sum o_d * dst_stride[d].
// With padding, only the box `extent` of the output is copied and the rest is zeroed.

struct CopyPlan {
  int rank = 0;
  int64_t extent[kMaxRank] = {};
  int64_t src_stride[kMaxRank] = {};
  int64_t dst_stride[kMaxRank] = {};
  int64_t src_offset = 0;
  int64_t dst_offset = 0;
  bool zero_fill = false;  // zero the whole output first (padding)
};

// C-contiguous byte strides of `shape`.
void ContiguousStrides(const std::vector<int64_t>& shape, size_t elem, int64_t* strides) {
  int64_t s = static_cast<int64_t>(elem);
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

template <size_t E>
void CopyStridedRun(const uint8_t* src, int64_t src_off, int64_t src_stride, uint8_t* dst, int64_t dst_off,
                    int64_t dst_stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + dst_off + i * dst_stride, src + src_off + i * src_stride, E);
  }
}

using RunFn = void (*)(const uint8_t*, int64_t, int64_t, uint8_t*, int64_t, int64_t, int64_t);

RunFn StridedRunFor(size_t elem) {
  switch (elem) {
    case 1: return CopyStridedRun<1>;
    case 2: return CopyStridedRun<2>;
    case 4: return CopyStridedRun<4>;
    default: return CopyStridedRun<8>;
  }
}

// Drops unit dimensions and merges neighbours that are contiguous in both source and destination,
// innermost last. Returns false when there is nothing to copy (a zero extent).
bool SimplifyPlan(CopyPlan* plan) {
  int r = 0;
  for (int d = 0; d < plan->rank; ++d) {
    const int64_t n = plan->extent[d];
    if (n == 0) return false;
    if (n == 1) continue;
    if (r > 0 && plan->src_stride[r - 1] == plan->src_stride[d] * n &&
        plan->dst_stride[r - 1] == plan->dst_stride[d] * n) {
      plan->extent[r - 1] *= n;
      plan->src_stride[r - 1] = plan->src_stride[d];
      plan->dst_stride[r - 1] = plan->dst_stride[d];
      continue;
    }
    plan->extent[r] = n;
    plan->src_stride[r] = plan->src_stride[d];
    plan->dst_stride[r] = plan->dst_stride[d];
    ++r;
  }
  plan->rank = r;
  return true;
}

// True when the simplified plan copies `bytes` contiguous bytes from offset 0 to offset 0.
bool IsIdentity(const CopyPlan& plan, size_t elem, size_t in_bytes, size_t out_bytes) {
  if (plan.zero_fill || plan.src_offset != 0 || plan.dst_offset != 0 || in_bytes != out_bytes) return false;
  if (plan.rank == 0) return true;  // a single element
  const int64_t e = static_cast<int64_t>(elem);
  return plan.rank == 1 && plan.src_stride[0] == e && plan.dst_stride[0] == e &&
         plan.extent[0] * e == static_cast<int64_t>(out_bytes);
}

// Runs a simplified plan. The innermost dimension is one memcpy when contiguous on both sides,
// else an element loop specialised on the element size; the outer dimensions are an odometer.
void ExecutePlan(const CopyPlan& plan, const uint8_t* src, uint8_t* dst, size_t elem) {
  const int64_t e = static_cast<int64_t>(elem);
  if (plan.rank == 0) {
    std::memcpy(dst + plan.dst_offset, src + plan.src_offset, elem);
    return;
  }
  const int inner = plan.rank - 1;
  const int64_t n = plan.extent[inner], ss = plan.src_stride[inner], ds = plan.dst_stride[inner];
  const bool contiguous = ss == e && ds == e;
  const RunFn run = StridedRunFor(elem);
  int64_t index[kMaxRank] = {};
  int64_t s = plan.src_offset, d = plan.dst_offset;
  while (true) {
    if (contiguous) {
      std::memcpy(dst + d, src + s, static_cast<size_t>(n * e));
    } else {
      run(src, s, ss, dst, d, ds, n);
    }
    int k = inner - 1;
    for (; k >= 0; --k) {
      if (++index[k] < plan.extent[k]) {
        s += plan.src_stride[k];
        d += plan.dst_stride[k];
        break;
      }
      index[k] = 0;
      s -= plan.src_stride[k] * (plan.extent[k] - 1);
      d -= plan.dst_stride[k] * (plan.extent[k] - 1);
    }
    if (k < 0) break;
  }
}

// Fills `plan` for one geometric step and the random choices it draws from `rng`.
void PlanGeometricStep(const Step& step, Rng& rng, CopyPlan* plan) {
  const size_t elem = DTypeSize(step.in_dtype);
  const int rank = static_cast<int>(step.in_shape.size());
  int64_t in_stride[kMaxRank], out_stride[kMaxRank];
  ContiguousStrides(step.in_shape, elem, in_stride);
  ContiguousStrides(step.out_shape, elem, out_stride);
  plan->rank = rank;
  for (int d = 0; d < rank; ++d) {
    plan->extent[d] = step.out_shape[d];
    plan->src_stride[d] = in_stride[d];
    plan->dst_stride[d] = out_stride[d];
  }
  switch (step.kind) {
    case Kind::kRandomFlip:
    case Kind::kRandomHorizontalFlip:
      for (int a : step.axes) {
        if (rng.Uniform() < step.p) {
          plan->src_offset += (step.in_shape[a] - 1) * in_stride[a];
          plan->src_stride[a] = -in_stride[a];
        }
      }
      break;
    case Kind::kRandomRot90: {
      const int a0 = step.axes[0], a1 = step.axes[1];
      const int64_t last = step.in_shape[a0] - 1;  // == step.in_shape[a1] - 1
      switch (rng.Below(4)) {
        case 1:  // out[i, j] = m[j, n-1-i]
          plan->src_stride[a0] = -in_stride[a1];
          plan->src_stride[a1] = in_stride[a0];
          plan->src_offset = last * in_stride[a1];
          break;
        case 2:  // out[i, j] = m[n-1-i, n-1-j]
          plan->src_stride[a0] = -in_stride[a0];
          plan->src_stride[a1] = -in_stride[a1];
          plan->src_offset = last * (in_stride[a0] + in_stride[a1]);
          break;
        case 3:  // out[i, j] = m[n-1-j, i]
          plan->src_stride[a0] = in_stride[a1];
          plan->src_stride[a1] = -in_stride[a0];
          plan->src_offset = last * in_stride[a0];
          break;
        default: break;
      }
      break;
    }
    case Kind::kRandomCrop:
    case Kind::kCenterCrop: {
      const bool random = step.kind == Kind::kRandomCrop;
      for (size_t i = 0; i < step.axes.size(); ++i) {
        const int a = step.axes[i];
        const int64_t extent = step.in_shape[a], size = step.size[i];
        if (extent >= size) {
          const int64_t diff = extent - size;
          // torchvision: int(round(diff / 2.0)), Python's round: half to even.
          const int64_t centred = step.torchvision_center && diff % 2 == 1 ? diff / 2 + ((diff / 2) % 2) : diff / 2;
          const int64_t offset = random ? static_cast<int64_t>(rng.Below(static_cast<uint64_t>(diff + 1))) : centred;
          plan->src_offset += offset * in_stride[a];
        } else {
          const int64_t offset = random ? static_cast<int64_t>(rng.Below(static_cast<uint64_t>(size - extent + 1)))
                                        : (size - extent) / 2;
          plan->dst_offset += offset * out_stride[a];
          plan->extent[a] = extent;
          plan->zero_fill = true;
        }
      }
      break;
    }
    case Kind::kChannelsFirst:
    case Kind::kChannelsLast: {
      // out dimension d reads input dimension perm[d].
      int perm[kMaxRank];
      int k = 0;
      if (step.kind == Kind::kChannelsFirst) perm[k++] = step.axis;
      for (int d = 0; d < rank; ++d) {
        if (d != step.axis) perm[k++] = d;
      }
      if (step.kind == Kind::kChannelsLast) perm[k++] = step.axis;
      for (int d = 0; d < rank; ++d) plan->src_stride[d] = in_stride[perm[d]];
      break;
    }
    default: break;
  }
}

size_t ByteSize(DType dtype, const std::vector<int64_t>& shape) {
  size_t n = DTypeSize(dtype);
  for (int64_t x : shape) n *= static_cast<size_t>(x);
  return n;
}

// The byte size of `shape` elements of `dtype`, or an error when it does not fit in int64.
Result<size_t> CheckedByteSize(DType dtype, const std::vector<int64_t>& shape) {
  int64_t n = static_cast<int64_t>(DTypeSize(dtype));
  for (int64_t x : shape) {
    if (__builtin_mul_overflow(n, x, &n)) {
      return Status::InvalidArgument(fmt::format("a sample of shape [{}] {} is too large",
                                                 fmt::join(shape, ","), DTypeName(dtype)));
    }
  }
  return static_cast<size_t>(n);
}

bool IsKnownDType(DType dtype) { return static_cast<int>(dtype) <= static_cast<int>(DType::kBFloat16); }

std::string FormatDoubles(const std::vector<double>& v) {
  constexpr size_t kShown = 8;
  if (v.size() <= kShown) return fmt::format("[{}]", fmt::join(v, ","));
  std::vector<double> head(v.begin(), v.begin() + kShown);
  return fmt::format("[{},...({} values)]", fmt::join(head, ","), v.size());
}

// The height and width axes of an image sample whose channel axis is `channel_axis` ([H, W, C] or
// [C, H, W]); false when the sample is not one.
bool ImageAxes(const Step& step, int channel_axis, int* h, int* w) {
  if (step.in_shape.size() != 3) return false;
  if (channel_axis == 2) {
    *h = 0;
    *w = 1;
    return true;
  }
  if (channel_axis == 0) {
    *h = 1;
    *w = 2;
    return true;
  }
  return false;
}

// Validates one spec against the dtype and shape it will see; fills everything of `step` but the
// kind and inputs, and moves *channel_axis (see transform.h) along. Errors carry no transform prefix
// (the caller adds it).
Status ValidateStep(const TransformSpec& spec, Step* step, int* channel_axis) {
  const int rank = static_cast<int>(step->in_shape.size());
  const auto resolve = [rank](int axis, int* out) -> Status {
    if (axis < -rank || axis >= rank) {
      return Status::InvalidArgument(fmt::format("axis {} out of range for a {}-d sample", axis, rank));
    }
    *out = axis < 0 ? axis + rank : axis;
    return Status::OK();
  };
  // Resolves spec.axes into step->axes: non-empty, in range, no repeats.
  const auto resolve_axes = [&]() -> Status {
    if (spec.axes.empty()) return Status::InvalidArgument("axes must not be empty");
    for (int axis : spec.axes) {
      int a = 0;
      STOKE_RETURN_IF_ERROR(resolve(axis, &a));
      if (std::find(step->axes.begin(), step->axes.end(), a) != step->axes.end()) {
        return Status::InvalidArgument(
            fmt::format("axis {} repeated in axes [{}]", axis, fmt::join(spec.axes, ",")));
      }
      step->axes.push_back(a);
    }
    return Status::OK();
  };
  step->out_dtype = step->in_dtype;
  step->out_shape = step->in_shape;
  switch (spec.kind) {
    case Kind::kCast:
      if (spec.dtype != DType::kFloat32 && spec.dtype != DType::kFloat16 && spec.dtype != DType::kBFloat16) {
        return Status::InvalidArgument(fmt::format(
            "cannot cast to {}: the targets are float32, float16 and bfloat16",
            IsKnownDType(spec.dtype) ? DTypeName(spec.dtype) : std::string_view("an unknown dtype")));
      }
      step->out_dtype = spec.dtype;
      return Status::OK();
    case Kind::kNormalize: {
      if (step->in_dtype == DType::kBool) return Status::InvalidArgument("needs a numeric input, not bool");
      if (spec.axis == TransformSpec::kChannelAxis) {
        step->axis = *channel_axis;
      } else {
        STOKE_RETURN_IF_ERROR(resolve(spec.axis, &step->axis));
      }
      const int64_t channels = step->in_shape[step->axis];
      if (spec.mean.empty() || spec.std.empty()) return Status::InvalidArgument("mean and std must not be empty");
      for (const auto* values : {&spec.mean, &spec.std}) {
        const char* name = values == &spec.mean ? "mean" : "std";
        if (values->size() != 1 && static_cast<int64_t>(values->size()) != channels) {
          return Status::InvalidArgument(fmt::format("{} has {} values; expected 1 or {} (the extent of axis {})",
                                                     name, values->size(), channels, step->axis));
        }
        for (size_t c = 0; c < values->size(); ++c) {
          if (!std::isfinite((*values)[c])) {
            return Status::InvalidArgument(fmt::format("{}[{}] is {}, not finite", name, c, (*values)[c]));
          }
          if (values == &spec.std && (*values)[c] == 0) {
            return Status::InvalidArgument(fmt::format("std[{}] is 0", c));
          }
        }
      }
      step->mean.assign(static_cast<size_t>(channels), spec.mean[0]);
      step->std.assign(static_cast<size_t>(channels), spec.std[0]);
      if (spec.mean.size() > 1) step->mean = spec.mean;
      if (spec.std.size() > 1) step->std = spec.std;
      const DType in = step->in_dtype;
      step->out_dtype =
          in == DType::kFloat16 || in == DType::kBFloat16 || in == DType::kFloat64 ? in : DType::kFloat32;
      return Status::OK();
    }
    case Kind::kRandomFlip:
    case Kind::kRandomHorizontalFlip:
      if (spec.kind == Kind::kRandomHorizontalFlip) {
        int h = 0, w = 0;
        if (!ImageAxes(*step, *channel_axis, &h, &w)) {
          return Status::InvalidArgument(fmt::format("needs an image: [H, W, C] or, after to_tensor or channels_first, "
                                                     "[C, H, W]; the sample is [{}]", fmt::join(step->in_shape, ",")));
        }
        step->axes = {w};
      } else {
        STOKE_RETURN_IF_ERROR(resolve_axes());
      }
      if (!(spec.p >= 0 && spec.p <= 1)) {
        return Status::InvalidArgument(fmt::format("p {} outside [0, 1]", spec.p));
      }
      step->p = spec.p;
      return Status::OK();
    case Kind::kRandomRot90: {
      if (spec.axes.size() != 2) {
        return Status::InvalidArgument(fmt::format("needs exactly two axes, got {}", spec.axes.size()));
      }
      STOKE_RETURN_IF_ERROR(resolve_axes());
      const int a0 = step->axes[0], a1 = step->axes[1];
      if (step->in_shape[a0] != step->in_shape[a1]) {
        return Status::InvalidArgument(fmt::format("axes {} and {} have unequal extents {} and {}", a0, a1,
                                                   step->in_shape[a0], step->in_shape[a1]));
      }
      return Status::OK();
    }
    case Kind::kCenterCrop:
      if (spec.axes.empty()) {  // an image's height and width, torchvision's offsets
        int h = 0, w = 0;
        if (!ImageAxes(*step, *channel_axis, &h, &w)) {
          return Status::InvalidArgument(fmt::format("without axes, needs an image: [H, W, C] or, after to_tensor or "
                                                     "channels_first, [C, H, W]; the sample is [{}] (or give axes)",
                                                     fmt::join(step->in_shape, ",")));
        }
        if (spec.size.size() != 1 && spec.size.size() != 2) {
          return Status::InvalidArgument(fmt::format("size has {} values; give (height, width) or one size for both",
                                                     spec.size.size()));
        }
        const int64_t sh = spec.size[0], sw = spec.size.back();
        if (sh < 1 || sw < 1) return Status::InvalidArgument(fmt::format("size {}x{} is below 1", sh, sw));
        step->axes = {h, w};
        step->size = {sh, sw};
        step->out_shape[h] = sh;
        step->out_shape[w] = sw;
        step->torchvision_center = true;
        return Status::OK();
      }
      [[fallthrough]];
    case Kind::kRandomCrop:
      STOKE_RETURN_IF_ERROR(resolve_axes());
      if (spec.size.size() != spec.axes.size()) {
        return Status::InvalidArgument(
            fmt::format("{} sizes for {} axes; give one size per axis", spec.size.size(), spec.axes.size()));
      }
      for (size_t i = 0; i < spec.size.size(); ++i) {
        if (spec.size[i] < 1) {
          return Status::InvalidArgument(fmt::format("size {} for axis {} is below 1", spec.size[i], spec.axes[i]));
        }
        step->out_shape[step->axes[i]] = spec.size[i];
      }
      step->size = spec.size;
      return Status::OK();
    case Kind::kChannelsFirst:
    case Kind::kChannelsLast: {
      STOKE_RETURN_IF_ERROR(resolve(spec.axis, &step->axis));
      const int64_t channels = step->in_shape[step->axis];
      step->out_shape.erase(step->out_shape.begin() + step->axis);
      if (spec.kind == Kind::kChannelsFirst) {
        step->out_shape.insert(step->out_shape.begin(), channels);
        *channel_axis = 0;
      } else {
        step->out_shape.push_back(channels);
        *channel_axis = rank - 1;
      }
      return Status::OK();
    }
    case Kind::kToTensor:
      if (step->in_dtype != DType::kUInt8 || rank != 3) {
        return Status::InvalidArgument(fmt::format("needs an [H, W, C] uint8 image, not {} [{}]",
                                                   DTypeName(step->in_dtype), fmt::join(step->in_shape, ",")));
      }
      if (spec.dtype != DType::kFloat32 && spec.dtype != DType::kFloat16 && spec.dtype != DType::kBFloat16) {
        return Status::InvalidArgument(fmt::format(
            "cannot output {}: the choices are float32, float16 and bfloat16",
            IsKnownDType(spec.dtype) ? DTypeName(spec.dtype) : std::string_view("an unknown dtype")));
      }
      step->out_dtype = spec.dtype;
      step->out_shape = {step->in_shape[2], step->in_shape[0], step->in_shape[1]};
      *channel_axis = 0;
      return Status::OK();
    case Kind::kRandomResizedCrop:
    case Kind::kResize:
    case Kind::kColorJitter:
      return Status::InvalidArgument(
          "an image transform: it runs on the pixels of an image column (or of a [H, W, C] uint8 tensor column) "
          "and must come before the other transforms (to_tensor, normalize, cast, ...)");
  }
  return Status::InvalidArgument(fmt::format("unknown transform kind {}", static_cast<int>(spec.kind)));
}

}  // namespace

std::string_view TransformKindName(TransformSpec::Kind kind) {
  switch (kind) {
    case Kind::kCast: return "cast";
    case Kind::kNormalize: return "normalize";
    case Kind::kRandomFlip: return "random_flip";
    case Kind::kRandomRot90: return "random_rot90";
    case Kind::kRandomCrop: return "random_crop";
    case Kind::kCenterCrop: return "center_crop";
    case Kind::kChannelsFirst: return "channels_first";
    case Kind::kChannelsLast: return "channels_last";
    case Kind::kRandomResizedCrop: return "random_resized_crop";
    case Kind::kResize: return "resize";
    case Kind::kRandomHorizontalFlip: return "random_horizontal_flip";
    case Kind::kColorJitter: return "color_jitter";
    case Kind::kToTensor: return "to_tensor";
  }
  return "unknown";
}

Result<TransformSpec::Kind> TransformKindFromName(std::string_view name) {
  std::string names;
  for (int k = 0; k <= static_cast<int>(Kind::kToTensor); ++k) {
    const std::string_view n = TransformKindName(static_cast<Kind>(k));
    if (n == name) return static_cast<Kind>(k);
    names += names.empty() ? "" : ", ";
    names += n;
  }
  return Status::InvalidArgument(fmt::format("unknown transform '{}' (expected one of {})", name, names));
}

namespace {

std::vector<std::string_view> SplitText(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

template <typename T>
bool ParseList(std::string_view s, char sep, std::vector<T>* out) {
  out->clear();
  for (std::string_view part : SplitText(s, sep)) {
    T v{};
    if (!ParseNumber(part, &v)) return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace

Result<TransformSpec> ParseTransformText(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  auto bad = [&](std::string_view what) {
    return Status::InvalidArgument(fmt::format("transform '{}': {}", text, what));
  };
  TransformSpec t;
  if (name == "hflip") {
    t.kind = Kind::kRandomHorizontalFlip;
  } else {
    auto kind = TransformKindFromName(name);
    if (!kind.ok()) return bad(kind.status().message());
    t.kind = *kind;
  }
  // The defaults the Python classes give.
  if (t.kind == Kind::kNormalize) t.axis = TransformSpec::kChannelAxis;
  if (t.kind == Kind::kChannelsLast) t.axis = 0;
  if (t.kind == Kind::kRandomRot90) t.axes = {0, 1};
  if (colon == std::string_view::npos) return t;
  const std::vector<std::string_view> args = SplitText(text.substr(colon + 1), ',');
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view key, value;
    const size_t eq = args[i].find('=');
    if (eq != std::string_view::npos) {
      key = args[i].substr(0, eq);
      value = args[i].substr(eq + 1);
    } else if (i == 0) {
      value = args[i];
      switch (t.kind) {
        case Kind::kRandomResizedCrop: case Kind::kResize: case Kind::kCenterCrop: case Kind::kRandomCrop:
          key = "size"; break;
        case Kind::kRandomFlip: case Kind::kRandomHorizontalFlip: key = "p"; break;
        case Kind::kCast: case Kind::kToTensor: key = "dtype"; break;
        default: return bad(fmt::format("'{}' is not key=value ({} has no main value)", args[i], name));
      }
    } else {
      return bad(fmt::format("'{}' is not key=value", args[i]));
    }
    bool ok = true;
    if (key == "size") {
      ok = ParseList(value, 'x', &t.size) && t.size.size() <= 2;
    } else if (key == "p") {
      ok = ParseNumber(value, &t.p);
    } else if (key == "dtype") {
      auto d = DTypeFromName(value);
      if (!d.ok()) return bad(d.status().message());
      t.dtype = *d;
    } else if (key == "mean") {
      ok = ParseList(value, '/', &t.mean);
    } else if (key == "std") {
      ok = ParseList(value, '/', &t.std);
    } else if (key == "axis") {
      ok = ParseNumber(value, &t.axis);
    } else if (key == "axes") {
      ok = ParseList(value, '/', &t.axes);
    } else if (key == "scale") {
      ok = ParseList(value, '/', &t.scale);
    } else if (key == "ratio") {
      ok = ParseList(value, '/', &t.ratio);
    } else if (key == "brightness" || key == "contrast") {
      std::vector<double>& range = key == "brightness" ? t.brightness : t.contrast;
      ok = ParseList(value, '/', &range) && (range.size() == 1 || range.size() == 2);
      if (ok && range.size() == 1) {
        const double b = range[0];
        ok = b >= 0;
        range = b == 0 ? std::vector<double>{} : std::vector<double>{std::max(0.0, 1.0 - b), 1.0 + b};
      }
    } else {
      return bad(fmt::format("unknown key '{}'", key));
    }
    if (!ok) return bad(fmt::format("bad value '{}' for '{}'", value, key));
  }
  return t;
}

Result<TransformPipeline> TransformPipeline::Create(const std::vector<TransformSpec>& specs, DType in_dtype,
                                                    std::vector<int64_t> in_shape, bool fuse) {
  if (!IsKnownDType(in_dtype)) {
    return Status::InvalidArgument(fmt::format("unknown input dtype {}", static_cast<int>(in_dtype)));
  }
  for (int64_t x : in_shape) {
    if (x < 0) {
      return Status::InvalidArgument(fmt::format("sample shape [{}] has a negative extent", fmt::join(in_shape, ",")));
    }
  }
  if (!specs.empty() && (in_shape.empty() || in_shape.size() > static_cast<size_t>(kMaxRank))) {
    return Status::InvalidArgument(fmt::format("transforms need a sample of 1 to {} dimensions, not {}", kMaxRank,
                                               in_shape.size()));
  }
  TransformPipeline p;
  p.in_dtype_ = in_dtype;
  p.in_shape_ = std::move(in_shape);
  STOKE_ASSIGN_OR_RETURN(p.in_bytes_, CheckedByteSize(in_dtype, p.in_shape_));
  DType dtype = in_dtype;
  std::vector<int64_t> shape = p.in_shape_;
  size_t bytes = p.in_bytes_;
  int channel_axis = static_cast<int>(shape.size()) - 1;
  for (size_t i = 0; i < specs.size(); ++i) {
    Step step;
    step.kind = specs[i].kind;
    step.in_dtype = dtype;
    step.in_shape = shape;
    Status s = ValidateStep(specs[i], &step, &channel_axis);
    if (s.ok()) {
      Result<size_t> out_bytes = CheckedByteSize(step.out_dtype, step.out_shape);
      s = out_bytes.status();
      if (s.ok()) bytes = *out_bytes;
    }
    if (!s.ok()) return s.WithContext(fmt::format("transforms[{}] ({})", i, TransformKindName(specs[i].kind)));
    dtype = step.out_dtype;
    shape = step.out_shape;
    p.steps_.push_back(std::move(step));
  }
  p.out_dtype_ = dtype;
  p.out_shape_ = std::move(shape);
  p.out_bytes_ = bytes;
  if (fuse) {
    // to_tensor and the elementwise steps after it (casts, normalize along the channel axis) become
    // one table lookup per element; the table is what the unfused steps give for each input value.
    std::vector<Step> fused;
    for (size_t i = 0; i < p.steps_.size(); ++i) {
      if (p.steps_[i].kind != Kind::kToTensor) {
        fused.push_back(std::move(p.steps_[i]));
        continue;
      }
      size_t j = i + 1;
      while (j < p.steps_.size() && (p.steps_[j].kind == Kind::kCast ||
                                     (p.steps_[j].kind == Kind::kNormalize && p.steps_[j].axis == 0))) {
        ++j;
      }
      const int64_t channels = p.steps_[i].in_shape[2];
      const std::vector<TransformSpec> part(specs.begin() + static_cast<std::ptrdiff_t>(i),
                                            specs.begin() + static_cast<std::ptrdiff_t>(j));
      STOKE_ASSIGN_OR_RETURN(TransformPipeline unfused, Create(part, DType::kUInt8, {1, 256, channels}, false));
      std::vector<uint8_t> ramp(static_cast<size_t>(256 * channels));
      for (size_t k = 0; k < ramp.size(); ++k) ramp[k] = static_cast<uint8_t>(k / static_cast<size_t>(channels));
      Step step = std::move(p.steps_[i]);
      step.out_dtype = p.steps_[j - 1].out_dtype;
      step.out_shape = p.steps_[j - 1].out_shape;
      step.lut.resize(unfused.out_bytes());
      TransformScratch scratch;
      Rng unused(0);  // elementwise steps draw nothing
      STOKE_RETURN_IF_ERROR(unfused.ApplyWithRng(ByteView(ramp.data(), ramp.size()),
                                                 MutableByteView(step.lut.data(), step.lut.size()), unused, &scratch));
      step.fused = unfused.Describe();
      fused.push_back(std::move(step));
      i = j - 1;
    }
    p.steps_ = std::move(fused);
  }
  for (size_t i = 0; i + 1 < p.steps_.size(); ++i) {
    p.max_scratch_bytes_ = std::max(p.max_scratch_bytes_, ByteSize(p.steps_[i].out_dtype, p.steps_[i].out_shape));
  }
  return p;
}

Status TransformPipeline::Apply(ByteView in, MutableByteView out, uint64_t seed, int64_t epoch, int64_t row,
                                uint32_t column, TransformScratch* scratch) const {
  Rng rng(TransformSeed(seed, epoch, row, column));
  return ApplyWithRng(in, out, rng, scratch);
}

Status TransformPipeline::ApplyWithRng(ByteView in, MutableByteView out, Rng& rng, TransformScratch* scratch) const {
  if (in.size() != in_bytes_) {
    return Status::InvalidArgument(
        fmt::format("transform input of {} bytes; the sample ({} [{}]) has {}", in.size(), DTypeName(in_dtype_),
                    fmt::join(in_shape_, ","), in_bytes_));
  }
  if (out.size() != out_bytes_) {
    return Status::InvalidArgument(
        fmt::format("transform output of {} bytes; the result ({} [{}]) has {}", out.size(), DTypeName(out_dtype_),
                    fmt::join(out_shape_, ","), out_bytes_));
  }
  if (steps_.empty()) {
    if (out_bytes_ > 0) std::memcpy(out.data(), in.data(), out_bytes_);
    return Status::OK();
  }
  if (steps_.size() > 1) {
    if (scratch == nullptr) return Status::InvalidArgument("a chain of transforms needs a TransformScratch");
    if (scratch->a.size() < max_scratch_bytes_) scratch->a.Resize(max_scratch_bytes_);
    if (scratch->b.size() < max_scratch_bytes_) scratch->b.Resize(max_scratch_bytes_);
  }
  // Each step reads `cur` and writes the next buffer: the output for the last step, else the scratch
  // buffer `cur` is not. A step that turns out to be the identity writes nothing.
  const uint8_t* cur = in.data();
  size_t cur_bytes = in_bytes_;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    uint8_t* dst = i + 1 == steps_.size() ? out.data()
                   : cur == scratch->a.data() ? scratch->b.data()
                                              : scratch->a.data();
    const size_t dst_bytes = ByteSize(step.out_dtype, step.out_shape);
    bool wrote = true;
    const size_t elements = dst_bytes / DTypeSize(step.out_dtype);
    switch (step.kind) {
      case Kind::kCast:
        if (step.in_dtype == step.out_dtype) {
          wrote = false;
        } else {
          CastElements(step.in_dtype, step.out_dtype, cur, dst, elements);
        }
        break;
      case Kind::kNormalize:
        NormalizeElements(step, cur, dst);
        break;
      case Kind::kToTensor:
        if (step.lut.empty()) {
          ToTensorElements(step, cur, dst);
        } else if (DTypeSize(step.out_dtype) == 4) {
          LookupToTensor<4>(step, cur, dst);
        } else if (DTypeSize(step.out_dtype) == 2) {
          LookupToTensor<2>(step, cur, dst);
        } else {
          LookupToTensor<8>(step, cur, dst);
        }
        break;
      default: {
        CopyPlan plan;
        PlanGeometricStep(step, rng, &plan);
        const size_t elem = DTypeSize(step.in_dtype);
        const bool any = SimplifyPlan(&plan);
        if (any && IsIdentity(plan, elem, cur_bytes, dst_bytes)) {
          wrote = false;
          break;
        }
        if (plan.zero_fill && dst_bytes > 0) std::memset(dst, 0, dst_bytes);
        if (any) ExecutePlan(plan, cur, dst, elem);
        break;
      }
    }
    if (wrote) cur = dst;
    cur_bytes = dst_bytes;
  }
  if (cur != out.data() && out_bytes_ > 0) std::memcpy(out.data(), cur, out_bytes_);
  return Status::OK();
}

namespace {

std::string DescribeStep(const Step& step) {
  const std::string_view name = TransformKindName(step.kind);
  switch (step.kind) {
    case Kind::kCast:
      return fmt::format("{}({})", name, DTypeName(step.out_dtype));
    case Kind::kNormalize: {
      // One value when all channels share it.
      const auto compact = [](const std::vector<double>& v) {
        const bool uniform = std::all_of(v.begin(), v.end(), [&](double x) { return x == v.front(); });
        return uniform && !v.empty() ? FormatDoubles({v.front()}) : FormatDoubles(v);
      };
      return fmt::format("{}(mean={}, std={}, axis={})", name, compact(step.mean), compact(step.std), step.axis);
    }
    case Kind::kRandomFlip:
      return fmt::format("{}(axes=[{}], p={})", name, fmt::join(step.axes, ","), step.p);
    case Kind::kRandomHorizontalFlip:
      return fmt::format("{}(axis={}, p={})", name, step.axes[0], step.p);
    case Kind::kRandomRot90:
      return fmt::format("{}(axes=[{}])", name, fmt::join(step.axes, ","));
    case Kind::kRandomCrop:
    case Kind::kCenterCrop:
      return fmt::format("{}(axes=[{}], size=[{}])", name, fmt::join(step.axes, ","), fmt::join(step.size, ","));
    case Kind::kChannelsFirst:
    case Kind::kChannelsLast:
      return fmt::format("{}(axis={})", name, step.axis);
    case Kind::kToTensor:
      if (!step.fused.empty()) return fmt::format("[{}]", step.fused);
      return fmt::format("{}({})", name, DTypeName(step.out_dtype));
    default:
      return std::string(name);
  }
}

}  // namespace

std::string TransformPipeline::Describe() const {
  if (steps_.empty()) return "identity";
  std::string text;
  for (const Step& step : steps_) {
    if (!text.empty()) text += " -> ";
    text += DescribeStep(step);
  }
  return text;
}

}  // namespace stoke
