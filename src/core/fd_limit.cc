#include "core/fd_limit.h"

#include <sys/resource.h>

#include <mutex>

namespace stoke {

namespace {
// Linux caps RLIMIT_NOFILE at fs.nr_open, 1048576 by default; a hard limit of RLIM_INFINITY (possible
// only for privileged processes) is taken as that.
constexpr rlim_t kUnlimitedTarget = rlim_t{1} << 20;
}  // namespace

uint64_t OpenFileSoftLimit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  return rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(rl.rlim_cur);
}

uint64_t RaiseOpenFileLimitOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit rl{};
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    const rlim_t target = rl.rlim_max == RLIM_INFINITY ? kUnlimitedTarget : rl.rlim_max;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < target) {
      rl.rlim_cur = target;
      (void)::setrlimit(RLIMIT_NOFILE, &rl);  // EPERM/EINVAL: keep the current limit
    }
  });
  return OpenFileSoftLimit();
}

}  // namespace stoke
