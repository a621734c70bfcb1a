// Decoded multi-row pages shared by the loader's workers (see DecodedPage): each page is read and
// decoded once while it stays in the cache, however many of its rows are asked for, and a page being
// loaded by one worker is waited for, not loaded again, by the others. Least recently used pages are
// dropped once the decoded bytes exceed the budget, but the kAlwaysKept most recently used stay
// whatever their size; a worker still copying out of a dropped page keeps it alive until it is done.
// Failed loads are not cached.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <utility>

#include "core/buffer_pool.h"
#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "loader/page_decoder.h"
#include "stoke/status.h"

namespace stoke {

class PageCache {
 public:
  // `budget_bytes`: decoded bytes kept; the page being loaded is kept even when it alone is larger.
  explicit PageCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // Decoded pages kept over the budget. Two: a page (say a row group's column chunk of images)
  // larger than the budget alone would be dropped as soon as the next one loads, while the workers
  // still on the previous one's last rows decode it again, and drop the new one in turn.
  static constexpr size_t kAlwaysKept = 2;

  using LoadFn = std::function<Result<std::shared_ptr<const DecodedPage>>()>;
  // The page at (file, offset): from the cache, or from `load` (run on the calling thread, once per
  // key while cached). Thread-safe.
  Result<std::shared_ptr<const DecodedPage>> GetOrLoad(uint32_t file, uint64_t offset, const LoadFn& load)
      EXCLUDES(mu_);

  size_t cached_bytes() const EXCLUDES(mu_);
  size_t cached_pages() const EXCLUDES(mu_);
  int64_t loads() const EXCLUDES(mu_);

 private:
  struct Loaded {
    Status status;
    std::shared_ptr<const DecodedPage> page;
  };
  struct Entry {
    std::shared_future<Loaded> page;
    uint64_t last_use = 0;
    size_t bytes = 0;  // 0 while loading
  };
  using Key = std::pair<uint32_t, uint64_t>;
  void EvictLocked(const Key& keep) REQUIRES(mu_);

  const size_t budget_;
  mutable Mutex mu_;
  std::map<Key, Entry> entries_ GUARDED_BY(mu_);
  size_t bytes_ GUARDED_BY(mu_) = 0;
  uint64_t clock_ GUARDED_BY(mu_) = 0;
  int64_t loads_ GUARDED_BY(mu_) = 0;
};

// A new DecodedPage whose body is taken from `pool` (one of at least `min_capacity` bytes where it
// has one, and not much larger: a buffer of more than twice that and a MiB stays in the pool) and
// given back to it when the page's last reference goes: pages decoded over and over reuse memory
// instead of faulting in fresh pages for each.
std::shared_ptr<DecodedPage> PooledDecodedPage(std::shared_ptr<BufferPool> pool, size_t min_capacity = SIZE_MAX);

}  // namespace stoke
