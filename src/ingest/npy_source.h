// A directory of .npy/.npz files joined with a labels CSV, as rows of a Parquet schema, and the
// parallel writer that turns chosen rows into Parquet files with one sample per page. Used by
// `stoke convert` (plain files) and `stoke ingest` (files of a Delta table).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/progress.h"
#include "format/parquet_column.h"
#include "format/parquet_writer.h"
#include "io/storage.h"

namespace stoke {

// One labels column: its Parquet type (inferred from the cells) and its cell per source file.
struct LabelColumn {
  ColumnSpec spec;
  std::vector<std::string> cells;  // by source file index; "" = null
};

struct NpySources {
  std::shared_ptr<Storage> storage;       // where the sources are (local, Azure Blob, S3)
  std::string dir;                        // the source directory's path in `storage`
  bool npz = false;
  std::string npy_column;                 // the tensor column of .npy files
  std::vector<DirEntry> files;            // sorted by name
  std::vector<LabelColumn> labels;
  std::vector<std::pair<std::string, TensorSpec>> tensors;  // from the first file
  std::vector<ColumnSpec> columns;        // id, file, labels..., tensors...
  size_t first_tensor = 0;                // index of the first tensor column in `columns`
  int64_t sample_bytes = 0;               // tensor bytes per row
};

// Lists `dir` (.npy or .npz files, not both; a local directory or a storage URI prefix), reads the
// first file's arrays for the tensor columns, and joins `labels_csv` (optional, a path or URI;
// needs a `file` column) on the file name. `what` names the
// command in errors ("convert", "ingest").
Result<NpySources> PlanNpySources(const std::string& dir, const std::string& labels_csv, const std::string& npy_column,
                                  std::string_view what);

// A data file written and complete under its final name. Small at any file count: the footer is
// reduced to its Delta statistics when the file is finished.
struct WrittenFile {
  std::string path;                 // where it was written
  int64_t rows = 0;
  uint64_t bytes = 0;
  std::string stats;                // the add action's stats JSON (delta::StatsJsonFromFooter)
  int64_t modification_time_ms = 0; // when it was finished, ms since the epoch
};

struct FileSetLayout {
  Storage* storage = nullptr;       // where to write (nullptr: the local file system)
  // Either one file (single_file) or part files "part-NNNNN-<uuid>.parquet" under `dir` (paths in
  // `storage`).
  std::string single_file;
  std::string dir;
  int64_t rows_per_file = 0;        // > 0; a multiple of rows_per_group unless smaller than it
  int64_t rows_per_group = 0;       // > 0
};

// The rows per row group and per file for target sizes in bytes (at most 1,000,000 rows per row
// group, so every OffsetIndex stays within Arrow's list limit).
FileSetLayout LayoutForSizes(int64_t sample_bytes, int64_t rows, int64_t row_group_bytes, int64_t target_file_bytes);

// Writes the source files `rows` (indices into sources.files, in this order) with the ids `ids`
// (one per row): row groups are encoded on `threads` threads (0 = one per core) while this
// thread appends them in order, at most threads + 1 row groups in memory. Files are written as
// "<name>.inprogress" and renamed when complete (finished on a small pool of threads, so that many
// small files sync in parallel); on error every file of this call is deleted. The result is in file
// order.
Result<std::vector<WrittenFile>> WriteNpyRows(const NpySources& sources, const std::vector<int64_t>& rows,
                                              const std::vector<int64_t>& ids, const FileSetLayout& layout,
                                              const WriterOptions& options, size_t threads, ProgressBar* progress);

// The same sources without label column `label` (a partition column: its values go into directory
// names and the table log, not into the data files).
NpySources WithoutLabel(const NpySources& sources, size_t label);

}  // namespace stoke
