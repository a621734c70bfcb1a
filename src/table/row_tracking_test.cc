#include "table/row_tracking.h"

#include <gtest/gtest.h>

#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using testing_support::NewAdd;
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

}  // namespace
}  // namespace stoke::delta
