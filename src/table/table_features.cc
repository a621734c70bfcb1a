#include "table/table_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <optional>
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

bool Contains(const auto& list, std::string_view name) {
  return std::find(std::begin(list), std::end(list), name) != std::end(list);
}

bool ConfigIsTrue(const Metadata& m, const std::string& key) {
  auto it = m.configuration.find(key);
  return it != m.configuration.end() && (it->second == "true" || it->second == "TRUE" || it->second == "True");
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

bool InCommitTimestampsEnabled(const Metadata& metadata) {
  return ConfigIsTrue(metadata, "delta.enableInCommitTimestamps");
}

std::string_view CommandName(WriteCommand command) {
  switch (command) {
    case WriteCommand::kAppend:
      return "ingest";
    case WriteCommand::kOverwrite:
      return "ingest --mode overwrite";
    case WriteCommand::kOptimize:
      return "optimize";
    case WriteCommand::kDeleteRows:
      return "bench delete-rows";
    case WriteCommand::kVacuum:
      return "vacuum";
    case WriteCommand::kCheckpoint:
      return "checkpoint";
  }
  return "write";
}

namespace {

// A set of write commands, one bit each.
using Commands = uint32_t;
constexpr Commands Bit(WriteCommand c) { return Commands{1} << static_cast<int>(c); }
constexpr Commands kNewRows = Bit(WriteCommand::kAppend) | Bit(WriteCommand::kOverwrite);
constexpr Commands kChangesFiles = kNewRows | Bit(WriteCommand::kOptimize) | Bit(WriteCommand::kDeleteRows);
constexpr Commands kEvery = kChangesFiles | Bit(WriteCommand::kVacuum) | Bit(WriteCommand::kCheckpoint);

// A writer feature whose rules some of stoke's commands cannot keep: those it refuses, and why.
// Features absent here and from kKeptWriterFeatures are unknown to stoke: every command refuses them.
struct WriterRule {
  std::string_view feature;
  Commands refused;
  std::string_view reason;
};

constexpr WriterRule kWriterRules[] = {
    {"appendOnly", Bit(WriteCommand::kOverwrite) | Bit(WriteCommand::kDeleteRows), "its rows may not be removed"},
    {"generatedColumns", kNewRows, "stoke does not compute generated columns"},
    {"changeDataFeed", Bit(WriteCommand::kDeleteRows), "deleting rows of a file needs change data files"},
    {"clustering", kChangesFiles, "stoke does not cluster the files it writes"},
    {"icebergCompatV1", kEvery, "stoke does not write Iceberg metadata"},
    {"icebergCompatV2", kEvery, "stoke does not write Iceberg metadata"},
    {"icebergWriterCompatV1", kEvery, "stoke does not write Iceberg metadata"},
};

// Writer features whose rules every command of stoke keeps: invariants and CHECK constraints (ingest
// checks every new row, table/row_constraints.h, and refuses those it cannot evaluate by name; the
// other commands add no row), column mapping (ingest writes physical names and field ids, giving a
// column it adds new ones, table/column_mapping.h; optimize rewrites columns under the names and ids
// it read), identity columns (ingest generates the values of stoke's `id` column when it is one and
// raises its high-water mark, and refuses a source that supplies the values of another one unless
// the table allows explicit inserts, table/identity_columns.h), row tracking (ingest and optimize give
// new files fresh row ids, and optimize preserves the stable ones where tracking is enabled,
// table/row_tracking.h), deletion vectors (carried by removes and checkpoints, applied by
// optimize, kept by vacuum), domains (kept by checkpoints), in-commit timestamps (written by every
// commit), v2 checkpoints (written where the table's policy asks), and features that ask nothing of
// a writer that adds files of the table's own types.
constexpr std::string_view kKeptWriterFeatures[] = {
    "invariants",   "checkConstraints", "columnMapping", "identityColumns", "rowTracking", "deletionVectors",      "domainMetadata",      "inCommitTimestamp",
    "v2Checkpoint", "timestampNtz",     "typeWidening",         "typeWidening-preview", "vacuumProtocolCheck",
};

// Whether `feature` is in use, for the features whose rules bind writers only when the metadata
// turns them on or declares columns that need them; nullopt for the others (in use when supported).
// Field metadata keys sit in the schema's JSON text; a column named like one is rare and only makes
// a check refuse where it need not.
std::optional<bool> InUse(std::string_view feature, const Metadata& m) {
  auto schema_has = [&](std::string_view key) { return m.schema_string.find(key) != std::string::npos; };
  if (feature == "appendOnly") return ConfigIsTrue(m, "delta.appendOnly");
  if (feature == "generatedColumns") return schema_has("\"delta.generationExpression\"");
  if (feature == "changeDataFeed") return ConfigIsTrue(m, "delta.enableChangeDataFeed");
  return std::nullopt;
}

// The writer features a legacy protocol version implies ("Table Features": "Features by protocol
// version").
std::vector<std::string> LegacyWriterFeatures(int32_t writer_version) {
  std::vector<std::string> out;
  if (writer_version >= 2) out.insert(out.end(), {"appendOnly", "invariants"});
  if (writer_version >= 3) out.push_back("checkConstraints");
  if (writer_version >= 4) out.insert(out.end(), {"changeDataFeed", "generatedColumns"});
  if (writer_version >= 5) out.push_back("columnMapping");
  if (writer_version >= 6) out.push_back("identityColumns");
  return out;
}

// What refuses `command` on a table supporting `feature`: "" when nothing does, else the feature
// and the reason.
std::string Refusal(std::string_view feature, const Metadata& m, WriteCommand command) {
  if (Contains(kKeptWriterFeatures, feature)) return "";
  for (const WriterRule& rule : kWriterRules) {
    if (rule.feature != feature) continue;
    if ((rule.refused & Bit(command)) == 0 || !InUse(feature, m).value_or(true)) return "";
    return fmt::format("{} ({})", feature, rule.reason);
  }
  return fmt::format("{} (a writer feature stoke does not know)", feature);
}

}  // namespace

Status CheckWritable(const Snapshot& snapshot, WriteCommand command, std::string_view table) {
  const Protocol& p = snapshot.protocol;
  const std::string_view name = CommandName(command);
  if (p.min_writer_version > 7) {
    return Status::Unsupported(fmt::format("{}: table '{}' needs writer version {}; stoke writes versions 1 to 7; "
                                           "nothing was written",
                                           name, table, p.min_writer_version));
  }
  // The features the table supports: those listed (version 7) or implied (versions 2 to 6); and,
  // from older writers that turned one on without the version it needs, those in use all the same.
  std::vector<std::string> features = p.min_writer_version == 7 ? p.writer_features : LegacyWriterFeatures(p.min_writer_version);
  for (const WriterRule& rule : kWriterRules) {
    if (!Contains(features, rule.feature) && InUse(rule.feature, snapshot.metadata).value_or(false)) {
      features.emplace_back(rule.feature);
    }
  }
  std::vector<std::string> refused;
  for (const std::string& f : features) {
    std::string why = Refusal(f, snapshot.metadata, command);
    if (!why.empty()) refused.push_back(std::move(why));
  }
  if (refused.empty()) return Status::OK();
  return Status::Unsupported(fmt::format("{}: table '{}' uses {}, which stoke's {} does not keep; nothing was written",
                                         name, table, fmt::join(refused, ", "), name));
}

namespace {

// The features a legacy protocol version implies ("Table Features": "Features by protocol version").
std::vector<std::string> LegacyReaderFeatures(int32_t reader_version) {
  if (reader_version >= 2) return {"columnMapping"};
  return {};
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
