// Keeping a table in shape: compaction (OptimizeTable), deleting files no retained version needs
// (VacuumTable) and checkpoints of the log (CheckpointTable). Each is one commit (or none) that
// concurrent readers and writers see atomically; none changes what any version's rows are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stoke/codec.h"
#include "stoke/status.h"

namespace stoke {

// `stoke optimize`: bin-packing compaction. Files smaller than 3/4 of the target (and files not in
// stoke's one-sample-per-page layout; with sort_by, all files) are rewritten into files of about the
// target size, in one commit of removes and adds with dataChange=false.
struct OptimizeOptions {
  std::string table_dir;                         // required: a directory or a URI
  int64_t target_file_bytes = int64_t{1} << 30;  // default 1 GiB: the size of the compacted files
  int64_t row_group_bytes = int64_t{128} << 20;  // default 128 MiB: their row group size
  std::string where;                      // default all files; a predicate: only files whose stats may match
  // Optional scalar column to order rows by within each new file (ascending, nulls last). Every
  // matching file is then rewritten, not only small ones, so that related rows share files and
  // files get narrow min/max ranges for skipping.
  std::string sort_by;
  // Default (nullopt): the codec the table was written with (its configuration "stoke.codec"; kAuto
  // when it has none). Otherwise this one, as IngestOptions::codec.
  std::optional<Codec> codec;
  size_t threads = 0;                     // default 0: one thread per available CPU
  bool progress = true;                   // default true: a progress bar when stdout is a terminal
};

// What an optimize did.
struct OptimizeReport {
  int64_t version = -1;                   // the version committed; -1: nothing to compact
  int64_t files_before = 0;               // live files in the table before
  int64_t files_after = 0;                // and after
  int64_t files_removed = 0;              // files rewritten
  int64_t files_added = 0;                // files written
  int64_t rows_rewritten = 0;             // rows in the files rewritten
  int64_t bytes_rewritten = 0;            // bytes of the files rewritten
  double seconds = 0;                     // wall time
};

// Compacts the table's latest version. Errors: InvalidArgument for bad options (a bad predicate, a
// sort_by that is not a scalar column), NotFound for a missing table, Conflict when a concurrent
// commit removed files being compacted.
Result<OptimizeReport> OptimizeTable(const OptimizeOptions& options);

// `stoke vacuum`: deletes data files that no version inside the retention window references and
// that are older than the retention (uncommitted leftovers included).
struct VacuumOptions {
  std::string table_dir;                  // required: a directory or a URI
  double retain_hours = 168;              // default 168 (7 days, as Delta Lake): versions this recent stay readable
  bool dry_run = false;                   // default false; true: list, delete nothing
  bool progress = true;                   // default true: a progress bar on a terminal while deleting
};

// What a vacuum deleted.
struct VacuumReport {
  std::vector<std::string> files;         // deleted (or, with dry_run, to delete), relative paths
  int64_t bytes = 0;                      // their bytes
  int64_t referenced_kept = 0;            // files kept because a retained version references them
};

// Deletes (or lists) the files VacuumOptions describes. Errors: InvalidArgument for a negative
// retention, NotFound for a missing table.
Result<VacuumReport> VacuumTable(const VacuumOptions& options);

// `stoke checkpoint`: writes the checkpoint of `version` (default: the latest). Commits write one
// every 10 versions by themselves; this is for tables written by tools that do not.
Status CheckpointTable(const std::string& table_dir, std::optional<int64_t> version);

}  // namespace stoke
