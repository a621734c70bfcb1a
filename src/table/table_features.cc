#include "table/table_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace stoke::delta {
namespace {

// Reader features whose data stoke reads as the protocol requires.
constexpr std::string_view kReaderFeatures[] = {
    "columnMapping",         // physical names and field ids in data files, statistics and partitions
    "deletionVectors",       // deleted rows vanish from scans, counts and the loader (deletion_vector.h)
    "timestampNtz",          // the timestamp_ntz type
    "typeWidening",          // files older than a widening hold the narrower type (ConvertToColumnType)
    "typeWidening-preview",  // the same, as Databricks' preview named it
    "v2Checkpoint",          // UUID-named JSON or Parquet checkpoints with sidecars (checkpoint_v2.cc)
    "vacuumProtocolCheck",   // readers only acknowledge it; vacuum checks the writer protocol
};

// Writer features whose rules stoke's writes keep: appendOnly (checked below), invariants (refused
// below when a column has one), and features that need nothing of a writer that adds files of the
// table's own types or deletes unreferenced ones.
constexpr std::string_view kWriterFeatures[] = {
    "appendOnly", "invariants", "timestampNtz", "typeWidening", "typeWidening-preview", "vacuumProtocolCheck",
};

bool Contains(const auto& list, std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

bool ConfigIsTrue(const Metadata& m, const std::string& key) {
  auto it = m.configuration.find(key);
  return it != m.configuration.end() && (it->second == "true" || it->second == "TRUE" || it->second == "True");
}

// Features of the table's metadata that a writer must honour when they are in use, whatever the
// protocol version that allows them (the legacy versions 3 to 6 imply them without listing them).
std::vector<std::string> FeaturesInUse(const Metadata& m) {
  std::vector<std::string> used;
  // Field metadata keys sit in the schema's JSON text; a column named like one is rare and only
  // makes the check refuse where it need not.
  auto schema_has = [&](std::string_view key) { return m.schema_string.find(key) != std::string::npos; };
  if (schema_has("\"delta.invariants\"")) used.push_back("invariants");
  if (std::any_of(m.configuration.begin(), m.configuration.end(),
                  [](const auto& kv) { return kv.first.rfind("delta.constraints.", 0) == 0; })) {
    used.push_back("checkConstraints");
  }
  if (ConfigIsTrue(m, "delta.enableChangeDataFeed")) used.push_back("changeDataFeed");
  if (schema_has("\"delta.generationExpression\"")) used.push_back("generatedColumns");
  auto mapping = m.configuration.find("delta.columnMapping.mode");
  if (mapping != m.configuration.end() && mapping->second != "none") used.push_back("columnMapping");
  if (schema_has("\"delta.identity.start\"")) used.push_back("identityColumns");
  return used;
}

// Whether a Delta type (a name or a nested type's JSON) holds a variant anywhere.
bool HoldsVariant(const nlohmann::json& t, int depth) {
  if (depth > 64) return false;
  if (t.is_string()) return t.get<std::string>() == "variant";
  if (!t.is_object()) return false;
  for (const char* key : {"elementType", "keyType", "valueType"}) {
    if (t.contains(key) && HoldsVariant(t[key], depth + 1)) return true;
  }
  if (t.contains("fields") && t["fields"].is_array()) {
    for (const auto& f : t["fields"]) {
      if (f.is_object() && f.contains("type") && HoldsVariant(f["type"], depth + 1)) return true;
    }
  }
  return false;
}

// The top-level columns of a schemaString that hold a variant.
std::vector<std::string> VariantColumns(const std::string& schema_string) {
  std::vector<std::string> out;
  auto schema = nlohmann::json::parse(schema_string, nullptr, false);
  if (!schema.is_object() || !schema.contains("fields") || !schema["fields"].is_array()) return out;
  for (const auto& f : schema["fields"]) {
    if (f.is_object() && f.contains("name") && f["name"].is_string() && f.contains("type") && HoldsVariant(f["type"], 0)) {
      out.push_back(f["name"].get<std::string>());
    }
  }
  return out;
}

// The table's reader features stoke does not implement, in the protocol's order.
std::vector<std::string> MissingReaderFeatures(const Protocol& p) {
  std::vector<std::string> missing;
  for (const std::string& f : p.reader_features) {
    if (!Contains(kReaderFeatures, f)) missing.push_back(f);
  }
  return missing;
}

// CheckReadable, with `detail` after the list of missing features.
Status CheckReadableWith(const Protocol& p, std::string_view where, std::string_view detail) {
  const std::vector<std::string> missing = MissingReaderFeatures(p);
  if (!missing.empty()) {
    return Status::Unsupported(fmt::format("{}: the table needs reader features [{}] (minReaderVersion {}) that stoke "
                                           "does not support{}",
                                           where, fmt::join(missing, ", "), p.min_reader_version, detail));
  }
  if (p.min_reader_version > 3) {
    return Status::Unsupported(fmt::format("{}: the table needs reader version {}; stoke reads versions 1 to 3", where,
                                           p.min_reader_version));
  }
  return Status::OK();
}

}  // namespace

Status CheckReadable(const Protocol& p, std::string_view where) { return CheckReadableWith(p, where, ""); }

Status CheckReadable(const Snapshot& snapshot, std::string_view where) {
  const std::vector<std::string> missing = MissingReaderFeatures(snapshot.protocol);
  const bool variant = std::any_of(missing.begin(), missing.end(),
                                   [](const std::string& f) { return f.rfind("variant", 0) == 0; });
  const std::vector<std::string> columns =
      variant ? VariantColumns(snapshot.metadata.schema_string) : std::vector<std::string>{};
  if (columns.empty()) return CheckReadableWith(snapshot.protocol, where, "");
  return CheckReadableWith(snapshot.protocol, where,
                           fmt::format(" (stoke does not read the variant type of column{} '{}')",
                                       columns.size() > 1 ? "s" : "", fmt::join(columns, "', '")));
}

Status CheckWritable(const Snapshot& snapshot, std::string_view operation, std::string_view table, bool removes_data,
                     std::span<const std::string_view> also_keeps) {
  const Protocol& p = snapshot.protocol;
  std::vector<std::string> refused;
  if (p.min_writer_version > 7) refused.push_back(fmt::format("writer version {}", p.min_writer_version));
  if (p.min_writer_version == 7) {
    for (const std::string& f : p.writer_features) {
      if (!Contains(kWriterFeatures, f) && !Contains(also_keeps, f)) refused.push_back(f);
    }
  }
  for (std::string& f : FeaturesInUse(snapshot.metadata)) {
    if (!Contains(refused, f)) refused.push_back(std::move(f));
  }
  if (removes_data && ConfigIsTrue(snapshot.metadata, "delta.appendOnly")) refused.push_back("appendOnly");
  if (refused.empty()) return Status::OK();
  return Status::Unsupported(fmt::format("{}: table '{}' uses [{}], which stoke's {} does not keep; nothing was written",
                                         operation, table, fmt::join(refused, ", "), operation));
}

namespace {

// The features a legacy protocol version implies ("Table Features": "Features by protocol version").
std::vector<std::string> LegacyReaderFeatures(int32_t reader_version) {
  if (reader_version >= 2) return {"columnMapping"};
  return {};
}

std::vector<std::string> LegacyWriterFeatures(int32_t writer_version) {
  std::vector<std::string> out;
  if (writer_version >= 2) out.insert(out.end(), {"appendOnly", "invariants"});
  if (writer_version >= 3) out.push_back("checkConstraints");
  if (writer_version >= 4) out.insert(out.end(), {"changeDataFeed", "generatedColumns"});
  if (writer_version >= 5) out.push_back("columnMapping");
  if (writer_version >= 6) out.push_back("identityColumns");
  return out;
}

void AddOnce(std::vector<std::string>* list, std::string_view name) {
  if (!Contains(*list, name)) list->emplace_back(name);
}

}  // namespace

Protocol WithTableFeature(const Protocol& protocol, std::string_view feature, bool reader_feature) {
  Protocol out;
  out.min_reader_version = reader_feature ? 3 : protocol.min_reader_version;
  out.min_writer_version = 7;
  out.reader_features =
      protocol.min_reader_version >= 3 ? protocol.reader_features : LegacyReaderFeatures(protocol.min_reader_version);
  out.writer_features =
      protocol.min_writer_version >= 7 ? protocol.writer_features : LegacyWriterFeatures(protocol.min_writer_version);
  if (reader_feature) {
    AddOnce(&out.reader_features, feature);
    // A reader feature is listed among the writer features too.
    for (const std::string& f : out.reader_features) AddOnce(&out.writer_features, f);
  } else {
    AddOnce(&out.writer_features, feature);
  }
  if (out.min_reader_version < 3) out.reader_features.clear();
  return out;
}

}  // namespace stoke::delta
