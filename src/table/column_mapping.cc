// The writers' side of column mapping (column_mapping.h).
#include "table/column_mapping.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/text.h"

namespace stoke::delta {

constexpr char kModeKey[] = "delta.columnMapping.mode";
constexpr char kMaxColumnIdKey[] = "delta.columnMapping.maxColumnId";

std::string ColumnMappingMode(const Snapshot& snapshot) {
  auto it = snapshot.metadata.configuration.find(kModeKey);
  if (!SupportsColumnMapping(snapshot.protocol) || it == snapshot.metadata.configuration.end() || it->second.empty()) {
    return "none";
  }
  return it->second;
}

namespace {

// The largest delta.columnMapping.id anywhere in a schema's JSON (nested fields have ids too).
int64_t LargestIdIn(const nlohmann::json& j, int depth) {
  int64_t largest = 0;
  if (depth > 64) return largest;
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (key == "delta.columnMapping.id" && value.is_number_integer()) {
        constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
        const int64_t id = value.is_number_unsigned() ? static_cast<int64_t>(std::min(value.get<uint64_t>(), kMax))
                                                      : value.get<int64_t>();
        largest = std::max(largest, id);
      } else {
        largest = std::max(largest, LargestIdIn(value, depth + 1));
      }
    }
  } else if (j.is_array()) {
    for (const auto& v : j) largest = std::max(largest, LargestIdIn(v, depth + 1));
  }
  return largest;
}

// The table's largest column id: its maxColumnId, or the largest id of its schema (nested fields
// included) or of `table` where that is more.
int64_t LargestColumnId(const Metadata& metadata, const std::vector<ColumnSpec>& table) {
  int64_t largest = LargestIdIn(nlohmann::json::parse(metadata.schema_string, nullptr, false), 0);
  auto it = metadata.configuration.find(kMaxColumnIdKey);
  if (it != metadata.configuration.end()) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    if (ec == std::errc() && end == it->second.data() + it->second.size()) largest = std::max(largest, v);
  }
  for (const ColumnSpec& c : table) largest = std::max<int64_t>(largest, c.field_id.value_or(0));
  return largest;
}

}  // namespace

Status MapColumns(const Snapshot& snapshot, std::vector<ColumnSpec>* columns, std::string_view where) {
  if (ColumnMappingMode(snapshot) == "none") return Status::OK();
  STOKE_ASSIGN_OR_RETURN(const std::vector<ColumnSpec> table, ColumnsFromSnapshot(snapshot, where));
  int64_t next_id = LargestColumnId(snapshot.metadata, table) + 1;
  for (ColumnSpec& c : *columns) {
    if (c.nested()) {
      return Status::Unsupported(fmt::format("{}: column '{}' is nested, and the table maps column names "
                                             "(columnMapping): stoke does not write nested columns under column "
                                             "mapping; nothing was written",
                                             where, c.name));
    }
    auto same = std::find_if(table.begin(), table.end(), [&](const ColumnSpec& t) { return t.name == c.name; });
    if (same != table.end()) {
      c.physical_name = same->physical_name;
      c.field_id = same->field_id;
      continue;
    }
    if (next_id > std::numeric_limits<int32_t>::max()) {
      return Status::Unsupported(fmt::format("{}: the table's column ids are exhausted (columnMapping)", where));
    }
    c.physical_name = "col-" + RandomUuid();
    c.field_id = static_cast<int32_t>(next_id++);
  }
  return Status::OK();
}

void RaiseMaxColumnId(const std::vector<ColumnSpec>& columns, Metadata* metadata) {
  if (std::none_of(columns.begin(), columns.end(), [](const ColumnSpec& c) { return c.field_id.has_value(); })) return;
  metadata->configuration[kMaxColumnIdKey] = std::to_string(LargestColumnId(*metadata, columns));
}

std::string FileColumnName(const std::vector<ColumnSpec>& columns, std::string_view column) {
  for (const ColumnSpec& c : columns) {
    if (c.name == column) return c.file_name();
  }
  return std::string(column);
}

}  // namespace stoke::delta
