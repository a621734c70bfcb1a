#include "table/scan.h"

#include "io/uri.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace stoke {
namespace {

// A statistics value decoded per the column's physical type (PLAIN encoding).
std::optional<Value> DecodeStat(const LeafColumn& col, const std::string& bytes) {
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  switch (col.type) {
    case parquet::Type::kBoolean:
      if (bytes.size() == 1) return Value{static_cast<bool>(bytes[0] != 0)};
      break;
    case parquet::Type::kInt32:
      if (bytes.size() == 4) return Value{static_cast<int64_t>(LoadLE<int32_t>(p))};
      break;
    case parquet::Type::kInt64:
      if (bytes.size() == 8) return Value{LoadLE<int64_t>(p)};
      break;
    case parquet::Type::kFloat:
      if (bytes.size() == 4) return Value{static_cast<double>(LoadLE<float>(p))};
      break;
    case parquet::Type::kDouble:
      if (bytes.size() == 8) return Value{LoadLE<double>(p)};
      break;
    case parquet::Type::kByteArray:
      if (col.is_string) return Value{bytes};
      break;
    default: break;
  }
  return std::nullopt;
}

// The statistics of a partition column over `rows` rows of one file.
Predicate::ColumnStats PartitionStats(const ColumnSpec& col, const std::optional<std::string>& text, int64_t rows) {
  Predicate::ColumnStats s;
  s.min = s.max = PartitionValue(col, text);
  if (!text) s.null_count = rows >= 0 ? std::optional<int64_t>(rows) : std::nullopt;
  else if (s.min) s.null_count = 0;
  return s;
}

}  // namespace

std::optional<Value> PartitionValue(const ColumnSpec& column, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::string& t = *text;
  char* end = nullptr;
  switch (column.type) {
    case parquet::Type::kBoolean:
      if (t == "true") return Value{true};
      if (t == "false") return Value{false};
      return std::nullopt;
    case parquet::Type::kInt32:
    case parquet::Type::kInt64: {
      errno = 0;
      long long v = std::strtoll(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0' || errno != 0) return std::nullopt;
      return Value{static_cast<int64_t>(v)};
    }
    case parquet::Type::kFloat:
    case parquet::Type::kDouble: {
      double v = std::strtod(t.c_str(), &end);
      if (t.empty() || *end != '\0') return std::nullopt;
      return Value{v};
    }
    default:
      if (column.is_string) return Value{t};
      return std::nullopt;
  }
}

ColumnValues PartitionColumnValues(const ColumnSpec& column, const std::optional<std::string>& text, size_t rows) {
  ColumnValues out{EmptyValuesFor(column.type), {}};
  std::optional<Value> v = PartitionValue(column, text);
  if (!v) {
    out.defined.assign(rows, 0);
    return out;
  }
  std::visit(
      [&](auto& dst) {
        using T = typename std::decay_t<decltype(dst)>::value_type;
        T x{};
        if constexpr (std::is_same_v<T, std::string>) {
          x = std::get<std::string>(v->v);
        } else if constexpr (std::is_same_v<T, uint8_t>) {
          x = std::get<bool>(v->v);
        } else if constexpr (std::is_floating_point_v<T>) {
          x = static_cast<T>(std::get<double>(v->v));
        } else {
          x = static_cast<T>(std::get<int64_t>(v->v));
        }
        dst.assign(rows, x);
      },
      out.values);
  return out;
}

Result<ColumnValues> ReadRowGroupColumn(const TableView& table, const delta::AddFile& add, const ParquetReader& reader,
                                        int row_group, const ColumnSpec& column) {
  if (table.IsPartitionColumn(column.name)) {
    auto it = add.partition_values.find(column.name);
    std::optional<std::string> text = it == add.partition_values.end() ? std::nullopt : it->second;
    return PartitionColumnValues(column, text, static_cast<size_t>(reader.metadata().row_groups[row_group].num_rows));
  }
  STOKE_ASSIGN_OR_RETURN(size_t index, reader.FindColumn(column.name));
  return reader.ReadColumnChunk(row_group, index);
}

bool TableView::IsPartitionColumn(const std::string& name) const {
  const auto& pc = snapshot.metadata.partition_columns;
  return std::find(pc.begin(), pc.end(), name) != pc.end();
}

std::vector<ColumnSpec> TableView::FileColumns() const {
  std::vector<ColumnSpec> out;
  for (const auto& c : columns) {
    if (!IsPartitionColumn(c.name)) out.push_back(c);
  }
  return out;
}

std::string ShardDirectoryName(int64_t index, int64_t count) { return fmt::format("shard-{}-of-{}", index, count); }

bool IsShardDirectoryName(std::string_view name) {
  // shard-<digits>-of-<digits>
  auto digits = [&name](size_t from, size_t* end) {
    size_t i = from;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
    *end = i;
    return i > from;
  };
  constexpr std::string_view kPrefix = "shard-", kMiddle = "-of-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  size_t end = 0;
  if (!digits(kPrefix.size(), &end) || name.substr(end, kMiddle.size()) != kMiddle) return false;
  return digits(end + kMiddle.size(), &end) && end == name.size();
}

std::string TableView::FilePath(const delta::AddFile& add) const {
  auto rel = delta::DecodePath(add.path);
  return JoinPath(dir, rel.ok() ? *rel : add.path);
}

Result<TableView> OpenTableView(const std::string& table_dir, std::optional<int64_t> version) {
  TableView t;
  STOKE_ASSIGN_OR_RETURN(StorageLocation loc, ResolveStorageLocation(table_dir));
  t.storage = std::move(loc.storage);
  t.dir = std::move(loc.path);
  delta::DeltaLog log(*t.storage, t.dir);
  auto snapshot = log.ReadSnapshot(version);
  if (!snapshot.ok()) {
    // The log names the path inside its storage ('t'); a URI names the container or bucket too.
    return t.dir == table_dir ? snapshot.status() : snapshot.status().WithContext(table_dir);
  }
  t.snapshot = std::move(*snapshot);
  STOKE_ASSIGN_OR_RETURN(t.columns, delta::ColumnsFromMetadata(t.snapshot.metadata, table_dir));
  return t;
}

void FileStatsInto(const delta::AddFile& add, AddStatsReader& reader, std::vector<Predicate::ColumnStats>* stats,
                   int64_t* num_records) {
  const std::vector<ColumnSpec>& columns = reader.columns();
  *num_records = -1;
  if (add.stats) {
    (void)reader.Read(*add.stats, stats, num_records);  // malformed: nothing known, nothing skipped
  } else {
    stats->assign(columns.size(), Predicate::ColumnStats{});
  }
  if (add.partition_values.empty()) return;
  for (size_t c = 0; c < columns.size(); ++c) {
    auto it = add.partition_values.find(columns[c].name);
    if (it != add.partition_values.end()) (*stats)[c] = PartitionStats(columns[c], it->second, *num_records);
  }
}

std::map<std::string, Predicate::ColumnStats> FileStats(const delta::AddFile& add, AddStatsReader& reader,
                                                        int64_t* num_records) {
  std::vector<Predicate::ColumnStats> stats;
  FileStatsInto(add, reader, &stats, num_records);
  std::map<std::string, Predicate::ColumnStats> out;
  for (size_t c = 0; c < stats.size(); ++c) out[reader.columns()[c].name] = std::move(stats[c]);
  return out;
}

std::map<std::string, Predicate::ColumnStats> FileStats(const delta::AddFile& add, const std::vector<ColumnSpec>& columns,
                                                        int64_t* num_records) {
  AddStatsReader reader(columns);
  return FileStats(add, reader, num_records);
}

std::map<std::string, Predicate::ColumnStats> RowGroupStats(const TableView& table, const delta::AddFile& add,
                                                           const ParquetReader& reader, int row_group) {
  std::map<std::string, Predicate::ColumnStats> out;
  for (const auto& col : table.columns) {
    auto it = add.partition_values.find(col.name);
    if (it != add.partition_values.end()) {
      out[col.name] = PartitionStats(col, it->second, reader.metadata().row_groups[row_group].num_rows);
    }
  }
  const auto& rg = reader.metadata().row_groups[row_group];
  for (size_t c = 0; c < reader.columns().size(); ++c) {
    const auto& meta = rg.columns[c].meta_data;
    if (!meta || !meta->statistics) continue;
    const auto& st = *meta->statistics;
    Predicate::ColumnStats s;
    // min_value/max_value have the column's sort order; the deprecated min/max only for signed
    // types, where both orders agree.
    bool legacy_ok = reader.columns()[c].type != parquet::Type::kByteArray;
    auto lo = st.min_value ? st.min_value : (legacy_ok ? st.min : std::nullopt);
    auto hi = st.max_value ? st.max_value : (legacy_ok ? st.max : std::nullopt);
    if (lo) s.min = DecodeStat(reader.columns()[c], *lo);
    if (hi) s.max = DecodeStat(reader.columns()[c], *hi);
    s.null_count = st.null_count;
    out[reader.columns()[c].name] = std::move(s);
  }
  return out;
}

}  // namespace stoke
