#include "core/trace.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace stoke {
namespace {

constexpr int kStages = kNumTraceStages;

TraceStage StageOf(int i) { return static_cast<TraceStage>(i % kStages); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    static const char* kDigits = "0123456789abcdef";
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_trace_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST(TraceStageName, NamesEveryStage) {
  const char* expected[] = {"plan", "fetch", "decode", "transform", "collate", "wait", "compute"};
  for (int i = 0; i < kNumTraceStages; ++i) EXPECT_EQ(TraceStageName(static_cast<TraceStage>(i)), expected[i]);
  EXPECT_EQ(TraceStageName(static_cast<TraceStage>(200)), "unknown");
}

TEST(TraceRecorder, KeepsEverySpanFromManyThreadsInOrder) {
  constexpr int kThreads = 4, kRecords = 10000;
  TraceRecorder rec(/*enabled=*/true);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&rec, t] {
      rec.SetThreadName("worker-" + std::to_string(t));
      for (int i = 0; i < kRecords; ++i) {
        rec.Record(StageOf(i), int64_t{i} * 10, int64_t{i} * 10 + 5 + t, int64_t{t} * 1000000 + i, i);
      }
    });
  }
  for (auto& th : threads) th.join();

  std::vector<TraceRecorder::ThreadSpans> snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), size_t{kThreads});
  std::vector<bool> seen(kThreads, false);
  for (size_t k = 0; k < snap.size(); ++k) {
    const auto& ts = snap[k];
    EXPECT_EQ(ts.thread_index, k + 1);
    ASSERT_EQ(ts.spans.size(), size_t{kRecords});
    const int t = static_cast<int>(ts.spans[0].batch / 1000000);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_FALSE(seen[t]);
    seen[t] = true;
    EXPECT_EQ(ts.name, "worker-" + std::to_string(t));
    for (int i = 0; i < kRecords; ++i) {
      const TraceSpan& s = ts.spans[i];
      ASSERT_EQ(s.start_ns, int64_t{i} * 10) << "thread " << t << " span " << i;
      ASSERT_EQ(s.end_ns, int64_t{i} * 10 + 5 + t);
      ASSERT_EQ(s.batch, int64_t{t} * 1000000 + i);
      ASSERT_EQ(s.bytes, i);
      ASSERT_EQ(s.stage, StageOf(i));
    }
  }

  auto totals = rec.Totals();
  int64_t count = 0;
  for (int st = 0; st < kStages; ++st) {
    int64_t expect_count = 0, expect_busy = 0, expect_bytes = 0;
    for (int i = st; i < kRecords; i += kStages) {
      expect_count += kThreads;
      expect_bytes += int64_t{i} * kThreads;
      for (int t = 0; t < kThreads; ++t) expect_busy += 5 + t;
    }
    EXPECT_EQ(totals[st].count, expect_count) << TraceStageName(static_cast<TraceStage>(st));
    EXPECT_EQ(totals[st].busy_ns, expect_busy);
    EXPECT_EQ(totals[st].bytes, expect_bytes);
    count += totals[st].count;
  }
  EXPECT_EQ(count, int64_t{kThreads} * kRecords);
  EXPECT_EQ(rec.dropped_spans(), 0);
}

TEST(TraceRecorder, DisabledKeepsTotalsButNoSpans) {
  TraceRecorder rec(/*enabled=*/false);
  EXPECT_FALSE(rec.enabled());
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&rec] {
      rec.SetThreadName("ignored");
      for (int i = 0; i < 1000; ++i) rec.Record(TraceStage::kDecode, 100, 130, i, 7);
      rec.Record(TraceStage::kWait, 0, 1000);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_TRUE(rec.Snapshot().empty());
  EXPECT_EQ(rec.dropped_spans(), 0);
  auto totals = rec.Totals();
  EXPECT_EQ(totals[int(TraceStage::kDecode)].count, 3000);
  EXPECT_EQ(totals[int(TraceStage::kDecode)].busy_ns, 3000 * 30);
  EXPECT_EQ(totals[int(TraceStage::kDecode)].bytes, 3000 * 7);
  EXPECT_EQ(totals[int(TraceStage::kWait)].count, 3);
  EXPECT_EQ(totals[int(TraceStage::kWait)].busy_ns, 3000);
  EXPECT_EQ(totals[int(TraceStage::kWait)].bytes, 0);
  EXPECT_EQ(totals[int(TraceStage::kFetch)].count, 0);
  // No spans, only the metadata event for the process.
  const std::string json = rec.ChromeTraceJson();
  EXPECT_EQ(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_EQ(json.find("thread_name"), std::string::npos);
}

TEST(TraceRecorder, NegativeDurationCountsAsZero) {
  TraceRecorder rec(true);
  rec.Record(TraceStage::kPlan, 100, 50);
  EXPECT_EQ(rec.Totals()[0].busy_ns, 0);
  auto snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].spans.size(), 1u);
  EXPECT_EQ(snap[0].spans[0].start_ns, 100);
  EXPECT_EQ(snap[0].spans[0].end_ns, 100);
}

TEST(TraceRecorder, DropsAndCountsSpansPastThePerThreadLimit) {
  TraceRecorder rec(true, /*max_spans_per_thread=*/100);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&rec] {
      for (int i = 0; i < 250; ++i) rec.Record(TraceStage::kFetch, i, i + 1, i, 10);
    });
  }
  for (auto& th : threads) th.join();
  auto snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  for (const auto& ts : snap) {
    ASSERT_EQ(ts.spans.size(), 100u);
    // The first spans are kept, later ones dropped.
    for (int i = 0; i < 100; ++i) EXPECT_EQ(ts.spans[i].batch, i);
  }
  EXPECT_EQ(rec.dropped_spans(), 300);
  // Totals include dropped spans.
  EXPECT_EQ(rec.Totals()[int(TraceStage::kFetch)].count, 500);
  EXPECT_EQ(rec.Totals()[int(TraceStage::kFetch)].bytes, 5000);

  TraceRecorder none(true, /*max_spans_per_thread=*/0);
  none.Record(TraceStage::kFetch, 0, 1);
  EXPECT_EQ(none.dropped_spans(), 1);
  ASSERT_EQ(none.Snapshot().size(), 1u);
  EXPECT_TRUE(none.Snapshot()[0].spans.empty());
}

TEST(TraceRecorder, TwoRecordersOnTheSameThreadsKeepSeparateSpans) {
  TraceRecorder a(true), b(true);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      a.SetThreadName("a-" + std::to_string(t));
      b.SetThreadName("b-" + std::to_string(t));
      for (int i = 0; i < 5000; ++i) {
        a.Record(TraceStage::kDecode, i, i + 1, /*batch=*/i);
        if (i % 2 == 0) b.Record(TraceStage::kCollate, i, i + 2, /*batch=*/-i);
      }
    });
  }
  for (auto& th : threads) th.join();
  auto sa = a.Snapshot(), sb = b.Snapshot();
  ASSERT_EQ(sa.size(), 3u);
  ASSERT_EQ(sb.size(), 3u);
  for (const auto& ts : sa) {
    EXPECT_EQ(ts.name.substr(0, 2), "a-");
    ASSERT_EQ(ts.spans.size(), 5000u);
    for (int i = 0; i < 5000; ++i) {
      ASSERT_EQ(ts.spans[i].stage, TraceStage::kDecode);
      ASSERT_EQ(ts.spans[i].batch, i);
    }
  }
  for (const auto& ts : sb) {
    EXPECT_EQ(ts.name.substr(0, 2), "b-");
    ASSERT_EQ(ts.spans.size(), 2500u);
    for (int i = 0; i < 2500; ++i) {
      ASSERT_EQ(ts.spans[i].stage, TraceStage::kCollate);
      ASSERT_EQ(ts.spans[i].batch, -2 * i);
    }
  }
}

// The thread_local cache must never hand a thread a buffer of a destroyed recorder, even when the new
// recorder lands at the same address (run under ASan: a stale pointer would be a use-after-free).
TEST(TraceRecorder, RecreatedRecorderDoesNotUseStaleThreadCache) {
  constexpr int kWorkers = 3;
  ThreadPool pool(kWorkers);
  std::optional<TraceRecorder> rec;  // every round's recorder at the same address
  for (int round = 0; round < 20; ++round) {
    rec.emplace(true, /*max_spans_per_thread=*/1000);
    std::barrier sync(kWorkers);  // makes each pool worker take exactly one index
    ASSERT_TRUE(ParallelFor(pool, kWorkers, [&](size_t w) {
                  sync.arrive_and_wait();
                  rec->SetThreadName("worker-" + std::to_string(w));
                  for (int i = 0; i < 100; ++i) rec->Record(TraceStage::kFetch, i, i + 1, round * 1000 + i);
                  return Status::OK();
                }).ok());
    auto snap = rec->Snapshot();
    ASSERT_EQ(snap.size(), size_t{kWorkers}) << "round " << round;
    for (const auto& ts : snap) {
      ASSERT_EQ(ts.spans.size(), 100u) << "round " << round;
      for (int i = 0; i < 100; ++i) ASSERT_EQ(ts.spans[i].batch, round * 1000 + i);
    }
    EXPECT_EQ(rec->Totals()[int(TraceStage::kFetch)].count, kWorkers * 100);
  }
}

// More live recorders than the per-thread cache holds: an evicted entry must lead back to the
// thread's existing buffer, not to a second one.
TEST(TraceRecorder, ManyRecordersOnOneThreadEachKeepOneBuffer) {
  constexpr int kRecorders = 20;
  std::vector<std::unique_ptr<TraceRecorder>> recs;
  for (int r = 0; r < kRecorders; ++r) recs.push_back(std::make_unique<TraceRecorder>(true));
  std::thread th([&] {
    for (int i = 0; i < 50; ++i) {
      for (int r = 0; r < kRecorders; ++r) recs[r]->Record(TraceStage::kTransform, i, i + 1, r * 100 + i);
    }
  });
  th.join();
  for (int r = 0; r < kRecorders; ++r) {
    auto snap = recs[r]->Snapshot();
    ASSERT_EQ(snap.size(), 1u) << "recorder " << r;
    ASSERT_EQ(snap[0].spans.size(), 50u);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(snap[0].spans[i].batch, r * 100 + i);
  }
}

TEST(TraceRecorder, ScopeRecordsItsLifetime) {
  TraceRecorder rec(true);
  const int64_t before = NowNanos();
  {
    TraceRecorder::Scope scope(&rec, TraceStage::kCompute, /*batch=*/7);
    scope.set_bytes(4096);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const int64_t after = NowNanos();
  { TraceRecorder::Scope nothing(nullptr, TraceStage::kCompute); }
  auto snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].spans.size(), 1u);
  const TraceSpan& s = snap[0].spans[0];
  EXPECT_EQ(s.stage, TraceStage::kCompute);
  EXPECT_EQ(s.batch, 7);
  EXPECT_EQ(s.bytes, 4096);
  EXPECT_GE(s.start_ns, before);
  EXPECT_LE(s.end_ns, after);
  EXPECT_GE(s.end_ns - s.start_ns, 2'000'000);
  EXPECT_EQ(rec.Totals()[int(TraceStage::kCompute)].count, 1);
  EXPECT_EQ(rec.Totals()[int(TraceStage::kCompute)].busy_ns, s.end_ns - s.start_ns);
}

TEST(TraceRecorder, ClearDropsSpansAndTotalsAndKeepsThreads) {
  TraceRecorder rec(true, /*max_spans_per_thread=*/10);
  rec.SetThreadName("consumer");
  for (int i = 0; i < 5000; ++i) rec.Record(TraceStage::kWait, i, i + 3, i, 1);
  EXPECT_EQ(rec.dropped_spans(), 4990);
  rec.Clear();
  EXPECT_EQ(rec.dropped_spans(), 0);
  for (const auto& t : rec.Totals()) {
    EXPECT_EQ(t.count, 0);
    EXPECT_EQ(t.busy_ns, 0);
    EXPECT_EQ(t.bytes, 0);
  }
  auto snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].name, "consumer");
  EXPECT_TRUE(snap[0].spans.empty());

  rec.Record(TraceStage::kPlan, 1, 2, 42);
  snap = rec.Snapshot();
  ASSERT_EQ(snap[0].spans.size(), 1u);
  EXPECT_EQ(snap[0].spans[0].batch, 42);
  EXPECT_EQ(rec.Totals()[int(TraceStage::kPlan)].count, 1);
  EXPECT_EQ(rec.Totals()[int(TraceStage::kWait)].count, 0);
}

// Clear keeps the span memory of several chunks; reusing it must not resurrect old spans.
TEST(TraceRecorder, ClearReusesSpanMemoryWithoutOldSpans) {
  TraceRecorder rec(true);
  for (int i = 0; i < 10000; ++i) rec.Record(TraceStage::kDecode, i, i + 1, i);
  rec.Clear();
  for (int i = 0; i < 5000; ++i) rec.Record(TraceStage::kFetch, i, i + 2, -i);
  auto snap = rec.Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].spans.size(), 5000u);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_EQ(snap[0].spans[i].stage, TraceStage::kFetch);
    ASSERT_EQ(snap[0].spans[i].batch, -i);
  }
  auto totals = rec.Totals();
  EXPECT_EQ(totals[int(TraceStage::kDecode)].count, 0);
  EXPECT_EQ(totals[int(TraceStage::kFetch)].count, 5000);
  EXPECT_EQ(totals[int(TraceStage::kFetch)].busy_ns, 10000);
}

// Snapshot, Clear, Totals and JSON export while threads keep recording (meant for TSan).
TEST(TraceRecorder, SnapshotAndClearRaceSafelyWithRecording) {
  TraceRecorder rec(true, /*max_spans_per_thread=*/20000);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&rec, &stop, t] {
      rec.SetThreadName("worker-" + std::to_string(t));
      int64_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        TraceRecorder::Scope scope(&rec, StageOf(static_cast<int>(i)), i, 1);
        ++i;
      }
    });
  }
  for (int k = 0; k < 30; ++k) {
    auto snap = rec.Snapshot();
    for (const auto& ts : snap) {
      for (size_t i = 1; i < ts.spans.size(); ++i) ASSERT_GT(ts.spans[i].batch, ts.spans[i - 1].batch);
    }
    (void)rec.Totals();
    (void)rec.dropped_spans();
    if (k % 10 == 5) rec.Clear();
    if (k % 10 == 7) {
      EXPECT_NE(rec.ChromeTraceJson().find("traceEvents"), std::string::npos);
    }
  }
  stop = true;
  for (auto& th : threads) th.join();
}

TEST(TraceSummary, FormatsOneLinePerStage) {
  std::array<TraceRecorder::StageTotal, kNumTraceStages> totals{};
  totals[int(TraceStage::kFetch)] = {1'234'000'000, 2000, 720'000'000};
  totals[int(TraceStage::kTransform)] = {3'000'000'000, 10, 0};
  const std::string s = FormatTraceSummary(totals, 2.0);
  EXPECT_EQ(s,
            "stage      busy s   share   count      MB\n"
            "plan        0.000    0.0%       0     0.0\n"
            "fetch       1.234   61.7%    2000   720.0\n"
            "decode      0.000    0.0%       0     0.0\n"
            "transform   3.000  150.0%      10     0.0\n"
            "collate     0.000    0.0%       0     0.0\n"
            "wait        0.000    0.0%       0     0.0\n"
            "compute     0.000    0.0%       0     0.0\n");
  const std::string no_wall = FormatTraceSummary(totals, 0.0);
  EXPECT_NE(no_wall.find("fetch       1.234       -    2000   720.0\n"), std::string::npos) << no_wall;
}

// Parses the trace with Python's json module (skipped when /usr/bin/python3 is absent) and prints
// what the test compares: the number of X events, the names (as UTF-8 hex) and every X event.
constexpr const char* kCheckScript = R"PY(
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
assert d["displayTimeUnit"] == "ms"
ev = d["traceEvents"]
for e in ev:
    assert e["pid"] == 1 and e["ph"] in ("X", "M"), e
x = [e for e in ev if e["ph"] == "X"]
print(len(x))
print([e["args"]["name"] for e in ev if e["name"] == "process_name"][0].encode().hex())
for e in ev:
    if e["ph"] == "M" and e["name"] == "thread_name":
        print(e["tid"], e["args"]["name"].encode().hex())
for e in x:
    assert e["cat"] == "stoke"
    print(e["tid"], e["name"], round(e["ts"] * 1000), round(e["dur"] * 1000), e["args"]["batch"], e["args"]["bytes"])
)PY";

TEST_F(TraceFileTest, ChromeTraceJsonParsesAndNamesThreads) {
  TraceRecorder rec(true);
  const int64_t base = NowNanos();
  const std::string odd_name = "worker \"q\" \\ \n\t\x01 \xc3\xa9";
  rec.SetThreadName(odd_name);
  rec.Record(TraceStage::kFetch, base + 1000, base + 3500, 3, 1024);
  rec.Record(TraceStage::kCollate, base + 5000, base + 5001, -1, 0);
  std::thread([&] {
    rec.SetThreadName("bad\xff");
    rec.Record(TraceStage::kCompute, base + 2000, base + 2000 + 1'000'000, 9, 0);
  }).join();

  const std::string json = rec.ChromeTraceJson("stoke \"bench\"");
  // The escapes, literally.
  EXPECT_NE(json.find(R"("name":"worker \"q\" \\ \n\t\u0001 )" "\xc3\xa9\""), std::string::npos) << json;
  EXPECT_NE(json.find(R"("name":"bad\ufffd")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("name":"stoke \"bench\"")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("displayTimeUnit":"ms")"), std::string::npos);

  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 to parse the JSON";
  const std::string trace = dir_ + "/trace.json", script = dir_ + "/check.py", out = dir_ + "/out.txt";
  ASSERT_TRUE(rec.WriteChromeTrace(trace, "stoke \"bench\"").ok());
  EXPECT_EQ(ReadFile(trace), json);
  std::ofstream(script) << kCheckScript;
  const std::string cmd = "/usr/bin/python3 " + script + " " + trace + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << ReadFile(out);

  // ts is relative to the recorder's creation, which happened before `base`.
  std::istringstream lines(ReadFile(out));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "3");
  std::getline(lines, line);
  EXPECT_EQ(line, Hex("stoke \"bench\""));
  std::getline(lines, line);
  EXPECT_EQ(line, "1 " + Hex(odd_name));
  std::getline(lines, line);
  EXPECT_EQ(line, "2 " + Hex("bad\xef\xbf\xbd"));
  int64_t ts[3];
  std::string rest[3];
  for (int i = 0; i < 3; ++i) {
    int tid;
    std::string name;
    ASSERT_TRUE(lines >> tid >> name >> ts[i]);
    std::getline(lines, rest[i]);
    rest[i] = std::to_string(tid) + " " + name + rest[i];
  }
  EXPECT_EQ(rest[0], "1 fetch 2500 3 1024");
  EXPECT_EQ(rest[1], "1 collate 1 -1 0");
  EXPECT_EQ(rest[2], "2 compute 1000000 9 0");
  EXPECT_GE(ts[0], 1000);
  EXPECT_EQ(ts[1] - ts[0], 4000);
  EXPECT_EQ(ts[2] - ts[0], 1000);
}

TEST_F(TraceFileTest, WriteChromeTraceReplacesTheFileAndLeavesNoTemporary) {
  TraceRecorder rec(true);
  rec.Record(TraceStage::kDecode, NowNanos(), NowNanos() + 10, 1, 2);
  const std::string path = dir_ + "/t.json";
  std::ofstream(path) << "old";
  ASSERT_TRUE(rec.WriteChromeTrace(path).ok());
  EXPECT_EQ(ReadFile(path), rec.ChromeTraceJson());
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);
}

TEST_F(TraceFileTest, WriteChromeTraceToUnwritablePathIsIOErrorNamingThePath) {
  TraceRecorder rec(true);
  rec.Record(TraceStage::kDecode, 0, 10);
  const std::string missing_dir = dir_ + "/no/such/dir/trace.json";
  Status s = rec.WriteChromeTrace(missing_dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(missing_dir), std::string::npos) << s.ToString();

  // A directory in the way of the rename: the temporary file must be removed.
  const std::string is_dir = dir_ + "/a_dir";
  std::filesystem::create_directories(is_dir + "/child");
  s = rec.WriteChromeTrace(is_dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(is_dir), std::string::npos) << s.ToString();
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1);  // only a_dir
}

}  // namespace
}  // namespace stoke
