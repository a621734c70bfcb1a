// Out-of-memory handling in the loader pipeline: allocation failures become Status values for the
// consumer instead of std::bad_alloc escaping a pipeline thread (which would call std::terminate).
// core's buffers throw std::bad_alloc when the allocator fails; the loader and the fetcher catch it
// at each pipeline step and report OutOfMemoryError.
#pragma once

#include <atomic>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

#include "stoke/status.h"

namespace stoke {

// The status of a failed allocation. status.h has no resource-exhausted code yet; kIOError ("the
// operating system refused an operation") is the closest, and the message starts with "out of memory".
inline Status OutOfMemoryError(std::string_view what) {
  return Status::IOError("out of memory: " + std::string(what), /*retryable=*/true);
}

// Injected allocation failures for tests of those paths. A process-wide test hook in the manner of
// RocksDB's SyncPoint: production code never arms it, and a disarmed check costs one relaxed load.
// The pipeline calls Check() right before each allocation that may fail on a pipeline thread (batch
// slots, per-batch planning, read buffers, hand-offs to the decode workers, decode scratch, the
// consumer's batch view).
class AllocationFaults {
 public:
  static AllocationFaults& Instance() {
    static AllocationFaults instance;
    return instance;
  }
  // Makes the n-th Check() from now (1 = the next one, on any thread) throw std::bad_alloc; 0 disarms.
  void FailNth(int64_t n) { countdown_.store(n, std::memory_order_relaxed); }
  // True while armed and not yet fired.
  bool armed() const { return countdown_.load(std::memory_order_relaxed) > 0; }
  void Check() {
    if (countdown_.load(std::memory_order_relaxed) > 0 && countdown_.fetch_sub(1, std::memory_order_relaxed) == 1) {
      throw std::bad_alloc();
    }
  }

 private:
  std::atomic<int64_t> countdown_{0};
};

// OutOfMemoryError(describe()), or a bare "out of memory" (short enough for std::string's inline
// buffer: allocates nothing) when even the message cannot be allocated.
template <typename Describe>
Status OutOfMemory(Describe describe) noexcept {
  try {
    return OutOfMemoryError(describe());
  } catch (const std::bad_alloc&) {
    return Status::IOError("out of memory");
  }
}

}  // namespace stoke
