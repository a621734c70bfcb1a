#include "loader/page_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace stoke {
namespace {

// A decoded page of `bytes` body bytes (values of 1 byte, one per row).
std::shared_ptr<const DecodedPage> PageOf(size_t bytes, uint8_t fill) {
  auto p = std::make_shared<DecodedPage>();
  p->body.Resize(bytes);
  std::memset(p->body.data(), fill, bytes);
  p->value_size = 1;
  p->offsets.assign(bytes, 0);
  return p;
}

// The page at `offset` of file 0 from `cache`, loaded as PageOf(bytes, offset) (counted in *loads)
// when it is not cached; checks that its bytes are that page's.
void GetPage(PageCache& cache, uint64_t offset, size_t bytes, int* loads) {
  auto p = cache.GetOrLoad(0, offset, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
    ++*loads;
    return PageOf(bytes, static_cast<uint8_t>(offset));
  });
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->body.data()[0], static_cast<uint8_t>(offset));
  EXPECT_EQ((*p)->body.data()[bytes - 1], static_cast<uint8_t>(offset));
}

TEST(PageCache, ConcurrentRequestsForOnePageLoadItOnce) {
  PageCache cache(1 << 20);
  std::atomic<int> loads{0};
  std::vector<std::thread> threads;
  std::vector<const DecodedPage*> got(8, nullptr);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto p = cache.GetOrLoad(3, 4096, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
        ++loads;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others arrive while loading
        return PageOf(100, 7);
      });
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      got[i] = p->get();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(loads.load(), 1);
  EXPECT_EQ(cache.loads(), 1);
  for (const DecodedPage* p : got) EXPECT_EQ(p, got[0]);
  EXPECT_EQ(got[0]->body.data()[99], 7);
}

TEST(PageCache, LeastRecentlyUsedPagesGoOverTheBudget) {
  const size_t page = PageOf(1000, 0)->bytes();
  PageCache cache(2 * page + page / 2);  // room for two pages
  int loads = 0;
  auto get = [&](uint64_t offset) { GetPage(cache, offset, 1000, &loads); };
  get(1);
  get(2);
  get(1);  // 1 is now more recent than 2
  EXPECT_EQ(loads, 2);
  get(3);  // evicts 2
  EXPECT_EQ(cache.cached_pages(), 2u);
  EXPECT_LE(cache.cached_bytes(), 2 * page + page / 2);
  get(1);
  EXPECT_EQ(loads, 3);
  get(2);
  EXPECT_EQ(loads, 4);
}

TEST(PageCache, TheTwoLatestPagesStayWhateverTheirSize) {
  // Pages larger than the whole budget are still served, and the two most recently used kept: the
  // previous window's last rows find theirs while the next window's page is in.
  PageCache tiny(10);
  int loads = 0;
  auto get = [&](uint64_t offset) { GetPage(tiny, offset, 5000, &loads); };
  get(1);
  EXPECT_EQ(tiny.cached_pages(), 1u);
  get(2);
  get(1);
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(tiny.cached_pages(), PageCache::kAlwaysKept);
  get(3);  // 2 is the least recently used
  get(1);
  EXPECT_EQ(loads, 3);
  get(2);
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(tiny.cached_pages(), PageCache::kAlwaysKept);
}

TEST(PageCache, FailedLoadsAreNotCached) {
  PageCache cache(1 << 20);
  int calls = 0;
  auto fail = [&]() -> Result<std::shared_ptr<const DecodedPage>> {
    ++calls;
    return Status::Corruption("page at offset 8: CRC mismatch");
  };
  auto a = cache.GetOrLoad(0, 8, fail);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kCorruption);
  auto b = cache.GetOrLoad(0, 8, fail);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(cache.cached_pages(), 0u);
  auto c = cache.GetOrLoad(0, 8, [] { return Result<std::shared_ptr<const DecodedPage>>(PageOf(10, 1)); });
  EXPECT_TRUE(c.ok());
  // An allocation failure reaches the loading thread as bad_alloc, and the page is not cached.
  EXPECT_THROW((void)cache.GetOrLoad(0, 16, []() -> Result<std::shared_ptr<const DecodedPage>> { throw std::bad_alloc(); }),
               std::bad_alloc);
  EXPECT_EQ(cache.cached_pages(), 1u);
}

}  // namespace
}  // namespace stoke
