// Images finished on a CUDA device. With LoaderOptions::transforms_on = kCuda an image column arrives
// as records (BatchColumn::gpu_images: uint8 [rows, record bytes]): the decode workers crop and
// decode, and the device resamples (Pillow's antialiased bilinear, in its fixed point), mirrors and
// runs to_tensor/normalize/cast. The finished images are the bytes the CPU path (kCpu) delivers.
//
//   const BatchColumn* c = batch->column("image");
//   Result<GpuImagesShape> s = GpuImagesShapeOf(*c);      // e.g. float16 [128, 3, 224, 224]
//   cudaMemcpyAsync(records, c->data(), c->num_bytes, cudaMemcpyHostToDevice, stream);
//   FinishGpuImages(records, c->shape[1], *s, images, stream);  // images: s->num_bytes on the device
//
// Python's Loader(transforms_on="cuda") does this for you (docs/python.md, "Images").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "stoke/dtype.h"
#include "stoke/loader.h"
#include "stoke/status.h"

namespace stoke {

// What a gpu_images column finishes to.
struct GpuImagesShape {
  DType dtype = DType::kUInt8;  // kUInt8 without to_tensor, else to_tensor's (or the last cast's) dtype
  std::vector<int64_t> shape;   // [rows, H, W, C] for uint8, else [rows, C, H, W]
  size_t num_bytes = 0;         // shape's product * DTypeSize(dtype)
};

// The images that `column` (a batch's gpu_images column, in host memory) finishes to, read from its
// first record. InvalidArgument for a column that is not gpu_images, has no rows, or whose first
// record is not one.
Result<GpuImagesShape> GpuImagesShapeOf(const BatchColumn& column);
// The same for `rows` records of `record_bytes` each at `records` (host memory).
Result<GpuImagesShape> GpuImagesShapeOf(const void* records, int64_t rows, size_t record_bytes);

// Finishes shape.shape[0] records of `record_bytes` each at `records` (device memory: the column's
// bytes, copied there) into `out` (device memory of shape.num_bytes; `shape` is GpuImagesShapeOf's),
// as one kernel queued on `stream` (a cudaStream_t of `device`; null: the default stream); returns once
// it is queued. `device` -1: the calling thread's current device. A record that is not one, or not of
// `shape`, gives zeros. Unsupported when stoke was built without its CUDA kernels; IOError with the
// CUDA runtime's message when the launch fails.
Status FinishGpuImages(const void* records, size_t record_bytes, const GpuImagesShape& shape, void* out, void* stream,
                       int device = -1);

// The same on the host (`records` and `out` in host memory): the reference of FinishGpuImages. Unlike
// it, InvalidArgument naming the row whose record is not one, or not of `shape`.
Status FinishGpuImagesOnHost(const void* records, size_t record_bytes, const GpuImagesShape& shape, void* out);

// Finishes a batch's gpu_images columns on the current CUDA device: copies each column's records
// there and runs FinishGpuImages into an image buffer there (both grown as needed and kept for the
// next batch); Finish returns once the device is done. The images stay on the device (images()). What
// `stoke bench load --transforms-on cuda` does with each batch. Not thread-safe; move-only.
class GpuImageFinisher {
 public:
  GpuImageFinisher() = default;  // holds no device memory until the first Finish
  ~GpuImageFinisher();           // frees its device memory
  GpuImageFinisher(GpuImageFinisher&& other) noexcept;             // takes other's buffers
  GpuImageFinisher& operator=(GpuImageFinisher&& other) noexcept;  // frees its own, takes other's
  GpuImageFinisher(const GpuImageFinisher&) = delete;
  GpuImageFinisher& operator=(const GpuImageFinisher&) = delete;

  // Unsupported without the CUDA kernels or without a device; IOError with the CUDA runtime's message
  // when an allocation, copy or launch fails; GpuImagesShapeOf's errors. A batch without gpu_images
  // columns does nothing.
  Status Finish(const Batch& batch);
  // The last finished column's images on the device (GpuImagesShapeOf's layout), or null.
  const void* images() const { return images_; }

 private:
  void Release();
  void* records_ = nullptr;  // device memory
  size_t records_bytes_ = 0;
  void* images_ = nullptr;   // device memory
  size_t images_bytes_ = 0;
};

}  // namespace stoke
