#include "loader/image_transform.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/clock.h"
#include "format/image.h"

namespace stoke {

using Kind = TransformSpec::Kind;

namespace {

constexpr int kAttempts = 10;  // torchvision's RandomResizedCrop attempts before its fallback

bool IsImageKind(Kind k) {
  return k == Kind::kRandomResizedCrop || k == Kind::kResize || k == Kind::kRandomHorizontalFlip ||
         k == Kind::kColorJitter;
}

// The leading image transforms of `specs` (center_crop without axes counts as one).
size_t ImagePartLength(const std::vector<TransformSpec>& specs) {
  size_t n = 0;
  while (n < specs.size() && (IsImageKind(specs[n].kind) || (specs[n].kind == Kind::kCenterCrop && specs[n].axes.empty()))) {
    ++n;
  }
  return n;
}

// Python's round(): to nearest, half to even (the default rounding mode of nearbyint).
int64_t RoundHalfEven(double x) { return static_cast<int64_t>(std::nearbyint(x)); }

}  // namespace

namespace {

// The pixels of the decoded image (src_w x src_h: the width x height source at scale / 8) that the
// resampler's filter may read for the box: the box itself at full scale, else the scaled box
// widened to whole pixels.
struct ResampleClip {
  int32_t left = 0, top = 0, right = 0, bottom = 0;
};
ResampleClip ClipOfBox(const ImageGeometry& g, int32_t width, int32_t height, int32_t src_w, int32_t src_h, int scale) {
  if (scale == 8) return {g.box_left, g.box_top, g.box_left + g.box_width, g.box_top + g.box_height};
  const double sx = static_cast<double>(src_w) / width, sy = static_cast<double>(src_h) / height;
  return {static_cast<int32_t>(std::floor(g.box_left * sx)), static_cast<int32_t>(std::floor(g.box_top * sy)),
          std::min(src_w, static_cast<int32_t>(std::ceil((g.box_left + g.box_width) * sx))),
          std::min(src_h, static_cast<int32_t>(std::ceil((g.box_top + g.box_height) * sy)))};
}

// Copies the window of the box (no resampling) into `dst`, zeros outside the box, mirrored when flip.
void CopyWindow(const uint8_t* src, int32_t src_width, int channels, const ImageGeometry& g, uint8_t* dst,
                std::vector<uint8_t>& values) {
  const size_t row_bytes = static_cast<size_t>(g.window_width) * channels;
  values.resize(row_bytes);
  const int32_t lo = std::clamp(g.window_left, 0, g.box_width), hi = std::clamp(g.window_left + g.window_width, 0, g.box_width);
  for (int32_t i = 0; i < g.window_height; ++i) {
    const int32_t y = g.window_top + i;
    uint8_t* out = dst + static_cast<size_t>(i) * row_bytes;
    if (y < 0 || y >= g.box_height) {
      std::memset(out, 0, row_bytes);
      continue;
    }
    const uint8_t* row = src + (static_cast<size_t>(g.box_top + y) * src_width + g.box_left) * channels;
    const bool inside = lo == g.window_left && hi == g.window_left + g.window_width;
    if (inside && !g.flip) {
      std::memcpy(out, row + static_cast<size_t>(lo) * channels, row_bytes);
      continue;
    }
    std::fill(values.begin(), values.end(), 0);
    if (hi > lo) std::memcpy(values.data() + static_cast<size_t>(lo - g.window_left) * channels, row + lo * channels,
                             static_cast<size_t>(hi - lo) * channels);
    StorePixelRow(values.data(), g.window_width, channels, g.flip, out);
  }
}

// PIL's Image.blend(a, x, f) for one value: float arithmetic, truncated, clipped when extrapolating.
inline uint8_t Blend(int a, int x, float f) {
  if (f == 0.0f) return static_cast<uint8_t>(a);
  if (f == 1.0f) return static_cast<uint8_t>(x);
  const float t = static_cast<float>(a) + f * static_cast<float>(x - a);
  if (f >= 0 && f <= 1.0f) return static_cast<uint8_t>(t);
  if (t <= 0.0f) return 0;
  if (t >= 255.0f) return 255;
  return static_cast<uint8_t>(t);
}

// PIL's gray level (convert("L")) of a pixel of `channels` components.
inline uint32_t Gray(const uint8_t* p, int channels) {
  if (channels < 3) return p[0];
  return (p[0] * 19595u + p[1] * 38470u + p[2] * 7471u + 0x8000u) >> 16;
}

// torchvision's adjust_brightness / adjust_contrast on a PIL image (ImageEnhance: blend with black,
// blend with the image's mean gray level int(mean + 0.5)), in the chosen order, in place.
void ApplyColorJitter(const ColorJitterChoice& j, uint8_t* pixels, size_t count, int channels) {
  uint8_t bright[256], contrast[256], color[256], alpha[256];
  const float fb = static_cast<float>(j.brightness), fc = static_cast<float>(j.contrast);
  for (int x = 0; x < 256; ++x) bright[x] = Blend(0, x, fb);
  // The mean gray level of the image as the contrast step sees it.
  uint64_t sum = 0;
  if (fc != 1.0f) {
    uint8_t px[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < count; ++i) {
      const uint8_t* p = pixels + i * channels;
      if (j.brightness_first) {
        for (int c = 0; c < channels; ++c) px[c] = bright[p[c]];
        sum += Gray(px, channels);
      } else {
        sum += Gray(p, channels);
      }
    }
  }
  const double mean = count > 0 ? static_cast<double>(sum) / static_cast<double>(count) : 0.0;
  const int m = static_cast<int>(mean + 0.5);
  for (int x = 0; x < 256; ++x) contrast[x] = Blend(m, x, fc);
  for (int x = 0; x < 256; ++x) {
    color[x] = j.brightness_first ? contrast[bright[x]] : bright[contrast[x]];
    alpha[x] = bright[x];  // PIL's black for brightness has alpha 0; contrast keeps the image's alpha
  }
  const int alpha_band = channels == 2 ? 1 : channels == 4 ? 3 : -1;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = pixels + i * channels;
    for (int c = 0; c < channels; ++c) p[c] = c == alpha_band ? alpha[p[c]] : color[p[c]];
  }
}

Status ValidateRange(const std::vector<double>& v, const char* name, bool positive) {
  if (v.size() != 2) return Status::InvalidArgument(fmt::format("{} needs two values (min, max), got {}", name, v.size()));
  if (!std::isfinite(v[0]) || !std::isfinite(v[1]) || v[0] > v[1] || (positive ? v[0] <= 0 : v[0] < 0)) {
    return Status::InvalidArgument(fmt::format("{} ({}, {}) must be finite, ordered and {}", name, v[0], v[1],
                                               positive ? "positive" : "non-negative"));
  }
  return Status::OK();
}

// {h, w} from a size of one or two values, each >= 1.
Status ImageSize(const std::vector<int64_t>& size, int64_t* h, int64_t* w) {
  if (size.size() != 1 && size.size() != 2) {
    return Status::InvalidArgument(fmt::format("size has {} values; give (height, width) or one size", size.size()));
  }
  *h = size[0];
  *w = size.back();
  if (*h < 1 || *w < 1 || *h > INT32_MAX || *w > INT32_MAX) {
    return Status::InvalidArgument(fmt::format("size {}x{} is outside [1, 2^31)", *h, *w));
  }
  return Status::OK();
}

// The image part's fixed output size {h, w}, when it has one.
std::optional<std::pair<int64_t, int64_t>> FixedSize(const std::vector<TransformSpec>& specs) {
  std::optional<std::pair<int64_t, int64_t>> size;
  for (size_t i = 0; i < ImagePartLength(specs); ++i) {
    const TransformSpec& s = specs[i];
    if (s.size.empty()) continue;
    const bool sets = s.kind == Kind::kRandomResizedCrop || s.kind == Kind::kCenterCrop ||
                      (s.kind == Kind::kResize && s.size.size() == 2);
    if (sets) {
      size = std::make_pair(s.size[0], s.size.back());
    } else if (s.kind == Kind::kResize) {
      size.reset();
    }
  }
  return size;
}

}  // namespace

bool ImagePipeline::HasImageTransforms(const std::vector<TransformSpec>& specs) { return ImagePartLength(specs) > 0; }

bool ImagePipeline::FixesSize(const std::vector<TransformSpec>& specs) { return FixedSize(specs).has_value(); }

Status ImagePipeline::SetInput(const ImagePipelineOptions& options, const std::vector<int64_t>& tensor_shape) {
  encoded_ = tensor_shape.empty();
  dct_scaling_ = options.jpeg_dct_scaling;
  region_decode_ = options.jpeg_region_decode;
  max_decoded_bytes_ = options.max_decoded_bytes;
  if (encoded_) {
    if (options.channels != 1 && options.channels != 3 && options.channels != 4) {
      return Status::InvalidArgument(fmt::format("image_channels must be 1, 3 or 4, got {}", options.channels));
    }
    channels_ = options.channels;
    return Status::OK();
  }
  if (tensor_shape.size() != 3 || tensor_shape[2] < 1 || tensor_shape[2] > 4 || tensor_shape[0] < 1 ||
      tensor_shape[1] < 1 || tensor_shape[0] > INT32_MAX || tensor_shape[1] > INT32_MAX) {
    return Status::InvalidArgument(fmt::format("image transforms need images: an image column, or a uint8 tensor "
                                               "column of shape [H, W, C] with C 1 to 4 (this one is [{}])",
                                               fmt::join(tensor_shape, ",")));
  }
  channels_ = static_cast<int>(tensor_shape[2]);
  tensor_height_ = static_cast<int32_t>(tensor_shape[0]);
  tensor_width_ = static_cast<int32_t>(tensor_shape[1]);
  return Status::OK();
}

Status ImagePipeline::ParseResampleStep(const TransformSpec& s, Step* step, std::string* text) {
  if (s.kind == Kind::kResize && s.size.size() == 1) {
    if (s.size[0] < 1 || s.size[0] > INT32_MAX) {
      return Status::InvalidArgument(fmt::format("size {} is outside [1, 2^31)", s.size[0]));
    }
    step->height = s.size[0];
    step->width = 0;  // the shorter side
    *text = fmt::format("resize({})", s.size[0]);
    return Status::OK();
  }
  STOKE_RETURN_IF_ERROR(ImageSize(s.size, &step->height, &step->width));
  if (s.kind == Kind::kResize) {
    *text = fmt::format("resize({}x{})", step->height, step->width);
    return Status::OK();
  }
  STOKE_RETURN_IF_ERROR(ValidateRange(s.scale, "scale", true));
  STOKE_RETURN_IF_ERROR(ValidateRange(s.ratio, "ratio", true));
  step->scale[0] = s.scale[0];
  step->scale[1] = s.scale[1];
  step->log_ratio[0] = std::log(s.ratio[0]);
  step->log_ratio[1] = std::log(s.ratio[1]);
  *text = fmt::format("random_resized_crop({}x{}, scale=[{},{}], ratio=[{:.4g},{:.4g}])", step->height, step->width,
                      s.scale[0], s.scale[1], s.ratio[0], s.ratio[1]);
  return Status::OK();
}

Status ImagePipeline::ParseColorJitterStep(const TransformSpec& s, Step* step, std::string* text) {
  if (s.brightness.empty() && s.contrast.empty()) return Status::InvalidArgument("neither brightness nor contrast is set");
  if (!s.brightness.empty()) {
    STOKE_RETURN_IF_ERROR(ValidateRange(s.brightness, "brightness", false));
    step->brightness = true;
    step->brightness_range[0] = s.brightness[0];
    step->brightness_range[1] = s.brightness[1];
  }
  if (!s.contrast.empty()) {
    STOKE_RETURN_IF_ERROR(ValidateRange(s.contrast, "contrast", false));
    step->contrast = true;
    step->contrast_range[0] = s.contrast[0];
    step->contrast_range[1] = s.contrast[1];
  }
  *text = fmt::format("color_jitter(brightness=[{},{}], contrast=[{},{}])", step->brightness_range[0],
                      step->brightness_range[1], step->contrast_range[0], step->contrast_range[1]);
  return Status::OK();
}

Status ImagePipeline::AddStep(const TransformSpec& s, StepOrder* order, std::string* text) {
  Step step;
  step.kind = s.kind;
  switch (s.kind) {
    case Kind::kRandomResizedCrop:
    case Kind::kResize:
      if (order->resampled) {
        return Status::InvalidArgument("one resampling transform per column (random_resized_crop or resize): a second "
                                       "would resample the pixels twice");
      }
      if (order->jittered) return Status::InvalidArgument("must come before color_jitter");
      order->resampled = true;
      STOKE_RETURN_IF_ERROR(ParseResampleStep(s, &step, text));
      break;
    case Kind::kCenterCrop:
      if (order->jittered) return Status::InvalidArgument("must come before color_jitter");
      STOKE_RETURN_IF_ERROR(ImageSize(s.size, &step.height, &step.width));
      *text = fmt::format("center_crop({}x{})", step.height, step.width);
      break;
    case Kind::kRandomHorizontalFlip:
      if (!(s.p >= 0 && s.p <= 1)) return Status::InvalidArgument(fmt::format("p {} outside [0, 1]", s.p));
      step.p = s.p;
      *text = fmt::format("random_horizontal_flip(p={})", s.p);
      break;
    case Kind::kColorJitter:
      if (order->jittered) return Status::InvalidArgument("one color_jitter per column");
      order->jittered = true;
      STOKE_RETURN_IF_ERROR(ParseColorJitterStep(s, &step, text));
      break;
    default:
      return Status::Internal("not an image transform");
  }
  steps_.push_back(step);
  return Status::OK();
}

Result<std::pair<int64_t, int64_t>> ImagePipeline::SetOutputSize(const std::vector<TransformSpec>& specs,
                                                                const std::vector<int64_t>& tensor_shape, bool resampled,
                                                                std::optional<std::pair<int64_t, int64_t>> uniform_size) {
  if (auto fixed = FixedSize(specs)) {
    fixes_size_ = true;
    return *fixed;
  }
  if (!encoded_ && !resampled) {  // pixels of a fixed shape, only flipped or jittered
    fixes_size_ = true;
    return std::pair{tensor_shape[0], tensor_shape[1]};
  }
  if (!uniform_size) {
    return Status::InvalidArgument("images of different sizes cannot be batched: end the image transforms with "
                                   "random_resized_crop, resize to (height, width) or center_crop");
  }
  if (!encoded_) {
    // resize to one side of a fixed-shape tensor: the output size is known.
    ImageGeometry g;
    Rng rng(0);
    ColorJitterChoice unused;
    STOKE_RETURN_IF_ERROR(PlanGeometry(tensor_width_, tensor_height_, rng, &g, &unused, nullptr));
    fixes_size_ = true;
    return std::pair<int64_t, int64_t>{g.window_height, g.window_width};
  }
  uniform_height_ = uniform_size->first;
  uniform_width_ = uniform_size->second;
  return *uniform_size;
}

Status ImagePipeline::SetTensorPart(const std::vector<TransformSpec>& specs, size_t image_part, int64_t out_h,
                                    int64_t out_w) {
  const std::vector<TransformSpec> rest(specs.begin() + static_cast<std::ptrdiff_t>(image_part), specs.end());
  auto tensor = TransformPipeline::Create(rest, DType::kUInt8, {out_h, out_w, channels_});
  if (!tensor.ok()) {
    // Name the transform by its index in the whole list.
    std::string message = tensor.status().message();
    if (message.rfind("transforms[", 0) == 0) {
      const size_t close = message.find(']');
      const size_t index = std::stoul(message.substr(11, close - 11)) + image_part;
      message = fmt::format("transforms[{}{}", index, message.substr(close));
    }
    return Status(tensor.status().code(), message);
  }
  tensor_ = std::move(*tensor);
  return Status::OK();
}

Result<ImagePipeline> ImagePipeline::Create(const std::vector<TransformSpec>& specs, const ImagePipelineOptions& options,
                                            const std::vector<int64_t>& tensor_shape,
                                            std::optional<std::pair<int64_t, int64_t>> uniform_size) {
  ImagePipeline p;
  STOKE_RETURN_IF_ERROR(p.SetInput(options, tensor_shape));
  const size_t image_part = ImagePartLength(specs);
  StepOrder order;
  std::string describe = p.encoded_ ? fmt::format("decode({})", p.channels_ == 1 ? "gray" : p.channels_ == 3 ? "rgb" : "rgba")
                                    : std::string();
  for (size_t i = 0; i < image_part; ++i) {
    std::string text;
    if (Status st = p.AddStep(specs[i], &order, &text); !st.ok()) {
      return st.WithContext(fmt::format("transforms[{}] ({})", i, TransformKindName(specs[i].kind)));
    }
    describe += describe.empty() ? text : " -> " + text;
  }
  for (size_t i = image_part; i < specs.size(); ++i) {
    if (IsImageKind(specs[i].kind) && specs[i].kind != Kind::kRandomHorizontalFlip) {
      return Status::InvalidArgument(fmt::format(
          "transforms[{}] ({}): an image transform after a tensor transform; the image transforms (random_resized_crop, "
          "resize, center_crop, random_horizontal_flip, color_jitter) come first", i, TransformKindName(specs[i].kind)));
    }
  }
  STOKE_ASSIGN_OR_RETURN(auto out_size, p.SetOutputSize(specs, tensor_shape, order.resampled, uniform_size));
  STOKE_RETURN_IF_ERROR(p.SetTensorPart(specs, image_part, out_size.first, out_size.second));
  if (options.for_gpu) STOKE_RETURN_IF_ERROR(p.SetGpuOutput(order, out_size.first, out_size.second));
  if (!p.tensor_.empty()) describe += fmt::format("{}[{}]", describe.empty() ? "" : " -> ", p.tensor_.Describe());
  if (p.for_gpu_) describe += " (resample and tensor part on the GPU)";
  p.describe_image_part_ = describe.empty() ? "identity" : describe;
  return p;
}

Status ImagePipeline::SetGpuOutput(const StepOrder& order, int64_t out_h, int64_t out_w) {
  if (order.jittered) {
    return Status::InvalidArgument("transforms_on cuda: color_jitter runs on the CPU only (leave it out, or use "
                                   "transforms_on cpu)");
  }
  const std::vector<uint8_t>* table = tensor_.FusedLookup();
  if (!tensor_.empty() && table == nullptr) {
    return Status::InvalidArgument(fmt::format(
        "transforms_on cuda: after the image transforms the GPU runs to_tensor with normalize and cast only, not "
        "[{}]", tensor_.Describe()));
  }
  for_gpu_ = true;
  gpu_header_ = GpuImageHeader{};
  gpu_header_.channels = channels_;
  gpu_header_.out_height = static_cast<int32_t>(out_h);
  gpu_header_.out_width = static_cast<int32_t>(out_w);
  gpu_header_.out_dtype = static_cast<int32_t>(tensor_.out_dtype());
  gpu_header_.element_bytes = static_cast<int32_t>(DTypeSize(tensor_.out_dtype()));
  gpu_header_.table_bytes = table == nullptr ? 0 : static_cast<int32_t>(table->size());
  gpu_shape_ = {static_cast<int64_t>(GpuImageRecordBytes(out_h, out_w, channels_, gpu_header_.table_bytes))};
  return Status::OK();
}

std::string ImagePipeline::Describe() const { return describe_image_part_; }

namespace {

// A crop of the current image (the window), mirrored when the image is flipped so far.
void CropWindow(ImageGeometry* g, int64_t left, int64_t top, int64_t w, int64_t h) {
  if (g->flip) left = g->window_width - left - w;
  g->window_left += static_cast<int32_t>(left);
  g->window_top += static_cast<int32_t>(top);
  g->window_width = static_cast<int32_t>(w);
  g->window_height = static_cast<int32_t>(h);
}

// A resize of the window to w x h: the window becomes the box that is resampled.
Status ResizeWindow(ImageGeometry* g, int64_t w, int64_t h) {
  if (g->window_left < 0 || g->window_top < 0 || g->window_left + g->window_width > g->box_width ||
      g->window_top + g->window_height > g->box_height) {
    return Status::InvalidArgument(fmt::format("a center_crop pads the {}x{} image before it is resized; crop after "
                                               "the resize, or resize first", g->source_width, g->source_height));
  }
  g->box_left += g->window_left;
  g->box_top += g->window_top;
  g->box_width = g->window_width;
  g->box_height = g->window_height;
  g->resized = true;
  g->resized_width = static_cast<int32_t>(w);
  g->resized_height = static_cast<int32_t>(h);
  g->window_left = g->window_top = 0;
  g->window_width = static_cast<int32_t>(w);
  g->window_height = static_cast<int32_t>(h);
  return Status::OK();
}

}  // namespace

void ImagePipeline::DrawRandomResizedCrop(const Step& s, int64_t cur_w, int64_t cur_h, Rng& rng,
                                          ImageTransformChoice* choice) {
  double u[2 * kAttempts + 2];
  for (double& x : u) x = rng.Uniform();
  const double area = static_cast<double>(cur_w) * static_cast<double>(cur_h);
  int64_t top = 0, left = 0, w = 0, h = 0;
  bool found = false;
  for (int k = 0; k < kAttempts && !found; ++k) {
    const double target = area * (s.scale[0] + u[2 * k] * (s.scale[1] - s.scale[0]));
    const double aspect = std::exp(s.log_ratio[0] + u[2 * k + 1] * (s.log_ratio[1] - s.log_ratio[0]));
    w = RoundHalfEven(std::sqrt(target * aspect));
    h = RoundHalfEven(std::sqrt(target / aspect));
    if (w > 0 && w <= cur_w && h > 0 && h <= cur_h) {
      top = static_cast<int64_t>(u[2 * kAttempts] * static_cast<double>(cur_h - h + 1));
      left = static_cast<int64_t>(u[2 * kAttempts + 1] * static_cast<double>(cur_w - w + 1));
      found = true;
    }
  }
  if (!found) {  // torchvision's fallback: the centred box of the nearest ratio bound
    const double in_ratio = static_cast<double>(cur_w) / static_cast<double>(cur_h);
    const double lo = std::exp(s.log_ratio[0]), hi = std::exp(s.log_ratio[1]);
    if (in_ratio < lo) {
      w = cur_w;
      h = RoundHalfEven(static_cast<double>(w) / lo);
    } else if (in_ratio > hi) {
      h = cur_h;
      w = RoundHalfEven(static_cast<double>(h) * hi);
    } else {
      w = cur_w;
      h = cur_h;
    }
    top = (cur_h - h) / 2;
    left = (cur_w - w) / 2;
  }
  choice->top = top;
  choice->left = left;
  choice->height = h;
  choice->width = w;
  choice->out_height = s.height;
  choice->out_width = s.width;
}

void ImagePipeline::ResizeChoice(const Step& s, int64_t cur_w, int64_t cur_h, ImageTransformChoice* choice) {
  int64_t nh = s.height, nw = s.width;
  if (s.width == 0) {  // the shorter side to `height`, as torchvision's _compute_resized_output_size
    const int64_t shorter = std::min(cur_w, cur_h), longer = std::max(cur_w, cur_h);
    const int64_t other =
        static_cast<int64_t>(static_cast<double>(s.height) * static_cast<double>(longer) / static_cast<double>(shorter));
    nw = cur_w <= cur_h ? s.height : other;
    nh = cur_w <= cur_h ? other : s.height;
  }
  choice->out_height = nh;
  choice->out_width = nw;
}

void ImagePipeline::CenterCropChoice(const Step& s, int64_t cur_w, int64_t cur_h, ImageTransformChoice* choice) {
  // torchvision's center_crop: pad (floor on the low side) where the crop is larger, then crop at
  // round((extent - size) / 2), half to even.
  auto offset = [](int64_t extent, int64_t size) -> int64_t {
    if (size > extent) return -((size - extent) / 2);
    return RoundHalfEven(static_cast<double>(extent - size) / 2.0);
  };
  choice->top = offset(cur_h, s.height);
  choice->left = offset(cur_w, s.width);
  choice->height = choice->out_height = s.height;
  choice->width = choice->out_width = s.width;
}

void ImagePipeline::DrawColorJitter(const Step& s, Rng& rng, ColorJitterChoice* jitter, ImageTransformChoice* choice) {
  const double u_order = rng.Uniform(), u_b = rng.Uniform(), u_c = rng.Uniform();
  jitter->active = true;
  jitter->brightness_first = u_order < 0.5;
  jitter->brightness = s.brightness ? s.brightness_range[0] + u_b * (s.brightness_range[1] - s.brightness_range[0]) : 1.0;
  jitter->contrast = s.contrast ? s.contrast_range[0] + u_c * (s.contrast_range[1] - s.contrast_range[0]) : 1.0;
  choice->brightness = jitter->brightness;
  choice->contrast = jitter->contrast;
  choice->brightness_first = jitter->brightness_first;
}

Status ImagePipeline::PlanGeometry(int32_t width, int32_t height, Rng& rng, ImageGeometry* g, ColorJitterChoice* jitter,
                                   std::vector<ImageTransformChoice>* choices) const {
  *g = ImageGeometry{};
  g->source_width = width;
  g->source_height = height;
  g->box_width = g->resized_width = g->window_width = width;
  g->box_height = g->resized_height = g->window_height = height;
  for (const Step& s : steps_) {
    ImageTransformChoice choice;
    choice.kind = s.kind;
    const int64_t cur_w = g->window_width, cur_h = g->window_height;
    switch (s.kind) {
      case Kind::kRandomResizedCrop:
        DrawRandomResizedCrop(s, cur_w, cur_h, rng, &choice);
        CropWindow(g, choice.left, choice.top, choice.width, choice.height);
        STOKE_RETURN_IF_ERROR(ResizeWindow(g, s.width, s.height));
        break;
      case Kind::kResize:
        ResizeChoice(s, cur_w, cur_h, &choice);
        if (choice.out_width != cur_w || choice.out_height != cur_h) {  // PIL: the same size is a copy
          STOKE_RETURN_IF_ERROR(ResizeWindow(g, choice.out_width, choice.out_height));
        }
        break;
      case Kind::kCenterCrop:
        CenterCropChoice(s, cur_w, cur_h, &choice);
        CropWindow(g, choice.left, choice.top, s.width, s.height);
        break;
      case Kind::kRandomHorizontalFlip:
        choice.flip = rng.Uniform() < s.p;
        if (choice.flip) g->flip = !g->flip;
        break;
      case Kind::kColorJitter:
        DrawColorJitter(s, rng, jitter, &choice);
        break;
      default: break;
    }
    if (choices != nullptr) choices->push_back(choice);
  }
  return Status::OK();
}

Result<std::vector<ImageTransformChoice>> ImagePipeline::Choices(int64_t width, int64_t height, uint64_t seed,
                                                                 int64_t epoch, int64_t row, uint32_t column,
                                                                 ImageGeometry* geometry) const {
  if (width < 1 || height < 1 || width > INT32_MAX || height > INT32_MAX) {
    return Status::InvalidArgument(fmt::format("an image of {}x{} pixels", width, height));
  }
  Rng rng(TransformSeed(seed, epoch, row, column));
  std::vector<ImageTransformChoice> choices;
  ColorJitterChoice jitter;
  ImageGeometry g;
  STOKE_RETURN_IF_ERROR(PlanGeometry(static_cast<int32_t>(width), static_cast<int32_t>(height), rng, &g, &jitter, &choices));
  if (geometry != nullptr) *geometry = g;
  return choices;
}

namespace {

// What ResampleBilinear is asked for geometry `g` of a width x height image decoded as `src`.
ResampleRequest ResampleRequestFor(const ImageGeometry& g, const DecodedPixels& src, int32_t width, int32_t height,
                                   int channels) {
  ResampleRequest r;
  r.src = src.pixels;
  r.src_width = src.width;
  r.src_height = src.height;
  r.channels = channels;
  const double sx = static_cast<double>(src.width) / width, sy = static_cast<double>(src.height) / height;
  r.x0 = g.box_left * sx;
  r.x1 = (g.box_left + g.box_width) * sx;
  r.y0 = g.box_top * sy;
  r.y1 = (g.box_top + g.box_height) * sy;
  const ResampleClip clip = ClipOfBox(g, width, height, src.width, src.height, src.scale);
  r.clip_left = clip.left;
  r.clip_top = clip.top;
  r.clip_right = clip.right;
  r.clip_bottom = clip.bottom;
  r.out_width = g.resized_width;
  r.out_height = g.resized_height;
  r.wx = g.window_left;
  r.wy = g.window_top;
  r.ww = g.window_width;
  r.wh = g.window_height;
  r.flip = g.flip;
  return r;
}

// The JPEG DCT scale (n/8) to decode at: the smallest at which the box is still at least the output
// size in both axes, when the geometry resamples; 8 (full size) otherwise.
int DctScale(const ImageGeometry& g) {
  if (!g.resized) return 8;
  for (int n = 1; n <= 4; ++n) {
    if (int64_t{g.box_width} * n >= int64_t{8} * g.resized_width && int64_t{g.box_height} * n >= int64_t{8} * g.resized_height) {
      return n;
    }
  }
  return 8;
}

}  // namespace

Result<DecodedPixels> ImagePipeline::Decode(ByteView in, int32_t width, int32_t height, bool jpeg, const ImageGeometry& g,
                                            ImageScratch* scratch) const {
  if (!encoded_) return DecodedPixels{in.data(), width, height, 8};
  const int scale = jpeg && dct_scaling_ ? DctScale(g) : 8;
  DecodeImageOptions o;
  o.channels = channels_;
  o.scale_eighths = scale;
  o.max_bytes = max_decoded_bytes_;
  if (jpeg && region_decode_) {
    // The resampler reads only the box's pixels (its filter is clipped to them), and so does
    // CopyWindow: decode just those.
    const ResampleClip clip =
        ClipOfBox(g, width, height, JpegScaledExtent(width, scale), JpegScaledExtent(height, scale), scale);
    o.region_left = clip.left;
    o.region_top = clip.top;
    o.region_width = clip.right - clip.left;
    o.region_height = clip.bottom - clip.top;
  }
  STOKE_ASSIGN_OR_RETURN(DecodedImage d, DecodeImage(in, "image", o, &scratch->decoded));
  return DecodedPixels{scratch->decoded.data(), d.width, d.height, scale};
}

void ImagePipeline::WriteGpuRecord(const ImageGeometry& g, const DecodedPixels& src, int32_t width, int32_t height,
                                   uint8_t* out, ImageScratch* scratch) const {
  GpuImageHeader h = gpu_header_;
  uint8_t* table = out + sizeof(GpuImageHeader);
  if (h.table_bytes > 0) std::memcpy(table, tensor_.FusedLookup()->data(), static_cast<size_t>(h.table_bytes));
  uint8_t* pixels = table + h.table_bytes;
  const size_t capacity = out_bytes() - sizeof(GpuImageHeader) - static_cast<size_t>(h.table_bytes);
  h.staged_width = g.window_width;
  h.staged_height = g.window_height;
  if (!g.resized) {
    CopyWindow(src.pixels, src.width, channels_, g, pixels, scratch->row);
  } else if (const ResampleRequest r = ResampleRequestFor(g, src, width, height, channels_);
             static_cast<size_t>(r.clip_right - r.clip_left) * (r.clip_bottom - r.clip_top) * channels_ > capacity) {
    ResampleBilinear(r, pixels, &scratch->resample);  // too large to ship: the CPU resamples it
  } else {
    h.resample = 1;
    h.staged_width = r.clip_right - r.clip_left;
    h.staged_height = r.clip_bottom - r.clip_top;
    const size_t row_bytes = static_cast<size_t>(h.staged_width) * channels_;
    for (int32_t y = 0; y < h.staged_height; ++y) {
      std::memcpy(pixels + y * row_bytes,
                  r.src + (static_cast<size_t>(r.clip_top + y) * r.src_width + r.clip_left) * channels_, row_bytes);
    }
    h.flip = r.flip ? 1 : 0;
    h.virtual_width = r.out_width;
    h.virtual_height = r.out_height;
    h.window_left = r.wx;
    h.window_top = r.wy;
    h.x0 = r.x0 - r.clip_left;
    h.x1 = r.x1 - r.clip_left;
    h.y0 = r.y0 - r.clip_top;
    h.y1 = r.y1 - r.clip_top;
  }
  std::memcpy(out, &h, sizeof(h));
}

Status ImagePipeline::Apply(ByteView in, MutableByteView out, uint64_t seed, int64_t epoch, int64_t row,
                            uint32_t column, ImageScratch* scratch, Timing* timing) const {
  const int64_t t0 = NowNanos();
  if (out.size() != out_bytes()) {
    return Status::InvalidArgument(fmt::format("image output of {} bytes; the result has {}", out.size(), out_bytes()));
  }
  int32_t width = tensor_width_, height = tensor_height_;
  bool jpeg = false;
  if (encoded_) {
    STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(in, "image"));
    width = info.width;
    height = info.height;
    jpeg = info.format == ImageFormat::kJpeg;
  } else if (in.size() != static_cast<size_t>(width) * height * channels_) {
    return Status::InvalidArgument(fmt::format("an image cell of {} bytes; the column's [{}, {}, {}] uint8 has {}",
                                               in.size(), height, width, channels_,
                                               static_cast<size_t>(width) * height * channels_));
  }
  Rng rng(TransformSeed(seed, epoch, row, column));
  ImageGeometry g;
  ColorJitterChoice jitter;
  STOKE_RETURN_IF_ERROR(PlanGeometry(width, height, rng, &g, &jitter, nullptr));
  if (!fixes_size_ && (g.window_width != uniform_width_ || g.window_height != uniform_height_)) {
    return Status::InvalidArgument(fmt::format(
        "the image is {}x{} (width x height){}, the column's first image {}x{}: images of different sizes cannot be "
        "batched; end the image transforms with random_resized_crop, resize to (height, width) or center_crop",
        width, height, g.resized ? fmt::format(", {}x{} after the transforms", g.window_width, g.window_height) : "",
        uniform_width_, uniform_height_));
  }
  STOKE_ASSIGN_OR_RETURN(const DecodedPixels src, Decode(in, width, height, jpeg, g, scratch));
  const int64_t t1 = NowNanos();
  if (for_gpu_) {
    WriteGpuRecord(g, src, width, height, out.data(), scratch);
    if (timing != nullptr) *timing = {t1 - t0, NowNanos() - t1};
    return Status::OK();
  }
  const size_t staged_bytes = static_cast<size_t>(g.window_width) * g.window_height * channels_;
  uint8_t* image_out = out.data();
  if (!tensor_.empty()) {
    scratch->staged.Resize(staged_bytes);
    image_out = scratch->staged.data();
  }
  if (g.resized) {
    ResampleBilinear(ResampleRequestFor(g, src, width, height, channels_), image_out, &scratch->resample);
  } else {
    CopyWindow(src.pixels, src.width, channels_, g, image_out, scratch->row);
  }
  if (jitter.active) {
    ApplyColorJitter(jitter, image_out, static_cast<size_t>(g.window_width) * g.window_height, channels_);
  }
  Status st;
  if (!tensor_.empty()) st = tensor_.ApplyWithRng(ByteView(image_out, staged_bytes), out, rng, &scratch->tensor);
  if (timing != nullptr) {
    timing->decode_ns = t1 - t0;
    timing->transform_ns = NowNanos() - t1;
  }
  return st;
}

}  // namespace stoke

namespace stoke {
namespace {

// A pipeline for single images: when the chain does not fix the output size, the size this image
// comes out at is the one "every image" must have.
Result<ImagePipeline> PipelineForOneImage(const std::vector<TransformSpec>& transforms, const ImageTransformOptions& o,
                                          int64_t width, int64_t height) {
  ImagePipelineOptions io;
  io.channels = o.channels;
  io.jpeg_dct_scaling = o.jpeg_dct_scaling;
  if (ImagePipeline::FixesSize(transforms)) return ImagePipeline::Create(transforms, io, {}, std::nullopt);
  STOKE_ASSIGN_OR_RETURN(ImagePipeline draft, ImagePipeline::Create(transforms, io, {}, std::make_pair(height, width)));
  ImageGeometry g;
  STOKE_RETURN_IF_ERROR(draft.Choices(width, height, o.seed, o.epoch, o.row, o.column, &g).status());
  return ImagePipeline::Create(transforms, io, {}, std::make_pair(int64_t{g.window_height}, int64_t{g.window_width}));
}

}  // namespace

Result<TransformedImage> TransformImage(std::string_view encoded, std::string_view path,
                                        const std::vector<TransformSpec>& transforms,
                                        const ImageTransformOptions& options) {
  const ByteView bytes(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size());
  STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(bytes, path));
  STOKE_ASSIGN_OR_RETURN(ImagePipeline pipeline, PipelineForOneImage(transforms, options, info.width, info.height));
  TransformedImage out;
  out.dtype = pipeline.out_dtype();
  out.shape = pipeline.out_shape();
  out.data.resize(pipeline.out_bytes());
  ImageScratch scratch;
  Status st = pipeline.Apply(bytes, MutableByteView(out.data.data(), out.data.size()), options.seed, options.epoch,
                             options.row, options.column, &scratch, nullptr);
  if (!st.ok()) return st.WithContext(std::string(path));
  return out;
}

Result<std::vector<ImageTransformChoice>> PlanImageTransforms(const std::vector<TransformSpec>& transforms,
                                                              int64_t width, int64_t height,
                                                              const ImageTransformOptions& options) {
  if (width < 1 || height < 1 || width > INT32_MAX || height > INT32_MAX) {
    return Status::InvalidArgument(fmt::format("an image of {}x{} pixels", width, height));
  }
  STOKE_ASSIGN_OR_RETURN(ImagePipeline pipeline, PipelineForOneImage(transforms, options, width, height));
  return pipeline.Choices(width, height, options.seed, options.epoch, options.row, options.column, nullptr);
}

}  // namespace stoke
