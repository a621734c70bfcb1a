// Typed statistics in checkpoints (checkpoint_stats.h).
#include "table/checkpoint_stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "format/logical_value.h"
#include "format/parquet_writer.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;

// Whether Delta keeps bounds for a column of this type (and stoke's writer writes its leaf).
bool HasBounds(const ColumnSpec& c) {
  if (c.nested() || c.paged() || c.type == parquet::Type::kBoolean) return false;
  if (c.type == parquet::Type::kByteArray) return c.is_string;
  return c.type != parquet::Type::kFixedLenByteArray && c.type != parquet::Type::kInt96;
}

// The text of a JSON number or string.
std::string TextOf(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

json IntegerOf(const json& value) {
  if (value.is_number_integer()) return value;
  if (!value.is_string()) return nullptr;
  const std::string text = value.get<std::string>();
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() ? json(v) : json(nullptr);
}

json FloatingOf(const json& value) {
  if (value.is_number()) return value;
  if (!value.is_string()) return nullptr;
  const std::string text = value.get<std::string>();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && !text.empty() && std::isfinite(v) ? json(v) : json(nullptr);
}

// TypedStatValue before its range check.
json TypedStatValueUnchecked(const ColumnSpec& column, const json& value) {
  if (value.is_null()) return nullptr;
  switch (column.logical) {
    case LogicalType::kDate: {
      auto days = value.is_string() ? ParseDate(value.get<std::string>()) : std::nullopt;
      return days ? json(*days) : json(nullptr);
    }
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz: {
      auto micros = value.is_string() ? ParseTimestamp(value.get<std::string>()) : std::nullopt;
      return micros ? json(*micros) : json(nullptr);
    }
    case LogicalType::kDecimal: {
      if (column.type != parquet::Type::kInt64 && column.type != parquet::Type::kInt32) return nullptr;
      // A JSON number of more than 15 digits was read as a double: its digits are not the writer's.
      if (value.is_number_float() && column.precision > 15) return nullptr;
      auto d = value.is_number() || value.is_string() ? ParseDecimal(TextOf(value), column.scale) : std::nullopt;
      __int128 limit = 1;
      for (int i = 0; i < column.precision; ++i) limit *= 10;
      if (!d || !d->exact || d->floor >= limit || d->floor <= -limit) return nullptr;
      return json(static_cast<int64_t>(d->floor));
    }
    default: break;
  }
  switch (column.type) {
    case parquet::Type::kInt32:
    case parquet::Type::kInt64: return IntegerOf(value);
    case parquet::Type::kFloat:
    case parquet::Type::kDouble: return FloatingOf(value);
    case parquet::Type::kBoolean:
      if (value.is_boolean()) return value;
      return value == "true" ? json(true) : value == "false" ? json(false) : json(nullptr);
    case parquet::Type::kByteArray: return value.is_string() ? value : json(nullptr);
    default: return nullptr;
  }
}

}  // namespace

json TypedStatValue(const ColumnSpec& column, const json& value) {
  json v = TypedStatValueUnchecked(column, value);
  // An integer its leaf cannot hold (another writer's statistic out of range) is unknown.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return nullptr;
  if (column.type == parquet::Type::kInt32 && v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) return nullptr;
  }
  return v;
}

void TypedStats::SetFields() {
  std::vector<SchemaNode> bounds, nulls;
  for (const Column& c : columns_) {
    if (c.bounds) bounds.push_back(LeafNode(c.spec.file_name(), c.spec));
    nulls.push_back(LeafNode(c.spec.file_name(), ColumnSpec{.type = parquet::Type::kInt64}));
  }
  std::vector<SchemaNode> stats = {LeafNode("numRecords", ColumnSpec{.type = parquet::Type::kInt64}),
                                   LeafNode("tightBounds", ColumnSpec{.type = parquet::Type::kBoolean})};
  if (!bounds.empty()) {
    stats.push_back(StructNode("minValues", bounds));
    stats.push_back(StructNode("maxValues", bounds));
  }
  if (!nulls.empty()) stats.push_back(StructNode("nullCount", nulls));
  fields_.clear();
  if (!partitions_.empty()) {
    std::vector<SchemaNode> values;
    for (const ColumnSpec& p : partitions_) values.push_back(LeafNode(p.file_name(), p));
    fields_.push_back(StructNode("partitionValues_parsed", values));
  }
  fields_.push_back(StructNode("stats_parsed", stats));
}

Result<std::optional<TypedStats>> TypedStats::For(const Snapshot& snapshot, std::string_view table) {
  auto as_struct = snapshot.metadata.configuration.find("delta.checkpoint.writeStatsAsStruct");
  if (as_struct == snapshot.metadata.configuration.end() || as_struct->second != "true") {
    return std::optional<TypedStats>();
  }
  STOKE_ASSIGN_OR_RETURN(const std::vector<ColumnSpec> columns, ColumnsFromSnapshot(snapshot, table));
  TypedStats out;
  const auto& partitioned = snapshot.metadata.partition_columns;
  for (const ColumnSpec& c : columns) {
    if (std::find(partitioned.begin(), partitioned.end(), c.name) != partitioned.end()) {
      // partitionValues_parsed must hold every partition column: one stoke cannot write refuses.
      if (c.nested() || !WritableType(c.type)) {
        return Status::Unsupported(fmt::format("checkpoint: table '{}' asks for typed partition values "
                                               "(delta.checkpoint.writeStatsAsStruct), and its partition column '{}' "
                                               "is a {}, which stoke's checkpoints do not write; nothing was written",
                                               table, c.name, SparkTypeName(c)));
      }
      out.partitions_.push_back(c);
      continue;
    }
    if (c.nested()) continue;
    out.columns_.push_back({c, HasBounds(c)});
    out.any_bounds_ = out.any_bounds_ || out.columns_.back().bounds;
  }
  out.SetFields();
  return std::optional<TypedStats>(std::move(out));
}

void TypedStats::AddTo(const AddFile& add, json* add_json) const {
  if (!partitions_.empty()) {
    json values = json::object();
    for (const ColumnSpec& p : partitions_) {
      auto it = add.partition_values.find(p.file_name());
      const bool present = it != add.partition_values.end() && it->second && !it->second->empty();
      values[p.file_name()] = present ? TypedStatValue(p, json(*it->second)) : json(nullptr);
    }
    (*add_json)["partitionValues_parsed"] = std::move(values);
  }
  if (!add.stats) return;
  const json stats = json::parse(*add.stats, nullptr, /*allow_exceptions=*/false);
  if (!stats.is_object()) return;
  json parsed = json::object();
  parsed["numRecords"] = TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64}, stats.value("numRecords", json()));
  // Bounds that are not tight (a file with deleted rows) must not read as tight, which absent means.
  if (stats.contains("tightBounds") && stats["tightBounds"].is_boolean()) parsed["tightBounds"] = stats["tightBounds"];
  const auto member = [&](const char* group, const std::string& name) -> json {
    if (!stats.contains(group) || !stats[group].is_object() || !stats[group].contains(name)) return nullptr;
    return stats[group][name];
  };
  json min = json::object(), max = json::object(), nulls = json::object();
  for (const Column& c : columns_) {
    const std::string name = c.spec.file_name();
    if (c.bounds) {
      min[name] = TypedStatValue(c.spec, member("minValues", name));
      max[name] = TypedStatValue(c.spec, member("maxValues", name));
    }
    nulls[name] = TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64}, member("nullCount", name));
  }
  if (any_bounds_) {
    parsed["minValues"] = std::move(min);
    parsed["maxValues"] = std::move(max);
  }
  if (!columns_.empty()) parsed["nullCount"] = std::move(nulls);
  (*add_json)["stats_parsed"] = std::move(parsed);
}

}  // namespace stoke::delta
