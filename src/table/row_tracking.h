// Row tracking for commits that add files (PROTOCOL.md, "Row Tracking", "Writer Requirements for
// Row Tracking"): fresh row ids above the table's high-water mark, each add's baseRowId and
// defaultRowCommitVersion, and the mark kept in the system domain delta.rowTracking; for commits
// that copy rows, their stable row ids and commit versions preserved in the hidden materialized
// columns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

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

// A rewrite (removes, and adds of the same rows copied, without row ids: OPTIMIZE) on top of `read`,
// a table that AssignsRowIds: the adds get fresh row ids and the commit's version (AssignRowIds), so
// the commit must land on the version they were assigned for. Where another writer took it, the
// winners are checked as a rewrite's are (CheckConcurrentCommit: one that removed a file these
// actions remove, or changed the metadata or protocol, is a Conflict) and the ids assigned again on
// top of the newest version, up to `max_attempts` times. Returns the version written. `state`, when
// given, is `read` itself, handed to the first attempt's commit as DeltaLog::Commit's state (a
// checkpoint due is then written from it; unspecified after the call).
Result<int64_t> CommitRewriteAssigningRowIds(const DeltaLog& log, const Snapshot& read, std::vector<Action> actions,
                                             const std::string& operation, const nlohmann::json& parameters,
                                             Snapshot* state = nullptr, int max_attempts = 100);

// The hidden columns of materialized row ids and row commit versions
// (delta.rowTracking.materializedRowIdColumnName and materializedRowCommitVersionColumnName).
struct MaterializedRowTracking {
  std::string row_id;
  std::string row_commit_version;
};
// Where row tracking is enabled (AssignsRowIds, and delta.enableRowTracking true), writers that copy
// rows preserve each row's stable row id and commit version in those columns: their names; nullopt
// where it is not enabled. Corruption naming `table` when enabled without both names.
Result<std::optional<MaterializedRowTracking>> MaterializedColumns(const Snapshot& snapshot, std::string_view table);

// For a copy of rows [first, first + n) of the data file of `add` (`file`): fills the nulls of
// `values`, those rows' values of hidden column `column` of `hidden` as the file holds them (INT64;
// all null where the file lacks the column), with their default generated values: the add's
// baseRowId + the row's index in the file, or its defaultRowCommitVersion. Nothing for another
// column. Corruption naming the file when the add lacks the field needed.
Status FillStableRowTracking(const MaterializedRowTracking& hidden, const std::string& column, const AddFile& add,
                             int64_t first, std::string_view file, ColumnValues* values);

}  // namespace stoke::delta
