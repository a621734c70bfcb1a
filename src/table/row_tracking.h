// Row tracking for commits that add files of new rows (PROTOCOL.md, "Row Tracking", "Writer
// Requirements for Row Tracking"): fresh row ids above the table's high-water mark, each add's
// baseRowId and defaultRowCommitVersion, and the mark kept in the system domain delta.rowTracking.
#pragma once

#include <cstdint>
#include <vector>

#include "table/delta_log.h"

namespace stoke::delta {

// The system domain that holds the row id high-water mark ({"rowIdHighWaterMark": n}).
inline constexpr char kRowTrackingDomain[] = "delta.rowTracking";

// Whether writers must assign row ids on this table: the writer feature rowTracking is supported
// and delta.rowTrackingSuspended is not true.
bool AssignsRowIds(const Snapshot& snapshot);

// For a commit of `actions` as `version` on top of `snapshot` (a table that AssignsRowIds): gives
// every add of `actions` without a baseRowId fresh row ids above the high-water mark, in order
// (baseRowId, and its numRecords rows from its statistics), and defaultRowCommitVersion `version`,
// and appends the domainMetadata action that raises the mark. InvalidArgument for an add without
// numRecords; Corruption for a mark that is not a number. The commit must land at `version` exactly
// (an exclusive commit: a retry plans again).
Status AssignRowIds(const Snapshot& snapshot, int64_t version, std::vector<Action>* actions);

}  // namespace stoke::delta
