#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

#include "stoke/status.h"

namespace stoke {
namespace {

TEST(ThreadPool, RunsEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  ASSERT_TRUE(ParallelFor(pool, hits.size(), [&](size_t i) {
                hits[i]++;
                return Status::OK();
              }).ok());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ReturnsTheErrorOfTheLowestFailingIndex) {
  ThreadPool pool(2);
  Status s = ParallelFor(pool, 100, [](size_t i) {
    if (i == 70 || i == 30) return Status::Corruption("bad " + std::to_string(i));
    return Status::OK();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "bad 30");
}

TEST(ThreadPool, DestructorRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace stoke
