#include "core/cpus.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"

namespace stoke {

namespace {

// The largest CPU set sched_getaffinity is asked for (CPU_ALLOC sizes double from 1024 while the
// kernel's mask is larger): Linux's NR_CPUS is at most 8192.
constexpr size_t kMaxAffinityCpus = size_t{1} << 16;
// /proc/self/mountinfo on a host with thousands of mounts is a few MB; cgroup files are a line.
constexpr size_t kMaxFileBytes = size_t{64} << 20;

// The whole file; nullopt when it cannot be opened or read (absent: no cgroup there, or not Linux).
std::optional<std::string> ReadSmallFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || text.size() + static_cast<size_t>(n) > kMaxFileBytes) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

Status Rejected(std::string_view file, size_t offset, std::string_view what) {
  return Status::InvalidArgument(fmt::format("{}: offset {}: {}", file, offset, what));
}

// A decimal integer making up all of `token`.
std::optional<int64_t> ParseInteger(std::string_view token) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty()) return std::nullopt;
  return v;
}

// The file's text without one trailing newline (the kernel ends each value with one).
std::string_view OneLine(std::string_view text) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

// mountinfo's fields escape space, tab, newline and backslash as \ooo (octal).
Result<std::string> Unescape(std::string_view field, std::string_view file, size_t offset) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '\\') {
      out.push_back(field[i]);
      continue;
    }
    int v = 0;
    for (size_t k = 1; k <= 3; ++k) {
      if (i + k >= field.size() || field[i + k] < '0' || field[i + k] > '7') {
        return Rejected(file, offset + i, "a '\\' not followed by three octal digits");
      }
      v = v * 8 + (field[i + k] - '0');
    }
    if (v > 0xff) return Rejected(file, offset + i, "an octal escape above \\377");
    out.push_back(static_cast<char>(v));
    i += 3;
  }
  return out;
}

// Splits `line` at single spaces into fields, with each field's offset within the line.
std::vector<std::pair<std::string_view, size_t>> Fields(std::string_view line) {
  std::vector<std::pair<std::string_view, size_t>> fields;
  size_t start = 0;
  for (;;) {
    const size_t space = line.find(' ', start);
    fields.emplace_back(line.substr(start, space - start), start);
    if (space == std::string_view::npos) return fields;
    start = space + 1;
  }
}

bool ListHas(std::string_view list, std::string_view item) {
  for (size_t start = 0;;) {
    const size_t comma = list.find(',', start);
    if (list.substr(start, comma - start) == item) return true;
    if (comma == std::string_view::npos) return false;
    start = comma + 1;
  }
}

// Calls on_line(line, offset) for each line of `text`; a last line without '\n' counts, an empty
// text has none.
template <typename OnLine>
Status ForEachLine(std::string_view text, OnLine on_line) {
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    STOKE_RETURN_IF_ERROR(on_line(text.substr(start, end - start), start));
    start = end + 1;
  }
  return Status::OK();
}

void KeepSmaller(std::optional<double> limit, std::optional<double>* smallest) {
  if (limit && (!*smallest || *limit < **smallest)) *smallest = limit;
}

// The directories from the cgroup at `path` (as /proc/self/cgroup names it) up to the root of its
// mount: the mount's root directory when the cgroup lies outside it (another cgroup namespace's
// view, "/.." in the path).
std::vector<std::string> CgroupDirs(const std::string& root, const CgroupMount& mount, const std::string& path) {
  std::string rel;
  if (mount.root == "/") {
    rel = path;
  } else if (path.size() > mount.root.size() && path.compare(0, mount.root.size(), mount.root) == 0 &&
             path[mount.root.size()] == '/') {
    rel = path.substr(mount.root.size());
  }
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  if (rel.find("/..") != std::string::npos) rel.clear();
  std::string base = root + mount.mount_point;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::vector<std::string> dirs;
  for (;;) {
    dirs.push_back(base + rel);
    if (rel.empty()) return dirs;
    rel.resize(rel.rfind('/'));
  }
}

}  // namespace

Result<CgroupMounts> ParseCgroupMounts(std::string_view mountinfo, std::string_view file) {
  CgroupMounts mounts;
  STOKE_RETURN_IF_ERROR(ForEachLine(mountinfo, [&](std::string_view line, size_t at) -> Status {
    const auto fields = Fields(line);
    // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
    size_t sep = 6;
    while (sep < fields.size() && fields[sep].first != "-") ++sep;
    if (sep + 3 >= fields.size()) {
      return Rejected(file, at, "a line without six fields, then ' - FSTYPE SOURCE OPTIONS'");
    }
    const std::string_view fstype = fields[sep + 1].first;
    const bool v2 = fstype == "cgroup2" && !mounts.v2;
    const bool v1_cpu = fstype == "cgroup" && !mounts.v1_cpu && ListHas(fields[sep + 3].first, "cpu");
    if (!v2 && !v1_cpu) return Status::OK();
    CgroupMount m;
    STOKE_ASSIGN_OR_RETURN(m.root, Unescape(fields[3].first, file, at + fields[3].second));
    STOKE_ASSIGN_OR_RETURN(m.mount_point, Unescape(fields[4].first, file, at + fields[4].second));
    if (m.root.empty() || m.root[0] != '/' || m.mount_point.empty() || m.mount_point[0] != '/') {
      return Rejected(file, at + fields[3].second, "a cgroup mount whose root or mount point is not an absolute path");
    }
    (v2 ? mounts.v2 : mounts.v1_cpu) = std::move(m);
    return Status::OK();
  }));
  return mounts;
}

Result<CgroupPaths> ParseProcCgroup(std::string_view text, std::string_view file) {
  CgroupPaths paths;
  STOKE_RETURN_IF_ERROR(ForEachLine(text, [&](std::string_view line, size_t at) -> Status {
    const size_t first = line.find(':');
    const size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) return Rejected(file, at, "a line that is not ID:CONTROLLERS:PATH");
    const auto id = ParseInteger(line.substr(0, first));
    if (!id || *id < 0) return Rejected(file, at, "a hierarchy ID that is not a non-negative integer");
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string_view path = line.substr(second + 1);
    if (path.empty() || path[0] != '/') {
      return Rejected(file, at + second + 1, "a cgroup path that does not start with '/'");
    }
    if (*id == 0 && controllers.empty()) {
      if (!paths.v2) paths.v2 = std::string(path);
    } else if (ListHas(controllers, "cpu") && !paths.v1_cpu) {
      paths.v1_cpu = std::string(path);
    }
    return Status::OK();
  }));
  return paths;
}

Result<std::optional<double>> ParseCpuMax(std::string_view text, std::string_view file) {
  const std::string_view line = OneLine(text);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos) return Rejected(file, 0, "not 'QUOTA PERIOD' (QUOTA a number or max)");
  const auto period = ParseInteger(line.substr(space + 1));
  if (!period || *period <= 0) return Rejected(file, space + 1, "a period that is not a positive integer");
  const std::string_view quota = line.substr(0, space);
  if (quota == "max") return std::optional<double>();
  const auto q = ParseInteger(quota);
  if (!q || *q <= 0) return Rejected(file, 0, "a quota that is neither max nor a positive integer");
  return std::optional<double>(static_cast<double>(*q) / static_cast<double>(*period));
}

Result<std::optional<double>> ParseCfsQuota(std::string_view quota, std::string_view period, std::string_view file) {
  const auto q = ParseInteger(OneLine(quota));
  if (!q || (*q <= 0 && *q != -1)) return Rejected(file, 0, "a quota that is neither -1 nor a positive integer");
  if (*q == -1) return std::optional<double>();
  const auto p = ParseInteger(OneLine(period));
  if (!p || *p <= 0) {
    return Status::InvalidArgument(fmt::format("{}: the period beside this quota is not a positive integer", file));
  }
  return std::optional<double>(static_cast<double>(*q) / static_cast<double>(*p));
}

Result<std::optional<double>> CgroupCpuLimit(const std::string& root) {
  const std::string mountinfo_path = root + "/proc/self/mountinfo";
  const std::string cgroup_path = root + "/proc/self/cgroup";
  const auto mountinfo = ReadSmallFile(mountinfo_path);
  const auto cgroup = ReadSmallFile(cgroup_path);
  if (!mountinfo || !cgroup) return std::optional<double>();
  STOKE_ASSIGN_OR_RETURN(const CgroupMounts mounts, ParseCgroupMounts(*mountinfo, mountinfo_path));
  STOKE_ASSIGN_OR_RETURN(const CgroupPaths paths, ParseProcCgroup(*cgroup, cgroup_path));
  std::optional<double> smallest;
  if (mounts.v2 && paths.v2) {
    for (const std::string& dir : CgroupDirs(root, *mounts.v2, *paths.v2)) {
      const std::string file = dir + "/cpu.max";
      if (auto text = ReadSmallFile(file)) {
        STOKE_ASSIGN_OR_RETURN(const auto limit, ParseCpuMax(*text, file));
        KeepSmaller(limit, &smallest);
      }
    }
  }
  if (mounts.v1_cpu && paths.v1_cpu) {
    for (const std::string& dir : CgroupDirs(root, *mounts.v1_cpu, *paths.v1_cpu)) {
      const std::string file = dir + "/cpu.cfs_quota_us";
      auto quota = ReadSmallFile(file);
      auto period = ReadSmallFile(dir + "/cpu.cfs_period_us");
      if (quota && period) {
        STOKE_ASSIGN_OR_RETURN(const auto limit, ParseCfsQuota(*quota, *period, file));
        KeepSmaller(limit, &smallest);
      }
    }
  }
  return smallest;
}

size_t AvailableCpus() {
  static const std::optional<double> limit = []() -> std::optional<double> {
    auto r = CgroupCpuLimit("");
    if (!r.ok()) {
      STOKE_LOG(kWarn, "cpus.cgroup_limit", "error=\"{}\" (thread pools are sized from the affinity mask alone)",
                r.status().message());
      return std::nullopt;
    }
    return *r;
  }();
  size_t cpus = 0;
  for (size_t n = 1024; n <= kMaxAffinityCpus && cpus == 0; n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) break;
    const size_t bytes = CPU_ALLOC_SIZE(n);
    const int rc = ::sched_getaffinity(0, bytes, set);
    const int err = errno;
    if (rc == 0) cpus = static_cast<size_t>(CPU_COUNT_S(bytes, set));
    CPU_FREE(set);
    if (rc != 0 && err != EINVAL) break;  // EINVAL: the kernel's mask is larger than n CPUs
  }
  if (cpus == 0) cpus = std::thread::hardware_concurrency();
  if (limit) cpus = std::min(cpus, static_cast<size_t>(std::max(1.0, std::ceil(*limit))));
  return std::max<size_t>(cpus, 1);
}

}  // namespace stoke
