// The writers' side of Delta's column mapping (PROTOCOL.md, "Writer Requirements for Column
// Mapping"): in modes name and id, data files name each column by its physical name and carry its
// id as the Parquet field_id; a column new to the schema gets a physical name of its own
// ("col-<uuid>", unique across the table's versions) and the next id, and
// delta.columnMapping.maxColumnId rises with it. The readers' side is ColumnsFromMetadata
// (delta_log.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "table/delta_log.h"

namespace stoke::delta {

// The table's column mapping mode: its delta.columnMapping.mode where its protocol supports the
// feature (SupportsColumnMapping; as stoke's reader takes it, ColumnsFromSnapshot), else "none";
// "none" also for no mode.
std::string ColumnMappingMode(const Snapshot& snapshot);

// Gives each of `columns`, the schema a write into the table at `snapshot` declares, its physical
// name and field id: a column of the table (by name) keeps the table's, a new column gets a new
// physical name and the next id above the table's largest. Nothing changes where the table maps no
// names. A nested column is Unsupported under mapping (its fields would need physical names of their
// own, which stoke's writer does not write), naming `where` and the column.
Status MapColumns(const Snapshot& snapshot, std::vector<ColumnSpec>* columns, std::string_view where);

// Raises metadata->configuration's delta.columnMapping.maxColumnId to the largest field id of
// `columns` (the schema the metadata declares), where they have ids (MapColumns gave them).
void RaiseMaxColumnId(const std::vector<ColumnSpec>& columns, Metadata* metadata);

// The name `column` has in the data files of a table of `columns`: its physical name under column
// mapping, else `column`.
std::string FileColumnName(const std::vector<ColumnSpec>& columns, std::string_view column);

}  // namespace stoke::delta
