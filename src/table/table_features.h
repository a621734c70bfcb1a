// What stoke supports of the Delta protocol's versions and table features (delta-io/delta
// PROTOCOL.md, "Protocol Evolution" and "Table Features"): which tables it may read, and which its
// write commands (ingest, optimize, vacuum, checkpoint) may change without breaking a rule that the
// table's writers must keep.
#pragma once

#include <string_view>

#include "table/delta_log.h"

namespace stoke::delta {

// OK when stoke reads tables of this protocol correctly: reader version 1 or 2 (column mapping), or
// 3 with only the reader features it implements (columnMapping, deletionVectors, timestampNtz,
// typeWidening, v2Checkpoint, vacuumProtocolCheck). Otherwise Unsupported naming `where` and each
// missing feature.
Status CheckReadable(const Protocol& protocol, std::string_view where);
// The same for a snapshot, naming the columns of the type a missing feature is for (variant).
Status CheckReadable(const Snapshot& snapshot, std::string_view where);

// stoke's write commands, as the writer features' rules tell them apart.
enum class WriteCommand {
  kAppend,      // ingest --mode append: files of new rows added
  kOverwrite,   // ingest --mode overwrite: every file removed, files of new rows added
  kOptimize,    // files rewritten with the same rows (less deleted ones), dataChange=false
  kDeleteRows,  // rows of files marked deleted with deletion vectors
  kVacuum,      // files no retained version references deleted; nothing committed
  kCheckpoint,  // the state at a version written out
};
// The command's name in messages: "ingest", "ingest --mode overwrite", "optimize", "bench
// delete-rows", "vacuum", "checkpoint".
std::string_view CommandName(WriteCommand command);

// OK when `command` may write to the table at `snapshot` keeping every rule of the table's writer
// features (PROTOCOL.md, "Table Features"): writer version 7 or below; every feature the table
// supports (listed, or implied by a legacy version) either kept by stoke for every command
// (invariants and checkConstraints, which ingest checks on every new row with RowConstraints,
// columnMapping, whose physical names and field ids ingest and optimize write, identityColumns,
// whose values ingest generates (or refuses to be given), rowTracking, whose row ids ingest and
// optimize assign and optimize preserves, deletionVectors, domainMetadata,
// inCommitTimestamp, v2Checkpoint, timestampNtz, typeWidening, vacuumProtocolCheck), or not in use
// (appendOnly unset, no generated column, change data feed off), or one whose rules do not bind this
// command (generated columns bind only new rows; appendOnly binds only what removes rows). Otherwise
// Unsupported naming the command, `table` and each feature with why stoke cannot keep it, before
// anything is written. Unknown writer features are refused by every command.
Status CheckWritable(const Snapshot& snapshot, WriteCommand command, std::string_view table);

// Whether the table's commits carry in-commit timestamps: delta.enableInCommitTimestamps is true
// (PROTOCOL.md, "In-Commit Timestamps"; the inCommitTimestamp feature goes with it).
bool InCommitTimestampsEnabled(const Metadata& metadata);

// `protocol` with the table feature `feature` added ("Table Features"): writer version 7, and
// reader version 3 when it is a reader feature (listed among the writer features too). A legacy
// protocol's implied features are listed explicitly (writer version 2: appendOnly and invariants;
// reader version 2: columnMapping), so that the upgraded table allows what it allowed before.
Protocol WithTableFeature(const Protocol& protocol, std::string_view feature, bool reader_feature);

}  // namespace stoke::delta
