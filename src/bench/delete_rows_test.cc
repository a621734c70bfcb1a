#include "stoke/bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "table/scan.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TestTable;

// The rows each file's DV deletes, by file path.
std::vector<std::vector<uint64_t>> DeletedByFile(const TestTable& t) {
  auto view = OpenTableView(t.dir());
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  std::vector<std::vector<uint64_t>> out;
  for (const auto& add : view->snapshot.files) {
    auto rows = DeletedRows(*view, add);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    out.push_back(*rows);
  }
  return out;
}

TEST(DeleteRows, DeletesTheRoundedShareOfEveryFileInOneCommitAndTurnsTheFeatureOn) {
  TestTable t;
  t.AppendFile(0, 100);
  t.AppendFile(100, 50);
  t.AppendFile(150, 7);
  auto r = RunDeleteRows({.table = t.dir(), .fraction = 0.1, .seed = 1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, 3);
  EXPECT_EQ(r->files, 3);
  EXPECT_EQ(r->files_touched, 3);
  EXPECT_EQ(r->rows_before, 157);
  EXPECT_EQ(r->rows_deleted, 10 + 5 + 1);
  auto snap = t.log().ReadSnapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_EQ(snap->num_records(), 157 - 16);
  EXPECT_EQ(snap->protocol.min_reader_version, 3);
  EXPECT_EQ(snap->protocol.reader_features, std::vector<std::string>({"deletionVectors"}));
  EXPECT_EQ(snap->metadata.configuration.at("delta.enableDeletionVectors"), "true");
  for (const auto& add : snap->files) {  // the bounds still cover the deleted rows
    ASSERT_TRUE(add.stats.has_value());
    EXPECT_NE(add.stats->find("\"tightBounds\":false"), std::string::npos) << *add.stats;
    EXPECT_NE(add.stats->find("\"numRecords\""), std::string::npos) << *add.stats;
  }
  std::set<std::string> dv_files;
  for (const auto& add : snap->files) dv_files.insert(add.deletion_vector->path_or_inline_dv);
  EXPECT_EQ(dv_files.size(), 1u);  // one DV file, a DV per data file at its offset
  const auto first = DeletedByFile(t);
  EXPECT_EQ(first[0].size(), 10u);
  EXPECT_EQ(first[2].size(), 1u);
  EXPECT_LT(first[0].back(), 100u);

  // A second run deletes from the live rows only and keeps what the first deleted.
  r = RunDeleteRows({.table = t.dir(), .fraction = 0.5, .seed = 1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows_before, 141);
  EXPECT_EQ(r->rows_deleted, 45 + 23 + 3);  // round(22.5) is 23
  const auto second = DeletedByFile(t);
  for (size_t f = 0; f < first.size(); ++f) {
    EXPECT_TRUE(std::includes(second[f].begin(), second[f].end(), first[f].begin(), first[f].end())) << f;
  }
  EXPECT_EQ(t.log().ReadSnapshot()->num_records(), 141 - 71);
}

TEST(DeleteRows, TheSameSeedChoosesTheSameRows) {
  TestTable a, b;
  for (TestTable* t : {&a, &b}) t->AppendFile(0, 1000);
  ASSERT_TRUE(RunDeleteRows({.table = a.dir(), .fraction = 0.3, .seed = 7}).ok());
  ASSERT_TRUE(RunDeleteRows({.table = b.dir(), .fraction = 0.3, .seed = 7}).ok());
  EXPECT_EQ(DeletedByFile(a), DeletedByFile(b));
  EXPECT_EQ(DeletedByFile(a)[0].size(), 300u);
}

TEST(DeleteRows, NothingToDeleteWritesNothingAndBadInputIsRefusedBeforeWriting) {
  TestTable t;
  t.AppendFile(0, 4);
  auto r = RunDeleteRows({.table = t.dir(), .fraction = 0.1});  // round(0.4) = 0
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version, -1);
  EXPECT_EQ(r->rows_deleted, 0);
  EXPECT_EQ(RunDeleteRows({.table = t.dir(), .fraction = 1.5}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RunDeleteRows({.table = t.dir() + "/none"}).status().code(), StatusCode::kNotFound);

  // A writer version 3 to 6 table is refused: upgraded, it would list features stoke's writes refuse.
  {
    TestTable v4;
    v4.AppendFile(0, 10);
    auto snap4 = v4.log().ReadSnapshot();
    ASSERT_TRUE(v4.log().Commit(snap4->version, {delta::Protocol{1, 4, {}, {}}}, delta::CommitKind::kExclusive,
                                "UPGRADE PROTOCOL", {}).ok());
    auto refused = RunDeleteRows({.table = v4.dir(), .fraction = 0.5});
    EXPECT_EQ(refused.status().code(), StatusCode::kUnsupported) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("writer version 4"), std::string::npos) << refused.status().ToString();
    EXPECT_EQ(*v4.log().LatestVersion(), 1);
  }

  // delta.appendOnly forbids deletes.
  auto snap = t.log().ReadSnapshot();
  delta::Metadata meta = snap->metadata;
  meta.configuration["delta.appendOnly"] = "true";
  ASSERT_TRUE(t.log().Commit(snap->version, {meta}, delta::CommitKind::kExclusive, "SET TBLPROPERTIES", {}).ok());
  r = RunDeleteRows({.table = t.dir(), .fraction = 1});
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
  EXPECT_NE(r.status().message().find("appendOnly"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(*t.log().LatestVersion(), 1);
  for (const auto& e : std::filesystem::directory_iterator(t.dir())) {
    EXPECT_EQ(e.path().filename().string().rfind("deletion_vector_", 0), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace stoke
