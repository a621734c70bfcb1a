// The geometric kernels of the transforms (transform_kernels.h): flips, rot90, crops and channel
// moves, each one strided copy.
#include "loader/transform_kernels.h"

#include <cstring>
#include <vector>

namespace stoke::transform_internal {

using Kind = TransformSpec::Kind;

namespace {

constexpr int kMaxRank = TransformPipeline::kMaxRank;

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

}  // namespace

bool ApplyGeometricStep(const Step& step, Rng& rng, const uint8_t* src, size_t src_bytes, uint8_t* dst,
                        size_t dst_bytes) {
  CopyPlan plan;
  PlanGeometricStep(step, rng, &plan);
  const size_t elem = DTypeSize(step.in_dtype);
  const bool any = SimplifyPlan(&plan);
  if (any && IsIdentity(plan, elem, src_bytes, dst_bytes)) return false;
  if (plan.zero_fill && dst_bytes > 0) std::memset(dst, 0, dst_bytes);
  if (any) ExecutePlan(plan, src, dst, elem);
  return true;
}

}  // namespace stoke::transform_internal
