// Per-sample tensor transforms (TransformSpec in stoke/loader.h): casts, normalisation and random or
// fixed geometric moves, applied by the loader's workers to one decoded sample of a tensor column
// (or to the output of an image column's image transforms, loader/image_transform.h) before it is
// collated into a batch. Pure computation, no I/O. The image transforms proper (resize,
// random_resized_crop, color_jitter) are not run here: Create refuses them.
//
// A TransformPipeline is validated once per column (Create) against the sample's dtype and shape, so
// that Apply, which runs per sample, only moves bytes. Every transform reads a C-contiguous,
// little-endian N-d array (1 <= N <= 8) and writes one; geometric transforms (flip, rot90, crop,
// channel moves) are byte moves by element size and work for every dtype.
//
// Randomness. Apply makes one Rng per call:
//
//   h = SplitMix64(SplitMix64(SplitMix64(seed) ^ kTransformStream) + uint64_t(epoch))
//   h = SplitMix64(h + uint64_t(row))
//   h = SplitMix64(h + uint64_t(column))
//   Rng rng(h)                  kTransformStream = 0x7472616e73666f72 ("transfor")
//
// (the sampler derives its streams from (seed, epoch) the same way with other stream constants, so
// the two never share a sequence). The transforms then draw from it in list order:
//   random_flip    one rng.Uniform() per entry of `axes`, in order; that axis is reversed iff u < p
//   random_rot90   one rng.Below(4) = k, the number of quarter turns
//   random_crop    one rng.Below(n) per entry of `axes`, in order: n = extent - size + 1 (the window's
//                  offset) when the axis is at least `size` long, else n = size - extent + 1 (the
//                  offset at which the sample is placed in the zero-padded window)
//   random_horizontal_flip  as random_flip with one axis (the width axis)
//   others         nothing
// An image column's image transforms draw first, from the same Rng (image_transform.h lists their
// draws); the transforms here then continue its sequence.
// A draw is made even when it cannot change anything (p = 0, extent == size), so the sequence seen by
// later transforms depends only on the list of transforms, never on the data or earlier outcomes.
// Changing this derivation or the draw order changes every augmentation: treat it as persisted.
//
// Conventions:
//   rot90 by k    as numpy.rot90(m, k, axes=(a0, a1)): k = 1 turns axis a0 towards axis a1, i.e.
//                 out[.., i, .., j, ..] = m[.., j, .., n-1-i, ..] (i at a0, j at a1 on the left).
//   center_crop   window offset floor((extent - size) / 2); when padding, the sample is placed at
//                 floor((size - extent) / 2). Without axes (an image's height and width, axes 0, 1
//                 of HWC or 1, 2 of CHW): offset round((extent - size) / 2), half to even, as
//                 torchvision's CenterCrop; padding as above.
//   channel axis  normalize's default axis (TransformSpec::kChannelAxis): the last axis, the first
//                 after to_tensor or channels_first, the last again after channels_last.
//   to_tensor     [H, W, C] uint8 to [C, H, W]: float32(x) / 255 in float32, then rounded to the
//                 output dtype. Followed by normalize along the channel axis and casts, the chain
//                 runs as one lookup per element (a table per channel of the chain's value for each
//                 of the 256 inputs, computed by running the chain itself: results are identical).
//   cast          round to nearest even from the exact source value (no double rounding, also for
//                 int32/int64/float64 sources); beyond the largest finite value: +-inf; NaN stays
//                 NaN (quiet, sign and top payload bits kept); bool is 0 or 1.
//   normalize     (x - mean[c]) / std[c] evaluated in double, rounded to float32, and for
//                 float16/bfloat16 outputs then to the output type; float64 stays double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/random.h"
#include "stoke/dtype.h"
#include "stoke/loader.h"
#include "stoke/status.h"

namespace stoke {

// Per-thread working memory of TransformPipeline::Apply; reuse one per worker thread so steady state
// does not allocate (each buffer grows to the largest intermediate result, then stays). Not
// thread-safe: one per thread.
struct TransformScratch {
  AlignedBuffer a, b;
};

// One validated transform of a pipeline with the dtype and shape it reads and writes (axes resolved
// to >= 0). Internal to the implementation; here only because the pipeline holds a vector of them.
namespace transform_internal {
struct Step {
  TransformSpec::Kind kind = TransformSpec::Kind::kCast;
  DType in_dtype = DType::kFloat32, out_dtype = DType::kFloat32;
  std::vector<int64_t> in_shape, out_shape;
  std::vector<int> axes;          // flip, rot90, crops
  std::vector<int64_t> size;      // crops, one per axis
  int axis = 0;                   // normalize, channel moves
  double p = 0;                   // flip
  std::vector<double> mean, std;  // normalize, expanded to one entry per channel
  bool torchvision_center = false; // center_crop without axes: offsets rounded half to even
  // to_tensor fused with the elementwise steps after it: per channel, 256 output elements (out_dtype).
  std::vector<uint8_t> lut;
  std::string fused;               // the fused steps, for Describe
};
}  // namespace transform_internal

// A validated chain of TransformSpecs for one tensor column of known input dtype and shape.
// Immutable after Create; Apply is const and thread-safe (scratch must not be shared between threads).
class TransformPipeline {
 public:
  // Most dimensions a sample may have when the pipeline has transforms.
  static constexpr int kMaxRank = 8;

  // A placeholder until a Create result is assigned: no transforms, no sample (in_bytes() == 0).
  TransformPipeline() = default;

  // Validates every spec against the shape/dtype it will see (after the previous transforms) and
  // computes the output dtype and shape. InvalidArgument naming the transform (index and kind, e.g.
  // "transforms[2] (random_crop): axis 5 out of range for a 4-d sample") for: a cast to anything but
  // float32/float16/bfloat16; normalize with empty mean/std, sizes that are neither 1 nor the channel
  // extent, a std of 0, a non-finite mean or std, or a bool input; axes out of range or repeated, or
  // an empty axis list (flip, crop); rot90 without exactly two distinct axes or with unequal extents;
  // crop size count != axes count or size < 1; p outside [0, 1]. Also InvalidArgument for a negative
  // extent, a sample of more than kMaxRank dimensions (or of 0 dimensions when there are transforms),
  // a byte size that overflows, or an unknown dtype or kind.
  static Result<TransformPipeline> Create(const std::vector<TransformSpec>& specs, DType in_dtype,
                                          std::vector<int64_t> in_shape) {
    return Create(specs, in_dtype, std::move(in_shape), /*fuse=*/true);
  }
  // `fuse` false keeps to_tensor unfused (what the fused lookup tables are computed with).
  static Result<TransformPipeline> Create(const std::vector<TransformSpec>& specs, DType in_dtype,
                                          std::vector<int64_t> in_shape, bool fuse);

  bool empty() const { return steps_.empty(); }  // no transforms: output == input
  DType in_dtype() const { return in_dtype_; }
  const std::vector<int64_t>& in_shape() const { return in_shape_; }
  DType out_dtype() const { return out_dtype_; }
  const std::vector<int64_t>& out_shape() const { return out_shape_; }
  size_t in_bytes() const { return in_bytes_; }
  size_t out_bytes() const { return out_bytes_; }
  // The lookup table when the pipeline is exactly one to_tensor fused with the elementwise steps after
  // it (out[c, i] = table[c][in[i, c]]: per channel 256 elements of out_dtype); null otherwise.
  const std::vector<uint8_t>* FusedLookup() const;

  // Transforms one sample: `in` holds in_bytes() bytes (C-contiguous, little-endian, in_dtype, in_shape),
  // `out` receives out_bytes() bytes. The random choices come from one Rng per (seed, epoch, row,
  // column), derived and drawn as described at the top of this file, so results are identical across
  // runs, threads and ranks. InvalidArgument when in/out sizes are wrong, or when `scratch` is null
  // and the pipeline has more than one transform.
  // REQUIRES: `in` and `out` do not overlap. Allocates only while `scratch` grows to its working size.
  Status Apply(ByteView in, MutableByteView out, uint64_t seed, int64_t epoch, int64_t row, uint32_t column,
               TransformScratch* scratch) const;
  // As Apply, drawing from `rng` (positioned after the draws of an image column's image transforms).
  Status ApplyWithRng(ByteView in, MutableByteView out, Rng& rng, TransformScratch* scratch) const;

  // A short text of the chain, e.g. "cast(float16) -> random_flip(axes=[0,1], p=0.5)", for logs
  // (axes as resolved: non-negative). "identity" for an empty pipeline.
  std::string Describe() const;

 private:
  DType in_dtype_ = DType::kFloat32, out_dtype_ = DType::kFloat32;
  std::vector<int64_t> in_shape_, out_shape_;
  size_t in_bytes_ = 0, out_bytes_ = 0;
  size_t max_scratch_bytes_ = 0;  // the largest intermediate result (outputs of all but the last step)
  std::vector<transform_internal::Step> steps_;
};

// The seed of the one Rng a sample's transforms draw from (see the top of this file).
uint64_t TransformSeed(uint64_t seed, int64_t epoch, int64_t row, uint32_t column);


}  // namespace stoke
