#include "core/retry.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "core/random.h"

namespace stoke {

int64_t RetryPolicy::BackoffMicros(int attempt) const {
  thread_local Rng rng(std::random_device{}() ^ std::hash<std::thread::id>{}(std::this_thread::get_id()));
  const int64_t ceiling = std::max<int64_t>(max_backoff_us, 0);
  int64_t cap = std::min(std::max<int64_t>(initial_backoff_us, 0), ceiling);
  for (int i = 1; i < attempt && cap < ceiling; ++i) cap = cap > ceiling / 2 ? ceiling : cap * 2;
  return static_cast<int64_t>(rng.Uniform() * static_cast<double>(cap));
}

void RetryPolicy::Wait(int attempt) const {
  const int64_t us = BackoffMicros(attempt);
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

}  // namespace stoke
