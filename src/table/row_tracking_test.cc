#include "table/row_tracking.h"

#include <gtest/gtest.h>

#include "io/local_files.h"
#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using testing_support::NewAdd;
using testing_support::NewMetadata;
using testing_support::NewRemove;

Snapshot Tracked(std::optional<int64_t> mark) {
  Snapshot s;
  s.protocol = Protocol{3, 7, {}, {"domainMetadata", "rowTracking"}};
  if (mark) s.domains[kRowTrackingDomain] = DomainMetadata{kRowTrackingDomain, R"({"rowIdHighWaterMark":)" + std::to_string(*mark) + "}", false};
  return s;
}

const FileTracking& TrackingOf(const Action& a) { return *std::get<AddFile>(a).tracking; }

// New adds take fresh ids above the mark, in order, by their numRecords; an add that has a baseRowId
// keeps it; the mark is raised in the delta.rowTracking domain.
TEST(RowTracking, NewAddsTakeFreshIdsAboveTheHighWaterMark) {
  AddFile kept = NewAdd("kept", 100, 4);
  kept.tracking = std::make_shared<const FileTracking>(FileTracking{2, 1, std::nullopt});
  std::vector<Action> actions = {NewAdd("a", 100, 3), NewRemove("old"), kept, NewAdd("b", 100, 5), NewAdd("empty", 100, 0)};
  ASSERT_TRUE(AssignRowIds(Tracked(9), 12, &actions).ok());
  EXPECT_EQ(TrackingOf(actions[0]), (FileTracking{10, 12, std::nullopt}));
  EXPECT_EQ(TrackingOf(actions[2]), (FileTracking{2, 1, std::nullopt}));
  EXPECT_EQ(TrackingOf(actions[3]), (FileTracking{13, 12, std::nullopt}));
  EXPECT_EQ(TrackingOf(actions[4]), (FileTracking{18, 12, std::nullopt}));
  ASSERT_EQ(actions.size(), 6u);
  const auto& domain = std::get<DomainMetadata>(actions[5]);
  EXPECT_EQ(domain.domain, kRowTrackingDomain);
  EXPECT_EQ(domain.configuration, R"({"rowIdHighWaterMark":17})");
  // A table without a mark yet starts at 0.
  std::vector<Action> first = {NewAdd("a", 100, 2)};
  ASSERT_TRUE(AssignRowIds(Tracked(std::nullopt), 0, &first).ok());
  EXPECT_EQ(TrackingOf(first[0]).base_row_id, 0);
  EXPECT_EQ(std::get<DomainMetadata>(first[1]).configuration, R"({"rowIdHighWaterMark":1})");
}

TEST(RowTracking, WhatCannotBeAssignedIsAnErrorAndSuspendedTablesGetNone) {
  AddFile no_stats = NewAdd("a");
  no_stats.stats.reset();
  std::vector<Action> actions = {no_stats};
  EXPECT_EQ(AssignRowIds(Tracked(0), 1, &actions).code(), StatusCode::kInvalidArgument);
  Snapshot bad = Tracked(0);
  bad.domains[kRowTrackingDomain].configuration = "{}";
  actions = {NewAdd("a")};
  EXPECT_EQ(AssignRowIds(bad, 1, &actions).code(), StatusCode::kCorruption);
  EXPECT_TRUE(AssignsRowIds(Tracked(0)));
  Snapshot suspended = Tracked(0);
  suspended.metadata.configuration["delta.rowTrackingSuspended"] = "true";
  EXPECT_FALSE(AssignsRowIds(suspended));
  EXPECT_FALSE(AssignsRowIds(Snapshot{}));
}


// A table that tracks rows, of files "a" (3 rows) and "b" (2 rows) with row ids 0-4 (version 0).
class RowTrackingCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<Action> create = {Protocol{3, 7, {}, {"domainMetadata", "rowTracking"}}, NewMetadata(), NewAdd("a", 100, 3),
                                  NewAdd("b", 100, 2)};
    ASSERT_TRUE(AssignRowIds(Tracked(std::nullopt), 0, &create).ok());
    ASSERT_TRUE(log_.Commit(-1, std::move(create), CommitKind::kExclusive, "CREATE", nlohmann::json::object()).ok());
  }
  Snapshot Read() { return *log_.ReadSnapshot(); }
  // Another writer's commit on top of the latest version.
  void Winner(std::vector<Action> actions) {
    const Snapshot now = Read();
    ASSERT_TRUE(AssignRowIds(now, now.version + 1, &actions).ok());
    ASSERT_TRUE(log_.Commit(now.version, std::move(actions), CommitKind::kExclusive, "WRITE", nlohmann::json::object()).ok());
  }
  // OPTIMIZE's actions: "a" and "b" rewritten as "ab".
  static std::vector<Action> Rewrite(const Snapshot& read) {
    std::vector<Action> actions;
    for (const auto& f : read.files) {
      if (f.path == "a" || f.path == "b") actions.push_back(RemoveOf(f, 1, false));
    }
    AddFile ab = NewAdd("ab", 200, 5);
    ab.data_change = false;
    actions.push_back(ab);
    return actions;
  }
  const AddFile* Find(const Snapshot& s, const std::string& path) {
    for (const auto& f : s.files) {
      if (f.path == path) return &f;
    }
    return nullptr;
  }

  TemporaryDirectory dir_ = TemporaryDirectory::Create("stoke_row_tracking_").value();
  DeltaLog log_{LocalStorage(), dir_.path()};
};

// The rewrite's new file takes ids above the mark as of the version it lands on: after a concurrent
// append it lands on the next version, above the append's ids, with that version as its commit
// version.
TEST_F(RowTrackingCommitTest, ARewriteLandsAboveAConcurrentAppendsIds) {
  const Snapshot read = Read();
  Winner({NewAdd("c", 100, 4)});  // ids 5-8, version 1
  auto version = CommitRewriteAssigningRowIds(log_, read, Rewrite(read), "OPTIMIZE", nlohmann::json::object());
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, 2);
  const Snapshot now = Read();
  const AddFile* ab = Find(now, "ab");
  ASSERT_NE(ab, nullptr);
  EXPECT_EQ(*ab->tracking, (FileTracking{9, 2, std::nullopt}));
  EXPECT_EQ(now.domains.at(kRowTrackingDomain).configuration, R"({"rowIdHighWaterMark":13})");
  EXPECT_EQ(Find(now, "a"), nullptr);
  EXPECT_NE(Find(now, "c"), nullptr);
}

// A winner that removed one of the rewritten files conflicts: nothing is committed.
TEST_F(RowTrackingCommitTest, ARewriteOfAFileAnotherWriterRemovedConflicts) {
  const Snapshot read = Read();
  Winner({RemoveOf(*Find(read, "b"), 1, true)});
  auto version = CommitRewriteAssigningRowIds(log_, read, Rewrite(read), "OPTIMIZE", nlohmann::json::object());
  EXPECT_EQ(version.status().code(), StatusCode::kConflict) << version.status().ToString();
  EXPECT_EQ(Read().version, 1);
}

TEST(RowTracking, MaterializedColumnsWhereRowTrackingIsEnabled) {
  Snapshot s = Tracked(0);
  EXPECT_FALSE(MaterializedColumns(s, "t")->has_value());  // supported, not enabled
  s.metadata.configuration["delta.enableRowTracking"] = "true";
  EXPECT_EQ(MaterializedColumns(s, "t").status().code(), StatusCode::kCorruption);
  s.metadata.configuration["delta.rowTracking.materializedRowIdColumnName"] = "_id";
  s.metadata.configuration["delta.rowTracking.materializedRowCommitVersionColumnName"] = "_v";
  auto hidden = MaterializedColumns(s, "t");
  ASSERT_TRUE(hidden.ok() && hidden->has_value());
  EXPECT_EQ((*hidden)->row_id, "_id");
  EXPECT_EQ((*hidden)->row_commit_version, "_v");
  s.metadata.configuration["delta.rowTrackingSuspended"] = "true";
  EXPECT_FALSE(MaterializedColumns(s, "t")->has_value());
}

// A copied row keeps the id it has (materialized) or else its default one (baseRowId + its index in
// the file), and likewise its commit version.
TEST(RowTracking, StableValuesFillTheNullsOfTheHiddenColumns) {
  const MaterializedRowTracking hidden{"_id", "_v"};
  AddFile add = NewAdd("a", 100, 5);
  add.tracking = std::make_shared<const FileTracking>(FileTracking{100, 7, std::nullopt});
  ColumnValues ids{std::vector<int64_t>{42}, {0, 1, 0}};  // rows 2..4 of the file; row 3 moved before
  ASSERT_TRUE(FillStableRowTracking(hidden, "_id", add, 2, "f", &ids).ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(ids.values), (std::vector<int64_t>{102, 42, 104}));
  EXPECT_TRUE(ids.defined.empty());
  ColumnValues versions{std::vector<int64_t>{}, {0, 0}};
  ASSERT_TRUE(FillStableRowTracking(hidden, "_v", add, 0, "f", &versions).ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(versions.values), (std::vector<int64_t>{7, 7}));
  ColumnValues other{std::vector<int64_t>{}, {0}};
  ASSERT_TRUE(FillStableRowTracking(hidden, "x", add, 0, "f", &other).ok());
  EXPECT_EQ(other.defined.size(), 1u);  // not a hidden column
  add.tracking.reset();
  ColumnValues missing{std::vector<int64_t>{}, {0}};
  Status st = FillStableRowTracking(hidden, "_id", add, 0, "f.parquet", &missing);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("f.parquet: its add has no baseRowId"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace stoke::delta
