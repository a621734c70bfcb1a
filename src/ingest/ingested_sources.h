// What a Delta table already holds of an ingest's source files: stoke's ingest records in each row
// the source file's name (`file`), its location and version (`source_location`, `source_version`),
// and an `id`; an append reads them back to skip the files the table holds, to report those whose
// version changed, and to continue the ids. Columns are found by their names in data files (their
// physical names under column mapping).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ingest/source.h"
#include "io/storage.h"
#include "table/delta_log.h"

namespace stoke {

// The add tag naming the sharded ingest run that wrote a file (table_ingest.cc, ShardRunId).
constexpr char kIngestRunTag[] = "stoke.ingestRun";

// What the table holds of one candidate source file, from its rows whose `file` is the file's name.
enum class InTable : uint8_t {
  kNo,       // no row of this file
  kChanged,  // rows of its location, but none of its version
  kYes,      // a row of its location and version, or a row without a location (written before stoke
             // recorded them: matched by name, as then)
};

// The table's answer for the candidates (a contiguous run of the plan's sorted files).
struct SourcesInTable {
  size_t first = 0;                              // the plan's index of candidate 0
  std::vector<InTable> state;                    // per candidate
  std::map<size_t, std::string> table_versions;  // kChanged candidates: a version the table holds

  InTable Of(uint32_t file) const {
    return file >= first && file - first < state.size() ? state[file - first] : InTable::kNo;
  }
};

// What the table already holds of the sources: which of `candidates` (planned.files[first...],
// sorted by name) are in it (SourcesInTable), and the largest id of files not tagged with `run`
// ("" = of every file). `table_columns`: the table's, for the names of its columns in files. A file
// whose add statistics give its `file` range and largest id is opened only when that range holds a
// candidate name (so the shards of one sharded ingest do not read each other's files); the files
// that must be read are read in parallel.
Status ReadIngestedFiles(Storage& fs, const delta::Snapshot& snap, const std::vector<ColumnSpec>& table_columns,
                         const std::string& table_dir, const SourceSet& planned, size_t first,
                         std::span<const DirEntry> candidates, const std::string& run, SourcesInTable* out,
                         int64_t* max_id);

}  // namespace stoke
