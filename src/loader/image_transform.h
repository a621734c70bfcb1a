// Images in the loader: an encoded JPEG/PNG cell (or a [H, W, C] uint8 tensor cell) through a column's
// transforms, on a decode worker. The leading image transforms of the list (random_resized_crop,
// resize, center_crop without axes, random_horizontal_flip, color_jitter; see TransformSpec) form the
// image part; the rest (to_tensor, normalize, cast, ...) run as a TransformPipeline on its output.
//
// One pass where it pays. The image part's crops, resize and flip are composed into one geometry per
// image (a source box, the size it is resampled to, a window of that and a mirror flag), so that
//   decode (JPEG: only the box's rows and iMCU columns, and at a DCT scale when allowed and the box
//           is at least twice the output size)
//   -> resample the box to the window (horizontal pass, vertical pass, the mirror folded into the
//      output index) -> color jitter (one table lookup per byte) -> the tensor part (to_tensor and
//      normalize fused into one lookup per element)
// touches no pixel outside the box after the JPEG decoder's entropy decoding.
//
// Resampling is Pillow's (format/image_resample.h), with the filter clipped to the box as PIL's
// crop-then-resize does. Without DCT scaling the result is
// therefore byte-identical to PIL's `img.crop(box).resize(size, BILINEAR)` and to torchvision's
// RandomResizedCrop / Resize / CenterCrop on a PIL image given the same random choices (tested against
// PIL). Two differences remain, documented in docs/python.md: a flip before a resize is applied after
// it (the same up to ties in the filter's rounding), and RGBA images are resampled as they are (PIL
// premultiplies alpha).
//
// Randomness: the sample's Rng (transform.h: seeded by seed, epoch, row and column) draws, in list
// order:
//   random_resized_crop     22 Uniform()s: u_area[k], u_ratio[k] for the 10 attempts k = 0..9
//                           (interleaved: area then ratio), then u_top, u_left. Attempt k takes area
//                           fraction scale[0] + u_area[k] * (scale[1] - scale[0]) and log aspect ratio
//                           log(ratio[0]) + u_ratio[k] * (log(ratio[1]) - log(ratio[0])), w =
//                           round(sqrt(area * aspect)), h = round(sqrt(area / aspect)) (half to even); the
//                           first attempt with 0 < w <= W and 0 < h <= H is kept, at top =
//                           floor(u_top * (H - h + 1)), left = floor(u_left * (W - w + 1)); none: the
//                           centred fallback of torchvision (the box of the ratio range's nearest bound)
//   random_horizontal_flip  one Uniform(); mirror iff u < p
//   color_jitter            three Uniform()s: u_order (brightness first iff u_order < 0.5), u_b, u_c;
//                           factor = lo + u * (hi - lo) (1 when off)
//   resize, center_crop     nothing
// Every draw is made whatever the image, so later transforms see a sequence that depends only on the
// list. Treat this as persisted: changing it changes every augmentation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/random.h"
#include "format/image_resample.h"
#include "loader/gpu_image.h"
#include "loader/transform.h"
#include "stoke/loader.h"
#include "stoke/status.h"

namespace stoke {

// Per-thread working memory of ImagePipeline::Apply: every buffer grows to the largest image seen and
// stays, so the steady state allocates nothing. Not thread-safe: one per worker thread.
struct ImageScratch {
  AlignedBuffer decoded;     // the decoded image (full size or DCT-scaled)
  AlignedBuffer staged;      // the image part's output when the tensor part follows
  ResampleScratch resample;
  std::vector<uint8_t> row;  // a row being mirrored
  TransformScratch tensor;
};

// Where one image's pixels come from and go to (see the file comment). All in source pixels.
struct ImageGeometry {
  int32_t source_width = 0, source_height = 0;
  // The box of the source that is resampled (or copied, without a resize): inside the source.
  int32_t box_left = 0, box_top = 0, box_width = 0, box_height = 0;
  bool resized = false;
  // The size the box is resampled to (the box's own size without a resize).
  int32_t resized_width = 0, resized_height = 0;
  // The output: the window [left, left + width) x [top, top + height) of the resampled box. Parts
  // outside the resampled box are zero (padding).
  int32_t window_left = 0, window_top = 0, window_width = 0, window_height = 0;
  bool flip = false;  // mirror the output horizontally
};

// The color_jitter choices for one image: factors (1 when off) and their order.
struct ColorJitterChoice {
  bool active = false;
  double brightness = 1, contrast = 1;
  bool brightness_first = true;
};

struct ImagePipelineOptions {
  int channels = 3;                         // LoaderOptions::image_channels
  bool jpeg_dct_scaling = true;             // LoaderOptions::jpeg_dct_scaling
  bool jpeg_region_decode = true;           // LoaderOptions::jpeg_region_decode
  int64_t max_decoded_bytes = int64_t{1} << 30;  // per image (DecodeImageOptions::max_bytes)
  // LoaderOptions::transforms_on == kCuda: Apply writes a GpuImage record (loader/gpu_image.h) that the
  // device finishes, instead of the transformed image.
  bool for_gpu = false;
};

// Pixels to resample: width x height of them (at JPEG DCT scale `scale`/8 of the image), row-major,
// interleaved channels.
struct DecodedPixels {
  const uint8_t* pixels = nullptr;
  int32_t width = 0, height = 0;
  int scale = 8;
};

class ImagePipeline {
 public:
  ImagePipeline() = default;

  // True when `specs` starts with an image transform (the loader then runs a uint8 [H, W, C] tensor
  // column through an ImagePipeline too).
  static bool HasImageTransforms(const std::vector<TransformSpec>& specs);
  // True when the image part of `specs` ends at the same size for every image (random_resized_crop,
  // resize to (h, w), or a center_crop after the last resize to one side).
  static bool FixesSize(const std::vector<TransformSpec>& specs);

  // Validates `specs` for images of options.channels channels (encoded images: `tensor_shape` empty)
  // or for a tensor column of shape `tensor_shape` (uint8 [H, W, C], C 1..4). `uniform_size` {height,
  // width}: when the image part does not fix the size, the size every image must have (the loader
  // reads the first image's); unused otherwise. InvalidArgument naming the transform (index and
  // kind) for bad parameters (sizes below 1, scale/ratio ranges not positive and ordered, factor
  // ranges not 0 <= lo <= hi, p outside [0, 1], more than one resampling transform), for an image
  // transform after a tensor transform, and as TransformPipeline::Create for the tensor part.
  static Result<ImagePipeline> Create(const std::vector<TransformSpec>& specs, const ImagePipelineOptions& options,
                                      const std::vector<int64_t>& tensor_shape,
                                      std::optional<std::pair<int64_t, int64_t>> uniform_size);

  // What Apply writes per image: the transformed image, or with for_gpu a uint8 [record bytes] record.
  DType out_dtype() const { return for_gpu_ ? DType::kUInt8 : tensor_.out_dtype(); }
  const std::vector<int64_t>& out_shape() const { return for_gpu_ ? gpu_shape_ : tensor_.out_shape(); }
  size_t out_bytes() const { return for_gpu_ ? gpu_shape_[0] : tensor_.out_bytes(); }
  // The image a record finishes to (with for_gpu; the same as out_* otherwise).
  DType image_dtype() const { return tensor_.out_dtype(); }
  const std::vector<int64_t>& image_shape() const { return tensor_.out_shape(); }
  bool decodes() const { return encoded_; }  // cells are encoded files (not pixels)
  // "decode(rgb) -> random_resized_crop(...) -> ... -> [to_tensor(float32) -> normalize(...)]".
  std::string Describe() const;

  struct Timing {
    int64_t decode_ns = 0;     // header + decode
    int64_t transform_ns = 0;  // everything after the decode
  };
  // One image: `in` is the encoded file (decodes()) or the pixels; `out` gets out_bytes(). The
  // random choices come from the Rng of (seed, epoch, row, column). Errors name no file (the loader
  // adds the file, row and column): the decoder's, InvalidArgument for an image whose size differs
  // from the column's (saying which transform to add), a crop that pads before a resize, or a
  // channel count of a tensor cell. REQUIRES: `in` and `out` do not overlap.
  Status Apply(ByteView in, MutableByteView out, uint64_t seed, int64_t epoch, int64_t row, uint32_t column,
               ImageScratch* scratch, Timing* timing) const;

  // The image part's choices for an image of width x height, as Apply makes them (the decode's DCT
  // scale aside), one per image transform; and the geometry they compose to.
  Result<std::vector<ImageTransformChoice>> Choices(int64_t width, int64_t height, uint64_t seed, int64_t epoch,
                                                    int64_t row, uint32_t column, ImageGeometry* geometry) const;

 private:
  struct Step {
    TransformSpec::Kind kind = TransformSpec::Kind::kResize;
    int64_t height = 0, width = 0;  // random_resized_crop, resize ({s}: width 0), center_crop
    double scale[2] = {0, 0}, log_ratio[2] = {0, 0};
    double p = 0;
    bool brightness = false, contrast = false;
    double brightness_range[2] = {1, 1}, contrast_range[2] = {1, 1};
  };
  // Which kinds of step the image part has so far (one resampling and one color_jitter at most, the
  // jitter last but for flips).
  struct StepOrder {
    bool resampled = false, jittered = false;
  };
  // Create's stages. The input: an encoded image column (options.channels) or a [H, W, C] tensor.
  Status SetInput(const ImagePipelineOptions& options, const std::vector<int64_t>& tensor_shape);
  // Checks one image transform against `order` and the ones before it, adds its Step, and sets
  // `text` to its description.
  Status AddStep(const TransformSpec& s, StepOrder* order, std::string* text);
  static Status ParseResampleStep(const TransformSpec& s, Step* step, std::string* text);
  static Status ParseColorJitterStep(const TransformSpec& s, Step* step, std::string* text);
  // The output's (height, width): fixed by the transforms or the tensor's shape, or the column's
  // uniform size; InvalidArgument when images of several sizes would reach a batch.
  Result<std::pair<int64_t, int64_t>> SetOutputSize(const std::vector<TransformSpec>& specs,
                                                    const std::vector<int64_t>& tensor_shape, bool resampled,
                                                    std::optional<std::pair<int64_t, int64_t>> uniform_size);
  // With for_gpu: checks that the device can run the rest of the chain (no color_jitter; after the
  // image transforms only to_tensor and the elementwise steps fused with it) and sets the record's
  // size and header template.
  Status SetGpuOutput(const StepOrder& order, int64_t out_h, int64_t out_w);
  // Apply's last step with for_gpu: the record for geometry `g` of a width x height image decoded as `src`.
  void WriteGpuRecord(const ImageGeometry& g, const DecodedPixels& src, int32_t width, int32_t height, uint8_t* out,
                      ImageScratch* scratch) const;
  // The tensor transforms after the first image_part, on out_h x out_w images; their errors name
  // their index in the whole list.
  Status SetTensorPart(const std::vector<TransformSpec>& specs, size_t image_part, int64_t out_h, int64_t out_w);
  // The pixels Apply resamples or copies: a tensor cell as it is, or an image decoded for geometry
  // `g` (at a DCT scale, and only the region the geometry reads, when the options allow).
  Result<DecodedPixels> Decode(ByteView in, int32_t width, int32_t height, bool jpeg, const ImageGeometry& g,
                               ImageScratch* scratch) const;
  // PlanGeometry's steps on a cur_w x cur_h window: the choice each makes (drawing from `rng` where
  // it is random, in a fixed order, so that a seed gives the same choices everywhere).
  static void DrawRandomResizedCrop(const Step& s, int64_t cur_w, int64_t cur_h, Rng& rng, ImageTransformChoice* choice);
  static void ResizeChoice(const Step& s, int64_t cur_w, int64_t cur_h, ImageTransformChoice* choice);
  static void CenterCropChoice(const Step& s, int64_t cur_w, int64_t cur_h, ImageTransformChoice* choice);
  static void DrawColorJitter(const Step& s, Rng& rng, ColorJitterChoice* jitter, ImageTransformChoice* choice);
  // Composes the image part for a width x height image, drawing from `rng`; fills `choices` when not
  // null. InvalidArgument for a crop that pads before a resize.
  Status PlanGeometry(int32_t width, int32_t height, Rng& rng, ImageGeometry* g, ColorJitterChoice* jitter,
                      std::vector<ImageTransformChoice>* choices) const;

  std::vector<Step> steps_;
  bool encoded_ = true;
  bool fixes_size_ = false;
  int64_t uniform_height_ = 0, uniform_width_ = 0;  // when !fixes_size_
  int channels_ = 3;
  int32_t tensor_height_ = 0, tensor_width_ = 0;  // a tensor column's [H, W, C]
  bool dct_scaling_ = true;
  bool region_decode_ = true;
  int64_t max_decoded_bytes_ = 0;
  TransformPipeline tensor_;  // the tensor part, on [out_height, out_width, channels] uint8
  bool for_gpu_ = false;
  std::vector<int64_t> gpu_shape_;  // {record bytes}
  GpuImageHeader gpu_header_;       // the fields every record of the column shares
  std::string describe_image_part_;
};

}  // namespace stoke
