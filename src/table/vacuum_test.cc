// VacuumTable: which files it deletes, and that every retained version stays readable.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "stoke/maintenance.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::AllRows;
using testing_support::TestTable;

TEST(Vacuum, NeverDeletesFilesThatRetainedVersionsReference) {
  TestTable t;
  for (int64_t f = 0; f < 4; ++f) t.AppendFile(f * 5, 5);
  // An uncommitted leftover, as a crashed ingest leaves.
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), t.dir() + "/part-orphan.parquet", AsBytes("x")).ok());
  OptimizeOptions o;
  o.table_dir = t.dir();
  o.progress = false;
  ASSERT_TRUE(OptimizeTable(o).ok());

  VacuumOptions v;
  v.table_dir = t.dir();
  v.retain_hours = 168;  // every version is inside the window: only the orphan is old enough... but it is new
  auto r = VacuumTable(v);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->files.empty());
  EXPECT_EQ(AllRows(t.dir(), 0).size(), 5u);  // time travel intact

  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {  // a typo, not "keep all"
    v.retain_hours = bad;
    EXPECT_EQ(VacuumTable(v).status().code(), StatusCode::kInvalidArgument) << bad;
  }
  v.retain_hours = 0;
  v.dry_run = true;
  r = VacuumTable(v);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->files.size(), 5u);  // the 4 compacted files and the orphan
  EXPECT_TRUE(std::filesystem::exists(t.dir() + "/part-orphan.parquet"));

  v.dry_run = false;
  r = VacuumTable(v);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->files.size(), 5u);
  EXPECT_FALSE(std::filesystem::exists(t.dir() + "/part-orphan.parquet"));
  EXPECT_EQ(AllRows(t.dir()).size(), 20u);  // the current version is whole
  EXPECT_TRUE(std::filesystem::exists(t.dir() + "/_delta_log/00000000000000000000.json"));
}

// The deletion-vector file of a retained version's add is kept; one that only older versions name
// goes, like their data files.
TEST(Vacuum, KeepsTheDeletionVectorFilesRetainedVersionsName) {
  TestTable t;
  t.AppendFile(0, 5);
  t.AppendFile(5, 5);
  testing_support::DeleteRows(t, "part-0.parquet", {1});
  testing_support::DeleteRows(t, "part-0.parquet", {1, 2});  // a new DV replaces the first
  auto dv_files = [&] {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(t.dir())) {
      if (e.path().filename().string().rfind("deletion_vector_", 0) == 0) names.insert(e.path().filename().string());
    }
    return names;
  };
  ASSERT_EQ(dv_files().size(), 2u);
  auto snap = t.log().ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  const auto& live = *std::find_if(snap->files.begin(), snap->files.end(), [](const auto& f) { return f.deletion_vector; });
  auto live_dv = delta::DeletionVectorFilePath(*live.deletion_vector, t.dir());
  ASSERT_TRUE(live_dv.ok());

  VacuumOptions v;
  v.table_dir = t.dir();
  v.retain_hours = 0;
  auto r = VacuumTable(v);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->files.size(), 1u);  // the first DV: both data files are live
  EXPECT_EQ(dv_files(), std::set<std::string>({std::filesystem::path(*live_dv).filename().string()}));
  auto deleted = delta::ReadDeletionVector(LocalStorage(), t.dir(), *live.deletion_vector);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, std::vector<uint64_t>({1, 2}));
}

// As Delta's VACUUM: hidden names ('_', '.') are skipped at every depth, partition directories
// (name=value) are not hidden; and a table inside the table is left whole, its data included.
TEST(Vacuum, SkipsHiddenNamesAtEveryDepthAndTablesInsideTheTable) {
  TestTable outer;
  outer.AppendFile(0, 5);
  TestTable inner;
  inner.AppendFile(0, 5);
  const std::string nested = outer.dir() + "/inner";
  std::filesystem::copy(inner.dir(), nested, std::filesystem::copy_options::recursive);
  auto put = [&](const std::string& rel) {
    std::filesystem::create_directories(std::filesystem::path(outer.dir() + "/" + rel).parent_path());
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), outer.dir() + "/" + rel, AsBytes("x")).ok());
  };
  put("_SUCCESS");
  put("sub/.part-0.parquet.crc");
  put("sub/_tmp/part-9.parquet");
  put("sub/part-orphan.parquet");
  put("label=_x/part-orphan.parquet");
  put("_label=1/part-orphan.parquet");

  VacuumOptions v;
  v.table_dir = outer.dir();
  v.retain_hours = 0;
  auto r = VacuumTable(v);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, (std::vector<std::string>{"_label=1/part-orphan.parquet", "label=_x/part-orphan.parquet",
                                                "sub/part-orphan.parquet"}));
  for (const char* kept : {"_SUCCESS", "sub/.part-0.parquet.crc", "sub/_tmp/part-9.parquet"}) {
    EXPECT_TRUE(std::filesystem::exists(outer.dir() + "/" + kept)) << kept;
  }
  EXPECT_EQ(AllRows(nested).size(), 5u);  // the inner table is whole
  EXPECT_EQ(AllRows(outer.dir()).size(), 5u);
}

}  // namespace
}  // namespace stoke
