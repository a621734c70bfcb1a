#include "stoke/gpu_images.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#ifdef STOKE_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

#include "core/host_memory.h"
#include "core/random.h"
#include "format/image.h"
#include "loader/gpu_image.h"
#include "loader/image_transform.h"

namespace stoke {
namespace {

using TS = TransformSpec;

// A smooth image with noise on it: JPEG keeps it, and resampling has edges to get wrong.
std::vector<uint8_t> Picture(int w, int h, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &px[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(128 + 100 * std::sin(x / 17.0) + rng.Below(20));
      p[1] = static_cast<uint8_t>(128 + 100 * std::cos(y / 11.0));
      p[2] = static_cast<uint8_t>((x * 3 + y) % 256);
    }
  }
  return px;
}

std::string Jpeg(int w, int h, uint64_t seed) {
  const auto px = Picture(w, h, seed);
  auto r = EncodeJpeg(ByteView(px.data(), px.size()), w, h, 3, 90);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : "";
}

std::string Png(int w, int h, uint64_t seed) {
  const auto px = Picture(w, h, seed);
  auto r = EncodePng(ByteView(px.data(), px.size()), w, h, 3);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : "";
}

ImagePipeline Make(const std::vector<TransformSpec>& specs, bool for_gpu, bool dct = true) {
  ImagePipelineOptions o;
  o.for_gpu = for_gpu;
  o.jpeg_dct_scaling = dct;
  auto p = ImagePipeline::Create(specs, o, {}, std::nullopt);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : ImagePipeline();
}

// `images` through `specs` on the CPU path (cpu) and as records (records, record_bytes each).
struct BothPaths {
  std::vector<uint8_t> cpu, records;
  size_t record_bytes = 0;
  int64_t rows = 0;
};

BothPaths RunBoth(const std::vector<TransformSpec>& specs, const std::vector<std::string>& images, bool dct = true) {
  const ImagePipeline cpu = Make(specs, false, dct), gpu = Make(specs, true, dct);
  BothPaths b;
  b.rows = static_cast<int64_t>(images.size());
  b.record_bytes = gpu.out_bytes();
  b.cpu.resize(cpu.out_bytes() * images.size());
  b.records.resize(gpu.out_bytes() * images.size());
  ImageScratch scratch;
  for (size_t i = 0; i < images.size(); ++i) {
    const ByteView in(reinterpret_cast<const uint8_t*>(images[i].data()), images[i].size());
    const auto row = static_cast<int64_t>(i);
    EXPECT_TRUE(cpu.Apply(in, MutableByteView(b.cpu.data() + i * cpu.out_bytes(), cpu.out_bytes()), 7, 1, row, 0,
                          &scratch, nullptr).ok());
    EXPECT_TRUE(gpu.Apply(in, MutableByteView(b.records.data() + i * b.record_bytes, b.record_bytes), 7, 1, row, 0,
                          &scratch, nullptr).ok());
  }
  return b;
}

std::vector<uint8_t> FinishOnHost(const BothPaths& b, GpuImagesShape* shape_out = nullptr) {
  auto shape = GpuImagesShapeOf(b.records.data(), b.rows, b.record_bytes);
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  if (!shape.ok()) return {};
  std::vector<uint8_t> out(shape->num_bytes);
  const Status st = FinishGpuImagesOnHost(b.records.data(), b.record_bytes, *shape, out.data());
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (shape_out != nullptr) *shape_out = *shape;
  return out;
}

std::vector<std::string> Images(int count, bool png = false) {
  std::vector<std::string> images;
  for (int i = 0; i < count; ++i) {
    const int w = 120 + (i * 37) % 300, h = 100 + (i * 53) % 260;
    images.push_back(png ? Png(w, h, i) : Jpeg(w, h, i));
  }
  return images;
}

const std::vector<double> kMean = {0.485, 0.456, 0.406}, kStd = {0.229, 0.224, 0.225};

TEST(GpuImages, RecordsFinishToTheCpuPathsBytes) {
  const auto images = Images(24);
  for (const auto& specs : std::vector<std::vector<TransformSpec>>{
           {TS::RandomResizedCrop({64, 64}), TS::RandomHorizontalFlip()},
           {TS::RandomResizedCrop({48, 80}), TS::RandomHorizontalFlip(), TS::ToTensor(DType::kFloat16),
            TS::Normalize(kMean, kStd)},
           {TS::Resize({72}), TS::ImageCenterCrop({64}), TS::ToTensor()},
           {TS::Resize({40, 30}), TS::ToTensor(DType::kBFloat16)},
           {TS::ImageCenterCrop({90, 90}), TS::RandomHorizontalFlip(1.0)}}) {
    const BothPaths b = RunBoth(specs, images);
    GpuImagesShape shape;
    EXPECT_EQ(FinishOnHost(b, &shape), b.cpu);
    EXPECT_EQ(shape.num_bytes, b.cpu.size());
  }
}

TEST(GpuImages, WithoutDctScalingAndForPngsToo) {
  const std::vector<TransformSpec> specs = {TS::RandomResizedCrop({32, 32}), TS::RandomHorizontalFlip(),
                                            TS::ToTensor(), TS::Normalize(kMean, kStd)};
  const BothPaths jpeg = RunBoth(specs, Images(12), /*dct=*/false);
  EXPECT_EQ(FinishOnHost(jpeg), jpeg.cpu);
  const BothPaths png = RunBoth(specs, Images(12, /*png=*/true));
  EXPECT_EQ(FinishOnHost(png), png.cpu);
}

TEST(GpuImages, ABoxTooLargeToShipIsResampledOnTheCpu) {
  // The whole 400 x 300 image into 16 x 16: its pixels are far more than the record holds.
  const std::vector<TransformSpec> specs = {TS::Resize({16, 16}), TS::ToTensor()};
  const BothPaths b = RunBoth(specs, {Png(400, 300, 3)});
  GpuImageHeader h;
  std::memcpy(&h, b.records.data(), sizeof(h));
  EXPECT_EQ(h.resample, 0);
  EXPECT_EQ(FinishOnHost(b), b.cpu);
  const BothPaths shipped = RunBoth({TS::Resize({200, 150}), TS::ToTensor()}, {Png(400, 300, 3)});
  std::memcpy(&h, shipped.records.data(), sizeof(h));
  EXPECT_EQ(h.resample, 1);
  EXPECT_EQ(FinishOnHost(shipped), shipped.cpu);
}

TEST(GpuImages, ChainsTheDeviceCannotRunAreRefused) {
  ImagePipelineOptions o;
  o.for_gpu = true;
  auto jitter = ImagePipeline::Create({TS::RandomResizedCrop({8, 8}), TS::ColorJitter(0.4, 0.4)}, o, {}, std::nullopt);
  ASSERT_FALSE(jitter.ok());
  EXPECT_NE(jitter.status().message().find("color_jitter runs on the CPU only"), std::string::npos);
  auto flip = ImagePipeline::Create({TS::RandomResizedCrop({8, 8}), TS::ToTensor(), TS::RandomFlip({1})}, o, {},
                                    std::nullopt);
  ASSERT_FALSE(flip.ok());
  EXPECT_NE(flip.status().message().find("to_tensor with normalize and cast only"), std::string::npos);
}

TEST(GpuImages, NonRecordsAreRefusedNamingTheRow) {
  const BothPaths b = RunBoth({TS::RandomResizedCrop({16, 16})}, Images(3));
  auto shape = GpuImagesShapeOf(b.records.data(), b.rows, b.record_bytes);
  ASSERT_TRUE(shape.ok());
  std::vector<uint8_t> bad = b.records;
  bad[2 * b.record_bytes] ^= 0xff;  // row 2's magic
  std::vector<uint8_t> out(shape->num_bytes);
  const Status st = FinishGpuImagesOnHost(bad.data(), b.record_bytes, *shape, out.data());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("row 2: not a GPU image record"), std::string::npos);
  bad = b.records;
  reinterpret_cast<GpuImageHeader*>(bad.data())->staged_width = 1 << 20;  // pixels beyond the record
  EXPECT_FALSE(GpuImagesShapeOf(bad.data(), b.rows, b.record_bytes).ok());
  const BothPaths f32 = RunBoth({TS::RandomResizedCrop({16, 16}), TS::ToTensor()}, Images(1));
  bad = f32.records;
  reinterpret_cast<GpuImageHeader*>(bad.data())->element_bytes = 8;  // wider than float32's table
  EXPECT_FALSE(GpuImagesShapeOf(bad.data(), 1, f32.record_bytes).ok());
  bad = f32.records;
  reinterpret_cast<GpuImageHeader*>(bad.data())->out_dtype = 200;  // no such dtype
  EXPECT_FALSE(GpuImagesShapeOf(bad.data(), 1, f32.record_bytes).ok());
  EXPECT_FALSE(GpuImagesShapeOf(b.records.data(), 0, b.record_bytes).ok());
  EXPECT_FALSE(GpuImagesShapeOf(b.records.data(), 1, 64).ok());
  BatchColumn plain;
  plain.name = "image";
  EXPECT_NE(GpuImagesShapeOf(plain).status().message().find("load it with transforms_on cuda"), std::string::npos);
}

#ifdef STOKE_CUDA_KERNELS
// The kernel against the host reference, where a device is present.
TEST(GpuImages, TheDeviceFinishesAsTheHost) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  const BothPaths b = RunBoth({TS::RandomResizedCrop({224, 224}), TS::RandomHorizontalFlip(), TS::ToTensor(DType::kFloat16),
                           TS::Normalize(kMean, kStd)}, Images(32));
  GpuImagesShape shape;
  const std::vector<uint8_t> host = FinishOnHost(b, &shape);
  void *records = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(&records, b.records.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&out, shape.num_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(records, b.records.data(), b.records.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_TRUE(FinishGpuImages(records, b.record_bytes, shape, out, nullptr).ok());
  std::vector<uint8_t> device(shape.num_bytes);
  ASSERT_EQ(cudaMemcpy(device.data(), out, device.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(records);
  cudaFree(out);
  EXPECT_EQ(device, host);
  EXPECT_EQ(device, b.cpu);
}
#else
TEST(GpuImages, WithoutKernelsTheDeviceCallSaysSo) {
  GpuImagesShape shape;
  shape.shape = {1, 3, 8, 8};
  EXPECT_EQ(FinishGpuImages(nullptr, 1024, shape, nullptr, nullptr).code(), StatusCode::kUnsupported);
}
#endif

}  // namespace
}  // namespace stoke
