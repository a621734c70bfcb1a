// Test support: runs code on a thread that may use one CPU only (for tests of what is sized from
// AvailableCpus()), and stops a (child) process from starting more threads.
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

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

// Makes the calling process unable to start another thread or process: RLIMIT_NPROC of 1, as the
// unprivileged user nobody when it runs as root (root is exempt from the limit). For a child process
// only (a death test's): it cannot be undone. Returns false when a step fails.
inline bool AllowNoMoreThreads() {
  if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) return false;
  const rlimit one{1, 1};
  return ::setrlimit(RLIMIT_NPROC, &one) == 0;
}

}  // namespace stoke::testing_support
