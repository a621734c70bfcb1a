#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "format/npy.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "ingest/source.h"
#include "io/storage.h"
#include "stoke/ingest.h"
#include "stoke/maintenance.h"
#include "stoke/table.h"
#include "stoke/tools.h"
#include "table/delta_log.h"
#include "table/test_table.h"
#include "table/row_tracking.h"
#include "table/sample_index.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

class IngestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_ingest_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    table_ = dir_ + "/table";
    ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  }
  void TearDown() override { fsys::remove_all(dir_); }

  // Writes files s_<first>..s_<first+n-1> (float32 [8, 8]) and a labels.csv covering all files so far.
  void AddSources(int first, int n, std::vector<int64_t> shape = {8, 8}) {
    for (int i = first; i < first + n; ++i) {
      std::vector<float> v(64, static_cast<float>(i));
      char name[32];
      std::snprintf(name, sizeof(name), "s_%03d.npy", i);
      ASSERT_TRUE(WriteNpyFile(LocalStorage(), src_ + "/" + name, DType::kFloat32, shape,
                               ByteView(reinterpret_cast<const uint8_t*>(v.data()), 256)).ok());
    }
    std::string csv = "file,label\n";
    for (int i = 0; i < first + n; ++i) {
      char line[64];
      std::snprintf(line, sizeof(line), "s_%03d.npy,%d\n", i, i % 2);
      csv += line;
    }
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv", AsBytes(csv)).ok());
  }
  IngestOptions Options(IngestMode mode = IngestMode::kAppend) {
    IngestOptions o;
    o.source_dir = src_;
    o.labels_csv = src_ + "/labels.csv";
    o.table_dir = table_;
    o.mode = mode;
    o.tensor_column = "x";
    o.progress = false;
    return o;
  }
  // (id, file) of every row of the snapshot at `version`.
  std::vector<std::pair<int64_t, std::string>> Rows(std::optional<int64_t> version = std::nullopt) {
    delta::DeltaLog log(LocalStorage(), table_);
    auto snap = log.ReadSnapshot(version);
    EXPECT_TRUE(snap.ok()) << snap.status().ToString();
    std::vector<std::pair<int64_t, std::string>> rows;
    for (const auto& f : snap->files) {
      auto r = ParquetReader::Open(LocalStorage(), table_ + "/" + *delta::DecodePath(f.path));
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      auto ids = std::get<std::vector<int64_t>>((*r)->ReadColumn(0)->values);
      auto files = std::get<std::vector<std::string>>((*r)->ReadColumn(1)->values);
      for (size_t i = 0; i < ids.size(); ++i) rows.push_back({ids[i], files[i]});
    }
    std::sort(rows.begin(), rows.end());
    return rows;
  }
  // A table of the source's files as stoke wrote it before it recorded locations: columns id, file,
  // the labels and the tensor, one data file, one commit.
  void WriteTableWithoutLocations() {
    SourceOptions so;
    so.source = src_;
    so.labels_csv = src_ + "/labels.csv";
    so.npy_column = "x";
    auto plan = PlanSources(so, "ingest");
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ConvertOptions c;
    c.source_dir = src_;
    c.labels_csv = so.labels_csv;
    c.tensor_column = "x";
    c.out = table_ + "/part-00000-old.parquet";
    c.progress = false;
    ASSERT_TRUE(ConvertSources(c).ok());
    delta::Metadata meta;
    meta.id = "old-table";
    meta.schema_string = delta::SchemaToSparkJson(plan->columns);
    meta.configuration[kTensorsMetadataKey] = TensorSpecsToJson(plan->columns);
    delta::AddFile add;
    add.path = "part-00000-old.parquet";
    add.size = static_cast<int64_t>(fsys::file_size(c.out));
    add.data_change = true;
    std::vector<delta::Action> actions = {delta::Protocol{}, meta, add};
    auto v = delta::DeltaLog(LocalStorage(), table_).Commit(-1, std::move(actions), delta::CommitKind::kExclusive, "WRITE",
                                                            nlohmann::json::object());
    ASSERT_TRUE(v.ok()) << v.status().ToString();
  }
  Result<QueryResult> Query(const std::string& where, std::vector<std::string> select) {
    QueryOptions q;
    q.table_dir = table_;
    q.where = where;
    q.select = std::move(select);
    return QueryTableColumns(q);
  }
  size_t DataFilesOnDisk() {
    size_t n = 0;
    if (!fsys::exists(table_)) return 0;  // a failed first ingest removes the directory it created
    for (const auto& e : fsys::directory_iterator(table_)) n += e.path().extension() == ".parquet";
    return n;
  }

  std::string dir_, src_, table_;
};

// Appending with a labels CSV: the new files' cells take the table's column types where they
// convert (integers into a DOUBLE column, an empty cell into an OPTIONAL one); a cell that does not
// is named with its file, not blamed on the table's first file.
TEST_F(IngestTest, AppendedLabelsTakeTheTablesTypesOrNameTheCell) {
  auto labels = [&](const std::string& rows) {
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv", AsBytes("file,label,weight\n" + rows)).ok());
  };
  AddSources(0, 2);
  labels("s_000.npy,0,0.5\ns_001.npy,1,\n");  // label INT32 REQUIRED, weight DOUBLE OPTIONAL
  ASSERT_TRUE(IngestSources(Options()).ok());
  AddSources(2, 1);
  labels("s_000.npy,0,0.5\ns_001.npy,1,\ns_002.npy,3000000000,2\n");  // needs INT64: not the table's INT32
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("file 's_002.npy': the cell '3000000000' in column 'label', which the table "
                                      "holds as INT32"),
            std::string::npos)
      << r.status().message();
  labels("s_000.npy,0,0.5\ns_001.npy,1,\ns_002.npy,,2\n");  // null in a REQUIRED column
  r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("file 's_002.npy': an empty cell (null) in column 'label'"), std::string::npos)
      << r.status().message();
  labels("s_000.npy,0,0\ns_001.npy,1,\ns_002.npy,7,2\n");  // weight now reads as INT32: into the table's DOUBLE
  r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 1);
  delta::DeltaLog log(LocalStorage(), table_);
  auto snap = log.ReadSnapshot(std::nullopt);
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->files.size(), 2u);
  for (const auto& f : snap->files) {
    auto pr = ParquetReader::Open(LocalStorage(), table_ + "/" + *delta::DecodePath(f.path));
    ASSERT_TRUE(pr.ok());
    if ((*pr)->num_rows() != 1) continue;
    const size_t label = *(*pr)->FindColumn("label"), weight = *(*pr)->FindColumn("weight");
    EXPECT_EQ((*pr)->columns()[weight].type, parquet::Type::kDouble);
    EXPECT_EQ((*pr)->columns()[weight].max_definition_level, 1);  // OPTIONAL, as the table's
    EXPECT_EQ(std::get<std::vector<double>>((*pr)->ReadColumn(weight)->values), std::vector<double>{2.0});
    EXPECT_EQ(std::get<std::vector<int32_t>>((*pr)->ReadColumn(label)->values), std::vector<int32_t>{7});
  }
}

// A first ingest that fails after planning (a file of another shape, found while writing) leaves
// no directory behind: later commands would find a "table" without a log. A directory that
// existed before is kept.
TEST_F(IngestTest, AFailedFirstIngestLeavesNoTableDirectory) {
  AddSources(0, 3);
  AddSources(3, 1, {4, 16});  // the same bytes, another shape
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("s_003.npy"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fsys::exists(table_));
  ASSERT_TRUE(LocalStorage().CreateDirectories(table_).ok());
  EXPECT_FALSE(IngestSources(Options()).ok());
  EXPECT_TRUE(fsys::exists(table_));
}

TEST_F(IngestTest, NeverCreatesATableOverAPlainParquetDataset) {
  AddSources(0, 2);
  // What a first ingest that failed before its commit leaves does not stop the next one.
  ASSERT_TRUE(LocalStorage().CreateDirectories(table_ + "/year=2024").ok());
  testing_support::WriteDataFile(table_, "part-leftover.parquet", 0, 2, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  fsys::remove_all(table_);
  ASSERT_TRUE(LocalStorage().CreateDirectories(table_ + "/year=2024").ok());
  testing_support::WriteDataFile(table_ + "/year=2024", "part-0.parquet", 0, 2, 2);
  testing_support::RewriteFooter(table_ + "/year=2024/part-0.parquet",
                                 [](parquet::FileMetaData& m) { m.created_by = "parquet-mr version 1.12.3"; });
  auto r = IngestSources(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("year=2024/part-0.parquet"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(fsys::exists(table_ + "/_delta_log"));
  // Once it holds a Delta table, appends go on (the files it has are the table's business).
  fsys::remove_all(table_);
  ASSERT_TRUE(IngestSources(Options()).ok());
  AddSources(2, 1);
  EXPECT_TRUE(IngestSources(Options()).ok());
}

TEST_F(IngestTest, CreatesAppendsResumesAndOverwrites) {
  AddSources(0, 10);
  auto r0 = IngestSources(Options());
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_EQ(r0->version, 0);
  EXPECT_EQ(r0->rows, 10);
  EXPECT_TRUE(IsTableDirectory(table_));

  AddSources(10, 5);
  auto r1 = IngestSources(Options());
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->version, 1);
  EXPECT_EQ(r1->skipped, 10);
  EXPECT_EQ(r1->rows, 5);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 15u);
  for (int i = 0; i < 15; ++i) {
    EXPECT_EQ(rows[i].first, i);  // ids continue where the table ended
    char name[32];
    std::snprintf(name, sizeof(name), "s_%03d.npy", i);
    EXPECT_EQ(rows[i].second, name);
  }
  EXPECT_EQ(Rows(0).size(), 10u);  // time travel

  auto again = IngestSources(Options());  // nothing new: no commit
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->files_added, 0);
  EXPECT_EQ(again->version, 1);

  auto r2 = IngestSources(Options(IngestMode::kOverwrite));
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->version, 2);
  EXPECT_EQ(r2->rows, 15);
  EXPECT_EQ(r2->files_removed, 2);
  EXPECT_EQ(Rows().size(), 15u);
  EXPECT_EQ(Rows(1).size(), 15u);

  delta::DeltaLog log(LocalStorage(), table_);
  auto history = log.History();
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->size(), 3u);
  EXPECT_EQ((*history)[0].operation, "WRITE");
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->num_records(), 15);
  EXPECT_NE(snap->metadata.configuration.at("stoke.tensors").find("float32"), std::string::npos);
}

// A source file is its location and version: another directory's files with the same names are
// new rows, and re-running either ingest finds nothing to do.
TEST_F(IngestTest, SameNamesInAnotherDirectoryAreNewRows) {
  AddSources(0, 4);
  ASSERT_TRUE(IngestSources(Options()).ok());
  const std::string day1 = src_;
  src_ = dir_ + "/day2";
  ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  AddSources(0, 3);  // s_000.npy .. s_002.npy again, in day2/
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->new_files, 3);
  EXPECT_EQ(r->skipped, 0);
  EXPECT_EQ(r->rows, 3);
  EXPECT_EQ(Rows().size(), 7u);
  for (const std::string& source : {day1, src_}) {
    IngestOptions o = Options();
    o.source_dir = source;
    o.labels_csv = source + "/labels.csv";
    auto again = IngestSources(o);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->files_added, 0) << source;
    EXPECT_EQ(again->skipped, source == day1 ? 4 : 3);
  }
  // Each row records where it came from, as an absolute location, and which version of the file.
  auto rows = Query("file = 's_001.npy'", {"source_location", "source_version"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->report.rows, 2);
  const std::set<std::string> locations(rows->columns[0].strings.begin(), rows->columns[0].strings.end());
  EXPECT_EQ(locations, (std::set<std::string>{fsys::canonical(day1).string() + "/s_001.npy",
                                              fsys::canonical(src_).string() + "/s_001.npy"}));
  EXPECT_EQ(rows->columns[1].strings[0].rfind("size:384,mtime:", 0), 0u) << rows->columns[1].strings[0];
}

// A file at a known location with another version: skipped and reported by default, refused before
// anything is written with kError, appended as new rows with kAppend (after which it is present).
TEST_F(IngestTest, AChangedFileIsReportedAndSkippedRefusedOrAppended) {
  AddSources(0, 4);
  ASSERT_TRUE(IngestSources(Options()).ok());
  const std::string changed = src_ + "/s_001.npy";
  std::vector<float> v(64, 99.0f);
  ASSERT_TRUE(WriteNpyFile(LocalStorage(), changed, DType::kFloat32, std::vector<int64_t>{8, 8}, ByteView(reinterpret_cast<const uint8_t*>(v.data()), 256)).ok());
  fsys::last_write_time(changed, fsys::last_write_time(changed) + std::chrono::seconds(5));
  AddSources(4, 1);

  auto skip = IngestSources(Options());
  ASSERT_TRUE(skip.ok()) << skip.status().ToString();
  EXPECT_EQ(skip->new_files, 1);
  EXPECT_EQ(skip->skipped, 3);
  EXPECT_EQ(skip->changed, 1);
  EXPECT_EQ(skip->rows, 1);
  ASSERT_EQ(skip->changed_files.size(), 1u);
  EXPECT_EQ(skip->changed_files[0].location, fsys::canonical(changed).string());
  EXPECT_NE(skip->changed_files[0].table_version, skip->changed_files[0].source_version);
  EXPECT_EQ(Rows().size(), 5u);

  IngestOptions o = Options();
  o.on_changed = OnChanged::kError;
  auto error = IngestSources(o);
  ASSERT_EQ(error.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(error.status().message().find(fsys::canonical(changed).string()), std::string::npos) << error.status().message();
  EXPECT_NE(error.status().message().find("nothing was written"), std::string::npos);
  EXPECT_EQ(delta::DeltaLog(LocalStorage(), table_).LatestVersion().value(), 1);

  o.on_changed = OnChanged::kAppend;
  auto append = IngestSources(o);
  ASSERT_TRUE(append.ok()) << append.status().ToString();
  EXPECT_EQ(append->changed, 1);
  EXPECT_EQ(append->rows, 1);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows.back(), (std::pair<int64_t, std::string>{5, "s_001.npy"}));  // the new version, a new id

  o.on_changed = OnChanged::kError;  // the table now holds this version too
  auto again = IngestSources(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->changed, 0);
  EXPECT_EQ(again->skipped, 5);
  EXPECT_EQ(again->files_added, 0);
}

TEST(IngestModeNames, OnChangedNamesReadBack) {
  for (OnChanged c : {OnChanged::kSkip, OnChanged::kAppend, OnChanged::kError}) {
    EXPECT_EQ(ParseOnChanged(OnChangedName(c)).value(), c);
  }
  auto bad = ParseOnChanged("replace");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("skip, append or error"), std::string::npos);
}

// A table written before stoke recorded locations (columns id, file, label, x): its rows match by
// name, as they did; new rows add `source_location` and `source_version` to the schema (null in the old
// rows), and the table still reads, compacts and loads.
TEST_F(IngestTest, TablesWithoutLocationsMatchByNameAndGainTheColumns) {
  AddSources(0, 3);
  WriteTableWithoutLocations();
  AddSources(3, 2);
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped, 3);
  EXPECT_EQ(r->new_files, 2);
  EXPECT_EQ(Rows().size(), 5u);
  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  auto columns = delta::ColumnsFromMetadata(snap->metadata, table_);
  ASSERT_TRUE(columns.ok());
  std::vector<std::string> names;
  for (const auto& c : *columns) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"id", "file", "source_location", "source_version", "label", "x"}));
  EXPECT_TRUE((*columns)[2].optional);

  auto rows = Query("source_location IS NULL", {"file"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->report.rows, 3);
  // Both rewrites (in file order, and sorted) give the old rows a null location.
  fsys::copy(table_, table_ + "_sorted", fsys::copy_options::recursive);
  OptimizeOptions opt;
  opt.table_dir = table_ + "_sorted";
  opt.sort_by = "label";
  opt.progress = false;
  auto sorted = OptimizeTable(opt);
  ASSERT_TRUE(sorted.ok()) << sorted.status().ToString();
  QueryOptions q;
  q.table_dir = opt.table_dir;
  q.where = "source_location IS NULL";
  q.count_only = true;
  EXPECT_EQ(QueryTableColumns(q)->report.rows, 3);
  opt.table_dir = table_;
  opt.sort_by.clear();
  auto optimized = OptimizeTable(opt);
  ASSERT_TRUE(optimized.ok()) << optimized.status().ToString();
  EXPECT_EQ(Rows().size(), 5u);
  rows = Query("source_location IS NULL", {"file"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->report.rows, 3);
  EXPECT_EQ(Query("source_location IS NOT NULL", {"file"})->report.rows, 2);
  auto again = IngestSources(Options());  // old rows by name, new rows by location
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->skipped, 5);
  EXPECT_EQ(again->files_added, 0);
}

// Sharded appends to a table without location columns: the columns come in one commit of their
// own before the shards' data, so no shard's commit conflicts with another's over them.
TEST_F(IngestTest, ShardsAddTheLocationColumnsInACommitOfTheirOwn) {
  AddSources(0, 2);
  WriteTableWithoutLocations();
  AddSources(2, 4);
  for (int shard : {1, 0}) {
    IngestOptions o = Options();
    o.shard_index = shard;
    o.shard_count = 2;
    auto r = IngestSources(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  EXPECT_EQ(Rows().size(), 6u);
  auto history = delta::DeltaLog(LocalStorage(), table_).History();
  ASSERT_TRUE(history.ok());
  std::vector<std::string> operations;
  for (auto it = history->rbegin(); it != history->rend(); ++it) operations.push_back(it->operation);
  EXPECT_EQ(operations, (std::vector<std::string>{"WRITE", "ADD COLUMNS", "WRITE", "WRITE"}));
  EXPECT_EQ(Query("source_location IS NOT NULL", {"file"})->report.rows, 4);
}

// A labels column named like a location column keeps its name and values: rows then record no
// location, and appends match by name.
TEST_F(IngestTest, ALabelNamedLikeALocationColumnKeepsItsName) {
  AddSources(0, 2);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv",
                                  AsBytes(std::string("file,source_location\ns_000.npy,camera\ns_001.npy,lidar\n"))).ok());
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto rows = Query("", {"file", "source_location"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->columns[1].strings, (std::vector<std::string>{"camera", "lidar"}));
  EXPECT_FALSE(Query("", {"source_version"}).ok());
  auto again = IngestSources(Options());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->skipped, 2);
  EXPECT_EQ(again->files_added, 0);
}

// A table whose columns of those names are not strings (a labels column of integers, from an ingest
// that recorded no locations): an append is a schema mismatch, never a crash.
TEST_F(IngestTest, LocationColumnsOfAnotherTypeAreASchemaMismatch) {
  AddSources(0, 2);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv",
                                  AsBytes(std::string("file,source_location,source_version\ns_000.npy,1,2\ns_001.npy,3,4\n")))
                  .ok());
  ASSERT_TRUE(IngestSources(Options()).ok());
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv",
                                  AsBytes(std::string("file,label\ns_000.npy,1\ns_001.npy,0\n"))).ok());
  auto r = IngestSources(Options());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("schema mismatch"), std::string::npos) << r.status().message();
}

// The sample index an ingest writes for its version, compared with one a loader builds from the data
// files' footers: byte for byte (the cache records the commit file's size and time, so both describe
// the same commit).
class IngestIndexTest : public IngestTest {
 protected:
  std::string CacheBytes(int64_t version) {
    auto bytes = ReadFileToString(LocalStorage(), SampleIndex::CachePath(table_, version));
    return bytes.ok() ? *bytes : "";
  }
  std::string BuiltFromFooters(int64_t version) {
    SampleIndex::Options o;
    o.use_cache = false;
    o.write_cache = false;
    auto index = SampleIndex::Open(table_, version, o);
    EXPECT_TRUE(index.ok()) << index.status().ToString();
    // Write it where a comparison can read it, then restore the ingest's cache.
    const std::string path = SampleIndex::CachePath(table_, version);
    const std::string kept = CacheBytes(version);
    fsys::remove(path);
    SampleIndex::Options w;
    w.use_cache = false;
    EXPECT_TRUE(SampleIndex::Open(table_, version, w).ok());
    std::string built = CacheBytes(version);
    if (!kept.empty()) {
      EXPECT_TRUE(WriteFileAtomically(LocalStorage(), path, AsBytes(kept)).ok());
    }
    return built;
  }
};

TEST_F(IngestIndexTest, IngestWritesTheSampleIndexALoaderWouldBuild) {
  AddSources(0, 12);
  IngestOptions o = Options();
  o.rows_per_file = 1;
  ASSERT_TRUE(IngestSources(o).ok());
  const std::string v0 = CacheBytes(0);
  ASSERT_FALSE(v0.empty()) << "no index written for version 0";
  EXPECT_EQ(v0, BuiltFromFooters(0));

  // An append: the new files' pages from the writer, the others from version 0's index.
  AddSources(12, 3);
  ASSERT_TRUE(IngestSources(o).ok());
  const std::string v1 = CacheBytes(1);
  ASSERT_FALSE(v1.empty()) << "no index written for version 1";
  EXPECT_EQ(v1, BuiltFromFooters(1));
  auto index = SampleIndex::Open(table_, 1);
  ASSERT_TRUE(index.ok());
  EXPECT_TRUE(index->from_cache());
  EXPECT_EQ(index->num_rows(), 15);

  // Without an older index the ingest would have to read the other files' footers: it writes none.
  fsys::remove_all(table_ + "/_stoke");
  AddSources(15, 2);
  ASSERT_TRUE(IngestSources(o).ok());
  EXPECT_TRUE(CacheBytes(2).empty());
}

TEST_F(IngestIndexTest, PartitionedIngestIndexesFilesInTheirDirectories) {
  AddSources(0, 8);
  IngestOptions o = Options();
  o.partition_by = "label";
  o.rows_per_file = 2;
  ASSERT_TRUE(IngestSources(o).ok());
  const std::string v0 = CacheBytes(0);
  ASSERT_FALSE(v0.empty());
  EXPECT_EQ(v0, BuiltFromFooters(0));
}

TEST_F(IngestTest, SchemaMismatchOnAppendLeavesTheTableUntouched) {
  AddSources(0, 4);
  ASSERT_TRUE(IngestSources(Options()).ok());
  AddSources(4, 2, {4, 16});  // same bytes per sample, other shape
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  // The new files differ from the source's first file, which sets the columns: the error names one.
  EXPECT_NE(r.status().message().find("s_004.npy"), std::string::npos) << r.status().message();
  delta::DeltaLog log(LocalStorage(), table_);
  EXPECT_EQ(*log.LatestVersion(), 0);
  EXPECT_EQ(DataFilesOnDisk(), 1u);
  EXPECT_EQ(Rows().size(), 4u);
}

// Another writer's table (no `file` column) is a schema mismatch naming both sides' columns, before
// its files are read for the names of ingested sources.
TEST_F(IngestTest, AppendingToAnotherWritersTableIsASchemaMismatch) {
  AddSources(0, 2);
  testing_support::TestTable other;
  other.AppendFile(0, 3);
  IngestOptions o = Options();
  o.table_dir = other.dir();
  auto r = IngestSources(o);
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("the table has columns [id, label, name, t], the source [id, file"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(*other.log().LatestVersion(), 0);
}

// Another writer's CHECK constraints (`constraints`: name -> expression) and an invariant on column
// `invariant_column` (empty: none), committed as Spark's ALTER TABLE ... ADD CONSTRAINT does, on a
// protocol that supports them (writer version 3).
void AddConstraints(const std::string& table, const std::map<std::string, std::string>& constraints,
                    const std::string& invariant_column = "", const std::string& invariant = "") {
  delta::DeltaLog log(LocalStorage(), table);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  delta::Metadata meta = snap->metadata;
  for (const auto& [name, expression] : constraints) meta.configuration["delta.constraints." + name] = expression;
  if (!invariant_column.empty()) {
    auto schema = nlohmann::json::parse(meta.schema_string);
    for (auto& f : schema["fields"]) {
      if (f["name"] == invariant_column) {
        f["metadata"]["delta.invariants"] = nlohmann::json{{"expression", {{"expression", invariant}}}}.dump();
      }
    }
    meta.schema_string = schema.dump();
  }
  auto v = log.Commit(snap->version, {delta::Protocol{1, 3, {}, {}}, meta}, delta::CommitKind::kExclusive,
                      "ADD CONSTRAINT", nlohmann::json::object());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
}

// Another writer turns on column mapping (`mode` name or id) as Spark's upgrade of a table does:
// each column's physical name is its name, its id its position from 1, maxColumnId the largest, on
// protocol (2, 5); then it renames columns (`renames`: name -> new display name), which changes the
// schema only.
void MapColumnNames(const std::string& table, const std::string& mode, const std::map<std::string, std::string>& renames) {
  delta::DeltaLog log(LocalStorage(), table);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  delta::Metadata meta = snap->metadata;
  auto schema = nlohmann::json::parse(meta.schema_string);
  int id = 0;
  for (auto& f : schema["fields"]) {
    const std::string name = f["name"];
    f["metadata"]["delta.columnMapping.id"] = ++id;
    f["metadata"]["delta.columnMapping.physicalName"] = name;
    if (renames.count(name)) f["name"] = renames.at(name);
  }
  meta.schema_string = schema.dump();
  meta.configuration["delta.columnMapping.mode"] = mode;
  meta.configuration["delta.columnMapping.maxColumnId"] = std::to_string(id);
  auto v = log.Commit(snap->version, {delta::Protocol{2, 5, {}, {}}, meta}, delta::CommitKind::kExclusive,
                      "SET TBLPROPERTIES", nlohmann::json::object());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
}

// The field ids of a data file's top-level columns, by name.
std::map<std::string, int32_t> FieldIds(const std::string& path) {
  std::map<std::string, int32_t> out;
  auto reader = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  for (const auto& e : (*reader)->metadata().schema) {
    if (e.field_id) out[e.name] = *e.field_id;
  }
  return out;
}

// An append into a table that maps column names (renamed by another writer after the upgrade)
// writes each column under its physical name with its field id, keys statistics by physical names,
// and finds the files already in the table through the physical names: the renamed label and
// tensor columns read back under their new names, and the table's sample index finds the tensor.
TEST_F(IngestTest, AppendsIntoAColumnMappedTableWritePhysicalNamesAndFieldIds) {
  AddSources(0, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  MapColumnNames(table_, "name", {{"label", "grade"}, {"x", "volume"}});
  AddSources(2, 2);
  std::string csv = *ReadFileToString(LocalStorage(), src_ + "/labels.csv");
  csv.replace(0, csv.find('\n'), "file,grade");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv", AsBytes(csv)).ok());
  IngestOptions o = Options();
  o.tensor_column = "volume";
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped, 2);
  EXPECT_EQ(r->new_files, 2);

  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->files.size(), 2u);
  const std::string added = table_ + "/" + *delta::DecodePath(snap->files[1].path);
  EXPECT_EQ(FieldIds(added), (std::map<std::string, int32_t>{
                                 {"id", 1}, {"file", 2}, {"source_location", 3}, {"source_version", 4}, {"label", 5}, {"x", 6}}));
  ASSERT_TRUE(snap->files[1].stats.has_value());
  EXPECT_NE(snap->files[1].stats->find(R"("label":0)"), std::string::npos) << *snap->files[1].stats;
  EXPECT_EQ(snap->metadata.configuration.at("delta.columnMapping.maxColumnId"), "6");

  auto rows = Query("grade = 1", {"file", "grade"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->columns[0].strings, (std::vector<std::string>{"s_001.npy", "s_003.npy"}));
  for (bool cached : {true, false}) {  // written by the ingest; built from the footers
    SampleIndex::Options io;
    io.use_cache = cached;
    io.write_cache = false;
    auto index = SampleIndex::Open(table_, std::nullopt, io);
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    EXPECT_EQ(index->num_rows(), 4);
    EXPECT_EQ(index->tensor_columns(), std::vector<std::string>{"x"});  // named as the data files name it
  }

  auto again = IngestSources(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->skipped, 4);
  EXPECT_EQ(again->files_added, 0);
  // An overwrite keeps the columns' physical names and ids.
  auto overwritten = IngestSources([&] { IngestOptions w = o; w.mode = IngestMode::kOverwrite; return w; }());
  ASSERT_TRUE(overwritten.ok()) << overwritten.status().ToString();
  EXPECT_EQ(Query("grade = 1", {"file"})->report.rows, 2);
}

// In mode id, the columns an append adds (the source locations, to a table written before stoke
// recorded them) get physical names of their own and the ids above the table's largest, which
// maxColumnId follows; readers resolve them by id.
TEST_F(IngestTest, ColumnsAddedToAnIdMappedTableGetNewPhysicalNamesAndIds) {
  AddSources(0, 2);
  WriteTableWithoutLocations();
  MapColumnNames(table_, "id", {});
  AddSources(2, 2);
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->new_files, 2);
  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  auto columns = delta::ColumnsFromMetadata(snap->metadata, table_);
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  ASSERT_EQ(columns->size(), 6u);
  EXPECT_EQ((*columns)[2].name, "source_location");
  EXPECT_EQ((*columns)[2].physical_name.rfind("col-", 0), 0u) << (*columns)[2].physical_name;
  EXPECT_EQ((*columns)[2].field_id, 5);
  EXPECT_EQ((*columns)[3].field_id, 6);
  EXPECT_EQ(snap->metadata.configuration.at("delta.columnMapping.maxColumnId"), "6");
  const std::string added = table_ + "/" + *delta::DecodePath(snap->files.back().path);
  EXPECT_EQ(FieldIds(added).at((*columns)[2].physical_name), 5);
  EXPECT_EQ(Query("source_location IS NOT NULL", {"file"})->report.rows, 2);
  EXPECT_EQ(Query("label = 1", {"file"})->report.rows, 2);
  auto again = IngestSources(Options());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->skipped, 4);
}

// Another writer's identity column declaration on column `column` of the table (`metadata`: the
// delta.identity.* keys), on writer version 6, as a table created with an IDENTITY column has it.
void DeclareIdentity(const std::string& table, const std::string& column, const nlohmann::json& metadata) {
  delta::DeltaLog log(LocalStorage(), table);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  delta::Metadata meta = snap->metadata;
  meta.name = "volumes";
  meta.description = "kept by every commit";
  auto schema = nlohmann::json::parse(meta.schema_string);
  for (auto& f : schema["fields"]) {
    if (f["name"] == column) f["metadata"] = metadata;
  }
  meta.schema_string = schema.dump();
  auto v = log.Commit(snap->version, {delta::Protocol{1, 6, {}, {}}, meta}, delta::CommitKind::kExclusive, "CREATE",
                      nlohmann::json::object());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
}

// The identity column's metadata at the table's latest version.
nlohmann::json IdentityMetadata(const std::string& table, const std::string& column) {
  auto snap = delta::DeltaLog(LocalStorage(), table).ReadSnapshot();
  EXPECT_TRUE(snap.ok());
  const nlohmann::json schema = nlohmann::json::parse(snap->metadata.schema_string);
  for (const auto& f : schema["fields"]) {
    if (f["name"] == column) return f["metadata"];
  }
  return nullptr;
}

// Where the table's `id` is an identity column, an append gives its rows the column's next values
// (start + k * step beyond the high-water mark and every id the table holds) and raises the mark in
// the same commit; a sharded append, whose shards would race for the values, is refused.
TEST_F(IngestTest, AppendsGenerateTheValuesOfAnIdentityIdAndRaiseItsHighWaterMark) {
  AddSources(0, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  DeclareIdentity(table_, "id", {{"delta.identity.start", 100}, {"delta.identity.step", 10},
                                 {"delta.identity.allowExplicitInsert", false}});
  AddSources(2, 2);
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(IdentityMetadata(table_, "id")["delta.identity.highWaterMark"], 110);
  AddSources(4, 1);
  r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Rows(), (std::vector<std::pair<int64_t, std::string>>{
                        {0, "s_000.npy"}, {1, "s_001.npy"}, {100, "s_002.npy"}, {110, "s_003.npy"}, {120, "s_004.npy"}}));
  const nlohmann::json md = IdentityMetadata(table_, "id");
  EXPECT_EQ(md["delta.identity.highWaterMark"], 120);
  EXPECT_EQ(md["delta.identity.start"], 100);  // the rest of the declaration as it was
  auto snap = delta::DeltaLog(LocalStorage(), table_).ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata.name, "volumes");  // and of the table's metadata
  EXPECT_EQ(snap->metadata.description, "kept by every commit");

  AddSources(5, 2);
  IngestOptions sharded = Options();
  sharded.shard_count = 2;
  r = IngestSources(sharded);
  ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("identity column 'id'"), std::string::npos) << r.status().message();
  // An overwrite continues above the mark too.
  r = IngestSources(Options(IngestMode::kOverwrite));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Rows().front().first, 130);
  EXPECT_EQ(IdentityMetadata(table_, "id")["delta.identity.highWaterMark"], 130 + 6 * 10);
}

// An identity column whose values the source supplies (a labels column) is refused unless the table
// allows explicit inserts; a column that counts down is refused by name.
TEST_F(IngestTest, IdentityColumnsTheSourceFillsNeedExplicitInserts) {
  AddSources(0, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  DeclareIdentity(table_, "label", {{"delta.identity.start", 1}, {"delta.identity.step", 1},
                                    {"delta.identity.allowExplicitInsert", false}});
  AddSources(2, 1);
  const size_t files = DataFilesOnDisk();
  auto r = IngestSources(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("column 'label' is an identity column whose values the table generates"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(DataFilesOnDisk(), files);
  DeclareIdentity(table_, "label", {{"delta.identity.start", 1}, {"delta.identity.step", 1},
                                    {"delta.identity.allowExplicitInsert", true}});
  r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Rows().size(), 3u);
  EXPECT_FALSE(IdentityMetadata(table_, "label").contains("delta.identity.highWaterMark"));

  DeclareIdentity(table_, "id", {{"delta.identity.start", -1}, {"delta.identity.step", -1}});
  AddSources(3, 1);
  r = IngestSources(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("counts down"), std::string::npos) << r.status().message();
}

// The invariants and CHECK constraints of a table are checked on every row an append adds: a row
// that makes one false or null fails the ingest naming the row's source file and the rule, and
// nothing is written; a rule the predicate language cannot express refuses the ingest by name before
// any file is written. A schema change keeps the invariant.
TEST_F(IngestTest, AppendsKeepTheTablesInvariantsAndCheckConstraints) {
  AddSources(0, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  AddConstraints(table_, {{"label_ok", "`label` IN (0, 1)"}}, "id", "id >= 0");
  AddSources(2, 2);  // labels 0 and 1
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Rows().size(), 4u);

  // s_004.npy with label 7.
  AddSources(4, 1);
  std::string csv = *ReadFileToString(LocalStorage(), src_ + "/labels.csv");
  csv.replace(csv.find("s_004.npy,0"), 11, "s_004.npy,7");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv", AsBytes(csv)).ok());
  delta::DeltaLog log(LocalStorage(), table_);
  const int64_t version = *log.LatestVersion();
  const size_t files = DataFilesOnDisk();
  r = IngestSources(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find("(file 's_004.npy') violates the table's CHECK constraint 'label_ok' (`label` IN "
                                      "(0, 1)): it is false or null there"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("nothing was written"), std::string::npos) << r.status().message();
  EXPECT_EQ(*log.LatestVersion(), version);
  EXPECT_EQ(DataFilesOnDisk(), files);
  EXPECT_EQ(Rows().size(), 4u);

  // A rule stoke cannot evaluate refuses the append before any file is written.
  AddConstraints(table_, {{"named", "length(file) > 0"}});
  r = IngestSources(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("has the CHECK constraint 'named' (length(file) > 0), which stoke cannot check"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(DataFilesOnDisk(), files);
}

// A schema stoke writes again (an append that adds the location columns to a table written before
// them) keeps what another writer recorded of its columns.
TEST_F(IngestTest, AnAppendThatChangesTheSchemaKeepsTheColumnsMetadata) {
  AddSources(0, 2);
  WriteTableWithoutLocations();
  AddConstraints(table_, {}, "id", "id >= 0");
  delta::DeltaLog log(LocalStorage(), table_);
  const int64_t before = *log.LatestVersion();
  AddSources(2, 1);
  auto r = IngestSources(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  ASSERT_GT(snap->version, before);
  EXPECT_NE(snap->metadata.schema_string.find(kSourceLocationColumn), std::string::npos);  // rewritten by stoke
  auto schema = nlohmann::json::parse(snap->metadata.schema_string);
  EXPECT_EQ(schema["fields"][0]["name"], "id");
  EXPECT_TRUE(schema["fields"][0]["metadata"].contains("delta.invariants")) << snap->metadata.schema_string;
}

// On a table that tracks rows (another writer added the rowTracking feature), every appended file
// takes fresh row ids above the high-water mark and its commit's version as defaultRowCommitVersion,
// and the mark rises in the delta.rowTracking domain; checkpoints keep both. Shards, which race for
// versions, are refused.
TEST_F(IngestTest, AppendsToARowTrackingTableAssignFreshRowIds) {
  AddSources(0, 2);
  ASSERT_TRUE(IngestSources(Options()).ok());
  delta::DeltaLog log(LocalStorage(), table_);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  const delta::Protocol tracked{3, 7, {}, {"appendOnly", "invariants", "domainMetadata", "rowTracking"}};
  ASSERT_TRUE(log.Commit(snap->version, {tracked}, delta::CommitKind::kExclusive, "UPGRADE PROTOCOL", {}).ok());
  int64_t next_id = 0;
  for (int round = 0; round < 2; ++round) {
    AddSources(2 + 3 * round, 3);
    auto r = IngestSources(Options());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    auto now = log.ReadSnapshot();
    ASSERT_TRUE(now.ok());
    int64_t added = 0;
    for (const auto& f : now->files) {
      if (!f.tracking || f.tracking->default_row_commit_version != r->version) continue;
      EXPECT_EQ(f.tracking->base_row_id, next_id + added) << f.path;
      added += 3;  // one file of the 3 new rows
    }
    EXPECT_EQ(added, 3) << "round " << round;
    next_id += added;
    ASSERT_TRUE(now->domains.count(delta::kRowTrackingDomain));
    const std::string mark = nlohmann::json{{"rowIdHighWaterMark", next_id - 1}}.dump();
    EXPECT_EQ(now->domains.at(delta::kRowTrackingDomain).configuration, mark);
  }
  ASSERT_TRUE(log.Checkpoint().ok());
  auto from_checkpoint = log.ReadSnapshot();
  ASSERT_TRUE(from_checkpoint.ok());
  size_t tracked_files = 0;
  for (const auto& f : from_checkpoint->files) tracked_files += f.tracking && f.tracking->base_row_id ? 1 : 0;
  EXPECT_EQ(tracked_files, 2u);
  EXPECT_EQ(from_checkpoint->domains.count(delta::kRowTrackingDomain), 1u);

  IngestOptions sharded = Options();
  sharded.shard_index = 0;
  sharded.shard_count = 2;
  AddSources(8, 2);
  const int64_t version = *log.LatestVersion();
  const size_t files = DataFilesOnDisk();
  auto r = IngestSources(sharded);
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("tracks row ids (rowTracking)"), std::string::npos) << r.status().message();
  EXPECT_EQ(*log.LatestVersion(), version);
  EXPECT_EQ(DataFilesOnDisk(), files);
}

TEST_F(IngestTest, DifferentShapeOfAWholeNewSourceIsASchemaMismatch) {
  AddSources(0, 3);
  ASSERT_TRUE(IngestSources(Options()).ok());
  fsys::remove_all(src_);
  ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  AddSources(0, 3, {2, 32});
  auto r = IngestSources(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("schema mismatch"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("tensor float32[8,8]"), std::string::npos) << r.status().message();
  EXPECT_EQ(*delta::DeltaLog(LocalStorage(), table_).LatestVersion(), 0);
  EXPECT_EQ(DataFilesOnDisk(), 1u);
}

TEST_F(IngestTest, RowsPerFileOneWritesAFilePerSource) {
  AddSources(0, 7);
  auto o = Options();
  o.rows_per_file = 1;
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_added, 7);
  EXPECT_EQ(DataFilesOnDisk(), 7u);
  EXPECT_EQ(Rows().size(), 7u);
}

TEST_F(IngestTest, OneRowFilesInRunsKeepEveryIdWithItsSource) {
  // 300 one-row files on one thread: runs of 4 whole files per task (files / (threads * 64)).
  AddSources(0, 300);
  auto o = Options();
  o.rows_per_file = 1;
  o.threads = 1;
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_added, 300);
  EXPECT_EQ(DataFilesOnDisk(), 300u);
  auto rows = Rows();
  ASSERT_EQ(rows.size(), 300u);
  for (int64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(rows[static_cast<size_t>(i)], std::make_pair(i, fmt::format("s_{:03d}.npy", i)));
  }
}

TEST_F(IngestTest, OneRowFileFailingMidRunLeavesNoFileAndNoVersion) {
  // Source 151 has another shape: its row fails when it is encoded, the last of a run of 4 (148-151)
  // whose first three files are written by then, while later runs are queued.
  AddSources(0, 151);
  AddSources(151, 1, {2, 32});
  AddSources(152, 148);
  auto o = Options();
  o.rows_per_file = 1;
  o.threads = 1;
  auto r = IngestSources(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("s_151.npy"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(DataFilesOnDisk(), 0u);
  EXPECT_FALSE(fsys::exists(table_ + "/_delta_log/00000000000000000000.json"));
}

// The codec of every column chunk of every live data file: column name -> codecs seen.
std::map<std::string, std::set<parquet::Codec>> ChunkCodecs(const std::string& table) {
  std::map<std::string, std::set<parquet::Codec>> out;
  delta::DeltaLog log(LocalStorage(), table);
  auto snap = log.ReadSnapshot(std::nullopt);
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  for (const auto& f : snap->files) {
    auto r = ParquetReader::Open(LocalStorage(), table + "/" + *delta::DecodePath(f.path));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& rg : (*r)->metadata().row_groups) {
      for (const auto& c : rg.columns) out[c.meta_data->path_in_schema[0]].insert(c.meta_data->codec);
    }
  }
  return out;
}

TEST_F(IngestTest, TableRecordsItsCodecAndOptimizeKeepsIt) {
  using parquet::Codec;
  AddSources(0, 300);  // enough rows for the label and file-name chunks to be worth compressing
  for (stoke::Codec codec : {stoke::Codec::kUncompressed, stoke::Codec::kAuto}) {
    SCOPED_TRACE(CodecName(codec));
    auto o = Options(IngestMode::kOverwrite);
    o.rows_per_file = 1;
    o.codec = codec;
    ASSERT_TRUE(IngestSources(o).ok());
    delta::DeltaLog log(LocalStorage(), table_);
    auto snap = log.ReadSnapshot(std::nullopt);
    ASSERT_TRUE(snap.ok());
    EXPECT_EQ(snap->metadata.configuration[kCodecPolicyKey], CodecName(codec));

    OptimizeOptions oo;
    oo.table_dir = table_;
    oo.progress = false;
    auto r = OptimizeTable(oo);  // no codec given: the table's
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->files_after, 1);
    auto codecs = ChunkCodecs(table_);
    if (codec == stoke::Codec::kUncompressed) {
      for (const auto& [column, set] : codecs) EXPECT_EQ(set, std::set<Codec>{Codec::kUncompressed}) << column;
    } else {
      // auto: the repetitive file names and 0/1 labels compress; 8x8 copies of one float per row
      // shrink too, so every column here keeps zstd.
      EXPECT_EQ(codecs["file"], std::set<Codec>{Codec::kZstd});
      EXPECT_EQ(codecs["label"], std::set<Codec>{Codec::kZstd});
    }
    EXPECT_EQ(Rows().size(), 300u);
  }
  // An explicit codec wins over the table's.
  OptimizeOptions oo;
  oo.table_dir = table_;
  oo.progress = false;
  oo.codec = stoke::Codec::kLz4Raw;
  oo.sort_by = "label";  // rewrites every file, small or not
  auto r = OptimizeTable(oo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& [column, set] : ChunkCodecs(table_)) EXPECT_EQ(set, std::set<parquet::Codec>{Codec::kLz4Raw}) << column;
}

TEST_F(IngestTest, RejectsBadOptions) {
  AddSources(0, 1);
  auto o = Options();
  o.table_dir.clear();
  EXPECT_EQ(IngestSources(o).status().code(), StatusCode::kInvalidArgument);
  o = Options(IngestMode::kOverwrite);
  o.shard_count = 2;
  EXPECT_EQ(IngestSources(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(IngestModeNames, ReadBackAndAnUnknownNameSaysWhatIsExpected) {
  for (IngestMode m : {IngestMode::kAppend, IngestMode::kOverwrite}) EXPECT_EQ(*ParseIngestMode(IngestModeName(m)), m);
  EXPECT_EQ(IngestModeName(IngestMode::kOverwrite), "overwrite");
  auto bad = ParseIngestMode("upsert");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "ingest: `mode` must be append or overwrite, not 'upsert'");
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST_F(IngestTest, PartitionsByALabelColumnAndKeepsPartitionsThroughOptimize) {
  AddSources(0, 12);  // label = i % 2
  auto o = Options();
  o.partition_by = "label";
  o.rows_per_file = 2;
  auto r = IngestSources(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(fsys::is_directory(table_ + "/label=0"));
  EXPECT_TRUE(fsys::is_directory(table_ + "/label=1"));
  delta::DeltaLog log(LocalStorage(), table_);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->metadata.partition_columns, std::vector<std::string>{"label"});
  ASSERT_EQ(snap->files.size(), 6u);
  for (const auto& f : snap->files) {
    ASSERT_TRUE(f.partition_values.count("label"));
    EXPECT_EQ(f.path.rfind("label=" + *f.partition_values.at("label") + "/", 0), 0u) << f.path;
    // The data files do not hold the partition column.
    auto reader = ParquetReader::Open(LocalStorage(), table_ + "/" + *delta::DecodePath(f.path));
    ASSERT_TRUE(reader.ok());
    EXPECT_FALSE((*reader)->FindColumn("label").ok());
  }

  // Appending without --partition-by uses the table's partitioning; a different one is refused.
  AddSources(12, 4);
  auto append = Options();
  ASSERT_TRUE(IngestSources(append).ok());
  append.partition_by = "x";
  EXPECT_EQ(IngestSources(append).status().code(), StatusCode::kInvalidArgument);

  testing_support::PrintedQuery q;
  q.table_dir = table_;
  q.where = "label = 1";
  q.select = {"id", "label"};
  q.format = RowFormat::kCsv;
  std::ostringstream out;
  auto qr = testing_support::PrintQuery(q, out);
  ASSERT_TRUE(qr.ok()) << qr.status().ToString();
  EXPECT_EQ(qr->rows, 8);
  EXPECT_EQ(qr->files_scanned, 4);  // label=0 files skipped from their partition values
  EXPECT_NE(out.str().find("\n1,1\n"), std::string::npos) << out.str();

  OptimizeOptions opt;
  opt.table_dir = table_;
  opt.progress = false;
  auto or_ = OptimizeTable(opt);
  ASSERT_TRUE(or_.ok()) << or_.status().ToString();
  EXPECT_EQ(or_->files_after, 2);  // one per partition
  auto after = log.ReadSnapshot();
  ASSERT_TRUE(after.ok());
  for (const auto& f : after->files) {
    EXPECT_EQ(f.path.rfind("label=" + *f.partition_values.at("label") + "/", 0), 0u) << f.path;
  }
  std::ostringstream count;
  q.count_only = true;
  ASSERT_TRUE(testing_support::PrintQuery(q, count).ok());
  EXPECT_EQ(count.str(), "8\n");
  EXPECT_EQ(Rows().size(), 16u);
}

TEST_F(IngestTest, ShardsWriteTheirFilesInTheirOwnDirectoryUnderEachPartition) {
  AddSources(0, 12);  // label = i % 2
  auto o = Options();
  o.partition_by = "label";
  o.rows_per_file = 1;
  o.shard_count = 2;
  for (int64_t shard : {1, 0}) {
    o.shard_index = shard;
    auto r = IngestSources(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->files_added, 6);
  }
  delta::DeltaLog log(LocalStorage(), table_);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->files.size(), 12u);
  std::map<std::string, int> per_directory;
  for (const auto& f : snap->files) {
    const std::string path = *delta::DecodePath(f.path);
    ++per_directory[path.substr(0, path.rfind('/'))];
    EXPECT_TRUE(fsys::is_regular_file(table_ + "/" + path)) << path;
  }
  // Sources 0-5 are shard 0's, 6-11 shard 1's; each has three of either label.
  EXPECT_EQ(per_directory, (std::map<std::string, int>{{"label=0/shard-0-of-2", 3}, {"label=0/shard-1-of-2", 3},
                                                        {"label=1/shard-0-of-2", 3}, {"label=1/shard-1-of-2", 3}}));
  std::vector<std::pair<int64_t, std::string>> expected;
  for (int i = 0; i < 12; ++i) expected.push_back({i, fmt::format("s_{:03}.npy", i)});
  EXPECT_EQ(Rows(), expected);
  // The table compacts and vacuums like any other: files in the shards' directories are found.
  OptimizeOptions opt;
  opt.table_dir = table_;
  opt.progress = false;
  auto optimized = OptimizeTable(opt);
  ASSERT_TRUE(optimized.ok()) << optimized.status().ToString();
  EXPECT_EQ(optimized->files_after, 2);
  // A compacted file merges shards: it goes in its partition's directory, not in a shard's.
  auto compacted = log.ReadSnapshot();
  ASSERT_TRUE(compacted.ok());
  for (const auto& f : compacted->files) {
    const std::string path = *delta::DecodePath(f.path);
    EXPECT_EQ(path.substr(0, path.rfind('/')), "label=" + *f.partition_values.at("label")) << path;
  }
  VacuumOptions vac;
  vac.table_dir = table_;
  vac.retain_hours = 0;
  vac.progress = false;
  auto vacuumed = VacuumTable(vac);
  ASSERT_TRUE(vacuumed.ok()) << vacuumed.status().ToString();
  EXPECT_EQ(vacuumed->files.size(), 12u);
  EXPECT_EQ(Rows(), expected);
}

}  // namespace
}  // namespace stoke
