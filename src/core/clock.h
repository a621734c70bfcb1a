// Monotonic time for measurements, and the wall clock for timestamps.
#pragma once

#include <chrono>
#include <cstdint>

namespace stoke {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Wall-clock time: milliseconds since the Unix epoch (Delta's timestamps).
inline int64_t EpochMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Measures elapsed wall time since construction or the last Reset().
class Stopwatch {
 public:
  Stopwatch() : start_(NowNanos()) {}
  void Reset() { start_ = NowNanos(); }
  double Seconds() const { return (NowNanos() - start_) * 1e-9; }

 private:
  int64_t start_;
};

}  // namespace stoke
