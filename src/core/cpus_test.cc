#include "core/cpus.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "core/cpus_testing.h"
#include "core/thread_pool.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

// What this machine's kernel wrote, on a hybrid (v1 + v2) system: the cpu controller on v1.
constexpr char kHybridMountinfo[] =
    "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "33 30 0:30 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
constexpr char kHybridCgroup[] = "9:name=systemd:/\n4:memory:/api/82bf\n3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n";

TEST(Cpus, ParsesCpuMax) {
  auto none = ParseCpuMax("max 100000\n", "cpu.max");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  auto limit = ParseCpuMax("150000 100000\n", "cpu.max");
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_DOUBLE_EQ(limit->value(), 1.5);
}

TEST(Cpus, RejectsBadCpuMaxNamingFileAndOffset) {
  for (const char* bad : {"", "\n", "max", "max\n", "abc 100000", "100000 0", "-5 100000", "0 100000", "100 100 100",
                          "100000 x", " 100000", "1e5 100000", "99999999999999999999 1"}) {
    auto r = ParseCpuMax(bad, "/sys/fs/cgroup/a/cpu.max");
    ASSERT_FALSE(r.ok()) << "accepted '" << bad << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("/sys/fs/cgroup/a/cpu.max: offset "), std::string::npos)
        << r.status().message();
  }
  auto r = ParseCpuMax("100000 1x", "cpu.max");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("offset 7"), std::string::npos) << r.status().message();
}

TEST(Cpus, ParsesCfsQuota) {
  auto none = ParseCfsQuota("-1\n", "100000\n", "cpu.cfs_quota_us");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  auto half = ParseCfsQuota("50000\n", "100000\n", "cpu.cfs_quota_us");
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  EXPECT_DOUBLE_EQ(half->value(), 0.5);
  for (auto [quota, period] : std::initializer_list<std::pair<const char*, const char*>>{
           {"", "100000"}, {"0", "100000"}, {"-2", "100000"}, {"x", "100000"}, {"50000", "0"}, {"50000", ""},
           {"50000", "-1"}, {"50000 1", "100000"}}) {
    auto r = ParseCfsQuota(quota, period, "/cg/cpu.cfs_quota_us");
    ASSERT_FALSE(r.ok()) << "accepted '" << quota << "' / '" << period << "'";
    EXPECT_NE(r.status().message().find("/cg/cpu.cfs_quota_us"), std::string::npos) << r.status().message();
  }
}

TEST(Cpus, ParsesProcCgroup) {
  auto hybrid = ParseProcCgroup(kHybridCgroup, "cgroup");
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  EXPECT_EQ(hybrid->v2, "/");
  EXPECT_EQ(hybrid->v1_cpu, "/");
  auto v2 = ParseProcCgroup("0::/kubepods.slice/pod1/cri-containerd-ab.scope\n", "cgroup");
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(v2->v2, "/kubepods.slice/pod1/cri-containerd-ab.scope");
  EXPECT_FALSE(v2->v1_cpu.has_value());
  // cpuacct and cpuset are not cpu; a path may hold ':'.
  auto v1 = ParseProcCgroup("3:cpuset:/a\n2:cpuacct:/b\n4:cpu,cpuacct:/docker/x:y", "cgroup");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->v1_cpu, "/docker/x:y");
  EXPECT_FALSE(v1->v2.has_value());
  auto empty = ParseProcCgroup("", "cgroup");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->v2 || empty->v1_cpu);
}

TEST(Cpus, RejectsBadProcCgroupNamingFileAndOffset) {
  for (const char* bad : {"garbage\n", "1:cpu\n", "x:cpu:/\n", "-1:cpu:/\n", "1:cpu:relative\n", "0::\n"}) {
    auto r = ParseProcCgroup(bad, "/proc/self/cgroup");
    ASSERT_FALSE(r.ok()) << "accepted '" << bad << "'";
    EXPECT_NE(r.status().message().find("/proc/self/cgroup: offset "), std::string::npos) << r.status().message();
  }
  auto r = ParseProcCgroup("0::/\n1:cpu:oops\n", "cg");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("offset 11"), std::string::npos) << r.status().message();
}

TEST(Cpus, ParsesCgroupMounts) {
  auto hybrid = ParseCgroupMounts(kHybridMountinfo, "mountinfo");
  ASSERT_TRUE(hybrid.ok()) << hybrid.status().ToString();
  ASSERT_TRUE(hybrid->v2.has_value());
  EXPECT_EQ(hybrid->v2->mount_point, "/sys/fs/cgroup/unified");
  ASSERT_TRUE(hybrid->v1_cpu.has_value());
  EXPECT_EQ(hybrid->v1_cpu->mount_point, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(hybrid->v1_cpu->root, "/");
  // Optional fields before the separator, the controllers among other super options, \ooo escapes.
  auto other = ParseCgroupMounts(
      "35 24 0:30 /docker/a\\040b /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:9 shared:3 - cgroup cgroup "
      "rw,cpu,cpuacct\n29 22 0:26 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
      "mountinfo");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->v1_cpu->root, "/docker/a b");
  EXPECT_EQ(other->v1_cpu->mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(other->v2->mount_point, "/sys/fs/cgroup");
  auto none = ParseCgroupMounts("22 1 253:1 / / rw - ext4 /dev/vda1 rw\n", "mountinfo");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->v2 || none->v1_cpu);
}

TEST(Cpus, RejectsBadMountinfoNamingFileAndOffset) {
  for (const char* bad : {"1 2 3\n", "1 2 0:1 / /x rw\n", "1 2 0:1 / /x rw - cgroup2\n",
                          "1 2 0:1 / /x\\04 rw - cgroup2 cgroup2 rw\n", "1 2 0:1 / /x\\777 rw - cgroup2 cgroup2 rw\n",
                          "1 2 0:1 rel /x rw - cgroup2 cgroup2 rw\n", "\n"}) {
    auto r = ParseCgroupMounts(bad, "/proc/self/mountinfo");
    ASSERT_FALSE(r.ok()) << "accepted '" << bad << "'";
    EXPECT_NE(r.status().message().find("/proc/self/mountinfo: offset "), std::string::npos) << r.status().message();
  }
  auto r = ParseCgroupMounts("22 1 253:1 / / rw - ext4 /dev/vda1 rw\n1 2 0:1 / /y\\9 rw - cgroup2 c rw\n", "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("offset 50"), std::string::npos) << r.status().message();
}

// A directory laid out as / is: proc/self/{mountinfo,cgroup} and cgroup files under the mounts.
class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "stoke_cpus_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

TEST_F(CgroupTree, TakesTheSmallestLimitOnThePathToTheMountsRoot) {
  Write("/proc/self/mountinfo", "29 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  Write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  Write("/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");
  Write("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  auto limit = CgroupCpuLimit(root_);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  ASSERT_TRUE(limit->has_value());
  EXPECT_DOUBLE_EQ(limit->value(), 2.5);
  Write("/sys/fs/cgroup/kubepods/cpu.max", "50000 100000\n");
  limit = CgroupCpuLimit(root_);
  ASSERT_TRUE(limit.ok());
  EXPECT_DOUBLE_EQ(limit->value(), 0.5);
}

TEST_F(CgroupTree, ReadsTheV1CpuControllerBelowItsMountsRoot) {
  // A container's view without a cgroup namespace: the mount's root is the container's cgroup.
  Write("/proc/self/mountinfo", "31 30 0:28 /docker/c1 /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu,cpuacct\n");
  Write("/proc/self/cgroup", "4:cpu,cpuacct:/docker/c1/sub\n");
  Write("/sys/fs/cgroup/cpu/sub/cpu.cfs_quota_us", "-1\n");
  Write("/sys/fs/cgroup/cpu/sub/cpu.cfs_period_us", "100000\n");
  Write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "300000\n");
  Write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  auto limit = CgroupCpuLimit(root_);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  ASSERT_TRUE(limit->has_value());
  EXPECT_DOUBLE_EQ(limit->value(), 3.0);
}

TEST_F(CgroupTree, ACgroupOutsideTheMountIsReadAtTheMountsRoot) {
  Write("/proc/self/mountinfo", "29 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  Write("/proc/self/cgroup", "0::/../../elsewhere\n");
  Write("/sys/fs/cgroup/cpu.max", "100000 100000\n");
  auto limit = CgroupCpuLimit(root_);
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_DOUBLE_EQ(limit->value_or(0), 1.0);
}

TEST_F(CgroupTree, NoLimitWithoutFilesOrWithoutAQuota) {
  auto absent = CgroupCpuLimit(root_);  // no proc files at all: not Linux, or no /proc
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->has_value());
  Write("/proc/self/mountinfo", kHybridMountinfo);
  Write("/proc/self/cgroup", kHybridCgroup);
  auto no_files = CgroupCpuLimit(root_);  // mounts named, no cgroup files under them
  ASSERT_TRUE(no_files.ok());
  EXPECT_FALSE(no_files->has_value());
  Write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
  Write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  auto unlimited = CgroupCpuLimit(root_);
  ASSERT_TRUE(unlimited.ok());
  EXPECT_FALSE(unlimited->has_value());
}

TEST_F(CgroupTree, AnUnparsableCgroupFileIsAnErrorNamingIt) {
  Write("/proc/self/mountinfo", "29 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  Write("/proc/self/cgroup", "0::/a\n");
  Write("/sys/fs/cgroup/a/cpu.max", "lots 100000\n");
  auto r = CgroupCpuLimit(root_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(root_ + "/sys/fs/cgroup/a/cpu.max: offset 0"), std::string::npos)
      << r.status().message();
}

// The calling thread's affinity mask bounds the count: one allowed CPU, one CPU.
TEST(Cpus, AvailableCpusFollowsTheThreadsAffinity) {
  cpu_set_t all;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(all), &all), 0);
  const size_t allowed = static_cast<size_t>(CPU_COUNT(&all));
  EXPECT_GE(AvailableCpus(), 1u);
  EXPECT_LE(AvailableCpus(), allowed);
  size_t pinned = 0;
  ASSERT_TRUE(testing_support::RunOnOneCpu([&] { pinned = AvailableCpus(); }));
  EXPECT_EQ(pinned, 1u);
}

// Where the calling thread may run on one CPU of several, a default pool has one worker.
TEST(Cpus, ThreadPoolsDefaultToTheAvailableCpus) {
  EXPECT_EQ(ThreadPool(0).size(), AvailableCpus());
  size_t workers = 0;
  ASSERT_TRUE(testing_support::RunOnOneCpu([&] { workers = ThreadPool(0).size(); }));
  EXPECT_EQ(workers, 1u);
}

}  // namespace
}  // namespace stoke
