// The kernel of FinishGpuImages (include/stoke/gpu_images.h): one thread per output pixel, the
// per-pixel arithmetic of loader/gpu_image.h, shared with FinishGpuImagesOnHost. C++17: nvcc sees
// only this file and loader/gpu_image.h.
#include <cuda_runtime.h>

#include "loader/gpu_image.h"

namespace stoke {
namespace {

__device__ void ZeroPixel(const GpuImageLaunch& e, int32_t x, int32_t y, uint8_t* image) {
  const size_t plane = static_cast<size_t>(e.height) * e.width, at = static_cast<size_t>(y) * e.width + x;
  const int bytes = e.table_bytes == 0 ? 1 : e.element_bytes;
  for (int k = 0; k < e.channels; ++k) {
    uint8_t* to = e.table_bytes == 0 ? image + at * e.channels + k : image + (k * plane + at) * e.element_bytes;
    for (int b = 0; b < bytes; ++b) to[b] = 0;
  }
}

__global__ void FinishKernel(GpuImageLaunch e, int64_t first_row) {
  const int32_t x = static_cast<int32_t>(blockIdx.x * blockDim.x + threadIdx.x);
  const int32_t y = static_cast<int32_t>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= e.width || y >= e.height) return;
  const int64_t row = first_row + blockIdx.z;
  const uint8_t* record = e.records + static_cast<size_t>(row) * e.record_bytes;
  uint8_t* image = e.out + static_cast<size_t>(row) * e.image_bytes;
  const GpuImageHeader& h = *reinterpret_cast<const GpuImageHeader*>(record);
  const bool matches = GpuImageRecordFits(h, e.record_bytes) && h.channels == e.channels && h.out_height == e.height &&
                       h.out_width == e.width && h.table_bytes == e.table_bytes &&
                       (e.table_bytes == 0 || h.element_bytes == e.element_bytes);
  if (!matches) {
    ZeroPixel(e, x, y, image);
    return;
  }
  FinishGpuImagePixel(record, x, y, image);
}

}  // namespace

namespace {

// Queues the kernel on the current device.
bool Launch(const GpuImageLaunch& e, const char** error) {
  const dim3 block(32, 8);
  const unsigned gx = static_cast<unsigned>((e.width + block.x - 1) / block.x);
  const unsigned gy = static_cast<unsigned>((e.height + block.y - 1) / block.y);
  constexpr int64_t kMaxGridZ = 65535;
  for (int64_t first = 0; first < e.rows; first += kMaxGridZ) {
    const int64_t n = e.rows - first < kMaxGridZ ? e.rows - first : kMaxGridZ;
    FinishKernel<<<dim3(gx, gy, static_cast<unsigned>(n)), block, 0, static_cast<cudaStream_t>(e.stream)>>>(e, first);
  }
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return true;
  *error = cudaGetErrorString(err);
  return false;
}

}  // namespace

bool LaunchFinishGpuImages(const GpuImageLaunch& e, const char** error) {
  int current = 0;
  if (const cudaError_t err = cudaGetDevice(&current); err != cudaSuccess) {
    *error = cudaGetErrorString(err);
    return false;
  }
  if (e.device < 0 || e.device == current) return Launch(e, error);
  // On the stream's device, and back: the caller's current device is left as it was.
  if (const cudaError_t err = cudaSetDevice(e.device); err != cudaSuccess) {
    *error = cudaGetErrorString(err);
    return false;
  }
  const bool launched = Launch(e, error);
  cudaSetDevice(current);
  return launched;
}

}  // namespace stoke
