#include "io/prefetching_file.h"

#include <algorithm>
#include <cstring>

namespace stoke {

Status PrefetchingFile::Prefetch(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t gap) {
  const uint64_t size = base_->size();
  std::vector<std::pair<uint64_t, uint64_t>> merged;  // [begin, end)
  for (auto& [offset, length] : ranges) {
    if (offset >= size || length == 0) continue;
    merged.emplace_back(offset, offset + std::min(length, size - offset));
  }
  std::sort(merged.begin(), merged.end());
  size_t n = 0;
  for (const auto& r : merged) {
    if (n > 0 && r.first <= merged[n - 1].second + gap) {
      merged[n - 1].second = std::max(merged[n - 1].second, r.second);
    } else {
      merged[n++] = r;
    }
  }
  merged.resize(n);
  if (merged.empty()) return Status::OK();

  // All reads in flight at once; their callbacks may run on other threads (object stores).
  struct Pending {
    Mutex mu;
    CondVar cv;
    size_t left GUARDED_BY(mu) = 0;
    Status first_error GUARDED_BY(mu);
  } pending;
  std::vector<Kept> fetched(merged.size());
  {
    MutexLock lock(&pending.mu);
    pending.left = merged.size();
  }
  for (size_t i = 0; i < merged.size(); ++i) {
    fetched[i].offset = merged[i].first;
    fetched[i].bytes = std::make_shared<AlignedBuffer>(merged[i].second - merged[i].first);
    base_->ReadAtAsync(fetched[i].offset, fetched[i].bytes->mutable_view(), [&pending](Status st) {
      MutexLock lock(&pending.mu);
      if (!st.ok() && pending.first_error.ok()) pending.first_error = std::move(st);
      if (--pending.left == 0) pending.cv.SignalAll();
    });
  }
  Status error;
  {
    MutexLock lock(&pending.mu);
    while (pending.left != 0) pending.cv.Wait(&pending.mu);
    error = pending.first_error;
  }
  if (!error.ok()) return error;
  MutexLock lock(&mu_);
  base_reads_ += fetched.size();
  for (auto& k : fetched) kept_.push_back(std::move(k));
  std::sort(kept_.begin(), kept_.end(), [](const Kept& a, const Kept& b) { return a.offset < b.offset; });
  return Status::OK();
}

Status PrefetchingFile::ReadAt(uint64_t offset, MutableByteView dst) const {
  std::shared_ptr<AlignedBuffer> from;
  uint64_t from_offset = 0;
  {
    MutexLock lock(&mu_);
    // The last kept range starting at or before `offset`; ranges kept by separate Prefetch calls may
    // overlap, so look at every one that starts there or before.
    for (const Kept& k : kept_) {
      if (k.offset > offset) break;
      if (offset + dst.size() <= k.offset + k.bytes->size()) {
        from = k.bytes;
        from_offset = k.offset;
      }
    }
    if (from == nullptr) ++base_reads_;
  }
  if (from == nullptr) return base_->ReadAt(offset, dst);
  if (!dst.empty()) std::memcpy(dst.data(), from->data() + (offset - from_offset), dst.size());
  return Status::OK();
}

uint64_t PrefetchingFile::base_reads() const {
  MutexLock lock(&mu_);
  return base_reads_;
}

}  // namespace stoke
