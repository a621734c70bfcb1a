#include "loader/page_cache.h"

#include <algorithm>
#include <new>

namespace stoke {

Result<std::shared_ptr<const DecodedPage>> PageCache::GetOrLoad(uint32_t file, uint64_t offset, const LoadFn& load) {
  const Key key{file, offset};
  std::shared_future<Loaded> pending;
  std::promise<Loaded> promise;
  bool loader = false;
  {
    MutexLock l(&mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      it->second.last_use = ++clock_;
      pending = it->second.page;
    } else {
      pending = promise.get_future().share();
      entries_.emplace(key, Entry{pending, ++clock_, 0});
      ++loads_;
      loader = true;
    }
  }
  if (loader) {
    Loaded loaded;
    bool out_of_memory = false;
    try {
      auto page = load();
      if (page.ok()) {
        loaded.page = std::move(page).value();
      } else {
        loaded.status = page.status();
      }
    } catch (const std::bad_alloc&) {
      // Waiters get an error; this thread rethrows below, for the caller to report as out of memory.
      loaded.status = Status::Internal("out of memory while another worker decoded this page");
      out_of_memory = true;
    }
    {
      MutexLock l(&mu_);
      auto it = entries_.find(key);
      if (!loaded.status.ok() || loaded.page == nullptr) {
        if (loaded.status.ok()) loaded.status = Status::Internal("page cache: a load returned no page");
        entries_.erase(it);  // a failed load is not cached: the next request tries again
      } else {
        it->second.bytes = std::max<size_t>(1, loaded.page->bytes());
        bytes_ += it->second.bytes;
        EvictLocked(key);
      }
    }
    promise.set_value(loaded);
    if (out_of_memory) throw std::bad_alloc();
    if (!loaded.status.ok()) return loaded.status;
    return loaded.page;
  }
  const Loaded& got = pending.get();
  if (!got.status.ok()) return got.status;
  return got.page;
}

void PageCache::EvictLocked(const Key& keep) {
  size_t loaded = 0;
  for (const auto& [key, e] : entries_) loaded += e.bytes > 0;
  while (bytes_ > budget_ && loaded > kAlwaysKept) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == keep || it->second.bytes == 0) continue;  // the new page, and pages still loading
      if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
    }
    if (victim == entries_.end()) return;
    bytes_ -= victim->second.bytes;
    entries_.erase(victim);
    --loaded;
  }
}

size_t PageCache::cached_bytes() const {
  MutexLock l(&mu_);
  return bytes_;
}

size_t PageCache::cached_pages() const {
  MutexLock l(&mu_);
  size_t n = 0;
  for (const auto& [key, e] : entries_) n += e.bytes > 0;
  return n;
}

int64_t PageCache::loads() const {
  MutexLock l(&mu_);
  return loads_;
}

std::shared_ptr<DecodedPage> PooledDecodedPage(std::shared_ptr<BufferPool> pool, size_t min_capacity) {
  AlignedBuffer body = pool->Take(min_capacity);
  // A buffer far larger than asked for (a page of images, for a page of a few rows) would be counted
  // at its capacity against the cache's budget: it goes back, and the page starts afresh.
  if (min_capacity != SIZE_MAX && body.capacity() > 2 * min_capacity + (size_t{1} << 20)) {
    pool->Give(std::move(body));
    body = AlignedBuffer();
  }
  std::shared_ptr<DecodedPage> page(new DecodedPage, [pool = std::move(pool)](DecodedPage* p) {
    pool->Give(std::move(p->body));
    delete p;
  });
  page->body = std::move(body);
  return page;
}

}  // namespace stoke
