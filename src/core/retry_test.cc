#include "core/retry.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace stoke {
namespace {

TEST(RetryPolicyTest, BackoffIsJitteredBelowADoublingCap) {
  RetryPolicy p{.max_attempts = 10, .initial_backoff_us = 100, .max_backoff_us = 1000};
  for (int attempt = 1; attempt <= 8; ++attempt) {
    const int64_t cap = std::min<int64_t>(1000, int64_t{100} << (attempt - 1));
    int64_t lowest = cap, highest = 0;
    for (int i = 0; i < 2000; ++i) {
      const int64_t w = p.BackoffMicros(attempt);
      ASSERT_GE(w, 0);
      ASSERT_LT(w, cap + 1) << "attempt " << attempt;
      lowest = std::min(lowest, w);
      highest = std::max(highest, w);
    }
    // Spread over [0, cap): the waits of clients that failed together differ.
    EXPECT_LT(lowest, cap / 4) << "attempt " << attempt;
    EXPECT_GT(highest, cap * 3 / 4) << "attempt " << attempt;
  }
}

TEST(RetryPolicyTest, AttemptsAreCountedWithTheFirst) {
  RetryPolicy once{.max_attempts = 1};
  EXPECT_FALSE(once.AllowsAnother(1));
  RetryPolicy three{.max_attempts = 3};
  EXPECT_TRUE(three.AllowsAnother(1));
  EXPECT_TRUE(three.AllowsAnother(2));
  EXPECT_FALSE(three.AllowsAnother(3));
}

TEST(RetryPolicyTest, ZeroAndHugeBoundsStayInRange) {
  RetryPolicy none{.max_attempts = 3, .initial_backoff_us = 0, .max_backoff_us = 0};
  EXPECT_EQ(none.BackoffMicros(1), 0);
  EXPECT_EQ(none.BackoffMicros(60), 0);
  RetryPolicy huge{.max_attempts = 100, .initial_backoff_us = 1, .max_backoff_us = int64_t{1} << 62};
  for (int attempt : {1, 30, 62, 63, 100, 1000}) {
    const int64_t w = huge.BackoffMicros(attempt);
    EXPECT_GE(w, 0);
    EXPECT_LE(w, int64_t{1} << 62);
  }
  none.Wait(5);  // returns at once
}

}  // namespace
}  // namespace stoke
