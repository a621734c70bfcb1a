#include "loader/transform.h"

#include "loader/transform_kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/random.h"

namespace stoke {

using transform_internal::ApplyGeometricStep;
using transform_internal::ByteSize;
using transform_internal::CastElements;
using transform_internal::CheckedByteSize;
using transform_internal::FormatDoubles;
using transform_internal::IsKnownDType;
using transform_internal::NormalizeElements;
using transform_internal::Step;
using transform_internal::ToTensorElements;
using transform_internal::ValidateStep;
using Kind = TransformSpec::Kind;

namespace {

// The stream constant of the transform Rng derivation (see transform.h). Arbitrary; never change it.
constexpr uint64_t kTransformStream = 0x7472616e73666f72ULL;  // "transfor"

}  // namespace

uint64_t TransformSeed(uint64_t seed, int64_t epoch, int64_t row, uint32_t column) {
  uint64_t h = SplitMix64(SplitMix64(SplitMix64(seed) ^ kTransformStream) + static_cast<uint64_t>(epoch));
  h = SplitMix64(h + static_cast<uint64_t>(row));
  return SplitMix64(h + column);
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
        ToTensorElements(step, cur, dst);
        break;
      default:
        wrote = ApplyGeometricStep(step, rng, cur, cur_bytes, dst, dst_bytes);
        break;
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
