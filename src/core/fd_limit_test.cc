#include "core/fd_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <thread>
#include <vector>

namespace stoke {
namespace {

TEST(FdLimit, SoftLimitMatchesGetrlimit) {
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  const uint64_t want = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
  EXPECT_EQ(OpenFileSoftLimit(), want);
}

// In a child process (the raise happens once per process): lowers the soft limit, raises it from
// several threads at once, and returns 0 when each saw soft == hard, and a later lowering stays.
int RaiseFromThreadsInChild() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 2;
  if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max < 64) return 0;  // nothing to show here
  rl.rlim_cur = 32;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return 3;
  std::vector<std::thread> threads;
  std::vector<uint64_t> seen(4, 0);
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&seen, i] { seen[i] = RaiseOpenFileLimitOnce(); });
  }
  for (auto& t : threads) t.join();
  for (uint64_t s : seen) {
    if (s != rl.rlim_max) return 4;
  }
  rl.rlim_cur = 32;
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return 5;
  return RaiseOpenFileLimitOnce() == 32 ? 0 : 6;
}

TEST(FdLimit, RaiseLiftsTheSoftLimitToTheHardLimitOnceFromAnyThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the once has not run in it
  EXPECT_EXIT(std::_Exit(RaiseFromThreadsInChild()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace stoke
