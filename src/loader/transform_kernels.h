// The transforms' kernels and checks (transform.h), private to src/loader: the element-wise kernels
// (transform_elementwise.cc), the geometric ones (transform_geometry.cc) and the check of each spec
// against the sample it will see (transform_validate.cc). TransformPipeline (transform.cc) validates
// its steps with them at Create and runs them in Apply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/random.h"
#include "loader/transform.h"
#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke::transform_internal {

// Element-wise kernels over `n` elements (or the step's output shape). Sample bytes come straight
// from pages: src and dst need not be aligned.
void CastElements(DType from, DType to, const uint8_t* src, uint8_t* dst, size_t n);
void NormalizeElements(const Step& step, const uint8_t* src, uint8_t* dst);
// to_tensor: [H, W, C] uint8 to [C, H, W] in the step's output dtype, through step.lut when the
// steps after it were fused into it.
void ToTensorElements(const Step& step, const uint8_t* src, uint8_t* dst);

// A geometric step (flips, rot90, crops, channel moves) as one strided copy of src (src_bytes) into
// dst (dst_bytes), with the random choices it draws from `rng`. False, writing nothing, when the
// copy would be the identity.
bool ApplyGeometricStep(const Step& step, Rng& rng, const uint8_t* src, size_t src_bytes, uint8_t* dst,
                        size_t dst_bytes);

// The bytes of `shape` elements of `dtype` (REQUIRES: they fit; Apply's steps were checked at
// Create), and the same checked: an error when they do not fit in int64.
inline size_t ByteSize(DType dtype, const std::vector<int64_t>& shape) {
  size_t n = DTypeSize(dtype);
  for (int64_t x : shape) n *= static_cast<size_t>(x);
  return n;
}
Result<size_t> CheckedByteSize(DType dtype, const std::vector<int64_t>& shape);
// Whether `dtype` is one of DType's values.
bool IsKnownDType(DType dtype);
// "[1,2.5]" for messages and Describe (the first 8 values, and how many there are).
std::string FormatDoubles(const std::vector<double>& v);
// Validates one spec against the dtype and shape it will see; fills everything of `step` but the
// kind and inputs, and moves *channel_axis (see transform.h) along. Errors carry no transform prefix
// (the caller adds it).
Status ValidateStep(const TransformSpec& spec, Step* step, int* channel_axis);

}  // namespace stoke::transform_internal
