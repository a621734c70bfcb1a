// Reading a table for queries and maintenance: the snapshot with its schema, and statistics for
// skipping files (from add.stats) and row groups (from Parquet footers) with a predicate.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "format/parquet_reader.h"
#include "table/delta_log.h"
#include "table/predicate.h"

namespace stoke {

struct TableView {
  std::string dir;
  delta::Snapshot snapshot;
  std::vector<ColumnSpec> columns;  // from schemaString and stoke.tensors
  std::string FilePath(const delta::AddFile& add) const;  // absolute path of a data file (decoded)
};

Result<TableView> OpenTableView(const std::string& table_dir, std::optional<int64_t> version = std::nullopt);

// Statistics of one data file from its add action's stats JSON (empty map when absent or
// malformed: nothing can be skipped then). *num_records is -1 when unknown.
std::map<std::string, Predicate::ColumnStats> FileStats(const delta::AddFile& add, const std::vector<ColumnSpec>& columns,
                                                        int64_t* num_records);

// Statistics of one row group from the Parquet footer.
std::map<std::string, Predicate::ColumnStats> RowGroupStats(const ParquetReader& reader, int row_group);

}  // namespace stoke
