#include "core/mutex.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace stoke {
namespace {

// The wrappers add no state to what they wrap.
static_assert(sizeof(Mutex) == sizeof(std::mutex));
static_assert(sizeof(CondVar) == sizeof(std::condition_variable));

struct Counter {
  Mutex mu;
  int64_t value GUARDED_BY(mu) = 0;
};

TEST(MutexTest, MutexLockMakesIncrementsFromManyThreadsExact) {
  Counter c;
  constexpr int kThreads = 4, kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < kPerThread; ++i) {
        MutexLock l(&c.mu);
        c.value = c.value + 1;  // a read and a write: lost updates without the lock
      }
    });
  }
  for (auto& t : threads) t.join();
  MutexLock l(&c.mu);
  EXPECT_EQ(c.value, int64_t{kThreads} * kPerThread);
}

TEST(MutexTest, TryLockFailsWhileAnotherThreadHoldsTheLock) {
  Mutex mu;
  mu.Lock();
  bool got = true;
  std::thread([&] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_FALSE(got);
  mu.Unlock();
  std::thread([&] {
    got = false;
    if (mu.TryLock()) {
      got = true;
      mu.Unlock();
    }
  }).join();
  EXPECT_TRUE(got);
}

// Two threads take turns through one CondVar: each Wait must release the mutex (or the other thread
// could never take its turn) and hold it again on return (the turn is read under it).
TEST(MutexTest, CondVarWaitReleasesTheMutexAndTakesItBack) {
  struct Turns {
    Mutex mu;
    CondVar cv;
    int turn GUARDED_BY(mu) = 0;           // even: main's turn, odd: the helper's
    std::vector<int> order GUARDED_BY(mu);  // who took each turn
    // Waits for the turns of `parity`, `rounds` times, recording each.
    void Take(int parity, int rounds) {
      for (int i = 0; i < rounds; ++i) {
        MutexLock l(&mu);
        while (turn % 2 != parity) cv.Wait(&mu);
        order.push_back(parity);
        ++turn;
        cv.SignalAll();
      }
    }
  } t;
  constexpr int kRounds = 1000;
  std::thread helper([&t] { t.Take(1, kRounds); });
  t.Take(0, kRounds);
  helper.join();
  MutexLock l(&t.mu);
  ASSERT_EQ(t.order.size(), size_t{2 * kRounds});
  for (size_t i = 0; i < t.order.size(); ++i) ASSERT_EQ(t.order[i], static_cast<int>(i % 2)) << "at " << i;
}

}  // namespace
}  // namespace stoke
