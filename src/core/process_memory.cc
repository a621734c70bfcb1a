#include "core/process_memory.h"

#include <unistd.h>

#include <cstdio>

namespace stoke {

int64_t AnonymousResidentBytes() {
  // statm: size resident shared text lib data dt, in pages; "shared" is the resident file-backed
  // and shared-memory pages.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0, shared = 0;
  const int got = std::fscanf(f, "%lld %lld %lld", &size, &resident, &shared);
  std::fclose(f);
  if (got != 3 || resident < shared) return -1;
  return (resident - shared) * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace stoke
