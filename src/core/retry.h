// One retry policy for all of stoke: jittered exponential backoff. HTTP requests (io/http_client),
// S3 conditional writes that collide (409), the wait for an Azure copy, and the commits of an
// ingest that lose to another writer's all retry with it.
//
// The wait before retry k (k = 1, 2, ...) is uniform in [0, min(max_backoff, initial_backoff * 2^(k-1))]:
// "full jitter", so clients that failed together spread out instead of retrying in lock step.
#pragma once

#include <cstdint>

namespace stoke {

struct RetryPolicy {
  // Attempts in all, the first included (1 = no retry). Default 5.
  int max_attempts = 5;
  // The backoff's bounds, in microseconds (see above). Defaults 50 ms and 2 s.
  int64_t initial_backoff_us = 50'000;
  int64_t max_backoff_us = 2'000'000;

  // Whether attempt `attempt` (1 = the first), which just failed with a retryable error, may be
  // followed by another.
  bool AllowsAnother(int attempt) const { return attempt < max_attempts; }
  // The wait before retry `attempt` (>= 1), in microseconds: drawn from this thread's generator.
  int64_t BackoffMicros(int attempt) const;
  // Sleeps BackoffMicros(attempt) microseconds.
  void Wait(int attempt) const;
};

}  // namespace stoke
