#include "io/fault_storage.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>

#include "io/uri.h"

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

// What each storage is: the local file system may be opened and mapped by name; its wrappers may not
// (that would bypass them), and say remote() as the storage they wrap does.
TEST_F(WrapperTest, WrappersAnswerTheCapabilityQuestionsOfWhatTheyWrap) {
  Storage& local = LocalStorage();
  EXPECT_TRUE(local.local_files());
  EXPECT_FALSE(local.remote());
  EXPECT_FALSE(local.CreateIsAtomic());
  EXPECT_EQ(local.objects(), nullptr);
  EXPECT_EQ(local.parallelism(), Storage::kLocalParallelism);
  FaultInjectingStorage faults(local);
  ThrottledStorage slow(local, ThrottleOptions{});
  for (Storage* s : {static_cast<Storage*>(&faults), static_cast<Storage*>(&slow)}) {
    EXPECT_FALSE(s->local_files());
    EXPECT_FALSE(s->remote());
    EXPECT_FALSE(s->CreateIsAtomic());
    EXPECT_EQ(s->objects(), nullptr);
    EXPECT_EQ(s->parallelism(), Storage::kLocalParallelism);
  }
}

// A failed write's clean-up: files already gone do not stop it; the first delete that fails does
// (the storage is most likely unreachable), and what is left is counted.
TEST_F(WrapperTest, DeleteLeftoversStopsAtTheFirstFailedDelete) {
  std::vector<std::string> paths;
  for (int i = 0; i < 5; ++i) {
    paths.push_back(JoinPath(dir_, fmt::format("f{}.parquet", i)));
    if (i != 1) ASSERT_TRUE(WriteFileAtomically(LocalStorage(), paths.back(), AsBytes("x")).ok());  // f1: gone already
  }
  FaultInjectingStorage fs(LocalStorage());
  FaultRule r;
  r.ops = kOpDelete;
  r.path_substring = "f3.parquet";
  fs.AddRule(r);
  EXPECT_EQ(DeleteLeftovers(fs, paths, "a test's files"), 2u);
  EXPECT_EQ(fs.faults_injected(), 1u);  // f4 was not tried
  for (int i = 0; i < 5; ++i) EXPECT_EQ(std::filesystem::exists(paths[i]), i >= 3) << i;
  EXPECT_EQ(DeleteLeftovers(LocalStorage(), paths, "a test's files"), 0u);
  for (const auto& p : paths) EXPECT_FALSE(std::filesystem::exists(p)) << p;
}

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

std::string Contents(const std::string& path) {
  auto s = ReadFileToString(LocalStorage(), path);
  return s.ok() ? *s : "<" + s.status().ToString() + ">";
}

// A fixed sequence of one operation of each kind, through `fs` in `dir`; returns the first error.
Status EveryKindOfOperation(Storage& fs, const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(auto w, fs.Create(JoinPath(dir, "c.tmp")));         // 1 create
  STOKE_RETURN_IF_ERROR(w->Append(AsBytes("abc")));                          // 2 append
  STOKE_RETURN_IF_ERROR(w->Sync());                                          // 3 sync
  STOKE_RETURN_IF_ERROR(w->Close());                                         // 4 close
  STOKE_RETURN_IF_ERROR(fs.Rename(JoinPath(dir, "c.tmp"), JoinPath(dir, "c")));  // 5 rename
  STOKE_RETURN_IF_ERROR(fs.SyncDirectory(dir));                              // 6 sync directory
  STOKE_RETURN_IF_ERROR(fs.Stat(JoinPath(dir, "c")).status());               // 7 stat
  STOKE_RETURN_IF_ERROR(fs.ListNames(dir).status());                         // 8 list
  STOKE_ASSIGN_OR_RETURN(auto r, fs.OpenForRead(JoinPath(dir, "c")));       // 9 open
  uint8_t buf[3];
  STOKE_RETURN_IF_ERROR(r->ReadAt(0, MutableByteView(buf, 3)));              // 10 read
  STOKE_RETURN_IF_ERROR(fs.PutIfAbsent(JoinPath(dir, "p"), AsBytes("p")));   // 11 put-if-absent
  STOKE_RETURN_IF_ERROR(fs.CreateDirectories(JoinPath(dir, "sub")));         // 12 create directories
  return fs.Delete(JoinPath(dir, "p"));                                      // 13 delete
}

TEST_F(WrapperTest, CountsEveryOperationAndFailsTheNthWithTheChosenError) {
  FaultInjectingStorage counting(LocalStorage());
  ASSERT_TRUE(EveryKindOfOperation(counting, JoinPath(dir_, "clean")).code() == StatusCode::kNotFound);  // no dir yet
  ASSERT_TRUE(LocalStorage().CreateDirectories(JoinPath(dir_, "clean")).ok());
  const uint64_t before = counting.operations();
  ASSERT_TRUE(EveryKindOfOperation(counting, JoinPath(dir_, "clean")).ok());
  const uint64_t total = counting.operations() - before;
  EXPECT_EQ(total, 13u);
  for (uint64_t n = 1; n <= total; ++n) {
    for (FaultKind kind : {FaultKind::kEIO, FaultKind::kENOSPC}) {
      const std::string dir = JoinPath(dir_, fmt::format("n{}-{}", n, static_cast<int>(kind)));
      ASSERT_TRUE(LocalStorage().CreateDirectories(dir).ok());
      FaultInjectingStorage fs(LocalStorage());
      fs.FailOperation(n, kind);
      Status s = EveryKindOfOperation(fs, dir);
      EXPECT_EQ(s.code(), StatusCode::kIOError) << n;
      EXPECT_FALSE(s.retryable());
      EXPECT_NE(s.message().find(kind == FaultKind::kEIO ? "Input/output error" : "No space left on device"),
                std::string::npos) << s.message();
      EXPECT_NE(s.message().find(fmt::format("operation {}", n)), std::string::npos) << s.message();
      EXPECT_EQ(fs.operations(), n);  // the sequence stops at the failure
      EXPECT_EQ(fs.faults_injected(), 1u);
      EXPECT_TRUE(EveryKindOfOperation(fs, JoinPath(dir_, "clean")).code() != StatusCode::kIOError);  // fired once
    }
  }
}

TEST_F(WrapperTest, CrashKeepsOnlyWhatWasSyncedAndUndoesUnsyncedNames) {
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), JoinPath(dir_, "old"), AsBytes("old bytes")).ok());
  FaultInjectingStorage fs(LocalStorage());
  // "a": synced, its name made durable, then appended to without a sync.
  auto a = fs.Create(JoinPath(dir_, "a"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Append(AsBytes("abc")).ok());
  ASSERT_TRUE((*a)->Sync().ok());
  ASSERT_TRUE(fs.SyncDirectory(dir_).ok());
  ASSERT_TRUE((*a)->Append(AsBytes("def")).ok());
  ASSERT_TRUE((*a)->Close().ok());
  // "new": written atomically, which syncs the directory (so nothing may be left pending before).
  ASSERT_TRUE(WriteFileAtomically(fs, JoinPath(dir_, "new"), AsBytes("new")).ok());
  // "b": never synced. "c": synced and renamed into place, directory not synced.
  auto b = fs.Create(JoinPath(dir_, "b"));
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE((*b)->Append(AsBytes("x")).ok());
  ASSERT_TRUE((*b)->Close().ok());
  auto c = fs.Create(JoinPath(dir_, "c.tmp"));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Append(AsBytes("c")).ok());
  ASSERT_TRUE((*c)->Sync().ok());
  ASSERT_TRUE((*c)->Close().ok());
  ASSERT_TRUE(fs.Rename(JoinPath(dir_, "c.tmp"), JoinPath(dir_, "c")).ok());
  // "old" replaced by a rename without a directory sync; "a.bin" (durable before) renamed away.
  auto o = fs.Create(JoinPath(dir_, "old.tmp"));
  ASSERT_TRUE(o.ok());
  ASSERT_TRUE((*o)->Append(AsBytes("replacement")).ok());
  ASSERT_TRUE((*o)->Sync().ok());
  ASSERT_TRUE((*o)->Close().ok());
  ASSERT_TRUE(fs.Rename(JoinPath(dir_, "old.tmp"), JoinPath(dir_, "old")).ok());
  ASSERT_TRUE(fs.Rename(JoinPath(dir_, "a.bin"), JoinPath(dir_, "moved.bin")).ok());
  EXPECT_EQ(Contents(JoinPath(dir_, "old")), "replacement");
  EXPECT_EQ(Contents(JoinPath(dir_, "a")), "abcdef");

  fs.FailOperation(2, FaultKind::kCrash);
  EXPECT_TRUE(fs.Stat(JoinPath(dir_, "a")).ok());
  Status s = fs.Stat(JoinPath(dir_, "a")).status();
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("lost power"), std::string::npos) << s.message();
  EXPECT_TRUE(fs.crashed());
  EXPECT_FALSE(fs.Delete(JoinPath(dir_, "a")).ok());  // everything fails after the crash

  EXPECT_EQ(Contents(JoinPath(dir_, "a")), "abc");
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir_, "b")));
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir_, "c")));
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir_, "c.tmp")));
  EXPECT_EQ(Contents(JoinPath(dir_, "new")), "new");
  EXPECT_EQ(Contents(JoinPath(dir_, "old")), "old bytes");
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir_, "old.tmp")));
  EXPECT_EQ(Contents(JoinPath(dir_, "a.bin")), "0123456789");
  EXPECT_FALSE(std::filesystem::exists(JoinPath(dir_, "moved.bin")));

  fs.ResetCrash();
  EXPECT_TRUE(fs.Delete(JoinPath(dir_, "a")).ok());
}

TEST_F(WrapperTest, SyncFilesMakesClosedFilesDurableForTheCrashModel) {
  FaultInjectingStorage fs(LocalStorage());
  auto write = [&](const std::string& name) {
    auto f = fs.Create(JoinPath(dir_, name));
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append(AsBytes(name)).ok());
    ASSERT_TRUE((*f)->Close().ok());  // no Sync
  };
  write("synced");
  write("unsynced");
  ASSERT_TRUE(fs.SyncFiles({JoinPath(dir_, "synced")}).ok());
  ASSERT_TRUE(fs.SyncDirectory(dir_).ok());
  ASSERT_TRUE(fs.Crash().ok());
  EXPECT_EQ(Contents(JoinPath(dir_, "synced")), "synced");
  // Named durably by the directory sync, but its bytes were never synced: empty after the crash.
  EXPECT_EQ(Contents(JoinPath(dir_, "unsynced")), "");
  fs.ResetCrash();
  // Rules match it by its first path.
  FaultRule r;
  r.ops = kOpSyncFiles;
  r.path_substring = "synced";
  fs.AddRule(r);
  Status s = fs.SyncFiles({JoinPath(dir_, "synced")});
  EXPECT_NE(s.message().find("injected: sync files"), std::string::npos) << s.ToString();
  EXPECT_TRUE(fs.SyncFiles({}).ok());
}

TEST_F(WrapperTest, RegisteredStorageServesTestUris) {
  FaultInjectingStorage fs(LocalStorage());
  {
    ScopedStorageRegistration reg("wrapper-test", fs);
    EXPECT_EQ(reg.Uri(dir_), "test://wrapper-test" + dir_);
    auto where = ResolveStorageLocation(reg.Uri(JoinPath(dir_, "a.bin")));
    ASSERT_TRUE(where.ok()) << where.status().ToString();
    EXPECT_EQ(where->storage.get(), &fs);
    EXPECT_EQ(where->path, JoinPath(dir_, "a.bin"));
    auto bytes = ReadFileToString(*where->storage, where->path);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(*bytes, "0123456789");
    EXPECT_EQ(fs.operations(), 2u);  // open, read
  }
  EXPECT_EQ(ResolveStorageLocation("test://wrapper-test/x").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseStorageUri("test://").status().code(), StatusCode::kInvalidArgument);
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
