// Host memory for batch buffers: page-locked (pinned) CUDA host memory when stoke is built with CUDA
// (STOKE_WITH_CUDA) and a device is present, so a later host-to-device copy can run asynchronously;
// otherwise 4096-byte-aligned heap memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace stoke {

// True when stoke was built with CUDA (the CUDA runtime is linked).
bool BuiltWithCuda();
// True when built with CUDA and the runtime reports at least one device (checked once, cached).
bool CudaDeviceAvailable();

// Gives the heap's free pages back to the operating system (glibc's malloc_trim; nothing elsewhere).
// For the end of a phase that freed much in small blocks, such as planning 650,000 source files:
// glibc keeps freed small blocks in its arenas, and the next phase's allocations, made on other
// threads, do not reuse them, so they stayed resident (300 MB of a 650,000-file ingest).
void ReleaseFreeHeapMemory();

// An owning block of host memory. Move-only. Not thread-safe.
class HostBuffer {
 public:
  HostBuffer() = default;
  // `size` bytes (at least 1 is allocated), pinned when `pinned` is requested and possible (see
  // pinned()), else aligned to 4096 bytes, and from 2 MiB up mapped in transparent huge pages
  // (MapHugePageRegion). Contents are uninitialised. Throws std::bad_alloc on allocation failure,
  // like operator new.
  HostBuffer(size_t size, bool pinned);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void Free();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
  bool mapped_ = false;  // data_ is a MapHugePageRegion of size_ bytes
};

}  // namespace stoke
