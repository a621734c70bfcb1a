#include "core/buffer_pool.h"

#include <algorithm>
#include <iterator>

namespace stoke {

AlignedBuffer BufferPool::Take(size_t min_capacity) {
  MutexLock lock(&mu_);
  if (idle_.empty()) return AlignedBuffer();
  // The most recently given buffer that is large enough (warm in cache, and found at once when the
  // sizes are alike), else the largest one.
  auto it = std::find_if(idle_.rbegin(), idle_.rend(), [&](const AlignedBuffer& b) { return b.capacity() >= min_capacity; });
  auto pick = it != idle_.rend() ? std::prev(it.base())
                                 : std::max_element(idle_.begin(), idle_.end(), [](const AlignedBuffer& a, const AlignedBuffer& b) {
                                     return a.capacity() < b.capacity();
                                   });
  AlignedBuffer b = std::move(*pick);
  if (pick != std::prev(idle_.end())) *pick = std::move(idle_.back());
  idle_.pop_back();
  return b;
}

void BufferPool::Give(AlignedBuffer buffer) {
  if (buffer.capacity() == 0) return;
  buffer.Clear();
  MutexLock lock(&mu_);
  if (idle_.size() < max_buffers_) idle_.push_back(std::move(buffer));
}

size_t BufferPool::idle() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace stoke
