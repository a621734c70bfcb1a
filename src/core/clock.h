// Monotonic time for measurements.
#pragma once

#include <chrono>
#include <cstdint>

namespace stoke {

inline int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
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
