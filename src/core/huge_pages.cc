#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <utility>

namespace stoke {

namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kClassBytes = size_t{64} << 10;  // size classes below a huge page

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// `bytes` (a multiple of 4 KiB) of anonymous memory starting on a huge-page boundary, advised
// MADV_HUGEPAGE; nullptr when the mapping fails. The advice is only advice: a kernel without
// transparent huge pages, or with none free, gives ordinary pages.
uint8_t* MapAligned(size_t bytes) {
  const size_t span = bytes + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* base = static_cast<uint8_t*>(raw);
  auto* aligned = reinterpret_cast<uint8_t*>(RoundUp(reinterpret_cast<uintptr_t>(base), kHugePageBytes));
  // Trim what lies outside [aligned, aligned + bytes).
  if (aligned > base) ::munmap(base, static_cast<size_t>(aligned - base));
  const size_t tail = static_cast<size_t>(base + span - (aligned + bytes));
  if (tail > 0) ::munmap(aligned + bytes, tail);
  (void)::madvise(aligned, bytes, MADV_HUGEPAGE);
  return aligned;
}

}  // namespace

uint8_t* MapHugePageRegion(size_t bytes) { return MapAligned(RoundUp(std::max<size_t>(bytes, 1), kPageBytes)); }

void UnmapHugePageRegion(uint8_t* p, size_t bytes) {
  if (p != nullptr) ::munmap(p, RoundUp(std::max<size_t>(bytes, 1), kPageBytes));
}

std::shared_ptr<HugePageBlocks> HugePageBlocks::Create() {
  return std::shared_ptr<HugePageBlocks>(new HugePageBlocks());
}

HugePageBlocks::~HugePageBlocks() {
  // Every buffer holds a reference, so none is out: all the memory is in regions_.
  for (const auto& [p, bytes] : regions_) ::munmap(p, bytes);
}

size_t HugePageBlocks::CapacityFor(size_t size) {
  return size < kHugePageBytes ? RoundUp(std::max<size_t>(size, 1), kClassBytes) : RoundUp(size, kPageBytes);
}

AlignedBuffer HugePageBlocks::Take(size_t size) {
  const size_t capacity = CapacityFor(size);
  uint8_t* block = nullptr;
  {
    MutexLock lock(&mu_);
    SizeClass& c = classes_[capacity];
    if (c.free.empty()) {
      // Below a huge page: map one and cut it into blocks of this class (the remainder, under one
      // block, stays unused). From a huge page up: a region for this buffer alone.
      const size_t bytes = capacity < kHugePageBytes ? kHugePageBytes : capacity;
      const size_t blocks = bytes / capacity;
      c.free.reserve(c.blocks + blocks);
      regions_.reserve(regions_.size() + 1);
      uint8_t* region = MapAligned(bytes);
      if (region == nullptr) throw std::bad_alloc();
      regions_.emplace_back(region, bytes);
      mapped_ += bytes;
      c.blocks += blocks;
      for (size_t at = 0; at + capacity <= bytes; at += capacity) c.free.push_back(region + at);
      if (capacity >= kHugePageBytes) idle_large_ += capacity;  // in the free list until taken below
    }
    block = c.free.back();
    c.free.pop_back();
    if (capacity >= kHugePageBytes) idle_large_ -= capacity;
  }
  return AlignedBuffer::Borrowed(block, capacity, shared_from_this());
}

void HugePageBlocks::Return(uint8_t* data, size_t capacity) {
  {
    MutexLock lock(&mu_);
    SizeClass& c = classes_.find(capacity)->second;  // its class exists
    if (capacity < kHugePageBytes || idle_large_ + capacity <= kMaxIdleLargeBytes) {
      c.free.push_back(data);  // with room for every block
      if (capacity >= kHugePageBytes) idle_large_ += capacity;
      return;
    }
    // A region of its own, beyond what is kept idle: unmapped (with its class, when that is empty).
    if (--c.blocks == 0) classes_.erase(capacity);
    mapped_ -= capacity;
    auto it = std::find(regions_.begin(), regions_.end(), std::pair<uint8_t*, size_t>(data, capacity));
    *it = regions_.back();
    regions_.pop_back();
  }
  ::munmap(data, capacity);
}

size_t HugePageBlocks::mapped_bytes() const {
  MutexLock lock(&mu_);
  return mapped_;
}

}  // namespace stoke
