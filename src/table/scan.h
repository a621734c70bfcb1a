// Reading a table for queries and maintenance: the snapshot with its schema, and statistics for
// skipping files (from add.stats) and row groups (from Parquet footers) with a predicate.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/parquet_reader.h"
#include "table/add_stats.h"
#include "table/delta_log.h"
#include "table/predicate.h"

namespace stoke {

struct TableView {
  std::shared_ptr<Storage> storage;  // where the table lives (local, Azure Blob, S3)
  std::string dir;                   // the table's path in `storage` (for object stores: a key prefix)
  // The table as a path or URI that data file paths join to (JoinPath): the location opened, or a
  // plain dataset's root (parquet_dataset.h).
  std::string location;
  bool plain = false;  // a plain Parquet dataset (no Delta log): a made-up snapshot of version 0
  delta::Snapshot snapshot;
  std::vector<ColumnSpec> columns;  // from schemaString and stoke.tensors, partition columns included
  std::string FilePath(const delta::AddFile& add) const;  // absolute path of a data file (decoded)
  bool IsPartitionColumn(const std::string& name) const;
  // The columns stored in the data files (all but the partition columns).
  std::vector<ColumnSpec> FileColumns() const;
};

// The directory a shard of a sharded ingest writes its data files in, under the table root or the
// partition's directory: "shard-<index>-of-<count>".
std::string ShardDirectoryName(int64_t index, int64_t count);
// Whether `name` (one path component) is such a directory.
bool IsShardDirectoryName(std::string_view name);

// A partition value (add.partitionValues holds text) as a value of the column's type; nullopt for a
// null partition or text that does not parse as the type.
std::optional<Value> PartitionValue(const ColumnSpec& column, const std::optional<std::string>& text);
// `rows` copies of a file's partition value (or nulls), as a decoded column.
ColumnValues PartitionColumnValues(const ColumnSpec& column, const std::optional<std::string>& text, size_t rows);

// The values of `column` in row group `row_group` of the data file `add`, opened as `reader`: decoded
// from the file, or, for a partition column, the file's partition value repeated for every row.
// NotFound when a non-partition column is not in the file.
Result<ColumnValues> ReadRowGroupColumn(const TableView& table, const delta::AddFile& add, const ParquetReader& reader,
                                        int row_group, const ColumnSpec& column);

// The leaf column of a data file that holds the table column `column`: by field id in column mapping's
// mode id (a top-level leaf whose SchemaElement has it), else by the column's name in files (its
// physical name under column mapping). NotFound when the file has none.
Result<size_t> FindFileColumn(const ParquetReader& reader, const ColumnSpec& column);

// The rows of data file `add` that its deletion vector deletes, as file-global row indexes, ascending
// and distinct; empty when it has none. Errors name the deletion vector's file (or the add's file for
// an inline one) and the offset (see delta::ReadDeletionVector).
Result<std::vector<uint64_t>> DeletedRows(const TableView& table, const delta::AddFile& add);
// How many of the rows [first, first + count) of a file are in `deleted` (as DeletedRows returns it).
int64_t CountDeletedRows(const std::vector<uint64_t>& deleted, int64_t first, int64_t count);
// Sets keep[r - first] to 0 for each deleted row r in [first, first + count).
void ClearDeletedRows(const std::vector<uint64_t>& deleted, int64_t first, int64_t count, uint8_t* keep);
// Whether any data file of the snapshot has a deletion vector.
bool HasDeletionVectors(const delta::Snapshot& snapshot);

// `table` is a local path or a storage URI (az://, abfss://, https://…blob…, s3://; see io/uri.h).
Result<TableView> OpenTableView(const std::string& table, std::optional<int64_t> version = std::nullopt);
// For readers: the Delta table at `location`, or, where there is no Delta log, the plain Parquet
// dataset it names (a directory, a glob or a file; parquet_dataset.h). A version asked of a plain
// dataset is InvalidArgument. Writers open tables with OpenTableView, which never takes a dataset.
Result<TableView> OpenDatasetView(const std::string& location, std::optional<int64_t> version = std::nullopt);

// Statistics of one data file from its add action's stats JSON and partition values (no bounds
// when the stats are absent or malformed: nothing can be skipped then), for the reader's columns
// (a scan that needs a few columns reads only those). *num_records is -1 when unknown.
std::map<std::string, Predicate::ColumnStats> FileStats(const delta::AddFile& add, AddStatsReader& reader,
                                                        int64_t* num_records);
// The same as a vector, (*stats)[c] for reader.columns()[c] (reused between calls: no map per file).
void FileStatsInto(const delta::AddFile& add, AddStatsReader& reader, std::vector<Predicate::ColumnStats>* stats,
                   int64_t* num_records);
// The same for `columns`, with a reader of its own (one call; loops keep a reader per thread).
std::map<std::string, Predicate::ColumnStats> FileStats(const delta::AddFile& add, const std::vector<ColumnSpec>& columns,
                                                        int64_t* num_records);

// Statistics of one row group from the Parquet footer, plus the file's partition values.
std::map<std::string, Predicate::ColumnStats> RowGroupStats(const TableView& table, const delta::AddFile& add,
                                                           const ParquetReader& reader, int row_group);

}  // namespace stoke
