// The parallel writer that turns chosen items of any source (source.h) into Parquet files with one
// sample per page: row groups are encoded on a thread pool (the source's reader fills each one)
// while the calling thread appends finished row groups to the output files in order. Used by
// `stoke convert` (plain files) and `stoke ingest` (files of a Delta table).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/progress.h"
#include "format/parquet_writer.h"
#include "ingest/source.h"
#include "io/storage.h"
#include "table/sample_index.h"

namespace stoke {

// A data file written and complete under its final name. Small at any file count: the footer is
// reduced to its Delta statistics when the file is finished.
struct WrittenFile {
  std::string path;                 // where it was written
  int64_t rows = 0;
  uint64_t bytes = 0;
  std::string stats;                // the add action's stats JSON (delta::StatsJsonFromFooter)
  int64_t modification_time_ms = 0; // when it was finished, ms since the epoch
  // With FileSetLayout::index_root: the file's pages for the table's sample index, from the footer
  // and OffsetIndexes as written (rel_path empty when they could not be taken: the index reads the
  // footer then).
  SampleIndex::FilePages pages;
};

struct FileSetLayout {
  Storage* storage = nullptr;       // where to write (nullptr: the local file system)
  // Either one file (single_file) or part files "part-NNNNN-<uuid>.parquet" under `dir` (paths in
  // `storage`).
  std::string single_file;
  std::string dir;
  int64_t rows_per_file = 0;        // > 0; a multiple of rows_per_group unless smaller than it
  int64_t rows_per_group = 0;       // > 0
  // Default false: each file is written as "<name>.inprogress", synced and renamed when complete,
  // so readers never see a partial file under its final name (plain files: `convert`). True: each
  // is written under its final name, and all are made durable together at the end
  // (Storage::SyncFiles), for files that readers find only through a commit made afterwards (a
  // table's data files): no rename, and one sync for all instead of one per file.
  bool write_in_place = false;
  // A table's data files: its root (files' index paths are relative to it) and its indexed columns
  // (SampleIndex::tensor_columns); WrittenFile::pages is filled when both are set.
  std::string index_root;
  std::vector<std::string> index_columns;
};

// The rows per row group and per file for target sizes in bytes (at most 1,000,000 rows per row
// group, so every OffsetIndex stays within Arrow's list limit).
FileSetLayout LayoutForSizes(int64_t sample_bytes, int64_t rows, int64_t row_group_bytes, int64_t target_file_bytes);

// Writes the items `items` of `sources` (item numbers, see SourceSet::item, in this order) with the
// ids `ids` (one per item): row groups are encoded on `threads` threads (0 = one per core) while
// this thread appends them in order, at most threads + 1 row groups in memory. Every file's footer
// carries sources.metadata. Files are written as "<name>.inprogress" and renamed when complete
// (finished on a small pool of threads, so that many small files sync in parallel), or in place
// (layout.write_in_place); files of one row group written in place on a local disk are each encoded,
// written and closed whole by one of the `threads` threads, a run of up to 16 files per task. On
// error every file of this call is deleted. The result is in file order.
Result<std::vector<WrittenFile>> WriteSourceRows(const SourceSet& sources, const std::vector<int64_t>& items,
                                                 const std::vector<int64_t>& ids, const FileSetLayout& layout,
                                                 const WriterOptions& options, size_t threads, ProgressBar* progress);

}  // namespace stoke
