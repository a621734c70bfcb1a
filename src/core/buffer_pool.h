// A free list of buffers, so that steady-state work reuses memory instead of faulting in fresh
// pages for every row group or sample (large allocations are fresh mmaps in glibc's per-thread
// arenas, and touching them costs a page fault per 4 KiB).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"

namespace stoke {

// Thread-safe.
class BufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; more are freed.
  explicit BufferPool(size_t max_buffers = 16) : max_buffers_(max_buffers) {}

  // An empty buffer: a pooled one when there is one, else new. Of the pooled ones, the most recently
  // given one with at least `min_capacity` bytes of capacity, else the one with the most capacity.
  AlignedBuffer Take(size_t min_capacity = SIZE_MAX) EXCLUDES(mu_);
  // Returns a buffer to the pool (its contents are discarded).
  void Give(AlignedBuffer buffer) EXCLUDES(mu_);
  size_t idle() const EXCLUDES(mu_);

 private:
  const size_t max_buffers_;
  mutable Mutex mu_;
  std::vector<AlignedBuffer> idle_ GUARDED_BY(mu_);
};

}  // namespace stoke
