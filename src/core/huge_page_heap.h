// The C library's heap in transparent huge pages, for the stoke command.
//
// Opening a table of 650,000 files decodes 650,000 add actions: about 400 MB of small objects
// (paths, statistics, the actions themselves) that glibc's malloc takes from the kernel 4 KiB at a
// time. Where a page fault is expensive (in a virtual machine each one is an exit to the hypervisor)
// those faults were most of `stoke inspect`: 150,000 faults and 3.0 s, against 1,300 faults and
// 0.5 s with the heap in 2 MiB pages (docs/benchmarks.md, "The heap in huge pages").
//
// glibc puts its heap in huge pages only when told so before the program starts, by the tunables in
// GLIBC_TUNABLES (glibc.malloc.hugetlb=1, which advises its heap MADV_HUGEPAGE, and a top_pad large
// enough that the heap grows by whole huge pages). ReexecWithHugePageHeap, called first thing in
// main, starts the program again with them added, then puts the environment back as it was, so
// that processes stoke starts (fio, Python baselines, other tools) see the caller's environment.
//
// Nothing changes where the kernel's transparent huge pages are off ("never"), where the caller
// already set either tunable (their choice stands), where STOKE_HUGE_PAGE_HEAP=0, in builds with a
// sanitizer (it brings its own allocator), or when the program cannot be executed again (it then
// goes on as it started).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "stoke/process.h"

namespace stoke {

// Grows the heap by this much beyond each request (glibc.malloc.top_pad): with less, the heap's end
// moves a few hundred KiB at a time and its new pages are 4 KiB ones (at 32 MiB inspect of 650,000
// files still took 1.6 s, at 64 MiB 0.5 s). It is address space: untouched, it takes no memory.
inline constexpr size_t kHugePageHeapTopPad = size_t{64} << 20;

// The environment variable that turns it off ("0").
inline constexpr char kHugePageHeapEnv[] = "STOKE_HUGE_PAGE_HEAP";

// The GLIBC_TUNABLES value to start again with, given the current one (nullptr when unset), the
// contents of /sys/kernel/mm/transparent_hugepage/enabled (e.g. "always [madvise] never") and the
// value of STOKE_HUGE_PAGE_HEAP (nullptr when unset); nullopt when nothing should change.
std::optional<std::string> HugePageHeapTunables(const char* current_tunables, std::string_view thp_enabled,
                                                const char* opt_out);

// ReexecWithHugePageHeap (stoke/process.h) does the above. The program started again logs
// "heap.huge_pages" at debug level (STOKE_LOG_LEVEL=debug).

}  // namespace stoke
