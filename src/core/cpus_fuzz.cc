// libFuzzer target: the parsers of the cgroup and mount files that size stoke's thread pools
// (/proc/self/mountinfo, /proc/self/cgroup, cpu.max, cpu.cfs_quota_us). Anything either parses into
// what the files can say or is an InvalidArgument naming the file; nothing crashes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/cpus.h"

namespace {
void CheckError(const stoke::Status& s) {
  if (s.code() != stoke::StatusCode::kInvalidArgument || s.message().find("fuzz: ") != 0) __builtin_trap();
}
void CheckLimit(const stoke::Result<std::optional<double>>& r) {
  if (!r.ok()) return CheckError(r.status());
  if (r->has_value() && !(**r > 0 && std::isfinite(**r))) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto m = stoke::ParseCgroupMounts(text, "fuzz"); !m.ok()) {
    CheckError(m.status());
  } else {
    for (const auto& mount : {m->v2, m->v1_cpu}) {
      if (mount && (mount->root.empty() || mount->root[0] != '/' || mount->mount_point.empty() ||
                    mount->mount_point[0] != '/')) {
        __builtin_trap();
      }
    }
  }
  if (auto p = stoke::ParseProcCgroup(text, "fuzz"); !p.ok()) {
    CheckError(p.status());
  } else {
    for (const auto& path : {p->v2, p->v1_cpu}) {
      if (path && (path->empty() || (*path)[0] != '/')) __builtin_trap();
    }
  }
  CheckLimit(stoke::ParseCpuMax(text, "fuzz"));
  const size_t half = text.find('\n');
  const std::string_view period = half == std::string_view::npos ? std::string_view() : text.substr(half + 1);
  CheckLimit(stoke::ParseCfsQuota(text.substr(0, half), period, "fuzz"));
  return 0;
}
