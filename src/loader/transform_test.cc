#include "loader/transform.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/random.h"
#include "core/small_float.h"
#include "core/small_float_testing.h"
#include "stoke/status.h"

namespace stoke {
namespace {

using testing_support::RefRoundSmallFloat;
using testing_support::SmallFloatValue;

using Kind = TransformSpec::Kind;

// ---------------------------------------------------------------------------------------------
// Naive references: per element index arithmetic, values through double. Nothing here shares code
// with transform*.cc. (The 16-bit float conversions are tested in core/small_float_test.cc.)

constexpr DType kAllDTypes[] = {DType::kBool,   DType::kInt8,    DType::kInt16,   DType::kInt32, DType::kInt64,
                                DType::kUInt8,  DType::kUInt16,  DType::kUInt32,  DType::kUInt64, DType::kFloat16,
                                DType::kFloat32, DType::kFloat64, DType::kBFloat16};

struct Tensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t x : shape) n *= x;
  return n;
}

std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t Ravel(const std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + index[d];
  return flat;
}

double ElementValue(const Tensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data() + i * DTypeSize(t.dtype);
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t.dtype) {
    case DType::kBool: return load(uint8_t{}) != 0 ? 1 : 0;
    case DType::kInt8: return load(int8_t{});
    case DType::kInt16: return load(int16_t{});
    case DType::kInt32: return load(int32_t{});
    case DType::kInt64: return static_cast<double>(load(int64_t{}));
    case DType::kUInt8: return load(uint8_t{});
    case DType::kUInt16: return load(uint16_t{});
    case DType::kUInt32: return load(uint32_t{});
    case DType::kUInt64: return static_cast<double>(load(uint64_t{}));
    case DType::kFloat16: return SmallFloatValue(load(uint16_t{}), false);
    case DType::kFloat32: return load(float{});
    case DType::kFloat64: return load(double{});
    case DType::kBFloat16: return SmallFloatValue(load(uint16_t{}), true);
  }
  return 0;
}

// Stores x (exact in the type for integers) as element i, rounding for the float types.
void StoreElement(Tensor& t, int64_t i, double x) {
  uint8_t* p = t.bytes.data() + i * DTypeSize(t.dtype);
  auto store = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
  switch (t.dtype) {
    case DType::kBool: store(static_cast<uint8_t>(x != 0)); break;
    case DType::kInt8: store(static_cast<int8_t>(x)); break;
    case DType::kInt16: store(static_cast<int16_t>(x)); break;
    case DType::kInt32: store(static_cast<int32_t>(x)); break;
    case DType::kInt64: store(static_cast<int64_t>(x)); break;
    case DType::kUInt8: store(static_cast<uint8_t>(x)); break;
    case DType::kUInt16: store(static_cast<uint16_t>(x)); break;
    case DType::kUInt32: store(static_cast<uint32_t>(x)); break;
    case DType::kUInt64: store(static_cast<uint64_t>(x)); break;
    case DType::kFloat16: store(RefRoundSmallFloat(x, false)); break;
    case DType::kFloat32: store(static_cast<float>(x)); break;
    case DType::kFloat64: store(x); break;
    case DType::kBFloat16: store(RefRoundSmallFloat(x, true)); break;
  }
}

// A tensor of varied values representable in `dtype` (negative ones for signed types and floats).
Tensor MakeTensor(DType dtype, std::vector<int64_t> shape, uint64_t seed = 1) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t n = NumElements(t.shape);
  t.bytes.assign(static_cast<size_t>(n) * DTypeSize(dtype), 0);
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    double v;
    switch (dtype) {
      case DType::kBool: v = static_cast<double>(rng.Below(2)); break;
      case DType::kUInt8: v = static_cast<double>(rng.Below(256)); break;
      case DType::kInt8: v = static_cast<double>(rng.Below(256)) - 128; break;
      case DType::kUInt16: v = static_cast<double>(rng.Below(65536)); break;
      case DType::kUInt32: case DType::kUInt64: v = static_cast<double>(rng.Below(70000)); break;
      case DType::kInt16: v = static_cast<double>(rng.Below(65536)) - 32768; break;
      case DType::kInt32: case DType::kInt64: v = static_cast<double>(rng.Below(200000)) - 100000; break;
      default: v = (rng.Uniform() - 0.5) * std::ldexp(1.0, static_cast<int>(rng.Below(24)) - 12); break;
    }
    StoreElement(t, i, v);
  }
  return t;
}

// out element at index o comes from input index source(o), or is 0 when source gives nothing.
Tensor Gather(const Tensor& in, std::vector<int64_t> out_shape,
              const std::function<std::optional<std::vector<int64_t>>(const std::vector<int64_t>&)>& source) {
  Tensor out;
  out.dtype = in.dtype;
  out.shape = std::move(out_shape);
  const size_t elem = DTypeSize(in.dtype);
  out.bytes.assign(static_cast<size_t>(NumElements(out.shape)) * elem, 0);
  for (int64_t i = 0; i < NumElements(out.shape); ++i) {
    const auto from = source(Unravel(i, out.shape));
    if (from) std::memcpy(&out.bytes[i * elem], &in.bytes[Ravel(*from, in.shape) * elem], elem);
  }
  return out;
}

Tensor RefFlipAxis(const Tensor& t, int axis) {
  return Gather(t, t.shape, [&](const std::vector<int64_t>& o) {
    auto i = o;
    i[axis] = t.shape[axis] - 1 - o[axis];
    return std::optional(i);
  });
}

Tensor RefSwapAxes(const Tensor& t, int a0, int a1) {
  auto shape = t.shape;
  std::swap(shape[a0], shape[a1]);
  return Gather(t, shape, [&](const std::vector<int64_t>& o) {
    auto i = o;
    std::swap(i[a0], i[a1]);
    return std::optional(i);
  });
}

// numpy.rot90 (numpy/lib/function_base.py) transcribed: k=1 transpose(flip(m, a1)), k=2 flip both,
// k=3 flip(transpose(m), a1), the transpose swapping a0 and a1.
Tensor RefRot90(const Tensor& t, int k, int a0, int a1) {
  switch (k) {
    case 1: return RefSwapAxes(RefFlipAxis(t, a1), a0, a1);
    case 2: return RefFlipAxis(RefFlipAxis(t, a0), a1);
    case 3: return RefFlipAxis(RefSwapAxes(t, a0, a1), a1);
    default: return t;
  }
}

// offset[i] >= 0: the window starts there; < 0: the sample is placed at -offset[i] in the window.
Tensor RefCrop(const Tensor& t, const std::vector<int>& axes, const std::vector<int64_t>& size,
               const std::vector<int64_t>& offset) {
  auto shape = t.shape;
  for (size_t i = 0; i < axes.size(); ++i) shape[axes[i]] = size[i];
  return Gather(t, shape, [&](const std::vector<int64_t>& o) -> std::optional<std::vector<int64_t>> {
    auto i = o;
    for (size_t k = 0; k < axes.size(); ++k) {
      i[axes[k]] = o[axes[k]] + offset[k];
      if (i[axes[k]] < 0 || i[axes[k]] >= t.shape[axes[k]]) return std::nullopt;
    }
    return i;
  });
}

// numpy.moveaxis(t, from, to).
Tensor RefMoveAxis(const Tensor& t, int from, int to) {
  std::vector<int> order;  // out dimension d is input dimension order[d]
  for (int d = 0; d < static_cast<int>(t.shape.size()); ++d) if (d != from) order.push_back(d);
  order.insert(order.begin() + to, from);
  std::vector<int64_t> shape;
  for (int d : order) shape.push_back(t.shape[d]);
  return Gather(t, shape, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o.size());
    for (size_t d = 0; d < o.size(); ++d) i[order[d]] = o[d];
    return std::optional(i);
  });
}

Tensor RefCast(const Tensor& t, DType to) {
  Tensor out;
  out.dtype = to;
  out.shape = t.shape;
  out.bytes.assign(static_cast<size_t>(NumElements(t.shape)) * DTypeSize(to), 0);
  for (int64_t i = 0; i < NumElements(t.shape); ++i) StoreElement(out, i, ElementValue(t, i));
  return out;
}

Tensor RefNormalize(const Tensor& t, int axis, const std::vector<double>& mean, const std::vector<double>& std) {
  Tensor out;
  out.dtype = t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16 || t.dtype == DType::kFloat64
                  ? t.dtype : DType::kFloat32;
  out.shape = t.shape;
  out.bytes.assign(static_cast<size_t>(NumElements(t.shape)) * DTypeSize(out.dtype), 0);
  for (int64_t i = 0; i < NumElements(t.shape); ++i) {
    const size_t c = static_cast<size_t>(Unravel(i, t.shape)[axis]);
    const double y = (ElementValue(t, i) - mean[mean.size() == 1 ? 0 : c]) / std[std.size() == 1 ? 0 : c];
    StoreElement(out, i, out.dtype == DType::kFloat64 ? y : static_cast<double>(static_cast<float>(y)));
  }
  return out;
}

// The derivation written in transform.h.
uint64_t DocumentedSeed(uint64_t seed, int64_t epoch, int64_t row, uint32_t column) {
  uint64_t h = SplitMix64(SplitMix64(SplitMix64(seed) ^ 0x7472616e73666f72ULL) + static_cast<uint64_t>(epoch));
  h = SplitMix64(h + static_cast<uint64_t>(row));
  return SplitMix64(h + column);
}

// to_tensor by definition: [H, W, C] uint8 to [C, H, W] of float32(x) / 255 in `to`.
Tensor RefToTensor(const Tensor& t, DType to) {
  Tensor f;
  f.dtype = DType::kFloat32;
  f.shape = t.shape;
  f.bytes.assign(t.bytes.size() * 4, 0);
  for (size_t i = 0; i < t.bytes.size(); ++i) {
    const float v = static_cast<float>(t.bytes[i]) / 255.0f;
    std::memcpy(f.bytes.data() + i * 4, &v, 4);
  }
  f = RefMoveAxis(f, 2, 0);
  return to == DType::kFloat32 ? f : RefCast(f, to);
}

// The whole chain by the references, drawing as documented in transform.h; the channel axis (normalize's
// default) tracked as documented there.
Tensor RefApply(const std::vector<TransformSpec>& specs, Tensor t, uint64_t seed, int64_t epoch, int64_t row,
                uint32_t column) {
  Rng rng(DocumentedSeed(seed, epoch, row, column));
  int channel_axis = static_cast<int>(t.shape.size()) - 1;
  for (const TransformSpec& s : specs) {
    const int rank = static_cast<int>(t.shape.size());
    auto resolve = [rank](int a) { return a < 0 ? a + rank : a; };
    std::vector<int> axes;
    for (int a : s.axes) axes.push_back(resolve(a));
    switch (s.kind) {
      case Kind::kCast: t = RefCast(t, s.dtype); break;
      case Kind::kNormalize:
        t = RefNormalize(t, s.axis == TransformSpec::kChannelAxis ? channel_axis : resolve(s.axis), s.mean, s.std);
        break;
      case Kind::kRandomFlip:
        for (int a : axes) if (rng.Uniform() < s.p) t = RefFlipAxis(t, a);
        break;
      case Kind::kRandomHorizontalFlip:
        if (rng.Uniform() < s.p) t = RefFlipAxis(t, channel_axis == 0 ? 2 : 1);
        break;
      case Kind::kRandomRot90: t = RefRot90(t, static_cast<int>(rng.Below(4)), axes[0], axes[1]); break;
      case Kind::kRandomCrop:
      case Kind::kCenterCrop: {
        std::vector<int64_t> size = s.size;
        const bool image = s.axes.empty();  // an image's height and width, torchvision's offsets
        if (image) {
          axes = channel_axis == 0 ? std::vector<int>{1, 2} : std::vector<int>{0, 1};
          size = {s.size[0], s.size.back()};
        }
        std::vector<int64_t> offset;
        for (size_t i = 0; i < axes.size(); ++i) {
          const int64_t n = t.shape[axes[i]];
          const bool random = s.kind == Kind::kRandomCrop;
          if (n >= size[i]) {
            const int64_t centred = image ? static_cast<int64_t>(std::nearbyint((n - size[i]) / 2.0)) : (n - size[i]) / 2;
            offset.push_back(random ? static_cast<int64_t>(rng.Below(n - size[i] + 1)) : centred);
          } else {
            offset.push_back(-(random ? static_cast<int64_t>(rng.Below(size[i] - n + 1)) : (size[i] - n) / 2));
          }
        }
        t = RefCrop(t, axes, size, offset);
        break;
      }
      case Kind::kChannelsFirst:
        t = RefMoveAxis(t, resolve(s.axis), 0);
        channel_axis = 0;
        break;
      case Kind::kChannelsLast:
        t = RefMoveAxis(t, resolve(s.axis), rank - 1);
        channel_axis = rank - 1;
        break;
      case Kind::kToTensor:
        t = RefToTensor(t, s.dtype);
        channel_axis = 0;
        break;
      case Kind::kRandomResizedCrop:
      case Kind::kResize:
      case Kind::kColorJitter:
        ADD_FAILURE() << "not a tensor transform";
        break;
    }
  }
  return t;
}

TransformPipeline MakePipeline(const std::vector<TransformSpec>& specs, DType dtype, std::vector<int64_t> shape) {
  Result<TransformPipeline> p = TransformPipeline::Create(specs, dtype, std::move(shape));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : TransformPipeline();
}

Tensor RunPipeline(const TransformPipeline& p, const Tensor& in, uint64_t seed = 7, int64_t epoch = 0,
                   int64_t row = 0, uint32_t column = 0, TransformScratch* scratch = nullptr) {
  TransformScratch local;
  Tensor out;
  out.dtype = p.out_dtype();
  out.shape = p.out_shape();
  out.bytes.assign(p.out_bytes(), 0xAB);
  Status s = p.Apply(in.bytes, out.bytes, seed, epoch, row, column, scratch ? scratch : &local);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

// Applies `specs` to `in` with the pipeline and with the references and expects identical bytes.
void ExpectMatchesReference(const std::vector<TransformSpec>& specs, const Tensor& in, uint64_t seed, int64_t epoch,
                            int64_t row, uint32_t column = 0) {
  TransformPipeline p = MakePipeline(specs, in.dtype, in.shape);
  const Tensor want = RefApply(specs, in, seed, epoch, row, column);
  const Tensor got = RunPipeline(p, in, seed, epoch, row, column);
  ASSERT_EQ(got.dtype, want.dtype) << p.Describe();
  ASSERT_EQ(got.shape, want.shape) << p.Describe();
  ASSERT_EQ(got.bytes, want.bytes) << p.Describe() << " dtype " << DTypeName(in.dtype) << " row " << row;
}

std::vector<uint8_t> ApplyBytes(const TransformPipeline& p, const std::vector<uint8_t>& in, uint64_t seed, int64_t epoch,
                                int64_t row, uint32_t column = 0) {
  std::vector<uint8_t> out(p.out_bytes());
  TransformScratch scratch;
  EXPECT_TRUE(p.Apply(in, out, seed, epoch, row, column, &scratch).ok());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Scalar conversions.

TEST(TransformCast, EveryDtypeMatchesReference) {
  for (DType from : kAllDTypes) {
    const Tensor in = MakeTensor(from, {3, 5, 7}, static_cast<uint64_t>(from) + 10);
    for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      SCOPED_TRACE(std::string(DTypeName(from)) + " -> " + std::string(DTypeName(to)));
      ExpectMatchesReference({TransformSpec::Cast(to)}, in, 0, 0, 0);
    }
  }
}

// Wide integers and doubles convert with one rounding from the exact value.
TEST(TransformCast, WideValuesRoundOnce) {
  auto cast_one = [](DType from, const void* value, DType to) {
    TransformPipeline p = MakePipeline({TransformSpec::Cast(to)}, from, {1});
    std::vector<uint8_t> in(DTypeSize(from));
    std::memcpy(in.data(), value, in.size());
    std::vector<uint8_t> out = ApplyBytes(p, in, 0, 0, 0);
    uint16_t bits = 0;
    std::memcpy(&bits, out.data(), 2);
    return bits;
  };
  const int32_t i32 = (1 << 25) + (1 << 17) + 1;  // just above a bfloat16 tie; float32 rounds it onto the tie
  EXPECT_EQ(cast_one(DType::kInt32, &i32, DType::kBFloat16), 0x4c01);
  const int64_t i64 = (int64_t{1} << 62) + (int64_t{1} << 54) + 1;  // likewise through double
  EXPECT_EQ(cast_one(DType::kInt64, &i64, DType::kBFloat16), 0x5e81);
  const int64_t i64_min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(cast_one(DType::kInt64, &i64_min, DType::kBFloat16), 0xdf00);
  const uint64_t u64_max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(cast_one(DType::kUInt64, &u64_max, DType::kBFloat16), 0x5f80);
  EXPECT_EQ(cast_one(DType::kUInt64, &u64_max, DType::kFloat16), 0x7c00);
  const int32_t big = -70000, max_half = 65519, over = 65520;
  EXPECT_EQ(cast_one(DType::kInt32, &big, DType::kFloat16), 0xfc00);
  EXPECT_EQ(cast_one(DType::kInt32, &max_half, DType::kFloat16), 0x7bff);
  EXPECT_EQ(cast_one(DType::kInt32, &over, DType::kFloat16), 0x7c00);
  const double d = 1.0 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(cast_one(DType::kFloat64, &d, DType::kFloat16), 0x3c01);
  const uint8_t truthy = 7;  // any non-zero bool byte is true
  EXPECT_EQ(cast_one(DType::kBool, &truthy, DType::kFloat16), 0x3c00);
}

// ---------------------------------------------------------------------------------------------
// Per-kind behaviour against the references.

TEST(TransformNormalize, MatchesReference) {
  for (DType dtype : {DType::kUInt8, DType::kInt16, DType::kInt64, DType::kUInt32, DType::kFloat16, DType::kFloat32,
                      DType::kFloat64, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor in = MakeTensor(dtype, {3, 4, 5});
    ExpectMatchesReference({TransformSpec::Normalize({0.5, -1, 2, 3.25}, {0.25, 2, -3, 7}, 1)}, in, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::Normalize({0.5}, {3}, -1)}, in, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::Normalize({1, 2, 3}, {4}, 0)}, in, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::Normalize({1}, {1, 2, 3, 4, 5}, 2)}, in, 0, 0, 0);
  }
}

TEST(TransformNormalize, OutputDtype) {
  auto out_dtype = [](DType in) {
    return MakePipeline({TransformSpec::Normalize({1}, {2})}, in, {2, 3}).out_dtype();
  };
  EXPECT_EQ(out_dtype(DType::kUInt8), DType::kFloat32);
  EXPECT_EQ(out_dtype(DType::kInt64), DType::kFloat32);
  EXPECT_EQ(out_dtype(DType::kFloat32), DType::kFloat32);
  EXPECT_EQ(out_dtype(DType::kFloat16), DType::kFloat16);
  EXPECT_EQ(out_dtype(DType::kBFloat16), DType::kBFloat16);
  EXPECT_EQ(out_dtype(DType::kFloat64), DType::kFloat64);
  // A known value: (200 - 100) / 50 = 2.
  TransformPipeline p = MakePipeline({TransformSpec::Normalize({100}, {50})}, DType::kUInt8, {1});
  std::vector<uint8_t> out = ApplyBytes(p, {200}, 0, 0, 0);
  float f;
  std::memcpy(&f, out.data(), 4);
  EXPECT_EQ(f, 2.0f);
}

TEST(TransformFlip, AlwaysAndNeverMatchReference) {
  for (DType dtype : {DType::kUInt8, DType::kInt16, DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const Tensor in = MakeTensor(dtype, {3, 5, 7});
    for (const std::vector<int>& axes : std::vector<std::vector<int>>{{0}, {1}, {2}, {-1}, {0, 2}, {2, 0, 1}}) {
      ExpectMatchesReference({TransformSpec::RandomFlip(axes, 1.0)}, in, 0, 0, 0);
      TransformPipeline never = MakePipeline({TransformSpec::RandomFlip(axes, 0.0)}, dtype, in.shape);
      TransformPipeline always = MakePipeline({TransformSpec::RandomFlip(axes, 1.0)}, dtype, in.shape);
      Tensor flipped = in;
      for (int a : axes) flipped = RefFlipAxis(flipped, a < 0 ? a + 3 : a);
      for (int64_t row = 0; row < 20; ++row) {
        EXPECT_EQ(RunPipeline(never, in, 1, 0, row).bytes, in.bytes);
        EXPECT_EQ(RunPipeline(always, in, 1, 0, row).bytes, flipped.bytes);
      }
    }
  }
}

TEST(TransformFlip, RandomFlipsMatchDocumentedDraws) {
  const Tensor in = MakeTensor(DType::kFloat32, {5, 3, 4});
  for (int64_t row = 0; row < 40; ++row) ExpectMatchesReference({TransformSpec::RandomFlip({0, 2}, 0.5)}, in, 11, 3, row, 2);
}

TEST(TransformRot90, MatchesNumpyValues) {
  // numpy.rot90(np.arange(18).reshape(2, 3, 3), k, axes=(1, 2)).ravel() for k = 0..3.
  const std::vector<std::vector<int32_t>> want12 = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {2, 5, 8, 1, 4, 7, 0, 3, 6, 11, 14, 17, 10, 13, 16, 9, 12, 15},
      {8, 7, 6, 5, 4, 3, 2, 1, 0, 17, 16, 15, 14, 13, 12, 11, 10, 9},
      {6, 3, 0, 7, 4, 1, 8, 5, 2, 15, 12, 9, 16, 13, 10, 17, 14, 11}};
  // numpy.rot90(np.arange(18).reshape(3, 3, 2), k, axes=(1, 0)).ravel().
  const std::vector<std::vector<int32_t>> want10 = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {12, 13, 6, 7, 0, 1, 14, 15, 8, 9, 2, 3, 16, 17, 10, 11, 4, 5},
      {16, 17, 14, 15, 12, 13, 10, 11, 8, 9, 6, 7, 4, 5, 2, 3, 0, 1},
      {4, 5, 10, 11, 16, 17, 2, 3, 8, 9, 14, 15, 0, 1, 6, 7, 12, 13}};
  struct Setup {
    std::vector<int64_t> shape;
    int a0, a1;
    const std::vector<std::vector<int32_t>>* want;
  };
  for (const Setup& s : {Setup{{2, 3, 3}, 1, 2, &want12}, Setup{{3, 3, 2}, 1, 0, &want10}}) {
    Tensor in;
    in.dtype = DType::kInt32;
    in.shape = s.shape;
    in.bytes.resize(18 * 4);
    for (int32_t i = 0; i < 18; ++i) std::memcpy(&in.bytes[i * 4], &i, 4);
    // The references reproduce numpy...
    for (int k = 0; k < 4; ++k) {
      const Tensor r = RefRot90(in, k, s.a0, s.a1);
      std::vector<int32_t> got(18);
      std::memcpy(got.data(), r.bytes.data(), 72);
      EXPECT_EQ(got, (*s.want)[k]) << "reference k=" << k;
    }
    // ...and the pipeline reproduces numpy for whichever k a row draws; every k occurs.
    TransformPipeline p = MakePipeline({TransformSpec::RandomRot90(s.a0, s.a1)}, DType::kInt32, s.shape);
    std::set<int> seen;
    for (int64_t row = 0; row < 64; ++row) {
      Rng rng(DocumentedSeed(5, 1, row, 0));
      const int k = static_cast<int>(rng.Below(4));
      const Tensor out = RunPipeline(p, in, 5, 1, row);
      std::vector<int32_t> got(18);
      std::memcpy(got.data(), out.bytes.data(), 72);
      EXPECT_EQ(got, (*s.want)[k]) << "row " << row << " k=" << k;
      seen.insert(k);
    }
    EXPECT_EQ(seen.size(), 4u);
  }
}

TEST(TransformRot90, MatchesReferenceAcrossDtypesAndAxes) {
  for (DType dtype : {DType::kBool, DType::kFloat16, DType::kFloat32, DType::kUInt64}) {
    const Tensor in = MakeTensor(dtype, {5, 3, 5, 2});
    for (auto [a0, a1] : std::vector<std::pair<int, int>>{{0, 2}, {2, 0}, {-2, 0}}) {
      for (int64_t row = 0; row < 12; ++row) ExpectMatchesReference({TransformSpec::RandomRot90(a0, a1)}, in, 9, 0, row);
    }
  }
}

TEST(TransformCrop, RandomCropMatchesReference) {
  for (DType dtype : {DType::kUInt8, DType::kFloat16, DType::kFloat32, DType::kInt64}) {
    const Tensor in = MakeTensor(dtype, {7, 5, 3});
    for (int64_t row = 0; row < 16; ++row) {
      ExpectMatchesReference({TransformSpec::RandomCrop({0, 1}, {3, 4})}, in, 2, 0, row);
      ExpectMatchesReference({TransformSpec::RandomCrop({-1}, {2})}, in, 2, 0, row);
      // Padding: axis 2 is shorter than its window; axis 0 crops, axis 1 pads.
      ExpectMatchesReference({TransformSpec::RandomCrop({2}, {6})}, in, 2, 0, row);
      ExpectMatchesReference({TransformSpec::RandomCrop({1, 0}, {9, 4})}, in, 2, 0, row);
    }
  }
}

TEST(TransformCrop, CenterCropAndPadPositions) {
  Tensor in;
  in.dtype = DType::kUInt8;
  in.shape = {5};
  in.bytes = {1, 2, 3, 4, 5};
  auto run = [&](int64_t size) { return RunPipeline(MakePipeline({TransformSpec::CenterCrop({0}, {size})}, DType::kUInt8, {5}), in).bytes; };
  EXPECT_EQ(run(3), (std::vector<uint8_t>{2, 3, 4}));
  EXPECT_EQ(run(2), (std::vector<uint8_t>{2, 3}));  // offset floor(3 / 2) = 1
  EXPECT_EQ(run(5), in.bytes);
  EXPECT_EQ(run(8), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 0, 0}));  // placed at floor(3 / 2) = 1
  EXPECT_EQ(run(7), (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 0}));
  const Tensor in3 = MakeTensor(DType::kFloat32, {6, 3, 4});
  ExpectMatchesReference({TransformSpec::CenterCrop({0, 1, 2}, {3, 6, 4})}, in3, 0, 0, 0);
}

TEST(TransformCrop, ImageCenterCropRoundsHalfToEvenAsTorchvision) {
  // torchvision: top = int(round((h - th) / 2.0)): differences 1, 3, 5, 7 give 0, 2, 2, 4.
  for (int64_t h : {9, 11, 13, 15}) {
    Tensor in = MakeTensor(DType::kUInt8, {h, 4, 3});
    TransformPipeline p = MakePipeline({TransformSpec::ImageCenterCrop({8, 4})}, DType::kUInt8, {h, 4, 3});
    const Tensor out = RunPipeline(p, in);
    const int64_t top = static_cast<int64_t>(std::nearbyint((h - 8) / 2.0));
    EXPECT_EQ(std::vector<uint8_t>(out.bytes.begin(), out.bytes.begin() + 12),
              std::vector<uint8_t>(in.bytes.begin() + top * 12, in.bytes.begin() + top * 12 + 12)) << h;
    ExpectMatchesReference({TransformSpec::ImageCenterCrop({8, 4})}, in, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::ImageCenterCrop({12})}, in, 0, 0, 0);  // pads the width
  }
  // After to_tensor the crop works on [C, H, W].
  ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::ImageCenterCrop({3, 5})},
                         MakeTensor(DType::kUInt8, {6, 8, 3}), 0, 0, 0);
}

TEST(TransformImageTensor, ToTensorNormalizeAndCastMatchTheUnfusedDefinition) {
  // The fused lookup must give exactly what the definition gives, for every dtype and chain shape.
  const Tensor img = MakeTensor(DType::kUInt8, {5, 7, 3});
  const std::vector<double> mean = {0.485, 0.456, 0.406}, std = {0.229, 0.224, 0.225};
  for (DType to : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    ExpectMatchesReference({TransformSpec::ToTensor(to)}, img, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::ToTensor(to), TransformSpec::Normalize(mean, std)}, img, 0, 0, 0);
    ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::Normalize(mean, std), TransformSpec::Cast(to)}, img,
                           0, 0, 0);
  }
  // Not fused (a normalize along another axis), still the definition.
  ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::Normalize({0.5}, {0.25}, 1)}, img, 0, 0, 0);
  ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::RandomHorizontalFlip(1.0),
                          TransformSpec::Normalize(mean, std)}, img, 0, 0, 3);
  // Gray and RGBA images.
  ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::Normalize({0.5}, {0.5})},
                         MakeTensor(DType::kUInt8, {4, 3, 1}), 0, 0, 0);
  ExpectMatchesReference({TransformSpec::ToTensor(DType::kFloat16), TransformSpec::Normalize({0.1, 0.2, 0.3, 0.4}, {1})},
                         MakeTensor(DType::kUInt8, {4, 3, 4}), 0, 0, 0);
  // The values of the definition: 255 is 1.0, and (1 - 0.485) / 0.229 for channel 0.
  Tensor white;
  white.dtype = DType::kUInt8;
  white.shape = {1, 1, 3};
  white.bytes = {255, 0, 51};
  const Tensor t = RunPipeline(MakePipeline({TransformSpec::ToTensor()}, DType::kUInt8, {1, 1, 3}), white);
  float v[3];
  std::memcpy(v, t.bytes.data(), 12);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 51.0f / 255.0f);
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 1, 1}));
}

TEST(TransformImageTensor, NormalizeDefaultsToTheChannelAxis) {
  // Last axis for tensors; the first after to_tensor or channels_first; the last after channels_last.
  EXPECT_EQ(MakePipeline({TransformSpec::ChannelsFirst(), TransformSpec::Normalize({1, 2, 3}, {1})}, DType::kUInt8,
                         {4, 5, 3}).out_shape(), (std::vector<int64_t>{3, 4, 5}));
  ExpectMatchesReference({TransformSpec::ChannelsFirst(), TransformSpec::Normalize({1, 2, 3}, {1})},
                         MakeTensor(DType::kUInt8, {4, 5, 3}), 0, 0, 0);
  ExpectMatchesReference({TransformSpec::ChannelsFirst(), TransformSpec::ChannelsLast(),
                          TransformSpec::Normalize({1, 2, 3}, {1})}, MakeTensor(DType::kUInt8, {4, 5, 3}), 0, 0, 0);
  ExpectMatchesReference({TransformSpec::Normalize({1, 2, 3, 4, 5}, {2})}, MakeTensor(DType::kFloat32, {2, 5}), 0, 0, 0);
}

TEST(TransformImageTensor, HorizontalFlipMirrorsTheWidthAxis) {
  for (int64_t row = 0; row < 8; ++row) {
    ExpectMatchesReference({TransformSpec::RandomHorizontalFlip()}, MakeTensor(DType::kUInt8, {3, 4, 3}), 1, 0, row);
    ExpectMatchesReference({TransformSpec::ToTensor(), TransformSpec::RandomHorizontalFlip()},
                           MakeTensor(DType::kUInt8, {3, 4, 3}), 1, 0, row);
  }
}

TEST(TransformCrop, PaddedOffsetsCoverEveryPlacement) {
  TransformPipeline p = MakePipeline({TransformSpec::RandomCrop({0}, {4})}, DType::kUInt8, {2});
  std::set<std::vector<uint8_t>> seen;
  for (int64_t row = 0; row < 100; ++row) seen.insert(ApplyBytes(p, {7, 9}, 0, 0, row));
  EXPECT_EQ(seen, (std::set<std::vector<uint8_t>>{{7, 9, 0, 0}, {0, 7, 9, 0}, {0, 0, 7, 9}}));
}

TEST(TransformChannels, MovesMatchReference) {
  for (DType dtype : {DType::kInt8, DType::kUInt16, DType::kFloat32, DType::kFloat64}) {
    const Tensor in = MakeTensor(dtype, {3, 5, 2, 7});
    for (int axis : {-1, 0, 1, 2, 3, -3}) {
      ExpectMatchesReference({TransformSpec::ChannelsFirst(axis)}, in, 0, 0, 0);
      ExpectMatchesReference({TransformSpec::ChannelsLast(axis)}, in, 0, 0, 0);
    }
  }
  EXPECT_EQ(MakePipeline({TransformSpec::ChannelsFirst()}, DType::kUInt8, {4, 6, 3}).out_shape(),
            (std::vector<int64_t>{3, 4, 6}));
  EXPECT_EQ(MakePipeline({TransformSpec::ChannelsLast()}, DType::kUInt8, {3, 4, 6}).out_shape(),
            (std::vector<int64_t>{4, 6, 3}));
}

// Random valid chains on random small shapes and dtypes, against the references.
TEST(TransformPipelineTest, RandomChainsMatchReference) {
  Rng rng(2024);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng.Below(4));
    std::vector<int64_t> shape;
    for (int d = 0; d < rank; ++d) shape.push_back(1 + static_cast<int64_t>(rng.Below(6)));
    const DType dtype = kAllDTypes[rng.Below(std::size(kAllDTypes))];
    std::vector<TransformSpec> specs;
    std::vector<int64_t> cur = shape;
    DType cur_dtype = dtype;
    const int n = 1 + static_cast<int>(rng.Below(4));
    for (int i = 0; i < n; ++i) {
      const int a = static_cast<int>(rng.Below(rank)), b = static_cast<int>(rng.Below(rank));
      switch (rng.Below(7)) {
        case 0: {
          const DType to[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
          specs.push_back(TransformSpec::Cast(to[rng.Below(3)]));
          cur_dtype = specs.back().dtype;
          break;
        }
        case 1:
          if (cur_dtype == DType::kBool) continue;
          specs.push_back(TransformSpec::Normalize({0.5}, std::vector<double>(cur[a], 1.5), a));
          if (cur_dtype != DType::kFloat16 && cur_dtype != DType::kBFloat16 && cur_dtype != DType::kFloat64) {
            cur_dtype = DType::kFloat32;
          }
          break;
        case 2:
          specs.push_back(a == b ? TransformSpec::RandomFlip({a}, 0.5) : TransformSpec::RandomFlip({a, b - rank}, 0.7));
          break;
        case 3:
          if (a == b || cur[a] != cur[b]) {
            specs.push_back(TransformSpec::ChannelsFirst(a));
            std::rotate(cur.begin(), cur.begin() + a, cur.begin() + a + 1);
          } else {
            specs.push_back(TransformSpec::RandomRot90(a, b));
          }
          break;
        case 4:
        case 5: {
          const int64_t size = 1 + static_cast<int64_t>(rng.Below(cur[a] + 2));
          specs.push_back(rng.Below(2) ? TransformSpec::RandomCrop({a}, {size}) : TransformSpec::CenterCrop({a}, {size}));
          cur[a] = size;
          break;
        }
        default:
          specs.push_back(TransformSpec::ChannelsLast(a));
          std::rotate(cur.begin() + a, cur.begin() + a + 1, cur.end());
          break;
      }
    }
    if (specs.empty()) continue;
    const Tensor in = MakeTensor(dtype, shape, static_cast<uint64_t>(trial));
    for (int64_t row = 0; row < 3; ++row) {
      SCOPED_TRACE("trial " + std::to_string(trial));
      ExpectMatchesReference(specs, in, static_cast<uint64_t>(trial), 1, row, 4);
      if (HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Determinism.

TEST(TransformDeterminism, SameInputsSameBytesDifferentRowsOrEpochsDiffer) {
  const Tensor in = MakeTensor(DType::kFloat32, {6, 6, 3});
  TransformPipeline p = MakePipeline({TransformSpec::RandomCrop({0, 1}, {4, 4}), TransformSpec::RandomFlip({0, 1}),
                                      TransformSpec::RandomRot90(0, 1)},
                                     in.dtype, in.shape);
  std::set<std::vector<uint8_t>> by_row, by_epoch, by_column, by_seed;
  for (int64_t i = 0; i < 50; ++i) {
    const auto once = ApplyBytes(p, in.bytes, 3, 2, i);
    EXPECT_EQ(once, ApplyBytes(p, in.bytes, 3, 2, i));  // again, fresh scratch
    by_row.insert(once);
    by_epoch.insert(ApplyBytes(p, in.bytes, 3, i, 5));
    by_column.insert(ApplyBytes(p, in.bytes, 3, 2, 5, static_cast<uint32_t>(i)));
    by_seed.insert(ApplyBytes(p, in.bytes, static_cast<uint64_t>(i), 2, 5));
  }
  // 9 offsets x 4 flips x 4 turns; 50 draws give many distinct results in each direction.
  EXPECT_GT(by_row.size(), 20u);
  EXPECT_GT(by_epoch.size(), 20u);
  EXPECT_GT(by_column.size(), 20u);
  EXPECT_GT(by_seed.size(), 20u);
}

TEST(TransformDeterminism, BothFlipOutcomesOccurWithHalfProbability) {
  TransformPipeline p = MakePipeline({TransformSpec::RandomFlip({0}, 0.5)}, DType::kUInt8, {2});
  int flipped = 0;
  const int rows = 1000;
  for (int64_t row = 0; row < rows; ++row) flipped += ApplyBytes(p, {1, 2}, 0, 0, row) == std::vector<uint8_t>{2, 1};
  EXPECT_GT(flipped, rows * 4 / 10);
  EXPECT_LT(flipped, rows * 6 / 10);
  int flipped_epochs = 0;
  for (int64_t epoch = 0; epoch < rows; ++epoch) flipped_epochs += ApplyBytes(p, {1, 2}, 0, epoch, 0)[0] == 2;
  EXPECT_GT(flipped_epochs, rows * 4 / 10);
  EXPECT_LT(flipped_epochs, rows * 6 / 10);
}

TEST(TransformDeterminism, IdenticalAcrossThreadsAndScratchReuse) {
  const Tensor in = MakeTensor(DType::kFloat32, {9, 9, 3});
  TransformPipeline p = MakePipeline({TransformSpec::RandomCrop({0, 1}, {7, 7}), TransformSpec::RandomRot90(0, 1),
                                      TransformSpec::ChannelsFirst(), TransformSpec::Cast(DType::kFloat16)},
                                     in.dtype, in.shape);
  constexpr int kRows = 64;
  std::vector<std::vector<uint8_t>> serial(kRows);
  TransformScratch scratch;  // one scratch reused for every row
  for (int row = 0; row < kRows; ++row) serial[row] = RunPipeline(p, in, 1, 0, row, 0, &scratch).bytes;
  std::vector<std::vector<uint8_t>> parallel(kRows);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      TransformScratch s;
      for (int row = t; row < kRows; row += 4) {
        std::vector<uint8_t> out(p.out_bytes());
        if (p.Apply(in.bytes, out, 1, 0, row, 0, &s).ok()) parallel[row] = std::move(out);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(serial, parallel);
}

// ---------------------------------------------------------------------------------------------
// Shapes, descriptions, errors.

TEST(TransformPipelineTest, ChainShapesAndDescription) {
  Result<TransformPipeline> p = TransformPipeline::Create(
      {TransformSpec::RandomCrop({0, 1}, {24, 20}), TransformSpec::ChannelsFirst(), TransformSpec::Cast(DType::kFloat16),
       TransformSpec::RandomFlip({-1, -2}), TransformSpec::Normalize({0.5}, {0.25}, 0)},
      DType::kUInt8, {32, 30, 3});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->out_shape(), (std::vector<int64_t>{3, 24, 20}));
  EXPECT_EQ(p->out_dtype(), DType::kFloat16);
  EXPECT_EQ(p->in_bytes(), 32u * 30 * 3);
  EXPECT_EQ(p->out_bytes(), 3u * 24 * 20 * 2);
  EXPECT_FALSE(p->empty());
  EXPECT_EQ(p->Describe(),
            "random_crop(axes=[0,1], size=[24,20]) -> channels_first(axis=2) -> cast(float16) -> "
            "random_flip(axes=[2,1], p=0.5) -> normalize(mean=[0.5], std=[0.25], axis=0)");
  const Tensor in = MakeTensor(DType::kUInt8, {32, 30, 3});
  ExpectMatchesReference({TransformSpec::RandomCrop({0, 1}, {24, 20}), TransformSpec::ChannelsFirst(),
                          TransformSpec::Cast(DType::kFloat16), TransformSpec::RandomFlip({-1, -2}),
                          TransformSpec::Normalize({0.5}, {0.25}, 0)},
                         in, 1, 2, 3);
}

TEST(TransformPipelineTest, EmptyPipelineCopies) {
  TransformPipeline p = MakePipeline({}, DType::kInt16, {3, 2});
  EXPECT_TRUE(p.empty());
  EXPECT_EQ(p.out_dtype(), DType::kInt16);
  EXPECT_EQ(p.out_shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(p.out_bytes(), 12u);
  EXPECT_EQ(p.Describe(), "identity");
  const Tensor in = MakeTensor(DType::kInt16, {3, 2});
  std::vector<uint8_t> out(12);
  ASSERT_TRUE(p.Apply(in.bytes, out, 0, 0, 0, 0, nullptr).ok());
  EXPECT_EQ(out, in.bytes);
}

TEST(TransformPipelineTest, IdentityStepsStillDeliver) {
  // Every step can be a no-op: a same-type cast, a full-size crop, a flip with p = 0.
  const Tensor in = MakeTensor(DType::kFloat32, {4, 3});
  TransformPipeline p = MakePipeline({TransformSpec::Cast(DType::kFloat32), TransformSpec::CenterCrop({0}, {4}),
                                      TransformSpec::RandomFlip({1}, 0.0)},
                                     in.dtype, in.shape);
  EXPECT_EQ(RunPipeline(p, in).bytes, in.bytes);
  TransformPipeline q = MakePipeline({TransformSpec::RandomFlip({1}, 1.0), TransformSpec::RandomFlip({1}, 0.0)},
                                     in.dtype, in.shape);
  EXPECT_EQ(RunPipeline(q, in).bytes, RefFlipAxis(in, 1).bytes);
}

void ExpectInvalid(const std::vector<TransformSpec>& specs, DType dtype, std::vector<int64_t> shape,
                   const std::string& prefix, const std::string& detail) {
  Result<TransformPipeline> p = TransformPipeline::Create(specs, dtype, std::move(shape));
  ASSERT_FALSE(p.ok()) << prefix << " " << detail;
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(prefix), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find(detail), std::string::npos) << p.status().message();
}

TEST(TransformPipelineTest, ValidationErrorsNameTheTransform) {
  using TS = TransformSpec;
  const std::vector<int64_t> img = {8, 6, 3};
  const TS ok = TS::RandomFlip({0});
  ExpectInvalid({TS::Cast(DType::kInt32)}, DType::kUInt8, img, "transforms[0] (cast)", "cannot cast to int32");
  ExpectInvalid({ok, TS::Cast(DType::kFloat64)}, DType::kUInt8, img, "transforms[1] (cast)", "float64");
  ExpectInvalid({TS::Normalize({}, {1})}, DType::kUInt8, img, "transforms[0] (normalize)", "must not be empty");
  ExpectInvalid({TS::Normalize({1}, {})}, DType::kUInt8, img, "transforms[0] (normalize)", "must not be empty");
  ExpectInvalid({TS::Normalize({1, 2}, {1})}, DType::kUInt8, img, "transforms[0] (normalize)", "mean has 2 values");
  ExpectInvalid({TS::Normalize({1}, {1, 2, 3, 4})}, DType::kUInt8, img, "transforms[0] (normalize)", "std has 4 values");
  ExpectInvalid({TS::Normalize({1}, {1, 0, 2})}, DType::kUInt8, img, "transforms[0] (normalize)", "std[1] is 0");
  ExpectInvalid({TS::Normalize({NAN}, {1})}, DType::kUInt8, img, "transforms[0] (normalize)", "not finite");
  ExpectInvalid({TS::Normalize({1}, {1})}, DType::kBool, img, "transforms[0] (normalize)", "bool");
  ExpectInvalid({ok, ok, TS::Normalize({1}, {1}, 3)}, DType::kUInt8, img, "transforms[2] (normalize)",
                "axis 3 out of range for a 3-d sample");
  ExpectInvalid({TS::RandomFlip({0, 3})}, DType::kUInt8, img, "transforms[0] (random_flip)", "axis 3 out of range");
  ExpectInvalid({TS::RandomFlip({-4})}, DType::kUInt8, img, "transforms[0] (random_flip)", "axis -4 out of range");
  ExpectInvalid({TS::RandomFlip({0, -3})}, DType::kUInt8, img, "transforms[0] (random_flip)", "repeated");
  ExpectInvalid({TS::RandomFlip({})}, DType::kUInt8, img, "transforms[0] (random_flip)", "empty");
  ExpectInvalid({TS::RandomFlip({0}, 1.5)}, DType::kUInt8, img, "transforms[0] (random_flip)", "outside [0, 1]");
  ExpectInvalid({TS::RandomFlip({0}, -0.1)}, DType::kUInt8, img, "transforms[0] (random_flip)", "outside [0, 1]");
  ExpectInvalid({TS::RandomFlip({0}, NAN)}, DType::kUInt8, img, "transforms[0] (random_flip)", "outside [0, 1]");
  ExpectInvalid({TS::RandomRot90(0, 1)}, DType::kUInt8, img, "transforms[0] (random_rot90)", "unequal extents");
  ExpectInvalid({TS::RandomRot90(1, -2)}, DType::kUInt8, img, "transforms[0] (random_rot90)", "repeated");
  TS three_axes = TS::RandomRot90(0, 1);
  three_axes.axes = {0, 1, 2};
  ExpectInvalid({three_axes}, DType::kUInt8, img, "transforms[0] (random_rot90)", "exactly two axes");
  ExpectInvalid({TS::RandomRot90(0, 5)}, DType::kUInt8, img, "transforms[0] (random_rot90)", "axis 5 out of range");
  ExpectInvalid({ok, ok, TS::RandomCrop({5}, {2})}, DType::kUInt8, {8, 6, 3, 2}, "transforms[2] (random_crop)",
                "axis 5 out of range for a 4-d sample");
  ExpectInvalid({TS::RandomCrop({0, 1}, {2})}, DType::kUInt8, img, "transforms[0] (random_crop)", "1 sizes for 2 axes");
  ExpectInvalid({TS::RandomCrop({0}, {0})}, DType::kUInt8, img, "transforms[0] (random_crop)", "below 1");
  ExpectInvalid({TS::CenterCrop({1, 1}, {2, 2})}, DType::kUInt8, img, "transforms[0] (center_crop)", "repeated");
  ExpectInvalid({TS::CenterCrop({0}, {-3})}, DType::kUInt8, img, "transforms[0] (center_crop)", "below 1");
  ExpectInvalid({TS::ChannelsFirst(3)}, DType::kUInt8, img, "transforms[0] (channels_first)", "axis 3 out of range");
  ExpectInvalid({TS::ChannelsLast(-4)}, DType::kUInt8, img, "transforms[0] (channels_last)", "axis -4 out of range");
  // Validation follows the shape as earlier transforms change it: after channels_first, axis 0 is the
  // 3-channel axis, so a 6-entry mean no longer fits.
  ExpectInvalid({TS::ChannelsFirst(), TS::Normalize({1, 2, 3, 4, 5, 6}, {1}, 0)}, DType::kUInt8, img,
                "transforms[1] (normalize)", "expected 1 or 3");
  // ...and admits what earlier transforms make valid: after the crop, axes 0 and 1 are both 6 long.
  EXPECT_TRUE(TransformPipeline::Create({TS::RandomCrop({0}, {6}), TS::RandomRot90(0, 1)}, DType::kUInt8, img).ok());
}

TEST(TransformPipelineTest, ShapeErrors) {
  EXPECT_EQ(TransformPipeline::Create({TransformSpec::RandomFlip({0})}, DType::kUInt8, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TransformPipeline::Create({TransformSpec::RandomFlip({0})}, DType::kUInt8, std::vector<int64_t>(9, 1))
                .status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TransformPipeline::Create({}, DType::kUInt8, {3, -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TransformPipeline::Create({}, DType::kUInt8, {int64_t{1} << 40, int64_t{1} << 40}).status().code(),
            StatusCode::kInvalidArgument);
  // Eight dimensions work.
  const Tensor in = MakeTensor(DType::kInt16, {2, 1, 3, 2, 1, 2, 3, 2});
  ExpectMatchesReference({TransformSpec::RandomFlip({0, 2, 7}, 1.0), TransformSpec::ChannelsFirst(3)}, in, 0, 0, 0);
}

TEST(TransformPipelineTest, ApplyRejectsWrongSizes) {
  TransformPipeline p = MakePipeline({TransformSpec::Cast(DType::kFloat16), TransformSpec::RandomFlip({0})},
                                     DType::kFloat32, {4, 2});
  std::vector<uint8_t> in(32), out(16);
  TransformScratch scratch;
  EXPECT_TRUE(p.Apply(in, out, 0, 0, 0, 0, &scratch).ok());
  std::vector<uint8_t> short_in(31), long_out(17);
  EXPECT_EQ(p.Apply(short_in, out, 0, 0, 0, 0, &scratch).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Apply(in, long_out, 0, 0, 0, 0, &scratch).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Apply(in, MutableByteView(), 0, 0, 0, 0, &scratch).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Apply(in, out, 0, 0, 0, 0, nullptr).code(), StatusCode::kInvalidArgument);  // a chain needs scratch
}

// The loader's production shape: a 360,000-byte float32 [30, 30, 10, 10] sample.
TEST(TransformPipelineTest, LargeSampleChainMatchesReference) {
  const Tensor in = MakeTensor(DType::kFloat32, {30, 30, 10, 10});
  const std::vector<TransformSpec> specs = {
      TransformSpec::RandomCrop({0, 1}, {24, 24}), TransformSpec::RandomFlip({0, 1, 3}, 0.5),
      TransformSpec::RandomRot90(0, 1),           TransformSpec::Normalize({0.1}, {2.0}, -1),
      TransformSpec::ChannelsFirst(2),             TransformSpec::Cast(DType::kBFloat16)};
  TransformPipeline p = MakePipeline(specs, in.dtype, in.shape);
  EXPECT_EQ(p.in_bytes(), 360000u);
  EXPECT_EQ(p.out_shape(), (std::vector<int64_t>{10, 24, 24, 10}));
  EXPECT_EQ(p.out_dtype(), DType::kBFloat16);
  for (int64_t row = 0; row < 4; ++row) ExpectMatchesReference(specs, in, 42, 7, row);
}

TEST(TransformImageTensor, ImageTransformsAndBadImagesAreRefusedHere) {
  using TS = TransformSpec;
  ExpectInvalid({TS::Resize({8})}, DType::kUInt8, {4, 4, 3}, "transforms[0] (resize)", "image transform");
  ExpectInvalid({TS::ToTensor(), TS::RandomResizedCrop({8})}, DType::kUInt8, {4, 4, 3}, "transforms[1] (random_resized_crop)",
                "must come before");
  ExpectInvalid({TS::ColorJitter(0.5, 0)}, DType::kUInt8, {4, 4, 3}, "transforms[0] (color_jitter)", "image transform");
  ExpectInvalid({TS::ToTensor()}, DType::kFloat32, {4, 4, 3}, "transforms[0] (to_tensor)", "uint8");
  ExpectInvalid({TS::ToTensor()}, DType::kUInt8, {4, 4}, "transforms[0] (to_tensor)", "[H, W, C]");
  ExpectInvalid({TS::ToTensor(DType::kInt32)}, DType::kUInt8, {4, 4, 3}, "transforms[0] (to_tensor)", "cannot output");
  ExpectInvalid({TS::RandomHorizontalFlip()}, DType::kUInt8, {4, 4}, "transforms[0] (random_horizontal_flip)", "image");
  ExpectInvalid({TS::ImageCenterCrop({2, 2, 2})}, DType::kUInt8, {4, 4, 3}, "transforms[0] (center_crop)", "size has 3");
  ExpectInvalid({TS::ImageCenterCrop({0})}, DType::kUInt8, {4, 4, 3}, "transforms[0] (center_crop)", "below 1");
}

}  // namespace
}  // namespace stoke
