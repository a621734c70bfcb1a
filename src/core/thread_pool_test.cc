#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

#include "core/progress.h"
#include "stoke/status.h"

namespace stoke {
namespace {

TEST(ThreadPool, RunsEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  ASSERT_TRUE(ParallelFor(pool, hits.size(), [&](size_t i) {
                hits[i]++;
                return Status::OK();
              }).ok());
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, ReturnsTheErrorOfTheLowestFailingIndex) {
  ThreadPool pool(2);
  Status s = ParallelFor(pool, 100, [](size_t i) {
    if (i == 70 || i == 30) return Status::Corruption("bad " + std::to_string(i));
    return Status::OK();
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "bad 30");
}

TEST(ThreadPool, DestructorRunsQueuedTasks) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(1);
    for (int i = 0; i < 50; ++i) pool.Submit([&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 50);
}

TEST(Status, CarriesCodeMessageAndContext) {
  Status s = Status::IOError("disk gone", /*retryable=*/true).WithContext("reading a.parquet");
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_TRUE(s.retryable());
  EXPECT_EQ(s.ToString(), "I/O error: reading a.parquet: disk gone");
  EXPECT_EQ(Status::Unsupported("encoding X").ToString(), "unsupported: encoding X");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

Result<int> Half(int v) {
  if (v % 2) return Status::InvalidArgument("odd");
  return v / 2;
}

Status Quarter(int v, int* out) {
  STOKE_ASSIGN_OR_RETURN(int h, Half(v));
  STOKE_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::OK();
}

TEST(Status, MacrosPropagateErrors) {
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  EXPECT_EQ(Quarter(6, &q).code(), StatusCode::kInvalidArgument);
  Result<int> r = Status::OK();  // an OK status is not a value
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ProgressBar, IsOffWhenNotATerminalAndRendersRatesAndEta) {
  ProgressBar bar("convert", 200, "files");  // tests run with stdout piped
  EXPECT_FALSE(bar.enabled());
  bar.Add(50, 50 * 360000);
  std::string line = bar.Render();
  EXPECT_NE(line.find("convert  50/200 files  25.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("MB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;
  EXPECT_EQ(bar.items(), 50u);
}

TEST(Units, FormatsBytesAndDurations) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(360000), "351.6 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(2.5), "2.5s");
}

}  // namespace
}  // namespace stoke
