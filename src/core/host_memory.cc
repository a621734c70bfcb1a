#include "core/host_memory.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <new>
#include <utility>

#include "core/huge_pages.h"

#ifdef STOKE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace stoke {

bool BuiltWithCuda() {
#ifdef STOKE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

void ReleaseFreeHeapMemory() {
#if defined(__GLIBC__)
  (void)malloc_trim(0);
#endif
}

bool CudaDeviceAvailable() {
#ifdef STOKE_WITH_CUDA
  static const bool available = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no device / no driver" error
      return false;
    }
    return n > 0;
  }();
  return available;
#else
  return false;
#endif
}

HostBuffer::HostBuffer(size_t size, bool pinned) : size_(size) {
  const size_t alloc = size == 0 ? 1 : size;
#ifdef STOKE_WITH_CUDA
  if (pinned && CudaDeviceAvailable()) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, alloc, cudaHostAllocPortable) == cudaSuccess) {
      data_ = static_cast<uint8_t*>(p);
      pinned_ = true;
      return;
    }
    (void)cudaGetLastError();  // fall back to pageable memory
  }
#endif
  (void)pinned;
  if (alloc >= kHugePageBytes) {  // a batch slot: in huge pages (see MapHugePageRegion)
    data_ = MapHugePageRegion(alloc);
    if (data_ == nullptr) throw std::bad_alloc();
    mapped_ = true;
    return;
  }
  void* p = std::aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
  if (p == nullptr) throw std::bad_alloc();
  data_ = static_cast<uint8_t*>(p);
}

HostBuffer::~HostBuffer() { Free(); }

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      pinned_(std::exchange(o.pinned_, false)),
      mapped_(std::exchange(o.mapped_, false)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    Free();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    pinned_ = std::exchange(o.pinned_, false);
    mapped_ = std::exchange(o.mapped_, false);
  }
  return *this;
}

void HostBuffer::Free() {
  if (data_ == nullptr) return;
#ifdef STOKE_WITH_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
    data_ = nullptr;
    return;
  }
#endif
  if (mapped_) {
    UnmapHugePageRegion(data_, size_);  // rounds 0 up to the page mapped for it
    mapped_ = false;
  } else {
    std::free(data_);
  }
  data_ = nullptr;
}

}  // namespace stoke
