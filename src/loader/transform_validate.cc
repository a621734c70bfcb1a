// Each transform checked against the dtype and shape it will see (transform_kernels.h).
#include "loader/transform_kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace stoke::transform_internal {

using Kind = TransformSpec::Kind;

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

namespace {

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


}  // namespace

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

}  // namespace stoke::transform_internal
