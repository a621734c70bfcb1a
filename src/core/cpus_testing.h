// Test support: runs code on a thread that may use one CPU only (for tests of what is sized from
// AvailableCpus()).
#pragma once

#include <sched.h>

#include <thread>

namespace stoke::testing_support {

// Runs fn() on a new thread whose affinity mask is the first CPU the caller may use, and waits for
// it. Returns false, without running fn, when the mask cannot be read or set.
template <typename Fn>
bool RunOnOneCpu(Fn&& fn) {
  cpu_set_t all;
  if (::sched_getaffinity(0, sizeof(all), &all) != 0 || CPU_COUNT(&all) == 0) return false;
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  bool ran = false;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    if (::sched_setaffinity(0, sizeof(one), &one) != 0) return;
    fn();
    ran = true;
  }).join();
  return ran;
}

}  // namespace stoke::testing_support
