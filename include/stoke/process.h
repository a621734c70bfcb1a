// Process-wide controls for programs that embed stoke: the C library's heap in huge pages (called
// first thing in main), and injected allocation failures for testing a program's handling of a
// loader that runs out of memory.
#pragma once

#include <cstdint>

namespace stoke {

// Starts the program again with glibc's heap in transparent huge pages, which cuts the page faults
// of opening a very large table (650,000 files: 3.0 s of `stoke inspect` became 0.5 s). Call it first
// in main, before any thread starts. It returns in the program started again (with the environment
// put back as it was), and in the first one when nothing changes: where transparent huge pages are
// off, where GLIBC_TUNABLES already sets the heap's tunables, where STOKE_HUGE_PAGE_HEAP=0, in
// sanitizer builds, or when the program cannot be executed again.
void ReexecWithHugePageHeap(char** argv);

// Makes the n-th allocation that the loader's pipeline checks from now (1 = the next one, on any
// thread) fail as if the allocator had refused it: the loader then reports an "out of memory" error
// instead of a batch. 0 disarms. For tests; a disarmed check costs one relaxed atomic load.
void FailNthLoaderAllocation(int64_t n);

}  // namespace stoke
