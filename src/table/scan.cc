#include "table/scan.h"

#include "stoke/table.h"
#include "table/parquet_dataset.h"

#include "format/logical_value.h"
#include "format/parquet_nested.h"
#include "io/uri.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>

namespace stoke {
namespace {

// A statistics value of a file column (PLAIN encoding of its stored type) in the canonical form of
// the table column `spec`; nullopt when it cannot serve as a bound.
std::optional<Value> DecodeStat(const ParquetReader& reader, size_t file_column, const ColumnSpec& spec,
                                const std::string& bytes) {
  const LeafColumn& col = reader.columns()[file_column];
  auto p = reinterpret_cast<const uint8_t*>(bytes.data());
  ColumnValues one;
  switch (col.type) {
    case parquet::Type::kBoolean:
      if (bytes.size() != 1) return std::nullopt;
      one.values = std::vector<uint8_t>{static_cast<uint8_t>(bytes[0] != 0)};
      break;
    case parquet::Type::kInt32:
      if (bytes.size() != 4) return std::nullopt;
      one.values = std::vector<int32_t>{LoadLE<int32_t>(p)};
      break;
    case parquet::Type::kInt64:
      if (bytes.size() != 8) return std::nullopt;
      one.values = std::vector<int64_t>{LoadLE<int64_t>(p)};
      break;
    case parquet::Type::kFloat:
      if (bytes.size() != 4) return std::nullopt;
      one.values = std::vector<float>{LoadLE<float>(p)};
      break;
    case parquet::Type::kDouble:
      if (bytes.size() != 8) return std::nullopt;
      one.values = std::vector<double>{LoadLE<double>(p)};
      break;
    case parquet::Type::kByteArray:
    case parquet::Type::kFixedLenByteArray:  // decimals: big-endian two's complement, signed order
      one.values = std::vector<std::string>{bytes};
      break;
    default: return std::nullopt;  // INT96: no defined order
  }
  if (!ConvertToColumnType(reader.metadata().schema[col.schema_index], spec, &one, reader.path()).ok()) {
    return std::nullopt;
  }
  return std::visit(
      [&](const auto& v) -> std::optional<Value> {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, uint8_t>) {
          return Value{v[0] != 0};
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (spec.is_string && spec.logical == LogicalType::kNone) return Value{v[0]};
          return std::nullopt;  // binary, and decimals of more than 18 digits: never bounds
        } else if constexpr (std::is_floating_point_v<T>) {
          return Value{static_cast<double>(v[0])};
        } else {
          return Value{static_cast<int64_t>(v[0])};
        }
      },
      one.values);
}

// The statistics of a partition column over `rows` rows of one file.
Predicate::ColumnStats PartitionStats(const ColumnSpec& col, const std::optional<std::string>& text, int64_t rows) {
  Predicate::ColumnStats s;
  s.min = s.max = PartitionValue(col, text);
  if (!text) s.null_count = rows >= 0 ? std::optional<int64_t>(rows) : std::nullopt;
  else if (s.min) s.null_count = 0;
  return s;
}

// Renames the struct fields of `v`, a value of the nested Delta type `type`, from their physical names
// (column mapping) to their names in the schema.
void ToLogicalNames(nlohmann::ordered_json* v, const nlohmann::json& type, int depth = 0) {
  if (v->is_null() || !type.is_object() || depth > 64) return;
  const std::string kind = type.value("type", "");
  if (kind == "array" && v->is_array()) {
    for (auto& e : *v) ToLogicalNames(&e, type.value("elementType", nlohmann::json()), depth + 1);
  } else if (kind == "map" && v->is_object()) {
    for (auto it = v->begin(); it != v->end(); ++it) ToLogicalNames(&it.value(), type.value("valueType", nlohmann::json()), depth + 1);
  } else if (kind == "struct" && v->is_object() && type.contains("fields") && type["fields"].is_array()) {
    nlohmann::ordered_json renamed = nlohmann::ordered_json::object();
    for (const auto& f : type["fields"]) {
      const std::string name = f.value("name", "");
      std::string physical = name;
      if (f.contains("metadata") && f["metadata"].is_object()) {
        physical = f["metadata"].value("delta.columnMapping.physicalName", name);
      }
      auto it = v->find(physical);
      if (it == v->end()) continue;
      ToLogicalNames(&*it, f.value("type", nlohmann::json()), depth + 1);
      renamed[name] = std::move(*it);
    }
    *v = std::move(renamed);
  }
}

// A struct, array or map column as JSON text per row (null rows not defined); all null when the
// file lacks it (added to the schema later).
Result<ColumnValues> ReadNestedColumn(const ParquetReader& reader, int row_group, const ColumnSpec& column,
                                      size_t rows) {
  ColumnValues out{std::vector<std::string>{}, std::vector<uint8_t>(rows, 0)};
  auto values = ReadNestedField(reader, row_group, column.file_name());
  if (!values.ok() && values.status().code() == StatusCode::kNotFound && column.optional) return out;
  STOKE_RETURN_IF_ERROR(values.status());
  auto& texts = std::get<std::vector<std::string>>(out.values);
  const nlohmann::json type =
      column.physical_name.empty() ? nlohmann::json() : nlohmann::json::parse(column.nested_type, nullptr, false);
  for (size_t r = 0; r < values->size() && r < rows; ++r) {
    auto& v = (*values)[r];
    if (v.is_null()) continue;
    out.defined[r] = 1;
    if (!column.physical_name.empty()) ToLogicalNames(&v, type);
    texts.push_back(v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  }
  return out;
}

}  // namespace

Result<size_t> FindFileColumn(const ParquetReader& reader, const ColumnSpec& column) {
  if (column.field_id) {
    for (size_t i = 0; i < reader.columns().size(); ++i) {
      const auto& e = reader.metadata().schema[reader.columns()[i].schema_index];
      if (e.field_id == column.field_id && reader.columns()[i].max_repetition_level == 0 &&
          reader.columns()[i].name.find('.') == std::string::npos) {
        return i;
      }
    }
  }
  return reader.FindColumn(column.file_name());
}

std::optional<Value> PartitionValue(const ColumnSpec& column, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::string& t = *text;
  switch (column.logical) {
    case LogicalType::kDate:
      if (auto days = ParseDate(t)) return Value{*days};
      return std::nullopt;
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz:
      if (auto micros = ParseTimestamp(t)) return Value{*micros};
      return std::nullopt;
    case LogicalType::kDecimal: {
      auto d = ParseDecimal(t, column.scale);
      if (!d || !d->exact) return std::nullopt;
      if (d->floor >= PowerOfTen(column.precision) || d->floor <= -PowerOfTen(column.precision)) return std::nullopt;
      // In the column's canonical form (see LogicalType): more than 18 digits as 16 bytes.
      if (column.precision > kMaxInt64DecimalPrecision) return Value{DecimalBytes(d->floor)};
      return Value{static_cast<int64_t>(d->floor)};
    }
    default: break;
  }
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
    auto it = add.partition_values.find(column.file_name());
    std::optional<std::string> text = it == add.partition_values.end() ? std::nullopt : it->second;
    return PartitionColumnValues(column, text, static_cast<size_t>(reader.metadata().row_groups[row_group].num_rows));
  }
  const size_t rows = static_cast<size_t>(reader.metadata().row_groups[row_group].num_rows);
  if (column.nested()) return ReadNestedColumn(reader, row_group, column, rows);
  auto index = FindFileColumn(reader, column);
  if (!index.ok() && index.status().code() == StatusCode::kNotFound && column.optional) {
    // A column added to the schema after this file was written (schema evolution): null in every row.
    return ColumnValues{EmptyValuesFor(column.type), std::vector<uint8_t>(rows, 0)};
  }
  STOKE_RETURN_IF_ERROR(index.status());
  STOKE_ASSIGN_OR_RETURN(ColumnValues values, reader.ReadColumnChunk(row_group, *index));
  const LeafColumn& stored = reader.columns()[*index];
  STOKE_RETURN_IF_ERROR(ConvertToColumnType(reader.metadata().schema[stored.schema_index], column, &values, reader.path()));
  return values;
}

Result<std::vector<uint64_t>> DeletedRows(const TableView& table, const delta::AddFile& add) {
  if (!add.deletion_vector) return std::vector<uint64_t>{};
  auto rows = delta::ReadDeletionVector(*table.storage, table.dir, *add.deletion_vector);
  if (!rows.ok()) return rows.status().WithContext(fmt::format("the deletion vector of '{}'", table.FilePath(add)));
  return rows;
}

int64_t CountDeletedRows(const std::vector<uint64_t>& deleted, int64_t first, int64_t count) {
  auto lo = std::lower_bound(deleted.begin(), deleted.end(), static_cast<uint64_t>(first));
  auto hi = std::lower_bound(lo, deleted.end(), static_cast<uint64_t>(first + count));
  return hi - lo;
}

void ClearDeletedRows(const std::vector<uint64_t>& deleted, int64_t first, int64_t count, uint8_t* keep) {
  auto it = std::lower_bound(deleted.begin(), deleted.end(), static_cast<uint64_t>(first));
  for (; it != deleted.end() && *it < static_cast<uint64_t>(first + count); ++it) {
    keep[*it - static_cast<uint64_t>(first)] = 0;
  }
}

bool HasDeletionVectors(const delta::Snapshot& snapshot) {
  return std::any_of(snapshot.files.begin(), snapshot.files.end(),
                     [](const delta::AddFile& f) { return f.deletion_vector != nullptr; });
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
  t.location = table_dir;
  STOKE_ASSIGN_OR_RETURN(t.columns, delta::ColumnsFromSnapshot(t.snapshot, table_dir));
  return t;
}

namespace {

Result<TableView> OpenPlainDataset(const std::string& location, std::optional<int64_t> version) {
  STOKE_ASSIGN_OR_RETURN(ParquetDataset d, OpenParquetDataset(location));
  if (version) {
    return Status::InvalidArgument(fmt::format("'{}' is a plain Parquet dataset (no Delta log): it has no version {} "
                                               "to read",
                                               location, *version));
  }
  TableView t;
  t.storage = std::move(d.where.storage);
  t.dir = std::move(d.where.path);
  t.location = std::move(d.root);
  t.plain = true;
  t.snapshot = std::move(d.snapshot);
  STOKE_ASSIGN_OR_RETURN(t.columns, delta::ColumnsFromSnapshot(t.snapshot, location));
  return t;
}

// Whether `location` names a file (not a directory or a prefix).
bool NamesFile(const std::string& location) {
  auto where = ResolveStorageLocation(location);
  if (!where.ok()) return false;
  auto stat = where->storage->Stat(where->path);
  return stat.ok() && !stat->is_directory;
}

}  // namespace

Result<TableView> OpenDatasetView(const std::string& location, std::optional<int64_t> version) {
  if (IsGlobLocation(location)) return OpenPlainDataset(location, version);
  // The table first: opening one costs no request more than before datasets (on object stores,
  // a look at the location itself is a HEAD and a listing).
  auto table = OpenTableView(location, version);
  if (table.ok() || IsTableDirectory(location)) return table;
  // Only where there is no log: a log that could not be read (a network error) is never passed over
  // for the data files beside it. A file's "log" is not a directory, so that error is no answer.
  if (table.status().code() != StatusCode::kNotFound && !NamesFile(location)) return table;
  auto dataset = OpenPlainDataset(location, version);
  if (dataset.ok() || dataset.status().code() != StatusCode::kNotFound) return dataset;
  // Neither: a location that does not exist says so as a table would; one that does, that it holds
  // no Parquet files either.
  auto where = ResolveStorageLocation(location);
  const bool exists = where.ok() && where->storage->Stat(where->path).ok();
  return exists ? dataset.status() : table.status();
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
    auto it = add.partition_values.find(columns[c].file_name());
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
    auto it = add.partition_values.find(col.file_name());
    if (it != add.partition_values.end()) {
      out[col.name] = PartitionStats(col, it->second, reader.metadata().row_groups[row_group].num_rows);
    }
  }
  const auto& rg = reader.metadata().row_groups[row_group];
  for (const ColumnSpec& spec : table.columns) {
    if (table.IsPartitionColumn(spec.name)) continue;
    auto c = FindFileColumn(reader, spec);
    if (!c.ok()) continue;  // not in this file (added later): unknown, nothing skipped
    const auto& meta = rg.columns[*c].meta_data;
    if (!meta || !meta->statistics) continue;
    const auto& st = *meta->statistics;
    Predicate::ColumnStats s;
    // min_value/max_value have the column's sort order; the deprecated min/max only for signed
    // types, where both orders agree.
    const parquet::Type stored = reader.columns()[*c].type;
    bool legacy_ok = stored != parquet::Type::kByteArray && stored != parquet::Type::kFixedLenByteArray;
    auto lo = st.min_value ? st.min_value : (legacy_ok ? st.min : std::nullopt);
    auto hi = st.max_value ? st.max_value : (legacy_ok ? st.max : std::nullopt);
    if (lo) s.min = DecodeStat(reader, *c, spec, *lo);
    if (hi) s.max = DecodeStat(reader, *c, spec, *hi);
    s.null_count = st.null_count;
    out[spec.name] = std::move(s);
  }
  return out;
}

}  // namespace stoke
