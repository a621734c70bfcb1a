// How many CPUs this process may use: what its thread pools are sized from by default.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "stoke/status.h"

namespace stoke {

// The CPUs the calling thread may run on (its affinity mask: taskset, a container's cpuset), at most
// its cgroup's CPU limit rounded up (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`:
// `docker --cpus=2`, a Kubernetes CPU limit), at least 1. std::thread::hardware_concurrency() counts
// the machine's online CPUs instead: 64 in a container limited to 2 CPUs on a 64-core host, where 64
// busy threads would spend most of each period throttled. The cgroup limit is read once per process
// (an unreadable one is logged once and ignored), the affinity mask at each call. Thread-safe.
size_t AvailableCpus();

// The CPU limit (quota / period, in CPUs) of this process's cgroup: the smallest set on the path from
// the cgroup that /proc/self/cgroup names up to the root of its mount in /proc/self/mountinfo, for
// cgroup v2 and for v1's cpu controller (a hybrid system has both). Every path is read below `root`:
// "" for the real files, a directory laid out alike in tests. nullopt when no limit is set or the
// files are absent (not Linux, no cgroup file system mounted); an error naming the file and offset
// when one cannot be parsed.
Result<std::optional<double>> CgroupCpuLimit(const std::string& root);

// The parsers behind CgroupCpuLimit. Each error names `file` and the byte offset of what it rejects.
struct CgroupMount {
  std::string root;         // the directory of the hierarchy mounted there (mountinfo's 4th field)
  std::string mount_point;  // where (5th field); both with the kernel's \ooo escapes undone
};
struct CgroupMounts {
  std::optional<CgroupMount> v2;      // the cgroup2 file system
  std::optional<CgroupMount> v1_cpu;  // the cgroup (v1) file system with the cpu controller
};
// /proc/self/mountinfo (proc(5)): the first mount of each kind.
Result<CgroupMounts> ParseCgroupMounts(std::string_view mountinfo, std::string_view file);

struct CgroupPaths {
  std::optional<std::string> v2;      // the "0::PATH" line's PATH
  std::optional<std::string> v1_cpu;  // PATH of the line whose controller list names cpu
};
// /proc/self/cgroup (cgroups(7)): "ID:CONTROLLERS:PATH" lines.
Result<CgroupPaths> ParseProcCgroup(std::string_view text, std::string_view file);

// cgroup v2 cpu.max: "max PERIOD" (nullopt: no limit) or "QUOTA PERIOD" (QUOTA / PERIOD CPUs).
Result<std::optional<double>> ParseCpuMax(std::string_view text, std::string_view file);
// cgroup v1 cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us; `file` names the quota's file.
Result<std::optional<double>> ParseCfsQuota(std::string_view quota, std::string_view period, std::string_view file);

}  // namespace stoke
