// stoke tables: a Delta Lake transaction log over Parquet files written with one sample per page.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "stoke/status.h"

namespace stoke {

// `stoke ingest`: source files (.npy/.npz, HDF5, JPEG/PNG images; + labels CSV) into a table.
struct IngestOptions {
  std::string source_dir;                 // required: a directory, or one file (a path or a URI)
  std::string labels_csv;                 // optional CSV with a `file` column (the path relative to the source)
  std::string table_dir;                  // created with the table when missing
  std::string mode = "append";            // append: add files not yet in the table; overwrite: replace all
  std::string tensor_column = "data";     // column name for .npy arrays
  std::string format;                     // "" = detected from the file names; or npy, npz, hdf5, images
  std::vector<std::string> datasets;      // HDF5: the datasets to ingest (empty = all)
  // HDF5: "auto" (N samples along axis 0 when the first file's datasets share their first extent N,
  // else one sample per file), "axis0" or "file". See docs/format.md.
  std::string hdf5_samples = "auto";
  // Images: {} (the default) stores each image's encoded bytes; {height, width} decodes each to RGB
  // and stores it resized to exactly that size (PIL's antialiased bilinear, as torchvision's
  // Resize((height, width))) as a [height, width, 3] uint8 tensor, for users who trade disk for CPU.
  std::vector<int64_t> decode_images;
  // Default "auto": per column chunk, ZSTD where it saves at least 10 % of the bytes, else
  // uncompressed. Or one codec for every chunk: zstd, lz4_raw, snappy, gzip, uncompressed. Recorded in
  // the table (configuration "stoke.codec") when this ingest creates or overwrites it.
  std::string codec = "auto";
  int compression_level = 0;
  int64_t target_file_bytes = int64_t{1} << 30;  // data file size to aim for
  int64_t row_group_bytes = int64_t{128} << 20;
  int64_t rows_per_file = 0;              // > 0: exactly this many rows per data file (1 = one per source)
  // A labels column to partition by (Hive-style directories "<column>=<value>/"; the column's
  // values live in the log's partitionValues, not in the data files). Appending to a partitioned
  // table uses the table's partition column when this is empty.
  std::string partition_by;
  // Sharded ingest (--shard INDEX/COUNT): this process ingests shard `shard_index` of
  // `shard_count`, a contiguous range of the sorted source listing, and commits it concurrently with
  // the other shards through the log's optimistic concurrency (no coordinator). Ids are base + the
  // file's index in the whole listing, so they are unique, and dense over the run when the table held
  // none of its files. Each shard resumes on its own. Needs mode "append".
  int64_t shard_index = 0;
  int64_t shard_count = 1;
  size_t threads = 0;
  bool progress = true;
};

struct IngestReport {
  int64_t version = -1;                   // the version committed (nothing to do: the current version)
  int64_t source_files = 0;               // files found in the source (this shard's)
  int64_t skipped = 0;                    // files already in the table (append resumes)
  int64_t rows = 0;                       // rows (samples) added
  int64_t files_added = 0, files_removed = 0;
  int64_t bytes_in = 0, bytes_out = 0;
  double seconds = 0;
};

Result<IngestReport> IngestSources(const IngestOptions& options);

// `stoke history`: one line per version, newest first.
Status PrintTableHistory(const std::string& table_dir, int64_t limit, bool json, std::ostream& out);

// `stoke inspect DIR`: version, schema, files, rows, sizes and statistics of a table.
Status InspectTable(const std::string& table_dir, std::optional<int64_t> version, bool json, std::ostream& out);

// True when `path` is a directory holding a Delta log.
bool IsTableDirectory(const std::string& path);

}  // namespace stoke

namespace stoke {

// `stoke optimize`: bin-packing compaction. Files smaller than 3/4 of the target (and files not in
// stoke's one-sample-per-page layout; with sort_by, all files) are rewritten into files of about the
// target size, in one commit of removes and adds with dataChange=false.
struct OptimizeOptions {
  std::string table_dir;
  int64_t target_file_bytes = int64_t{1} << 30;
  int64_t row_group_bytes = int64_t{128} << 20;
  std::string where;                      // optional predicate: only files whose stats may match
  // Optional scalar column to order rows by within each new file (ascending, nulls last). Every
  // matching file is then rewritten, not only small ones, so that related rows share files and
  // files get narrow min/max ranges for skipping.
  std::string sort_by;
  // Empty (default): the codec the table was written with (its configuration "stoke.codec"; "auto"
  // when it has none). Otherwise as IngestOptions::codec.
  std::string codec;
  size_t threads = 0;
  bool progress = true;
};

struct OptimizeReport {
  int64_t version = -1;                   // -1: nothing to compact
  int64_t files_before = 0, files_after = 0;  // live files in the table
  int64_t files_removed = 0, files_added = 0;
  int64_t rows_rewritten = 0, bytes_rewritten = 0;
  double seconds = 0;
};

Result<OptimizeReport> OptimizeTable(const OptimizeOptions& options);

// `stoke vacuum`: deletes data files that no version inside the retention window references and
// that are older than the retention (uncommitted leftovers included).
struct VacuumOptions {
  std::string table_dir;
  double retain_hours = 168;              // 7 days, as Delta Lake
  bool dry_run = false;                   // list, delete nothing
  bool progress = true;                   // a progress bar on a terminal while deleting
};

struct VacuumReport {
  std::vector<std::string> files;         // deleted (or, with dry_run, to delete), relative paths
  int64_t bytes = 0;
  int64_t referenced_kept = 0;            // files kept because a retained version references them
};

Result<VacuumReport> VacuumTable(const VacuumOptions& options);

}  // namespace stoke

#include "stoke/dtype.h"
#include "stoke/options.h"

namespace stoke {

// `stoke query`: rows of a table matching a predicate over its scalar columns. Files whose add
// statistics exclude the predicate are skipped, then row groups whose Parquet statistics do.
struct QueryOptions {
  std::string table_dir;
  std::string where;                      // empty = all rows
  std::vector<std::string> select;        // empty = all columns; tensor cells print as md5 and length
  int64_t limit = -1;                     // -1 = all
  bool count_only = false;                // print only the number of matching rows
  std::optional<int64_t> version;         // time travel
  CatOptions::Format format = CatOptions::Format::kTable;
};

struct QueryReport {
  int64_t rows = 0;                       // matching rows (all of them, also beyond the limit when counting)
  int64_t files_total = 0, files_scanned = 0;
  // Counting only: files whose add statistics decided the predicate for all their rows, so they
  // were counted without being opened.
  int64_t files_counted_from_stats = 0;
  int64_t row_groups_total = 0, row_groups_scanned = 0;
};

Result<QueryReport> QueryTable(const QueryOptions& options, std::ostream& out);

// One column of a query's result, all matching rows in scan order (options.format is ignored).
struct QueryColumn {
  std::string name;
  // kScalar: `data` holds one little-endian element of `dtype` per row (bool, int32, int64, float32,
  // float64); kString, kBinary: `strings`; kTensor: `data` holds one C-order tensor of `dtype` and
  // `shape` per row (one positioned read each).
  ColumnKind kind = ColumnKind::kScalar;
  DType dtype = DType::kInt64;      // kScalar and kTensor
  std::vector<int64_t> shape;       // kTensor: the shape of one sample
  std::vector<uint8_t> data;        // kScalar, kTensor: rows x element (or tensor) bytes; nulls are zeros
  std::vector<std::string> strings; // kString, kBinary: one per row; nulls are ""
  std::vector<uint8_t> valid;       // one per row, 1 = present; empty when no row is null
};

struct QueryResult {
  QueryReport report;
  std::vector<QueryColumn> columns;  // the selected columns (all when options.select is empty), in order
};

// The rows QueryTable would print, as columns. With count_only, only report.rows is filled.
Result<QueryResult> QueryTableColumns(const QueryOptions& options);

}  // namespace stoke

namespace stoke {

// `stoke checkpoint`: writes the checkpoint of a version (latest by default). Commits write one
// every 10 versions by themselves; this is for tables written by tools that do not.
Status CheckpointTable(const std::string& table_dir, std::optional<int64_t> version);

}  // namespace stoke
