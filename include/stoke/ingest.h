// Writing tables: source files (.npy/.npz, HDF5, JPEG/PNG images; + a labels CSV) into a Delta table,
// one sample per row and, in tensor and image columns, one sample per page. Appends resume where an
// earlier run stopped (a source file is in the table or not), and several processes may ingest
// shards of one source into one table at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/codec.h"
#include "stoke/source_format.h"
#include "stoke/status.h"

namespace stoke {

// What an ingest does with the rows already in the table.
enum class IngestMode {
  kAppend,     // add the source files not yet in the table, all samples of a file at once (re-running resumes)
  kOverwrite,  // replace every row of the table with the source's (one commit; older versions stay readable)
};

// The mode named "append" or "overwrite" (the CLI's --mode, the Python keyword `mode`).
// InvalidArgument otherwise: "ingest: `mode` must be append or overwrite, not '<name>'".
Result<IngestMode> ParseIngestMode(std::string_view name);
// "append" or "overwrite".
std::string_view IngestModeName(IngestMode mode);

// What an append does with a source file whose location is in the table but whose version (size and
// modification time; the ETag on object stores) is not: the file changed after it was ingested.
enum class OnChanged {
  kSkip,    // report it and leave it out (the table keeps the version it has)
  kAppend,  // append the new version as new rows (the old rows stay)
  kError,   // stop before writing anything, naming the changed files
};

// The OnChanged named "skip", "append" or "error" (the CLI's --on-changed, the Python keyword
// `on_changed`); InvalidArgument otherwise, saying what is expected.
Result<OnChanged> ParseOnChanged(std::string_view name);
// "skip", "append" or "error".
std::string_view OnChangedName(OnChanged on_changed);

// `stoke ingest`: what to ingest, where, and how to lay it out. Sizes are bytes.
struct IngestOptions {
  std::string source_dir;                 // required: a directory, or one file (a path or a URI)
  std::string labels_csv;                 // default none: a CSV with a `file` column (the path relative to the source)
  std::string table_dir;                  // required: a directory or a URI, created with the table when missing
  IngestMode mode = IngestMode::kAppend;  // default append
  OnChanged on_changed = OnChanged::kSkip;  // default skip: appending, a source file changed since it was ingested
  std::string tensor_column = "data";     // default "data": the column name for .npy arrays
  SourceFormat format = SourceFormat::kAuto;  // default kAuto: detected from the file names
  std::vector<std::string> datasets;      // HDF5: the datasets to ingest (default, empty: all)
  Hdf5Samples hdf5_samples = Hdf5Samples::kAuto;  // HDF5: default kAuto (see Hdf5Samples, docs/format.md)
  // Images: {} (the default) stores each image's encoded bytes; {height, width} decodes each to RGB
  // and stores it resized to exactly that size (PIL's antialiased bilinear, as torchvision's
  // Resize((height, width))) as a [height, width, 3] uint8 tensor, for users who trade disk for CPU.
  std::vector<int64_t> decode_images;
  // Default kAuto: per column chunk, ZSTD where it saves at least 10 % of the bytes (tensor and blob
  // columns: at least 90 %, of pages averaging 64 KiB or more), else uncompressed; or one codec for
  // every chunk. Recorded in the table (configuration "stoke.codec",
  // as CodecName spells it) when this ingest creates or overwrites it; OPTIMIZE keeps it.
  Codec codec = Codec::kAuto;
  int compression_level = 0;              // default 0: the codec's default level (zstd 1..19, gzip 1..9)
  int64_t target_file_bytes = int64_t{1} << 30;  // default 1 GiB: the data file size to aim for
  int64_t row_group_bytes = int64_t{128} << 20;  // default 128 MiB: the row group size to aim for
  int64_t rows_per_file = 0;              // default 0 (by size); > 0: exactly this many rows per data file
  // A labels column to partition by (Hive-style directories "<column>=<value>/"; the column's
  // values live in the log's partitionValues, not in the data files). Appending to a partitioned
  // table uses the table's partition column when this is empty.
  std::string partition_by;
  // Sharded ingest (--shard INDEX/COUNT): this process ingests shard `shard_index` of
  // `shard_count`, a contiguous range of the sorted source listing, and commits it concurrently with
  // the other shards through the log's optimistic concurrency (no coordinator). Ids are base + the
  // file's index in the whole listing, so they are unique, and dense over the run when the table held
  // none of its files. Each shard resumes on its own, and writes its data files in a directory of its
  // own, "shard-<index>-of-<count>" under the table root (or the partition's directory). Needs mode
  // kAppend.
  int64_t shard_index = 0;
  int64_t shard_count = 1;                // default 1: no sharding
  size_t threads = 0;                     // default 0: one encoding thread per available CPU
  bool progress = true;                   // default true: a progress bar when stdout is a terminal
};

// A source file whose location is in the table with another version than the file has now.
struct ChangedSourceFile {
  std::string location;                   // SourceSet::FileLocation: "/data/a/x.npy", "az://c/a/x.npy"
  std::string table_version;              // a version the table holds ("size:N,mtime:MS" or "etag:E"; one of
                                          // them when it holds several)
  std::string source_version;             // the version the source has now
};

// What an ingest did.
struct IngestReport {
  int64_t version = -1;                   // the version committed (nothing to do: the current version)
  int64_t source_files = 0;               // files found in the source (this shard's)
  int64_t new_files = 0;                  // files not in the table, added
  int64_t skipped = 0;                    // files already in the table, left out (append resumes): the same
                                          // location and version, or, in rows written before stoke recorded
                                          // locations, the same name
  int64_t changed = 0;                    // files in the table with another version: appended when on_changed
                                          // is kAppend, else left out
  std::vector<ChangedSourceFile> changed_files;  // the first kMaxChangedFilesListed of them
  // How many changed files changed_files lists at most (a changed directory of millions of files
  // must not fill memory with its names).
  static constexpr size_t kMaxChangedFilesListed = 1000;
  int64_t rows = 0;                       // rows (samples) added
  int64_t files_added = 0;                // data files added
  int64_t files_removed = 0;              // data files removed (overwrite)
  int64_t bytes_in = 0;                   // source bytes read
  int64_t bytes_out = 0;                  // data file bytes written
  double seconds = 0;                     // wall time
};

// Ingests options.source_dir into options.table_dir in one commit (re-planned and retried when a
// concurrent writer commits first). Errors: InvalidArgument for bad options, NotFound for a missing
// source, Unsupported for sources stoke cannot read, Conflict when the retries run out.
Result<IngestReport> IngestSources(const IngestOptions& options);

}  // namespace stoke
