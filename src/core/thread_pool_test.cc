#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/cpus_testing.h"
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

// In a process allowed no more threads (RLIMIT_NPROC of 1, as an unprivileged user: root is exempt):
// a pool gets none and runs every task on the submitting thread. Returns 0, or which check failed.
int PoolWithoutThreads() {
  if (!testing_support::AllowNoMoreThreads()) return 3;
  ThreadPool pool(4);
  if (pool.size() != 0) return 5;
  std::vector<int> hits(100);
  const Status st = ParallelFor(pool, hits.size(), [&](size_t i) {
    hits[i]++;
    return Status::OK();
  });
  if (!st.ok()) return 6;
  if (std::count(hits.begin(), hits.end(), 1) != 100) return 7;
  OrderedTasks<size_t> tasks(pool, 10, 3, [](size_t i) { return i * i; });
  for (size_t i = 0; i < 10; ++i) {
    if (!tasks.HasNext() || tasks.Next() != i * i) return 8;
  }
  return 0;
}

// Before, the refused thread's std::system_error left the pool's other threads joinable, and the
// process terminated.
TEST(ThreadPool, WithoutThreadsRunsTasksOnTheCaller) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(_exit(PoolWithoutThreads()), testing::ExitedWithCode(0), "");
}

TEST(OrderedTasks, HandsResultsBackInIndexOrderWithinTheWindow) {
  ThreadPool pool(4);
  std::atomic<size_t> started{0};
  constexpr size_t kWindow = 3;
  OrderedTasks<size_t> tasks(pool, 200, kWindow, [&](size_t i) {
    started++;
    // Later indices finish first now and then: the order must not come from timing.
    if (i % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
    return i * 10;
  });
  size_t taken = 0;
  while (tasks.HasNext()) {
    EXPECT_EQ(tasks.Next(), taken * 10);
    ++taken;
    EXPECT_LE(started.load(), taken - 1 + kWindow) << "more than the window started before result " << taken - 1;
  }
  EXPECT_EQ(taken, 200u);
  EXPECT_EQ(started.load(), 200u);
}

TEST(OrderedTasks, StopStartsNoMoreButHandsBackThoseStarted) {
  ThreadPool pool(2);
  std::atomic<size_t> started{0};
  OrderedTasks<size_t> tasks(pool, 100, 5, [&](size_t i) {
    started++;
    return i;
  });
  for (size_t i = 0; i < 10; ++i) ASSERT_EQ(tasks.Next(), i);
  tasks.Stop();
  size_t next = 10;
  while (tasks.HasNext()) EXPECT_EQ(tasks.Next(), next++);
  // Next(9) had started 9..13; nothing after Stop.
  EXPECT_EQ(next, 14u);
  EXPECT_EQ(started.load(), 14u);
}

TEST(OrderedTasks, DestructorWaitsForStartedTasks) {
  ThreadPool pool(2);
  std::atomic<int> finished{0};
  {
    OrderedTasks<int> tasks(pool, 50, 4, [&](size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      finished++;
      return 0;
    });
    ASSERT_TRUE(tasks.HasNext());  // starts the first 4
  }
  EXPECT_EQ(finished.load(), 4);
}

}  // namespace
}  // namespace stoke
