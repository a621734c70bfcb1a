#include "io/fault_storage.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

namespace stoke {
namespace {

class WrapperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_wrap_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), JoinPath(dir_, "a.bin"), AsBytes("0123456789")).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(WrapperTest, FaultsHitChosenOperationsAfterNCalls) {
  FaultInjectingStorage fs(LocalStorage());
  FaultRule r;
  r.ops = kOpRead;
  r.path_substring = "a.bin";
  r.after_calls = 2;
  r.max_faults = 1;
  fs.AddRule(r);
  auto f = fs.OpenForRead(JoinPath(dir_, "a.bin"));
  ASSERT_TRUE(f.ok());
  uint8_t buf[3];
  EXPECT_TRUE((*f)->ReadAt(0, MutableByteView(buf, 3)).ok());
  EXPECT_TRUE((*f)->ReadAt(0, MutableByteView(buf, 3)).ok());
  Status s = (*f)->ReadAt(0, MutableByteView(buf, 3));
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_TRUE(s.retryable());
  EXPECT_NE(s.message().find("injected: read"), std::string::npos) << s.message();
  EXPECT_TRUE((*f)->ReadAt(0, MutableByteView(buf, 3)).ok());  // max_faults reached
  EXPECT_EQ(fs.faults_injected(), 1u);
  EXPECT_TRUE(fs.Stat(JoinPath(dir_, "a.bin")).ok());  // other ops untouched
}

TEST_F(WrapperTest, FaultsCanFailCommitsWithAChosenCode) {
  FaultInjectingStorage fs(LocalStorage());
  FaultRule r;
  r.ops = kOpPutIfAbsent | kOpRename;
  r.path_substring = "_delta_log";
  r.error = Status::AlreadyExists("lost the race");
  fs.AddRule(r);
  std::string log = JoinPath(dir_, "_delta_log");
  ASSERT_TRUE(fs.CreateDirectories(log).ok());
  EXPECT_EQ(fs.PutIfAbsent(JoinPath(log, "0.json"), AsBytes("{}")).code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(std::filesystem::exists(JoinPath(log, "0.json")));
  EXPECT_TRUE(fs.PutIfAbsent(JoinPath(dir_, "other"), AsBytes("{}")).ok());
  fs.ClearRules();
  EXPECT_TRUE(fs.PutIfAbsent(JoinPath(log, "0.json"), AsBytes("{}")).ok());
}

TEST_F(WrapperTest, ProbabilisticFaultsAreSeededAndPartial) {
  FaultInjectingStorage fs(LocalStorage(), /*seed=*/42);
  FaultRule r;
  r.ops = kOpStat;
  r.probability = 0.5;
  fs.AddRule(r);
  int failures = 0;
  for (int i = 0; i < 200; ++i) failures += fs.Stat(JoinPath(dir_, "a.bin")).ok() ? 0 : 1;
  EXPECT_GT(failures, 60);
  EXPECT_LT(failures, 140);
}

TEST_F(WrapperTest, CloseFaultLeavesTheWriteUncommitted) {
  FaultInjectingStorage fs(LocalStorage());
  FaultRule r;
  r.ops = kOpClose;
  fs.AddRule(r);
  auto w = fs.Create(JoinPath(dir_, "b.bin"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Append(AsBytes("xyz")).ok());
  EXPECT_FALSE((*w)->Close().ok());
}

TEST_F(WrapperTest, ThrottleAddsLatencyAndCapsBandwidth) {
  ThrottleOptions o;
  o.latency_us = 20000;
  o.bytes_per_second = 1e6;
  ThrottledStorage ts(LocalStorage(), o);
  auto f = ts.OpenForRead(JoinPath(dir_, "a.bin"));
  ASSERT_TRUE(f.ok());
  auto start = std::chrono::steady_clock::now();
  uint8_t buf[10];
  ASSERT_TRUE((*f)->ReadAt(0, MutableByteView(buf, 10)).ok());
  ASSERT_TRUE((*f)->ReadAt(0, MutableByteView(buf, 10)).ok());
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(ms, 40);  // two requests, 20 ms each
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 10), "0123456789");

  // 100 KB at 1 MB/s: about 100 ms however it is split.
  ThrottleOptions bw;
  bw.bytes_per_second = 1e6;
  ThrottledStorage slow(LocalStorage(), bw);
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) slow.Charge(10000);
  ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(ms, 95);
  EXPECT_LT(ms, 1000);
}

}  // namespace
}  // namespace stoke
