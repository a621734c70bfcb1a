// What this process holds of the machine's memory, as the kernel counts it.
#pragma once

#include <cstdint>

namespace stoke {

// The process's resident memory now that is its own (anonymous pages: heap, stacks, buffers), in
// bytes: the resident set less its file-backed and shared pages (/proc/self/statm). Pages of
// files mapped read-only (the loader's mapped reads of data files) count in the resident set
// (getrusage's peak, /usr/bin/time) but not here: they are the page cache's, and the kernel may drop
// them. -1 where /proc cannot be read.
int64_t AnonymousResidentBytes();

}  // namespace stoke
