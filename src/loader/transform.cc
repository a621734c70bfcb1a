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
#include "core/small_float.h"

namespace stoke {

using transform_internal::Step;
using Kind = TransformSpec::Kind;

namespace {

// The stream constant of the transform Rng derivation (see transform.h). Arbitrary; never change it.
constexpr uint64_t kTransformStream = 0x7472616e73666f72ULL;  // "transfor"
constexpr int kMaxRank = TransformPipeline::kMaxRank;

}  // namespace

uint64_t TransformSeed(uint64_t seed, int64_t epoch, int64_t row, uint32_t column) {
  uint64_t h = SplitMix64(SplitMix64(SplitMix64(seed) ^ kTransformStream) + static_cast<uint64_t>(epoch));
  h = SplitMix64(h + static_cast<uint64_t>(row));
  return SplitMix64(h + column);
}


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

// PlanGeometricStep's kinds: each adjusts `plan`, set up as a plain copy with the input strides
// `in_stride` and output strides `out_stride`.
void PlanRot90(const Step& step, Rng& rng, const int64_t* in_stride, CopyPlan* plan) {
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
}

void PlanCrop(const Step& step, Rng& rng, const int64_t* in_stride, const int64_t* out_stride, CopyPlan* plan) {
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
      const int64_t offset =
          random ? static_cast<int64_t>(rng.Below(static_cast<uint64_t>(size - extent + 1))) : (size - extent) / 2;
      plan->dst_offset += offset * out_stride[a];
      plan->extent[a] = extent;
      plan->zero_fill = true;
    }
  }
}

void PlanChannelsMove(const Step& step, const int64_t* in_stride, CopyPlan* plan) {
  const int rank = static_cast<int>(step.in_shape.size());
  // out dimension d reads input dimension perm[d].
  int perm[kMaxRank];
  int k = 0;
  if (step.kind == Kind::kChannelsFirst) perm[k++] = step.axis;
  for (int d = 0; d < rank; ++d) {
    if (d != step.axis) perm[k++] = d;
  }
  if (step.kind == Kind::kChannelsLast) perm[k++] = step.axis;
  for (int d = 0; d < rank; ++d) plan->src_stride[d] = in_stride[perm[d]];
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
    case Kind::kRandomRot90: PlanRot90(step, rng, in_stride, plan); break;
    case Kind::kRandomCrop:
    case Kind::kCenterCrop: PlanCrop(step, rng, in_stride, out_stride, plan); break;
    case Kind::kChannelsFirst:
    case Kind::kChannelsLast: PlanChannelsMove(step, in_stride, plan); break;
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

// Resolves `axis` (negative: from the end) of a `rank`-d sample into *out.
Status ResolveAxis(int rank, int axis, int* out) {
  if (axis < -rank || axis >= rank) {
    return Status::InvalidArgument(fmt::format("axis {} out of range for a {}-d sample", axis, rank));
  }
  *out = axis < 0 ? axis + rank : axis;
  return Status::OK();
}

// Resolves spec.axes into step->axes: non-empty, in range, no repeats.
Status ResolveAxes(const TransformSpec& spec, Step* step) {
  if (spec.axes.empty()) return Status::InvalidArgument("axes must not be empty");
  for (int axis : spec.axes) {
    int a = 0;
    STOKE_RETURN_IF_ERROR(ResolveAxis(static_cast<int>(step->in_shape.size()), axis, &a));
    if (std::find(step->axes.begin(), step->axes.end(), a) != step->axes.end()) {
      return Status::InvalidArgument(fmt::format("axis {} repeated in axes [{}]", axis, fmt::join(spec.axes, ",")));
    }
    step->axes.push_back(a);
  }
  return Status::OK();
}

// The 16- and 32-bit float dtypes cast and to_tensor produce (`what`: the error's wording).
Status CheckFloatTarget(DType dtype, std::string_view what) {
  if (dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16) return Status::OK();
  return Status::InvalidArgument(fmt::format("{} {}: the choices are float32, float16 and bfloat16", what,
                                             IsKnownDType(dtype) ? DTypeName(dtype) : std::string_view("an unknown dtype")));
}

Status NeedsImage(const Step& step, std::string_view prefix, std::string_view suffix) {
  return Status::InvalidArgument(fmt::format("{}needs an image: [H, W, C] or, after to_tensor or channels_first, [C, H, W]; "
                                             "the sample is [{}]{}",
                                             prefix, fmt::join(step.in_shape, ","), suffix));
}

Status ValidateNormalize(const TransformSpec& spec, Step* step, int channel_axis) {
  if (step->in_dtype == DType::kBool) return Status::InvalidArgument("needs a numeric input, not bool");
  if (spec.axis == TransformSpec::kChannelAxis) {
    step->axis = channel_axis;
  } else {
    STOKE_RETURN_IF_ERROR(ResolveAxis(static_cast<int>(step->in_shape.size()), spec.axis, &step->axis));
  }
  const int64_t channels = step->in_shape[step->axis];
  if (spec.mean.empty() || spec.std.empty()) return Status::InvalidArgument("mean and std must not be empty");
  for (const auto* values : {&spec.mean, &spec.std}) {
    const char* name = values == &spec.mean ? "mean" : "std";
    if (values->size() != 1 && static_cast<int64_t>(values->size()) != channels) {
      return Status::InvalidArgument(fmt::format("{} has {} values; expected 1 or {} (the extent of axis {})", name,
                                                 values->size(), channels, step->axis));
    }
    for (size_t c = 0; c < values->size(); ++c) {
      if (!std::isfinite((*values)[c])) {
        return Status::InvalidArgument(fmt::format("{}[{}] is {}, not finite", name, c, (*values)[c]));
      }
      if (values == &spec.std && (*values)[c] == 0) return Status::InvalidArgument(fmt::format("std[{}] is 0", c));
    }
  }
  step->mean.assign(static_cast<size_t>(channels), spec.mean[0]);
  step->std.assign(static_cast<size_t>(channels), spec.std[0]);
  if (spec.mean.size() > 1) step->mean = spec.mean;
  if (spec.std.size() > 1) step->std = spec.std;
  const DType in = step->in_dtype;
  step->out_dtype = in == DType::kFloat16 || in == DType::kBFloat16 || in == DType::kFloat64 ? in : DType::kFloat32;
  return Status::OK();
}

Status ValidateFlip(const TransformSpec& spec, Step* step, int channel_axis) {
  if (spec.kind == Kind::kRandomHorizontalFlip) {
    int h = 0, w = 0;
    if (!ImageAxes(*step, channel_axis, &h, &w)) return NeedsImage(*step, "", "");
    step->axes = {w};
  } else {
    STOKE_RETURN_IF_ERROR(ResolveAxes(spec, step));
  }
  if (!(spec.p >= 0 && spec.p <= 1)) return Status::InvalidArgument(fmt::format("p {} outside [0, 1]", spec.p));
  step->p = spec.p;
  return Status::OK();
}

Status ValidateRot90(const TransformSpec& spec, Step* step) {
  if (spec.axes.size() != 2) return Status::InvalidArgument(fmt::format("needs exactly two axes, got {}", spec.axes.size()));
  STOKE_RETURN_IF_ERROR(ResolveAxes(spec, step));
  const int a0 = step->axes[0], a1 = step->axes[1];
  if (step->in_shape[a0] != step->in_shape[a1]) {
    return Status::InvalidArgument(fmt::format("axes {} and {} have unequal extents {} and {}", a0, a1,
                                               step->in_shape[a0], step->in_shape[a1]));
  }
  return Status::OK();
}

// center_crop without axes: an image's height and width, at torchvision's offsets.
Status ValidateImageCenterCrop(const TransformSpec& spec, Step* step, int channel_axis) {
  int h = 0, w = 0;
  if (!ImageAxes(*step, channel_axis, &h, &w)) return NeedsImage(*step, "without axes, ", " (or give axes)");
  if (spec.size.size() != 1 && spec.size.size() != 2) {
    return Status::InvalidArgument(
        fmt::format("size has {} values; give (height, width) or one size for both", spec.size.size()));
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

// random_crop, and center_crop with axes: one size per axis.
Status ValidateCrop(const TransformSpec& spec, Step* step) {
  STOKE_RETURN_IF_ERROR(ResolveAxes(spec, step));
  if (spec.size.size() != spec.axes.size()) {
    return Status::InvalidArgument(
        fmt::format("{} sizes for {} axes; give one size per axis", spec.size.size(), spec.axes.size()));
  }
  for (size_t i = 0; i < spec.size.size(); ++i) {
    if (spec.size[i] < 1) return Status::InvalidArgument(fmt::format("size {} for axis {} is below 1", spec.size[i], spec.axes[i]));
    step->out_shape[step->axes[i]] = spec.size[i];
  }
  step->size = spec.size;
  return Status::OK();
}

Status ValidateChannelsMove(const TransformSpec& spec, Step* step, int* channel_axis) {
  const int rank = static_cast<int>(step->in_shape.size());
  STOKE_RETURN_IF_ERROR(ResolveAxis(rank, spec.axis, &step->axis));
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

Status ValidateToTensor(const TransformSpec& spec, Step* step, int* channel_axis) {
  if (step->in_dtype != DType::kUInt8 || step->in_shape.size() != 3) {
    return Status::InvalidArgument(fmt::format("needs an [H, W, C] uint8 image, not {} [{}]", DTypeName(step->in_dtype),
                                               fmt::join(step->in_shape, ",")));
  }
  STOKE_RETURN_IF_ERROR(CheckFloatTarget(spec.dtype, "cannot output"));
  step->out_dtype = spec.dtype;
  step->out_shape = {step->in_shape[2], step->in_shape[0], step->in_shape[1]};
  *channel_axis = 0;
  return Status::OK();
}

// Validates one spec against the dtype and shape it will see; fills everything of `step` but the
// kind and inputs, and moves *channel_axis (see transform.h) along. Errors carry no transform prefix
// (the caller adds it).
Status ValidateStep(const TransformSpec& spec, Step* step, int* channel_axis) {
  step->out_dtype = step->in_dtype;
  step->out_shape = step->in_shape;
  switch (spec.kind) {
    case Kind::kCast:
      STOKE_RETURN_IF_ERROR(CheckFloatTarget(spec.dtype, "cannot cast to"));
      step->out_dtype = spec.dtype;
      return Status::OK();
    case Kind::kNormalize: return ValidateNormalize(spec, step, *channel_axis);
    case Kind::kRandomFlip:
    case Kind::kRandomHorizontalFlip: return ValidateFlip(spec, step, *channel_axis);
    case Kind::kRandomRot90: return ValidateRot90(spec, step);
    case Kind::kCenterCrop:
      return spec.axes.empty() ? ValidateImageCenterCrop(spec, step, *channel_axis) : ValidateCrop(spec, step);
    case Kind::kRandomCrop: return ValidateCrop(spec, step);
    case Kind::kChannelsFirst:
    case Kind::kChannelsLast: return ValidateChannelsMove(spec, step, channel_axis);
    case Kind::kToTensor: return ValidateToTensor(spec, step, channel_axis);
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

const std::vector<uint8_t>* TransformPipeline::FusedLookup() const {
  if (steps_.size() != 1 || steps_[0].kind != Kind::kToTensor || steps_[0].lut.empty()) return nullptr;
  return &steps_[0].lut;
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
