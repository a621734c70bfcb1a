// GpuImageFinisher (include/stoke/gpu_images.h): a batch's GPU image records to images on the device.
#include <fmt/format.h>

#include <utility>

#include "core/host_memory.h"
#include "stoke/gpu_images.h"

#ifdef STOKE_CUDA_KERNELS
#include <cuda_runtime.h>
#endif

namespace stoke {

GpuImageFinisher::~GpuImageFinisher() { Release(); }

GpuImageFinisher::GpuImageFinisher(GpuImageFinisher&& other) noexcept { *this = std::move(other); }

GpuImageFinisher& GpuImageFinisher::operator=(GpuImageFinisher&& other) noexcept {
  if (this != &other) {
    Release();
    records_ = std::exchange(other.records_, nullptr);
    records_bytes_ = std::exchange(other.records_bytes_, 0);
    images_ = std::exchange(other.images_, nullptr);
    images_bytes_ = std::exchange(other.images_bytes_, 0);
  }
  return *this;
}

#ifdef STOKE_CUDA_KERNELS
namespace {

Status CudaError(const char* what, cudaError_t err) {
  return Status::IOError(fmt::format("finishing images on the GPU: {}: {}", what, cudaGetErrorString(err)));
}

// `*buffer` holds at least `bytes` of device memory, reallocated when it held less.
Status Reserve(void** buffer, size_t* capacity, size_t bytes) {
  if (*capacity >= bytes) return Status::OK();
  if (*buffer != nullptr) cudaFree(*buffer);
  *buffer = nullptr;
  *capacity = 0;
  if (const cudaError_t err = cudaMalloc(buffer, bytes); err != cudaSuccess) return CudaError("cudaMalloc", err);
  *capacity = bytes;
  return Status::OK();
}

}  // namespace

void GpuImageFinisher::Release() {
  if (records_ != nullptr) cudaFree(records_);
  if (images_ != nullptr) cudaFree(images_);
  records_ = images_ = nullptr;
  records_bytes_ = images_bytes_ = 0;
}

Status GpuImageFinisher::Finish(const Batch& batch) {
  for (const BatchColumn& c : batch.columns()) {
    if (!c.gpu_images || c.shape.empty() || c.shape[0] == 0) continue;
    if (!CudaDeviceAvailable()) return Status::Unsupported("finishing images on the GPU: no CUDA device");
    STOKE_ASSIGN_OR_RETURN(const GpuImagesShape shape, GpuImagesShapeOf(c));
    STOKE_RETURN_IF_ERROR(Reserve(&records_, &records_bytes_, c.num_bytes));
    STOKE_RETURN_IF_ERROR(Reserve(&images_, &images_bytes_, shape.num_bytes));
    if (const cudaError_t err = cudaMemcpyAsync(records_, c.data(), c.num_bytes, cudaMemcpyHostToDevice, nullptr);
        err != cudaSuccess) {
      return CudaError("cudaMemcpyAsync", err);
    }
    STOKE_RETURN_IF_ERROR(FinishGpuImages(records_, static_cast<size_t>(c.shape[1]), shape, images_, nullptr));
    if (const cudaError_t err = cudaStreamSynchronize(nullptr); err != cudaSuccess) {
      return CudaError("cudaStreamSynchronize", err);
    }
  }
  return Status::OK();
}

#else

void GpuImageFinisher::Release() {}

Status GpuImageFinisher::Finish(const Batch& batch) {
  for (const BatchColumn& c : batch.columns()) {
    if (c.gpu_images) return Status::Unsupported("finishing images on a GPU: this stoke was built without its CUDA kernels");
  }
  return Status::OK();
}

#endif

}  // namespace stoke
