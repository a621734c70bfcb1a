// Crash consistency of the table operations, SQLite-style: each workload (ingest creating a table,
// ingest appending, optimize, vacuum, checkpoint) runs once through a FaultInjectingStorage to count
// its storage operations; then, for every operation N and every fault kind (EIO at N, ENOSPC at N,
// a power loss at N), it runs again on a fresh copy of the table with that fault. Afterwards, read
// through the plain local file system:
//  - the table is at the version before the workload or at the one it commits, and holds exactly
//    that version's rows, every column byte-equal;
//  - when the workload reported success, it is at the new version;
//  - after an EIO or ENOSPC, a power loss on top still leaves one of the two versions;
//  - the same workload run again without faults succeeds and reaches the expected final state.
// Here (in the ingest layer's tests) because the workloads include IngestSources.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "core/log.h"
#include "format/npy.h"
#include "io/fault_storage.h"
#include "io/uri.h"
#include "stoke/ingest.h"
#include "stoke/maintenance.h"
#include "stoke/table.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

enum class Workload { kCreate, kAppend, kOptimize, kVacuum, kCheckpoint };
constexpr Workload kWorkloads[] = {Workload::kCreate, Workload::kAppend, Workload::kOptimize, Workload::kVacuum,
                                   Workload::kCheckpoint};

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kCreate: return "ingest-create";
    case Workload::kAppend: return "ingest-append";
    case Workload::kOptimize: return "optimize";
    case Workload::kVacuum: return "vacuum";
    case Workload::kCheckpoint: return "checkpoint";
  }
  return "?";
}

const char* FaultName(FaultKind k) {
  switch (k) {
    case FaultKind::kEIO: return "eio";
    case FaultKind::kENOSPC: return "enospc";
    case FaultKind::kCrash: return "crash";
  }
  return "?";
}

// A committed version and its rows, each row every column's cell bytes, sorted by id.
struct TableState {
  int64_t version = -1;  // -1: no table
  std::vector<std::string> rows;
  bool operator==(const TableState&) const = default;
};

std::string Describe(const TableState& s) { return fmt::format("version {} with {} rows", s.version, s.rows.size()); }

// Reads the latest version of the table at `dir` (a plain local path) through the public API.
Result<TableState> ReadState(const std::string& dir) {
  TableState state;
  if (!fsys::exists(dir)) return state;
  delta::DeltaLog log(LocalStorage(), dir);
  STOKE_ASSIGN_OR_RETURN(state.version, log.LatestVersion());
  if (state.version < 0) return state;
  QueryOptions q;
  q.table_dir = dir;
  q.version = state.version;
  STOKE_ASSIGN_OR_RETURN(QueryResult r, QueryTableColumns(q));
  const size_t n = static_cast<size_t>(r.report.rows);
  std::vector<std::pair<int64_t, std::string>> rows(n);
  for (const QueryColumn& c : r.columns) {
    const size_t width = n == 0 ? 0 : c.data.size() / n;
    for (size_t i = 0; i < n; ++i) {
      std::string cell;
      if (c.kind == ColumnKind::kString || c.kind == ColumnKind::kBinary) {
        cell = c.strings[i];
      } else {
        cell.assign(reinterpret_cast<const char*>(c.data.data()) + i * width, width);
      }
      if (!c.valid.empty() && !c.valid[i]) cell = "<null>";
      if (c.name == "id") std::memcpy(&rows[i].first, cell.data(), sizeof(int64_t));
      rows[i].second += fmt::format("{}[{}]={};", c.name, cell.size(), cell);
    }
  }
  std::sort(rows.begin(), rows.end());
  for (auto& [id, row] : rows) state.rows.push_back(std::move(row));
  return state;
}

// Files under the table outside its log and stoke's _stoke/ directory, relative to it.
std::set<std::string> DataFilesOnDisk(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fsys::recursive_directory_iterator(dir)) {
    const std::string rel = fsys::relative(e.path(), dir).generic_string();
    // Not the log, nor stoke's own files (_stoke/: the sample index that ingest writes).
    if (e.is_regular_file() && rel.rfind(delta::kLogDirName, 0) != 0 && rel.rfind("_stoke/", 0) != 0) out.insert(rel);
  }
  return out;
}

class CrashConsistencyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { SetLogLevel(LogLevel::kError); }  // a failed checkpoint warns

  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_crash_XXXXXX";
    root_ = mkdtemp(tmpl.data());
    // Two source directories: four files, then two more (the append).
    MakeSources(root_ + "/src_a", 0, 4);
    MakeSources(root_ + "/src_b", 4, 2);
    // The table before and after each workload, built without faults: templates_[k] is the state
    // before workload k, templates_[k + 1] the state after it.
    templates_.push_back(root_ + "/t0");  // no table yet
    for (Workload w : kWorkloads) {
      const std::string next = root_ + "/t" + std::to_string(templates_.size());
      CopyTable(templates_.back(), next);
      Status s = RunWorkload(w, next);
      ASSERT_TRUE(s.ok()) << WorkloadName(w) << ": " << s.ToString();
      templates_.push_back(next);
    }
    for (const auto& t : templates_) {
      auto state = ReadState(t);
      ASSERT_TRUE(state.ok()) << state.status().ToString();
      states_.push_back(*state);
    }
  }
  void TearDown() override { fsys::remove_all(root_); }

  // Files s_<first>.npy.. (float32 [8, 8] filled with the file's index) and labels.csv.
  static void MakeSources(const std::string& dir, int first, int n) {
    ASSERT_TRUE(LocalStorage().CreateDirectories(dir).ok());
    std::string csv = "file,label\n";
    const std::vector<int64_t> shape = {8, 8};
    for (int i = first; i < first + n; ++i) {
      std::vector<float> v(64, static_cast<float>(i));
      const std::string name = fmt::format("s_{:03d}.npy", i);
      ASSERT_TRUE(WriteNpyFile(LocalStorage(), dir + "/" + name, DType::kFloat32, shape,
                               ByteView(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)))
                      .ok());
      csv += fmt::format("{},{}\n", name, i % 3);
    }
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir + "/labels.csv", AsBytes(csv)).ok());
  }

  static void CopyTable(const std::string& from, const std::string& to) {
    if (fsys::exists(from)) fsys::copy(from, to, fsys::copy_options::recursive);
  }

  // Runs workload `w` on the table at `table` (a path or URI).
  Status RunWorkload(Workload w, const std::string& table) {
    switch (w) {
      case Workload::kCreate:
      case Workload::kAppend: {
        IngestOptions o;
        o.source_dir = root_ + (w == Workload::kCreate ? "/src_a" : "/src_b");
        o.labels_csv = o.source_dir + "/labels.csv";
        o.table_dir = table;
        o.tensor_column = "x";
        o.rows_per_file = 2;  // several small files, for optimize to compact
        o.threads = 1;
        o.progress = false;
        return IngestSources(o).status();
      }
      case Workload::kOptimize: {
        OptimizeOptions o;
        o.table_dir = table;
        o.threads = 1;
        o.progress = false;
        return OptimizeTable(o).status();
      }
      case Workload::kVacuum: {
        VacuumOptions o;
        o.table_dir = table;
        o.retain_hours = 0;  // delete the files optimize just removed
        o.progress = false;
        return VacuumTable(o).status();
      }
      case Workload::kCheckpoint:
        return CheckpointTable(table, std::nullopt);
    }
    return Status::Internal("unknown workload");
  }

  // Checks that the table at `dir` is at the state before (k) or after (k + 1) workload k, and at
  // the state after it when `must_be_new`. Returns a description of what is wrong, or "".
  std::string CheckCommitted(size_t k, const std::string& dir, bool must_be_new) {
    auto state = ReadState(dir);
    if (!state.ok()) return "the table does not open: " + state.status().ToString();
    if (*state == states_[k + 1]) return "";
    if (*state == states_[k]) return must_be_new ? "the workload reported success but the table is at the old state" : "";
    return fmt::format("the table is at {}, neither the old {} nor the new {}", Describe(*state), Describe(states_[k]),
                       Describe(states_[k + 1]));
  }

  // After a clean re-run: the new state, and what the workload is for.
  std::string CheckFinal(size_t k, Workload w, const std::string& dir) {
    std::string wrong = CheckCommitted(k, dir, /*must_be_new=*/true);
    if (!wrong.empty()) return wrong;
    delta::DeltaLog log(LocalStorage(), dir);
    auto snap = log.ReadSnapshot();
    if (!snap.ok()) return snap.status().ToString();
    delta::DeltaLog expected_log(LocalStorage(), templates_[k + 1]);
    auto expected = expected_log.ReadSnapshot();
    if (!expected.ok()) return expected.status().ToString();
    if (snap->files.size() != expected->files.size()) {
      return fmt::format("{} live files, expected {}", snap->files.size(), expected->files.size());
    }
    if (w == Workload::kVacuum) {  // nothing left but the live files
      std::set<std::string> live;
      for (const auto& f : snap->files) live.insert(*delta::DecodePath(f.path));
      if (DataFilesOnDisk(dir) != live) {
        return fmt::format("after vacuum the table holds {} files, {} of them live", DataFilesOnDisk(dir).size(), live.size());
      }
    }
    if (w == Workload::kCheckpoint) {
      auto last = ReadFileToString(LocalStorage(), dir + "/_delta_log/_last_checkpoint");
      if (!last.ok()) return "no _last_checkpoint: " + last.status().ToString();
      auto json = nlohmann::json::parse(*last, nullptr, false);
      if (json.is_discarded() || json.value("version", int64_t{-1}) != snap->version) {
        return "_last_checkpoint does not name the latest version: " + *last;
      }
    }
    return "";
  }

  std::string root_;
  std::vector<std::string> templates_;
  std::vector<TableState> states_;
};

// The clean states are what the workloads are meant to produce, checked against the sources.
TEST_F(CrashConsistencyTest, TemplatesHoldTheSourceRows) {
  ASSERT_EQ(states_.size(), 6u);
  EXPECT_EQ(states_[0].version, -1);
  EXPECT_EQ(states_[1].version, 0);
  EXPECT_EQ(states_[1].rows.size(), 4u);
  EXPECT_EQ(states_[2].version, 1);
  EXPECT_EQ(states_[2].rows.size(), 6u);
  EXPECT_EQ(states_[3].version, 2);  // optimize commits
  EXPECT_EQ(states_[3].rows, states_[2].rows);
  EXPECT_EQ(states_[4], states_[3]);  // vacuum and checkpoint change no rows
  EXPECT_EQ(states_[5], states_[3]);
  for (size_t i = 0; i < states_[2].rows.size(); ++i) {
    std::vector<float> v(64, static_cast<float>(i));
    const std::string tensor(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    const std::string& row = states_[2].rows[i];
    EXPECT_NE(row.find(fmt::format("x[256]={};", tensor)), std::string::npos) << i;
    EXPECT_NE(row.find(fmt::format("file[9]=s_{:03d}.npy;", i)), std::string::npos) << row;
  }
  delta::DeltaLog optimized(LocalStorage(), templates_[3]);
  EXPECT_EQ(optimized.ReadSnapshot()->files.size(), 1u);
  EXPECT_EQ(DataFilesOnDisk(templates_[3]).size(), 4u);  // three removed files wait for vacuum
  EXPECT_EQ(DataFilesOnDisk(templates_[4]).size(), 1u);
}

TEST_F(CrashConsistencyTest, EveryFaultPointLeavesACommittedVersion) {
  int64_t covered = 0;
  std::string summary;
  int run = 0;
  for (size_t k = 0; k < std::size(kWorkloads); ++k) {
    const Workload w = kWorkloads[k];
    SCOPED_TRACE(WorkloadName(w));
    // A clean run through the wrapper counts the operations; a power loss right after it must keep
    // everything it reported as done.
    uint64_t total = 0;
    {
      const std::string dir = fmt::format("{}/run{}", root_, run++);
      CopyTable(templates_[k], dir);
      FaultInjectingStorage fs(LocalStorage());
      ScopedStorageRegistration reg("crash", fs);
      Status s = RunWorkload(w, reg.Uri(dir));
      ASSERT_TRUE(s.ok()) << s.ToString();
      total = fs.operations();
      ASSERT_TRUE(fs.Crash().ok());
      const std::string wrong = CheckCommitted(k, dir, /*must_be_new=*/true);
      EXPECT_EQ(wrong, "") << "power loss after a successful run";
      fsys::remove_all(dir);
    }
    ASSERT_GT(total, 0u);
    summary += fmt::format(" {}={}ops", WorkloadName(w), total);
    for (FaultKind kind : {FaultKind::kEIO, FaultKind::kENOSPC, FaultKind::kCrash}) {
      int64_t fired = 0;
      for (uint64_t n = 1; n <= total; ++n) {
        const std::string dir = fmt::format("{}/run{}", root_, run++);
        CopyTable(templates_[k], dir);
        Status s;
        bool injected = false;
        std::string wrong;
        {
          FaultInjectingStorage fs(LocalStorage());
          ScopedStorageRegistration reg("crash", fs);
          fs.FailOperation(n, kind);
          s = RunWorkload(w, reg.Uri(dir));
          injected = fs.faults_injected() > 0;
          wrong = CheckCommitted(k, dir, /*must_be_new=*/s.ok());
          if (wrong.empty() && !fs.crashed()) {  // the process lives on after the error; then the power goes
            Status crash = fs.Crash();
            wrong = crash.ok() ? CheckCommitted(k, dir, s.ok()) : "simulating the crash: " + crash.ToString();
            if (!wrong.empty()) wrong += " (after a power loss that followed the error)";
          }
        }
        if (wrong.empty()) {
          Status again = RunWorkload(w, dir);
          wrong = again.ok() ? CheckFinal(k, w, dir) : "the re-run fails: " + again.ToString();
          if (!wrong.empty()) wrong = "after a clean re-run: " + wrong;
        }
        EXPECT_EQ(wrong, "") << FaultName(kind) << " at operation " << n << " of " << total
                             << "; the workload returned " << s.ToString();
        fired += injected ? 1 : 0;
        fsys::remove_all(dir);
      }
      covered += fired;
      summary += fmt::format(" {}:{}={}", WorkloadName(w), FaultName(kind), fired);
    }
  }
  RecordProperty("fault_points", static_cast<int>(covered));
  std::printf("crash consistency: %lld fault points covered;%s\n", static_cast<long long>(covered), summary.c_str());
}

// The local storage, except that a put-if-absent takes effect and then reports an I/O error (as
// when the directory sync after the link fails, or an object store's response is lost).
class PutTakesEffectButFails final : public Storage {
 public:
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& p) override { return base_.OpenForRead(p); }
  Result<std::unique_ptr<WritableFile>> Create(const std::string& p, bool exclusive) override {
    return base_.Create(p, exclusive);
  }
  Result<std::vector<DirEntry>> List(const std::string& d) override { return base_.List(d); }
  Result<std::vector<std::string>> ListNames(const std::string& d) override { return base_.ListNames(d); }
  Result<DirEntry> Stat(const std::string& p) override { return base_.Stat(p); }
  Status CreateDirectories(const std::string& p) override { return base_.CreateDirectories(p); }
  Status Rename(const std::string& from, const std::string& to) override { return base_.Rename(from, to); }
  Status Delete(const std::string& p) override { return base_.Delete(p); }
  Status SyncDirectory(const std::string& d) override { return base_.SyncDirectory(d); }
  Status PutIfAbsent(const std::string& p, ByteView data) override {
    STOKE_RETURN_IF_ERROR(base_.PutIfAbsent(p, data));
    return Status::IOError(fmt::format("fsync directory of '{}': Input/output error (injected)", p));
  }

 private:
  Storage& base_ = LocalStorage();
};

TEST_F(CrashConsistencyTest, ACommitThatTookEffectDespiteAnErrorKeepsItsFiles) {
  for (size_t k : {size_t{0}, size_t{2}}) {  // ingest creating the table, optimize
    const Workload w = kWorkloads[k];
    const std::string dir = fmt::format("{}/unknown{}", root_, k);
    CopyTable(templates_[k], dir);
    PutTakesEffectButFails storage;
    ScopedStorageRegistration reg("put-fails", storage);
    Status s = RunWorkload(w, reg.Uri(dir));
    EXPECT_EQ(s.code(), StatusCode::kIOError) << WorkloadName(w) << ": " << s.ToString();
    auto state = ReadState(dir);  // committed: every file it names must still be there
    ASSERT_TRUE(state.ok()) << WorkloadName(w) << ": " << state.status().ToString();
    EXPECT_EQ(*state, states_[k + 1]) << WorkloadName(w);
  }
}

}  // namespace
}  // namespace stoke
