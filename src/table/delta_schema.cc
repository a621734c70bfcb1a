// Delta table schemas and statistics: the metaData's Spark schema JSON for stoke's columns (and
// back), and an add action's stats JSON (numRecords, minValues, maxValues, nullCount) from a Parquet
// footer. Protocol references are to delta-io/delta PROTOCOL.md.
#include "table/delta_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "core/text.h"
#include "format/logical_value.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

std::string Dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

// ---------------------------------------------------------------------------------------------
// Statistics.

using StatValue = std::variant<bool, int64_t, double, std::string>;

template <typename T>
T LoadLittleEndian(const std::string& bytes) {
  T v;
  std::memcpy(&v, bytes.data(), sizeof(T));  // stoke targets little-endian hosts only
  return v;
}

// Decodes a PLAIN-encoded min or max of a scalar column; nullopt when it cannot serve as a bound.
std::optional<StatValue> DecodeStat(const ColumnSpec& spec, const std::string& bytes) {
  // Delta writes dates, timestamps and decimals in their own JSON forms; stoke's writer leaves them unbounded.
  if (spec.logical != LogicalType::kNone) return std::nullopt;
  switch (spec.type) {
    case parquet::Type::kBoolean:
      if (bytes.size() != 1) return std::nullopt;
      return StatValue(bytes[0] != 0);
    case parquet::Type::kInt32:
      if (bytes.size() != 4) return std::nullopt;
      return StatValue(int64_t{LoadLittleEndian<int32_t>(bytes)});
    case parquet::Type::kInt64:
      if (bytes.size() != 8) return std::nullopt;
      return StatValue(LoadLittleEndian<int64_t>(bytes));
    case parquet::Type::kFloat: {
      if (bytes.size() != 4) return std::nullopt;
      double d = LoadLittleEndian<float>(bytes);  // exact: written so that it reads back as the same float
      if (!std::isfinite(d)) return std::nullopt;
      return StatValue(d);
    }
    case parquet::Type::kDouble: {
      if (bytes.size() != 8) return std::nullopt;
      double d = LoadLittleEndian<double>(bytes);
      if (!std::isfinite(d)) return std::nullopt;
      return StatValue(d);
    }
    case parquet::Type::kByteArray:
      if (!spec.is_string || spec.tensor || !IsValidUtf8(bytes)) return std::nullopt;
      return StatValue(bytes);
    default:
      return std::nullopt;
  }
}

ordered_json StatJson(const StatValue& v) {
  return std::visit([](const auto& x) { return ordered_json(x); }, v);
}

const parquet::ColumnMetaData* FindChunk(const parquet::RowGroup& rg, const std::string& name) {
  for (const auto& chunk : rg.columns) {
    if (chunk.meta_data && chunk.meta_data->path_in_schema.size() == 1 && chunk.meta_data->path_in_schema[0] == name) {
      return &*chunk.meta_data;
    }
  }
  return nullptr;
}

// Delta's primitive types beyond plain numbers and strings ("Primitive Types" in PROTOCOL.md): sets
// the column's canonical physical type and LogicalType; false for any other name.
bool SetLogicalType(const std::string& t, ColumnSpec* c) {
  static const std::pair<std::string_view, std::pair<parquet::Type, LogicalType>> kTypes[] = {
      {"byte", {parquet::Type::kInt32, LogicalType::kByte}},
      {"short", {parquet::Type::kInt32, LogicalType::kShort}},
      {"date", {parquet::Type::kInt32, LogicalType::kDate}},
      {"timestamp", {parquet::Type::kInt64, LogicalType::kTimestamp}},
      {"timestamp_ntz", {parquet::Type::kInt64, LogicalType::kTimestampNtz}},
  };
  for (const auto& [name, type] : kTypes) {
    if (t == name) {
      c->type = type.first;
      c->logical = type.second;
      return true;
    }
  }
  // decimal(p,s), spaces allowed after the comma as Spark prints them; "decimal" alone is (10,0).
  int precision = 10, scale = 0;
  char close = 0;
  int consumed = 0;
  if (t != "decimal" && (std::sscanf(t.c_str(), "decimal(%d,%d%c%n", &precision, &scale, &close, &consumed) != 3 ||
                         close != ')' || static_cast<size_t>(consumed) != t.size())) {
    return false;
  }
  if (precision < 1 || precision > kMaxDecimalPrecision || scale < 0 || scale > precision) return false;
  c->logical = LogicalType::kDecimal;
  c->precision = precision;
  c->scale = scale;
  c->type = precision <= kMaxInt64DecimalPrecision ? parquet::Type::kInt64 : parquet::Type::kFixedLenByteArray;
  return true;
}

// A primitive Delta type name stoke reads ("long", "decimal(10,2)", ...).
bool IsPrimitiveTypeName(const std::string& t) {
  static const std::set<std::string> kPlain = {"boolean", "integer", "long", "float", "double", "string", "binary"};
  ColumnSpec scratch;
  return kPlain.count(t) > 0 || SetLogicalType(t, &scratch);
}

// Checks a nested Delta type (struct, array or map, PROTOCOL.md "Schema Serialization Format") down to
// its primitive leaves: Unsupported naming the column for a type stoke does not read (variant),
// Corruption for a malformed one.
Status CheckNestedType(const json& t, const std::string& column, int depth) {
  constexpr int kMaxDepth = 64;  // as the Parquet reader's schemas
  auto bad = [&](std::string_view why) {
    return Status::Corruption(fmt::format("Delta schemaString: column '{}': {}", column, why));
  };
  if (depth > kMaxDepth) return bad("nested more than 64 deep");
  if (t.is_string()) {
    const std::string name = t.get<std::string>();
    if (IsPrimitiveTypeName(name)) return Status::OK();
    return Status::Unsupported(fmt::format("Delta schema: column '{}' holds the type '{}', which stoke does not read",
                                           column, name));
  }
  if (!t.is_object() || !t.contains("type") || !t["type"].is_string()) return bad("a type must be a name or an object");
  const std::string kind = t["type"].get<std::string>();
  if (kind == "array") {
    if (!t.contains("elementType")) return bad("an array without \"elementType\"");
    return CheckNestedType(t["elementType"], column, depth + 1);
  }
  if (kind == "map") {
    if (!t.contains("keyType") || !t.contains("valueType")) return bad("a map without \"keyType\" and \"valueType\"");
    STOKE_RETURN_IF_ERROR(CheckNestedType(t["keyType"], column, depth + 1));
    return CheckNestedType(t["valueType"], column, depth + 1);
  }
  if (kind != "struct") return bad(fmt::format("unknown type '{}'", kind));
  if (!t.contains("fields") || !t["fields"].is_array()) return bad("a struct without an array \"fields\"");
  for (const json& f : t["fields"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("type")) {
      return bad("each struct field needs a \"name\" and a \"type\"");
    }
    STOKE_RETURN_IF_ERROR(CheckNestedType(f["type"], column, depth + 1));
  }
  return Status::OK();
}

// A field's "nullable" (absent or null: true, as Spark reads it).
template <typename Bad>
Status SetNullable(const json& f, ColumnSpec* c, const Bad& bad) {
  auto nullable = f.find("nullable");
  if (nullable == f.end() || nullable->is_null()) {
    c->optional = true;
    return Status::OK();
  }
  if (!nullable->is_boolean()) return bad(fmt::format("column '{}': \"nullable\" must be true or false", c->name));
  c->optional = nullable->get<bool>();
  return Status::OK();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Schema.

std::string SchemaToSparkJson(const std::vector<ColumnSpec>& columns) {
  ordered_json fields = ordered_json::array();
  for (const ColumnSpec& c : columns) {
    ordered_json f = ordered_json::object();
    f["name"] = c.name;
    f["type"] = c.nested() ? ordered_json::parse(c.nested_type) : ordered_json(SparkTypeName(c));
    f["nullable"] = c.optional;
    f["metadata"] = ordered_json::object();
    if (!c.physical_name.empty()) {  // column mapping (column_mapping.h)
      if (c.field_id) f["metadata"]["delta.columnMapping.id"] = *c.field_id;
      f["metadata"]["delta.columnMapping.physicalName"] = c.physical_name;
    }
    fields.push_back(std::move(f));
  }
  ordered_json schema = ordered_json::object();
  schema["type"] = "struct";
  schema["fields"] = std::move(fields);
  return Dump(schema);
}

std::string SchemaToSparkJson(const std::vector<ColumnSpec>& columns, std::string_view previous) {
  ordered_json schema = ordered_json::parse(SchemaToSparkJson(columns));
  const ordered_json old = ordered_json::parse(previous, nullptr, /*allow_exceptions=*/false);
  if (!old.is_object() || !old.contains("fields") || !old["fields"].is_array()) return Dump(schema);
  for (ordered_json& f : schema["fields"]) {
    for (const ordered_json& o : old["fields"]) {
      if (o.is_object() && o.contains("name") && o["name"] == f["name"] && o.contains("metadata") &&
          o["metadata"].is_object()) {
        f["metadata"] = o["metadata"];
        // An identity declaration holds for the column's type only (a long): a column of another
        // type under the same name (an overwrite) is not that identity column.
        if (!o.contains("type") || o["type"] != f["type"]) {
          for (auto it = f["metadata"].begin(); it != f["metadata"].end();) {
            it = it.key().rfind("delta.identity.", 0) == 0 ? f["metadata"].erase(it) : std::next(it);
          }
        }
        break;
      }
    }
  }
  return Dump(schema);
}

Result<std::vector<ColumnSpec>> SchemaFromSparkJson(std::string_view text,
                                                    const std::map<std::string, TensorSpec>& tensors) {
  auto bad = [](std::string_view why) { return Status::Corruption(fmt::format("Delta schemaString: {}", why)); };
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return bad("not valid JSON");
  if (!j.is_object()) return bad("expected a JSON object");
  auto type = j.find("type");
  if (type == j.end() || !type->is_string() || type->get<std::string>() != "struct") {
    return bad("expected {\"type\": \"struct\", ...}");
  }
  auto fields = j.find("fields");
  if (fields == j.end() || !fields->is_array()) return bad("expected an array \"fields\"");
  std::vector<ColumnSpec> out;
  std::set<std::string> names;
  for (const json& f : *fields) {
    if (!f.is_object()) return bad("each field must be an object");
    auto name = f.find("name");
    if (name == f.end() || !name->is_string() || name->get<std::string>().empty()) {
      return bad("each field needs a non-empty string \"name\"");
    }
    ColumnSpec c;
    c.name = name->get<std::string>();
    if (!names.insert(c.name).second) return bad(fmt::format("column '{}' appears twice", c.name));
    auto ftype = f.find("type");
    if (ftype == f.end()) return bad(fmt::format("column '{}' has no \"type\"", c.name));
    if (ftype->is_object()) {
      STOKE_RETURN_IF_ERROR(CheckNestedType(*ftype, c.name, 0));
      c.type = parquet::Type::kByteArray;
      c.nested_type = ftype->dump();
      STOKE_RETURN_IF_ERROR(SetNullable(f, &c, bad));
      out.push_back(std::move(c));
      continue;
    }
    if (!ftype->is_string()) return bad(fmt::format("column '{}': \"type\" must be a string or an object", c.name));
    const std::string t = ftype->get<std::string>();
    if (t == "boolean") {
      c.type = parquet::Type::kBoolean;
    } else if (t == "integer") {
      c.type = parquet::Type::kInt32;
    } else if (t == "long") {
      c.type = parquet::Type::kInt64;
    } else if (t == "float") {
      c.type = parquet::Type::kFloat;
    } else if (t == "double") {
      c.type = parquet::Type::kDouble;
    } else if (t == "string") {
      c.type = parquet::Type::kByteArray;
      c.is_string = true;
    } else if (t == "binary") {
      c.type = parquet::Type::kByteArray;
    } else if (!SetLogicalType(t, &c)) {
      return Status::Unsupported(fmt::format("Delta schema: column '{}' has type '{}'; stoke supports boolean, "
                                             "byte, short, integer, long, float, double, decimal(p,s), date, "
                                             "timestamp, timestamp_ntz, string and binary",
                                             c.name, t));
    }
    STOKE_RETURN_IF_ERROR(SetNullable(f, &c, bad));
    if (auto tensor = tensors.find(c.name); tensor != tensors.end()) {
      if (t != "binary") {
        return bad(fmt::format("column '{}' is a tensor in {} but has type '{}' (expected binary)", c.name,
                               kTensorsMetadataKey, t));
      }
      c.tensor = tensor->second;
    }
    out.push_back(std::move(c));
  }
  for (const auto& [name, spec] : tensors) {
    if (!names.count(name)) return bad(fmt::format("{} names column '{}', which the schema lacks", kTensorsMetadataKey, name));
  }
  return out;
}

namespace {

// Column mapping (PROTOCOL.md, "Column Mapping"): in modes name and id, each column's physical name
// (and, in mode id, its field id) from its field metadata; mode none (or no mode) ignores them.
Status ApplyColumnMapping(const Metadata& metadata, std::vector<ColumnSpec>* columns, std::string_view context) {
  auto mode_it = metadata.configuration.find("delta.columnMapping.mode");
  const std::string mode = mode_it == metadata.configuration.end() ? "none" : mode_it->second;
  if (mode == "none") return Status::OK();
  if (mode != "name" && mode != "id") {
    return Status::Unsupported(
        fmt::format("{}: column mapping mode '{}'; stoke reads the modes none, name and id", context, mode));
  }
  const json schema = json::parse(metadata.schema_string, nullptr, false);  // SchemaFromSparkJson checked it
  const json& fields = schema["fields"];
  for (size_t i = 0; i < columns->size() && i < fields.size(); ++i) {
    ColumnSpec& c = (*columns)[i];
    const json& f = fields[i];
    const json empty = json::object();
    const json& md = f.contains("metadata") && f["metadata"].is_object() ? f["metadata"] : empty;
    auto physical = md.find("delta.columnMapping.physicalName");
    if (physical == md.end() || !physical->is_string() || physical->get<std::string>().empty()) {
      return Status::Corruption(fmt::format("{}: column '{}' has no delta.columnMapping.physicalName, which column "
                                            "mapping mode '{}' requires",
                                            context, c.name, mode));
    }
    c.physical_name = physical->get<std::string>();
    auto id = md.find("delta.columnMapping.id");
    if (id != md.end() && id->is_number_integer()) c.field_id = id->get<int32_t>();
    if (mode == "id" && !c.field_id) {
      return Status::Corruption(fmt::format("{}: column '{}' has no delta.columnMapping.id, which column mapping mode "
                                            "'id' requires",
                                            context, c.name));
    }
  }
  return Status::OK();
}

// Under column mapping, the display name of each top-level column whose physical name differs from
// it, by physical name: stoke.tensors and stoke.blobs name columns as data files do, so that another
// writer's rename keeps them. Empty without mapping.
std::map<std::string, std::string> DisplayNamesByPhysical(const Metadata& metadata) {
  std::map<std::string, std::string> out;
  auto mode = metadata.configuration.find("delta.columnMapping.mode");
  if (mode == metadata.configuration.end() || mode->second == "none") return out;
  const json schema = json::parse(metadata.schema_string, nullptr, false);
  if (!schema.is_object() || !schema.contains("fields") || !schema["fields"].is_array()) return out;
  for (const json& f : schema["fields"]) {
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("metadata")) continue;
    const json& md = f["metadata"];
    auto physical = md.is_object() ? md.find("delta.columnMapping.physicalName") : md.end();
    if (physical == md.end() || !physical->is_string() || *physical == f["name"]) continue;
    out.emplace(physical->get<std::string>(), f["name"].get<std::string>());
  }
  return out;
}

// `name` from stoke.tensors or stoke.blobs, as the schema displays it.
std::string DisplayName(const std::map<std::string, std::string>& by_physical, const std::string& name) {
  auto it = by_physical.find(name);
  return it == by_physical.end() ? name : it->second;
}

}  // namespace

Result<std::vector<ColumnSpec>> ColumnsFromMetadata(const Metadata& metadata, std::string_view context) {
  const std::map<std::string, std::string> by_physical = DisplayNamesByPhysical(metadata);
  std::map<std::string, TensorSpec> tensors;
  auto it = metadata.configuration.find(kTensorsMetadataKey);
  if (it != metadata.configuration.end()) {
    STOKE_ASSIGN_OR_RETURN(auto named, TensorSpecsFromJson(it->second, context));
    for (auto& [name, spec] : named) tensors[DisplayName(by_physical, name)] = std::move(spec);
  }
  STOKE_ASSIGN_OR_RETURN(auto columns, SchemaFromSparkJson(metadata.schema_string, tensors));
  it = metadata.configuration.find(kBlobsMetadataKey);
  if (it != metadata.configuration.end()) {
    STOKE_ASSIGN_OR_RETURN(auto blobs, BlobColumnsFromJson(it->second, context));
    for (const std::string& physical : blobs) {
      const std::string name = DisplayName(by_physical, physical);
      auto c = std::find_if(columns.begin(), columns.end(), [&](const ColumnSpec& col) { return col.name == name; });
      if (c == columns.end() || c->type != parquet::Type::kByteArray || c->is_string || c->tensor) {
        return Status::Corruption(fmt::format("{}: {} names column '{}', which is not a binary column of the schema", context,
                                              kBlobsMetadataKey, name));
      }
      c->blob = true;
    }
  }
  STOKE_RETURN_IF_ERROR(ApplyColumnMapping(metadata, &columns, context));
  return columns;
}

bool SupportsColumnMapping(const Protocol& protocol) {
  const auto& features = protocol.reader_features;
  return protocol.min_reader_version == 2 ||
         (protocol.min_reader_version == 3 && std::find(features.begin(), features.end(), "columnMapping") != features.end());
}

Result<std::vector<ColumnSpec>> ColumnsFromSnapshot(const Snapshot& snapshot, std::string_view context) {
  if (SupportsColumnMapping(snapshot.protocol) ||
      !snapshot.metadata.configuration.count("delta.columnMapping.mode")) {
    return ColumnsFromMetadata(snapshot.metadata, context);
  }
  Metadata unmapped = snapshot.metadata;
  unmapped.configuration.erase("delta.columnMapping.mode");
  return ColumnsFromMetadata(unmapped, context);
}

// ---------------------------------------------------------------------------------------------
// Stats.

std::string StatsJsonFromFooter(const parquet::FileMetaData& footer, const std::vector<ColumnSpec>& columns) {
  ordered_json min_values = ordered_json::object();
  ordered_json max_values = ordered_json::object();
  ordered_json null_count = ordered_json::object();
  for (const ColumnSpec& c : columns) {
    bool bounds_ok = !c.paged();  // tensor and blob columns get nullCount only
    bool nulls_ok = true;
    int64_t nulls = 0;
    std::optional<StatValue> lo, hi;
    for (const parquet::RowGroup& rg : footer.row_groups) {
      const parquet::ColumnMetaData* md = FindChunk(rg, c.file_name());
      if (md == nullptr || md->type != c.type) {
        bounds_ok = nulls_ok = false;
        break;
      }
      const parquet::Statistics* st = md->statistics ? &*md->statistics : nullptr;
      std::optional<int64_t> rg_nulls;
      if (st && st->null_count) {
        rg_nulls = *st->null_count;
      } else if (!c.optional) {
        rg_nulls = 0;  // REQUIRED: no nulls by definition
      }
      if (!rg_nulls || *rg_nulls < 0 || __builtin_add_overflow(nulls, *rg_nulls, &nulls)) nulls_ok = false;
      if (!bounds_ok || rg.num_rows == 0 || (rg_nulls && *rg_nulls >= rg.num_rows)) continue;  // nothing to bound
      if (st == nullptr) {
        bounds_ok = false;
        continue;
      }
      // min_value/max_value (fields 6/5) have the type's own order; the deprecated min/max (2/1) compare
      // signed bytes, which is still right for numbers and booleans but not for strings.
      const std::optional<std::string>* mn = &st->min_value;
      const std::optional<std::string>* mx = &st->max_value;
      if ((!*mn || !*mx) && c.type != parquet::Type::kByteArray) {
        mn = &st->min;
        mx = &st->max;
      }
      if (!*mn || !*mx) {
        bounds_ok = false;
        continue;
      }
      auto a = DecodeStat(c, **mn);
      auto b = DecodeStat(c, **mx);
      if (!a || !b) {
        bounds_ok = false;
        continue;
      }
      if (!lo || *a < *lo) lo = std::move(a);
      if (!hi || *hi < *b) hi = std::move(b);
    }
    if (bounds_ok && lo && hi) {
      min_values[c.file_name()] = StatJson(*lo);
      max_values[c.file_name()] = StatJson(*hi);
    }
    if (nulls_ok) null_count[c.file_name()] = nulls;
  }
  ordered_json stats = ordered_json::object();
  stats["numRecords"] = footer.num_rows;
  stats["minValues"] = std::move(min_values);
  stats["maxValues"] = std::move(max_values);
  stats["nullCount"] = std::move(null_count);
  std::string text = Dump(stats);
  // dump() grows its string by doubling: without this, each of 650,000 adds would hold up to twice
  // its text (about 300 bytes) until the commit.
  text.shrink_to_fit();
  return text;
}

}  // namespace stoke::delta
