// Delta Lake classic checkpoints (PROTOCOL.md, "Checkpoints"): a Parquet file
// `_delta_log/<version>.checkpoint.parquet` with one row per action of the table's state at that
// version (protocol, metaData, txn, domainMetadata, add, remove), plus `_delta_log/_last_checkpoint`. Readers start
// from the newest checkpoint instead of replaying every commit. Multi-part checkpoints
// (`<version>.checkpoint.<part>.<parts>.parquet`) written by other engines are read too.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "table/delta_log.h"

namespace stoke::delta {

// A checkpoint is written in row groups of this many actions (one in memory at a time), which
// readers read in parallel.
inline constexpr size_t kCheckpointRowGroupActions = 50000;

// The checkpoint schema stoke writes (a subset of Spark's: the fields of the actions above), with
// the checkpointMetadata action of the V2 spec (PROTOCOL.md, "V2 Spec") when `v2_spec`, and the add
// fields `typed_stats` (TypedStats::fields, checkpoint_stats.h).
SchemaNode CheckpointSchema(bool v2_spec = false, const std::vector<SchemaNode>& typed_stats = {});

// Writes the checkpoint of `snapshot` into `log_dir` as one classic file (under a temporary name,
// then renamed, so readers never see a partial file) and then `_last_checkpoint`. It follows the V2
// spec (a checkpointMetadata row first) on a table with the v2Checkpoint feature whose
// delta.checkpointPolicy is "v2" (PROTOCOL.md, "V2 Checkpoint Table Feature"), else the V1 spec.
// Where the table sets delta.checkpoint.writeStatsAsStruct, each add also carries its typed
// statistics (stats_parsed, and partitionValues_parsed: checkpoint_stats.h).
Status WriteCheckpoint(Storage& storage, const std::string& log_dir, const Snapshot& snapshot);

// The actions of a checkpoint by kind. A checkpoint is a reconciled state (no path added twice, no
// add of a removed path), so only the order within each kind matters: the adds' order is the
// snapshot's file order. Adds are kept as AddFile, not as Action (a variant as large as Metadata):
// at 650,000 files that is 80 MB less, and the replay takes the vector whole.
struct CheckpointActions {
  std::vector<AddFile> adds;       // in row order (parts in part order)
  std::vector<RemoveFile> removes; // in row order
  std::vector<Action> others;      // protocol, metaData, txn and domainMetadata actions, in row order
  // Files `action` under its kind.
  void Add(Action&& action);
  // Appends a later part's actions, moving them.
  void Append(CheckpointActions&& part);
  size_t size() const { return adds.size() + removes.size() + others.size(); }
  // The others, then the adds, then the removes: the order WriteCheckpoint writes them in.
  std::vector<Action> ToActions() &&;
};

// The actions of the checkpoint at `version` (all of its parts). NotFound when there is none,
// Corruption naming the file when one is malformed (a path that does not decode included). V2
// checkpoints are read with their sidecars.
Result<CheckpointActions> ReadCheckpoint(Storage& storage, const std::string& log_dir, int64_t version);
// The same, with the checkpoint's files found among `names` (a listing of the log that holds this
// version's names) instead of listing them again.
Result<CheckpointActions> ReadCheckpoint(Storage& storage, const std::string& log_dir, int64_t version,
                                         const std::vector<std::string>& names);

// The actions of one checkpoint file read column by column, with no JSON in between (what
// ReadCheckpoint uses first). Unsupported, with nothing usable appended, when the file has a shape
// this reader does not handle (deeper nesting, unknown action columns); the generic reader
// (ReadNestedParquet) reads those. Corruption naming the file and row for malformed actions.
Status ReadCheckpointColumns(const ParquetReader& reader, CheckpointActions* out);

// The checkpoint file names of `version` present in `names` (one classic file, one UUID-named V2
// file, or every part of a complete multi-part checkpoint); empty when there is no complete
// checkpoint at that version.
std::vector<std::string> CheckpointFiles(const std::vector<std::string>& names, int64_t version);

// V2 checkpoints (checkpoint_v2.cc). Whether `name` is "<version>.checkpoint.<uuid>.json|parquet".
bool IsV2CheckpointName(std::string_view name, int64_t version);
// The file a sidecar action names: <log_dir>/_sidecars/<name> (the path is URI-encoded; a path
// ending in _delta_log/_sidecars/<name> is taken by its name). Corruption naming `context` for a
// malformed action or a file elsewhere.
Result<std::string> SidecarPath(const nlohmann::json& sidecar, const std::string& log_dir, std::string_view context);
// The actions of a V2 checkpoint's JSON file `text` (one action per line, as a commit; `path` names
// it in errors) into *out, and the files its sidecar actions name into *sidecars. checkpointMetadata
// and commitInfo are skipped; anything malformed is Corruption naming the file and line.
Status ReadJsonCheckpoint(std::string_view text, const std::string& path, const std::string& log_dir,
                          CheckpointActions* out, std::vector<std::string>* sidecars);

}  // namespace stoke::delta
