#include "loader/descriptor_cache.h"

namespace stoke {

int DescriptorCache::PinOpen(uint32_t f) {
  Entry& e = entries_[f];
  if (e.fd < 0) return -1;
  if (e.pins++ == 0) RemoveIdle(f);
  return e.fd;
}

int DescriptorCache::Reserve(uint32_t f) {
  const int victim = open_ >= max_open_ ? EvictIdle() : -1;
  ++open_;  // reserved for file f, which the caller opens
  entries_[f].pins = 1;
  return victim;
}

void DescriptorCache::OpenFailed(uint32_t f) {
  entries_[f].pins = 0;
  --open_;
}

void DescriptorCache::Unpin(uint32_t f) {
  if (--entries_[f].pins == 0) PushIdle(f);
}

int DescriptorCache::EvictIdle() {
  const uint32_t v = head_;
  if (v == kNone) return -1;
  RemoveIdle(v);
  const int fd = entries_[v].fd;
  entries_[v].fd = -1;
  --open_;
  return fd;
}

std::vector<int> DescriptorCache::TakeAll() {
  std::vector<int> fds;
  for (Entry& e : entries_) {
    if (e.fd >= 0) fds.push_back(e.fd);
    e = Entry{};
  }
  open_ = 0;
  head_ = tail_ = kNone;
  return fds;
}

void DescriptorCache::RemoveIdle(uint32_t f) {
  Entry& e = entries_[f];
  if (!e.idle) return;
  (e.prev != kNone ? entries_[e.prev].next : head_) = e.next;
  (e.next != kNone ? entries_[e.next].prev : tail_) = e.prev;
  e.prev = e.next = kNone;
  e.idle = false;
}

void DescriptorCache::PushIdle(uint32_t f) {
  Entry& e = entries_[f];
  e.prev = tail_;
  e.next = kNone;
  (tail_ != kNone ? entries_[tail_].next : head_) = f;
  tail_ = f;
  e.idle = true;
}

}  // namespace stoke
