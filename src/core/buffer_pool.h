// A free list of buffers, so that steady-state work reuses memory instead of faulting in fresh
// pages for every row group or sample (large allocations are fresh mmaps in glibc's per-thread
// arenas, and touching them costs a page fault per 4 KiB).
#pragma once

#include <mutex>
#include <vector>

#include "core/buffer.h"

namespace stoke {

// Thread-safe.
class BufferPool {
 public:
  // Keeps at most `max_buffers` idle buffers; more are freed.
  explicit BufferPool(size_t max_buffers = 16) : max_buffers_(max_buffers) {}

  // An empty buffer: a pooled one (the one with the most capacity) when there is one, else new.
  AlignedBuffer Take();
  // Returns a buffer to the pool (its contents are discarded).
  void Give(AlignedBuffer buffer);
  size_t idle() const;

 private:
  const size_t max_buffers_;
  mutable std::mutex mu_;
  std::vector<AlignedBuffer> idle_;  // guarded by mu_
};

}  // namespace stoke
