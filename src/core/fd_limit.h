// The process's limit on open file descriptors (RLIMIT_NOFILE).
#pragma once

#include <cstdint>

namespace stoke {

// The soft RLIMIT_NOFILE now: how many descriptors this process may hold open at once (UINT64_MAX when
// unlimited; 1024 when getrlimit fails, the usual default).
uint64_t OpenFileSoftLimit();

// Raises the soft RLIMIT_NOFILE to the hard limit, as servers do at start-up: the soft default (1024
// on most systems) exists for programs that still use select(2), which stoke does not. Runs once per
// process; later calls return at once. Thread-safe. Failure is not an error (the limit stays where it
// was; callers size their caches from OpenFileSoftLimit()). Returns the soft limit afterwards.
uint64_t RaiseOpenFileLimitOnce();

}  // namespace stoke
