#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "stoke/maintenance.h"
#include "table/delta_testing.h"
#include "table/row_tracking.h"
#include "table/scan.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::AllRows;
using testing_support::TensorOf;
using testing_support::TestTable;

TEST(Optimize, CompactsSmallFilesPreservingEveryRowByteForByte) {
  TestTable t;
  for (int64_t f = 0; f < 20; ++f) t.AppendFile(f * 5, 5);
  auto before = AllRows(t.dir());
  ASSERT_EQ(before.size(), 100u);

  OptimizeOptions o;
  o.table_dir = t.dir();
  o.target_file_bytes = 1 << 20;
  o.row_group_bytes = 16 * 30;  // several row groups per output file
  o.progress = false;
  auto r = OptimizeTable(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_before, 20);
  EXPECT_EQ(r->files_after, 1);
  EXPECT_EQ(r->files_removed, 20);
  EXPECT_EQ(r->rows_rewritten, 100);
  EXPECT_EQ(AllRows(t.dir()), before);
  EXPECT_EQ(AllRows(t.dir(), 19), before);  // the old version is still readable (files remain until VACUUM)
  for (const auto& row : before) EXPECT_EQ(std::get<3>(row), TensorOf(std::get<0>(row)));

  auto snap = t.log().ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->num_records(), 100);
  EXPECT_FALSE(snap->files[0].data_change);
  auto history = t.log().History(1);
  EXPECT_EQ((*history)[0].operation, "OPTIMIZE");

  // Nothing left to do: one file in stoke's layout.
  auto again = OptimizeTable(o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->version, -1);
}

// The rows deletion vectors delete are left out of the rewritten files, in both rewrites, across row
// groups; a file whose every row is deleted adds nothing; each remove names the file's DV, and a file
// alone in its bin is rewritten when it has deleted rows.
TEST(Optimize, LeavesOutTheRowsDeletionVectorsDelete) {
  for (const std::string sort_by : {"", "id"}) {
    TestTable t;
    t.AppendFile(0, 5, /*per_group=*/2);
    t.AppendFile(5, 5, /*per_group=*/2);
    t.AppendFile(10, 5, /*per_group=*/2);
    // Rows at different places in their row groups (0 of the first, 1 of the second).
    testing_support::DeleteRows(t, "part-0.parquet", {0, 3});
    testing_support::DeleteRows(t, "part-10.parquet", {0, 1, 2, 3, 4});
    OptimizeOptions o;
    o.table_dir = t.dir();
    o.sort_by = sort_by;
    o.progress = false;
    auto r = OptimizeTable(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    std::vector<int64_t> ids;
    for (const auto& row : AllRows(t.dir())) ids.push_back(std::get<0>(row));
    EXPECT_EQ(ids, std::vector<int64_t>({1, 2, 4, 5, 6, 7, 8, 9})) << sort_by;
    auto snap = t.log().ReadSnapshot();
    ASSERT_TRUE(snap.ok());
    ASSERT_EQ(snap->files.size(), 1u);
    EXPECT_EQ(snap->files[0].deletion_vector, nullptr);
    EXPECT_EQ(snap->num_records(), 8);
    const delta::RemoveFile* removed = delta::testing_support::FindTombstone(*snap, "part-0.parquet");
    ASSERT_NE(removed, nullptr);
    ASSERT_NE(removed->deletion_vector, nullptr);
    EXPECT_EQ(removed->deletion_vector->cardinality, 2);

    // One file left with deleted rows is rewritten alone, even when it is large (in stoke's layout,
    // at least the target size).
    testing_support::DeleteRows(t, snap->files[0].path, {0});
    o.target_file_bytes = 1;
    r = OptimizeTable(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->files_removed, 1);
    EXPECT_EQ(AllRows(t.dir()).size(), 7u);

    // A bin whose every row is deleted adds nothing, and its file does not stay behind.
    snap = t.log().ReadSnapshot();
    ASSERT_TRUE(snap.ok());
    testing_support::DeleteRows(t, snap->files[0].path, {0, 1, 2, 3, 4, 5, 6});
    auto parquet_files = [&] {
      size_t n = 0;
      for (const auto& e : std::filesystem::directory_iterator(t.dir())) n += e.path().extension() == ".parquet";
      return n;
    };
    const size_t before = parquet_files();
    r = OptimizeTable(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->files_removed, 1);
    EXPECT_EQ(r->files_added, 0);
    EXPECT_EQ(parquet_files(), before);
    EXPECT_TRUE(t.log().ReadSnapshot()->files.empty());
  }
}

TEST(Optimize, WhereLimitsCompactionToFilesThatMayMatch) {
  TestTable t;
  for (int64_t f = 0; f < 6; ++f) t.AppendFile(f * 10, 10);
  OptimizeOptions o;
  o.table_dir = t.dir();
  o.where = "id < 30";
  o.progress = false;
  auto r = OptimizeTable(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_removed, 3);
  EXPECT_EQ(r->files_after, 4);
  EXPECT_EQ(AllRows(t.dir()).size(), 60u);
  o.where = "nonsense = 1";
  EXPECT_EQ(OptimizeTable(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST(Optimize, SortByOrdersRowsWithinNewFilesNullsLast) {
  TestTable t;
  for (int64_t f = 0; f < 6; ++f) t.AppendFile(f * 7, 7);
  auto before = AllRows(t.dir());
  OptimizeOptions o;
  o.table_dir = t.dir();
  o.sort_by = "name";
  o.row_group_bytes = 16 * 10;  // several row groups
  o.progress = false;
  auto r = OptimizeTable(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files_after, 1);
  EXPECT_EQ(AllRows(t.dir()), before);  // same rows, byte for byte

  auto view = OpenTableView(t.dir());
  ASSERT_TRUE(view.ok());
  auto reader = ParquetReader::Open(LocalStorage(), view->FilePath(view->snapshot.files[0]));
  ASSERT_TRUE(reader.ok());
  auto names = (*reader)->ReadColumn(2);
  auto ids = std::get<std::vector<int64_t>>((*reader)->ReadColumn(0)->values);
  auto tensors = std::get<std::vector<std::string>>((*reader)->ReadColumn(3)->values);
  const auto& nv = std::get<std::vector<std::string>>(names->values);
  EXPECT_TRUE(std::is_sorted(nv.begin(), nv.end()));
  bool seen_null = false;
  for (uint8_t d : names->defined) {
    if (!d) seen_null = true;
    EXPECT_FALSE(seen_null && d) << "a value after a null: nulls must come last";
  }
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(tensors[i], TensorOf(ids[i]));  // tensors follow their rows

  o.sort_by = "t";
  EXPECT_EQ(OptimizeTable(o).status().code(), StatusCode::kInvalidArgument);
}


// A table of rows 0-2 (version 0) on which another writer turns row tracking on (`enabled`: also
// delta.enableRowTracking, with materialized columns "_rid" and "_rver"), backfilling the file's
// baseRowId 0 (version 1); then rows 3-6 appended with row ids 3-6 (version 2).
void TrackRows(TestTable& t, bool enabled) {
  t.AppendFile(0, 3);
  auto log = t.log();
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  delta::Metadata meta = snap->metadata;
  if (enabled) {
    meta.configuration["delta.enableRowTracking"] = "true";
    meta.configuration["delta.rowTracking.materializedRowIdColumnName"] = "_rid";
    meta.configuration["delta.rowTracking.materializedRowCommitVersionColumnName"] = "_rver";
  }
  delta::AddFile backfilled = snap->files[0];
  backfilled.data_change = false;
  backfilled.tracking = std::make_shared<const delta::FileTracking>(delta::FileTracking{0, 0, std::nullopt});
  std::vector<delta::Action> upgrade = {delta::Protocol{3, 7, {}, {"domainMetadata", "rowTracking"}}, meta, backfilled,
                                        delta::DomainMetadata{delta::kRowTrackingDomain, R"({"rowIdHighWaterMark":2})", false}};
  ASSERT_TRUE(log.Commit(0, std::move(upgrade), delta::CommitKind::kExclusive, "ENABLE ROW TRACKING", {}).ok());
  std::vector<delta::Action> append = {
      testing_support::WriteDataFile(t.dir(), "part-3.parquet", 3, 4, 1000, t.tensor_len(), true, t.codec())};
  ASSERT_TRUE(delta::AssignRowIds(*log.ReadSnapshot(), 2, &append).ok());
  ASSERT_TRUE(log.Commit(1, std::move(append), delta::CommitKind::kExclusive, "WRITE", {}).ok());
}

// The INT64 values of column `name` of the table's only data file, by row (none null).
std::vector<int64_t> ColumnOfOnlyFile(const TestTable& t, const std::string& name) {
  auto view = OpenTableView(t.dir());
  EXPECT_TRUE(view.ok() && view->snapshot.files.size() == 1);
  auto reader = ParquetReader::Open(LocalStorage(), view->FilePath(view->snapshot.files[0]));
  EXPECT_TRUE(reader.ok());
  auto column = (*reader)->FindColumn(name);
  if (!column.ok()) return {};
  auto values = (*reader)->ReadColumn(*column);
  EXPECT_TRUE(values.ok());
  EXPECT_EQ(std::count(values->defined.begin(), values->defined.end(), 0), 0) << name << " has nulls";
  return std::get<std::vector<int64_t>>(values->values);
}

// Where the table enables row tracking, a rewritten row keeps its stable row id and commit version in
// the hidden materialized columns (its default ones where it has none yet, the materialized ones from
// an earlier rewrite), through a plain and a sorted rewrite; each new file takes fresh row ids above
// the mark and its OPTIMIZE's version.
TEST(Optimize, PreservesStableRowIdsWhereRowTrackingIsEnabled) {
  TestTable t;
  TrackRows(t, true);
  const auto before = AllRows(t.dir());
  OptimizeOptions o;
  o.table_dir = t.dir();
  o.progress = false;
  for (const std::string sort_by : {"", "name"}) {
    o.sort_by = sort_by;
    auto r = OptimizeTable(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(AllRows(t.dir()), before);
    const std::vector<int64_t> ids = ColumnOfOnlyFile(t, "id");  // rows 0-6 had row ids 0-6
    EXPECT_EQ(ColumnOfOnlyFile(t, "_rid"), ids) << "sort_by '" << sort_by << "'";
    std::vector<int64_t> versions;
    for (int64_t id : ids) versions.push_back(id < 3 ? 0 : 2);
    EXPECT_EQ(ColumnOfOnlyFile(t, "_rver"), versions);
    auto snap = t.log().ReadSnapshot();
    ASSERT_TRUE(snap.ok());
    const int64_t base = sort_by.empty() ? 7 : 14;
    EXPECT_EQ(*snap->files[0].tracking, (delta::FileTracking{base, r->version, std::nullopt}));
    const std::string mark = nlohmann::json{{"rowIdHighWaterMark", base + 6}}.dump();
    EXPECT_EQ(snap->domains.at(delta::kRowTrackingDomain).configuration, mark);
  }
}

// Where row tracking is only supported, the new file gets fresh row ids, and no hidden columns.
TEST(Optimize, AssignsFreshRowIdsWhereRowTrackingIsSupported) {
  TestTable t;
  TrackRows(t, false);
  OptimizeOptions o;
  o.table_dir = t.dir();
  o.progress = false;
  auto r = OptimizeTable(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto snap = t.log().ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->files.size(), 1u);
  EXPECT_EQ(*snap->files[0].tracking, (delta::FileTracking{7, r->version, std::nullopt}));
  EXPECT_TRUE(ColumnOfOnlyFile(t, "_rid").empty());
}

}  // namespace
}  // namespace stoke
