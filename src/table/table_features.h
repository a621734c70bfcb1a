// What stoke supports of the Delta protocol's versions and table features (delta-io/delta
// PROTOCOL.md, "Protocol Evolution" and "Table Features"): which tables it may read, and which its
// write commands (ingest, optimize, vacuum, checkpoint) may change without breaking a rule that the
// table's writers must keep.
#pragma once

#include <span>
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

// OK when stoke's write command `operation` may write to the table at `snapshot`: writer version 2
// or below, or 7 with only the writer features stoke keeps (appendOnly, invariants, timestampNtz,
// typeWidening, vacuumProtocolCheck), and none of the table's columns carrying invariants,
// constraints, generation expressions or identity definitions, and neither column mapping nor the
// change data feed turned on (versions 3 to 6 imply those features: a table that uses one is refused).
// `removes_data`: the command removes rows, which delta.appendOnly forbids. `also_keeps`: writer
// features this command keeps besides those (a checkpoint copies each action's deletionVector).
// Otherwise Unsupported naming the command, `table` and each feature, before anything is written.
Status CheckWritable(const Snapshot& snapshot, std::string_view operation, std::string_view table,
                     bool removes_data = false, std::span<const std::string_view> also_keeps = {});

// `protocol` with the table feature `feature` added ("Table Features"): writer version 7, and
// reader version 3 when it is a reader feature (listed among the writer features too). A legacy
// protocol's implied features are listed explicitly (writer version 2: appendOnly and invariants;
// reader version 2: columnMapping), so that the upgraded table allows what it allowed before.
Protocol WithTableFeature(const Protocol& protocol, std::string_view feature, bool reader_feature);

}  // namespace stoke::delta
