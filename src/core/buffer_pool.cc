#include "core/buffer_pool.h"

#include <algorithm>

namespace stoke {

AlignedBuffer BufferPool::Take() {
  MutexLock lock(&mu_);
  if (idle_.empty()) return AlignedBuffer();
  auto it = std::max_element(idle_.begin(), idle_.end(),
                             [](const AlignedBuffer& a, const AlignedBuffer& b) { return a.capacity() < b.capacity(); });
  AlignedBuffer b = std::move(*it);
  idle_.erase(it);
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
