// Reading stoke tables: a Delta Lake transaction log over Parquet files written with one sample per
// page (docs/format.md). A table is a directory or an object-store prefix (az://, abfss://, s3://);
// every function here takes it as `table_dir` and reads a snapshot of one version (the latest unless
// a version is named): rows matching a predicate (QueryTableRows, QueryTableColumns), the versions
// (TableHistory) and a description (InspectTable). Writing: ingest.h; compaction, vacuum and
// checkpoints: maintenance.h; batches for training: loader.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stoke/dtype.h"
#include "stoke/row_format.h"
#include "stoke/status.h"

namespace stoke {

// True when `path` is a table: a directory (or an object-store prefix) holding a Delta log.
bool IsTableDirectory(const std::string& path);
// True when `path` names a table rather than a file, for commands that take either: a local
// directory (a Delta table, a plain Parquet dataset, or neither: reading it says which), an
// object-store prefix with objects under it, or a glob of Parquet files (a plain dataset).
bool NamesTable(const std::string& path);
// OK when `path` opens for reading: a Delta table (at `version`; default the latest) or, without a
// log, a plain Parquet dataset (a directory, a glob, a file; docs/format.md). Otherwise the error
// opening it gives (NotFound where there is neither).
Status CheckTable(const std::string& path, std::optional<int64_t> version = std::nullopt);

// `stoke query`: rows of a table matching a predicate over its scalar columns. Files whose add
// statistics exclude the predicate are skipped, then row groups whose Parquet statistics do.
struct QueryOptions {
  std::string table_dir;                  // required: a directory or a URI
  // Default: all rows. = != < <= > >= IN, NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT and
  // parentheses over scalar columns, with SQL's three-valued logic: "label = 1 AND x < 100"; dates
  // as DATE '2024-01-31', timestamps as TIMESTAMP '2024-01-31 12:00:00', decimals as numbers.
  std::string where;
  std::vector<std::string> select;        // default (empty): all columns; tensor cells print as md5 and length
  int64_t limit = kNoLimit;               // default kNoLimit (-1): all matching rows; else at most this many
  int64_t offset = 0;                     // default 0; else the first `offset` matching rows are passed over
  bool count_only = false;                // default false; true: print only the number of matching rows
  std::optional<int64_t> version;         // default: the latest version; else time travel to this one
};

// What a query did.
struct QueryReport {
  int64_t rows = 0;                       // matching rows (all of them, also beyond the limit when counting)
  int64_t files_total = 0;                // data files in the version
  int64_t files_scanned = 0;              // data files opened (the others were skipped by their statistics)
  // Counting only: files whose add statistics decided the predicate for all their rows, so they
  // were counted without being opened.
  int64_t files_counted_from_stats = 0;
  int64_t row_groups_total = 0;           // row groups in the files scanned
  int64_t row_groups_scanned = 0;         // row groups read (the others were skipped by their statistics)
};

// A query's rows as text, the way `stoke query` prints them (RowsText, row_format.h).
struct QueryRows {
  QueryReport report;    // what the query did
  TextRows rows;         // the selected columns (all when options.select is empty), each matching row
  bool counted = false;  // options.count_only: report.rows is the answer, and `rows` holds no rows
};

// The matching rows as text cells (tensor and binary cells as "md5:<hex> len:<bytes>"); with
// count_only, only report.rows is filled. Errors: InvalidArgument for a bad predicate or an unknown
// column, NotFound for a missing table or version, Corruption/IOError from the table.
Result<QueryRows> QueryTableRows(const QueryOptions& options);
// What `stoke query` prints: counted, the number of matching rows on a line of its own; else the
// rows in `format` (RowsText), the table form's last line adding what was read: "(3 rows; scanned 1
// of 5 files, 2 of their 4 row groups)".
std::string QueryRowsText(const QueryRows& rows, RowFormat format);

// One column of a query's result, all matching rows in scan order.
struct QueryColumn {
  std::string name;                 // the column's name in the table
  // kScalar: `data` holds one little-endian element of `dtype` per row (bool, int32, int64, float32,
  // float64); kString, kBinary: `strings`; kTensor: `data` holds one C-order tensor of `dtype` and
  // `shape` per row (one positioned read each).
  ColumnKind kind = ColumnKind::kScalar;
  DType dtype = DType::kInt64;      // kScalar and kTensor: the element type
  std::vector<int64_t> shape;       // kTensor: the shape of one sample; empty otherwise
  std::vector<uint8_t> data;        // kScalar, kTensor: rows x element (or tensor) bytes; nulls are zeros
  std::vector<std::string> strings; // kString, kBinary: one per row; nulls are ""
  std::vector<uint8_t> valid;       // one per row, 1 = present; empty when no row is null
};

// A query's rows as columns.
struct QueryResult {
  QueryReport report;                // what the query did
  std::vector<QueryColumn> columns;  // the selected columns (all when options.select is empty), in order
};

// The matching rows as columns of values. With count_only, only report.rows is filled. Errors as
// QueryTableRows'.
Result<QueryResult> QueryTableColumns(const QueryOptions& options);

// One version of a table, as its log records it (`stoke history`).
struct TableVersion {
  int64_t version = 0;                    // the version number
  int64_t timestamp_ms = 0;               // the commit's timestamp, ms since the epoch
  std::string operation;                  // commitInfo.operation ("WRITE", "OPTIMIZE", ...), "" without one
  int64_t files_added = 0;                // add actions
  int64_t files_removed = 0;              // remove actions
  int64_t bytes_added = 0;                // the added files' sizes
  int64_t bytes_removed = 0;              // the removed files' sizes, where the remove actions give them
  std::string commit_info_json;           // the whole commitInfo as JSON text ("null" without one)
};

// The table's versions, newest first: all of them (kNoLimit), or the newest `limit`. NotFound when
// there is no table, InvalidArgument for a limit below -1.
Result<std::vector<TableVersion>> TableHistory(const std::string& table_dir, int64_t limit = kNoLimit);
// Time travel by timestamp: the newest version of the table committed at or before `timestamp`, an
// ISO-8601 time ("2026-11-30T08:00:00Z", "2026-11-30 08:00:00.250", with an offset or UTC when none
// is given) or milliseconds since the epoch ("1796112000000"). Commit times are those `history`
// lists (a table's in-commit timestamps where it has them); the latest version for a time after it.
// InvalidArgument for text that is neither, NotFound for a missing table or a time before the
// table's earliest version that can be read.
Result<int64_t> TableVersionAt(const std::string& table_dir, const std::string& timestamp);

// The versions as `stoke history` prints them: an aligned table of version, timestamp (UTC),
// operation, files added and removed, bytes added and the operation's parameters, a line each.
std::string HistoryText(const std::vector<TableVersion>& versions);
// The versions as `stoke history --json` prints them: one JSON object per version and line, with the
// keys version, timestamp, operation, files_added, files_removed, bytes_added, bytes_removed and
// commitInfo (the object itself).
std::string HistoryJsonLines(const std::vector<TableVersion>& versions);

// `stoke inspect DIR`.
struct InspectTableOptions {
  std::optional<int64_t> version;         // default: the latest version
  DescriptionFormat format = DescriptionFormat::kText;  // default text; kJson: one document that lists every data file
  bool data_files = true;                 // with kJson: the "data_files" list (false leaves it out: at 650,000
                                          // files it is 270 MB, with each file's statistics)
};

// Describes a table version: protocol, schema, partition columns, files, rows, sizes, the table's
// codec and each column's (from a sample of the files), image metadata, and statistics. NotFound for a missing table or version.
Result<std::string> InspectTable(const std::string& table_dir, const InspectTableOptions& options);

}  // namespace stoke
