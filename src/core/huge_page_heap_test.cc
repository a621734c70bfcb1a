#include "core/huge_page_heap.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace stoke {
namespace {

constexpr char kMadvise[] = "always [madvise] never\n";

TEST(HugePageHeapTunables, AddsHugetlbAndTopPadToWhatTheCallerSet) {
  const std::string ours = "glibc.malloc.hugetlb=1:glibc.malloc.top_pad=" + std::to_string(kHugePageHeapTopPad);
  EXPECT_EQ(HugePageHeapTunables(nullptr, kMadvise, nullptr), ours);
  EXPECT_EQ(HugePageHeapTunables("", kMadvise, nullptr), ours);
  EXPECT_EQ(HugePageHeapTunables("glibc.malloc.arena_max=2", kMadvise, nullptr), "glibc.malloc.arena_max=2:" + ours);
  EXPECT_EQ(HugePageHeapTunables(nullptr, "[always] madvise never", nullptr), ours);
  EXPECT_EQ(HugePageHeapTunables(nullptr, kMadvise, "1"), ours);
}

TEST(HugePageHeapTunables, NothingChangesWhereTheyWouldNotHelpOrTheCallerDecided) {
  EXPECT_EQ(HugePageHeapTunables(nullptr, "always madvise [never]", nullptr), std::nullopt);
  EXPECT_EQ(HugePageHeapTunables(nullptr, "", nullptr), std::nullopt) << "no THP file";
  EXPECT_EQ(HugePageHeapTunables(nullptr, kMadvise, "0"), std::nullopt);
  EXPECT_EQ(HugePageHeapTunables("glibc.malloc.hugetlb=0", kMadvise, nullptr), std::nullopt);
  EXPECT_EQ(HugePageHeapTunables("glibc.malloc.arena_max=2:glibc.malloc.top_pad=0", kMadvise, nullptr), std::nullopt);
}

// The program started again finds the marker, puts GLIBC_TUNABLES back as the caller had it and
// returns without executing anything.
TEST(ReexecWithHugePageHeap, TheProgramStartedAgainRestoresTheCallersEnvironment) {
  char name[] = "not-executed";
  char* argv[] = {name, nullptr};
  ::setenv("STOKE_HUGE_PAGE_HEAP_REEXEC", "=glibc.malloc.arena_max=2", 1);
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", 1);
  ReexecWithHugePageHeap(argv);
  ASSERT_NE(::getenv("GLIBC_TUNABLES"), nullptr);
  EXPECT_STREQ(::getenv("GLIBC_TUNABLES"), "glibc.malloc.arena_max=2");
  EXPECT_EQ(::getenv("STOKE_HUGE_PAGE_HEAP_REEXEC"), nullptr);

  ::setenv("STOKE_HUGE_PAGE_HEAP_REEXEC", "-", 1);
  ::setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1);
  ReexecWithHugePageHeap(argv);
  EXPECT_EQ(::getenv("GLIBC_TUNABLES"), nullptr);
  EXPECT_EQ(::getenv("STOKE_HUGE_PAGE_HEAP_REEXEC"), nullptr);
}

// Turned off, it returns at once and leaves the environment alone. In a child process: were the
// program executed again, the child would become this test binary running no test and exit 0.
TEST(ReexecWithHugePageHeap, TurnedOffItLeavesTheEnvironmentAlone) {
  auto child = [] {
    char name[] = "stoke_core_test";
    char filter[] = "--gtest_filter=-*";
    char* argv[] = {name, filter, nullptr};
    ::setenv("STOKE_HUGE_PAGE_HEAP", "0", 1);
    ::unsetenv("GLIBC_TUNABLES");
    ReexecWithHugePageHeap(argv);
    const bool untouched = ::getenv("GLIBC_TUNABLES") == nullptr && ::getenv("STOKE_HUGE_PAGE_HEAP_REEXEC") == nullptr;
    std::exit(untouched ? 42 : 43);
  };
  EXPECT_EXIT(child(), ::testing::ExitedWithCode(42), "");
}

}  // namespace
}  // namespace stoke
