#include "table/checkpoint.h"

#include <fmt/format.h>

#include <map>

#include "format/parquet_reader.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using Kind = SchemaNode::Kind;

SchemaNode Leaf(std::string name, parquet::Type type, bool is_string = false) {
  SchemaNode n;
  n.name = std::move(name);
  n.type = type;
  n.is_string = is_string;
  return n;
}
SchemaNode String(std::string name) { return Leaf(std::move(name), parquet::Type::kByteArray, true); }
SchemaNode Long(std::string name) { return Leaf(std::move(name), parquet::Type::kInt64); }
SchemaNode Int(std::string name) { return Leaf(std::move(name), parquet::Type::kInt32); }
SchemaNode Bool(std::string name) { return Leaf(std::move(name), parquet::Type::kBoolean); }
SchemaNode Struct(std::string name, std::vector<SchemaNode> fields) {
  SchemaNode n;
  n.name = std::move(name);
  n.kind = Kind::kStruct;
  n.children = std::move(fields);
  return n;
}
SchemaNode StringMap(std::string name) {
  SchemaNode n;
  n.name = std::move(name);
  n.kind = Kind::kMap;
  SchemaNode key = String("key");
  key.repetition = parquet::Repetition::kRequired;
  n.children = {key, String("value")};
  return n;
}
SchemaNode StringList(std::string name) {
  SchemaNode n;
  n.name = std::move(name);
  n.kind = Kind::kList;
  n.children = {String("element")};
  return n;
}

// Map-typed fields: a null inside them is a value (a null partition value), not an absent field.
bool IsMapField(const std::string& key) {
  return key == "partitionValues" || key == "tags" || key == "configuration" || key == "options";
}

// Drops null members of structs (absent optional fields), keeping nulls inside maps.
void StripNulls(json* j) {
  if (!j->is_object()) return;
  for (auto it = j->begin(); it != j->end();) {
    if (it->is_null()) {
      it = j->erase(it);
      continue;
    }
    if (!IsMapField(it.key())) StripNulls(&it.value());
    ++it;
  }
}

std::string CheckpointName(int64_t version) { return fmt::format("{:020d}.checkpoint.parquet", version); }

}  // namespace

SchemaNode CheckpointSchema() {
  return Struct("spark_schema",
                {Struct("txn", {String("appId"), Long("version"), Long("lastUpdated")}),
                 Struct("add", {String("path"), StringMap("partitionValues"), Long("size"), Long("modificationTime"),
                                Bool("dataChange"), String("stats"), StringMap("tags")}),
                 Struct("remove", {String("path"), Long("deletionTimestamp"), Bool("dataChange"),
                                   Bool("extendedFileMetadata"), StringMap("partitionValues"), Long("size")}),
                 Struct("metaData", {String("id"), String("name"), String("description"),
                                     Struct("format", {String("provider"), StringMap("options")}), String("schemaString"),
                                     StringList("partitionColumns"), StringMap("configuration"), Long("createdTime")}),
                 Struct("protocol", {Int("minReaderVersion"), Int("minWriterVersion"), StringList("readerFeatures"),
                                     StringList("writerFeatures")})});
}

Status WriteCheckpoint(Storage& storage, const std::string& log_dir, const Snapshot& snapshot) {
  // Each action as Delta's JSON (the commit serialisation), one row per action.
  std::vector<Action> actions;
  actions.push_back(snapshot.protocol);
  actions.push_back(snapshot.metadata);
  for (const auto& [app, version] : snapshot.app_versions) actions.push_back(Txn{app, version, std::nullopt});
  for (const auto& f : snapshot.files) actions.push_back(f);
  for (const auto& [path, r] : snapshot.tombstones) actions.push_back(r);
  std::vector<json> rows;
  rows.reserve(actions.size());
  std::string text = SerializeCommit(actions);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    json row = json::parse(text.substr(pos, nl - pos), nullptr, false);
    if (row.is_discarded()) return Status::Internal("checkpoint: serialised action does not parse");
    rows.push_back(std::move(row));
    pos = nl + 1;
  }
  WriterOptions options;
  options.codec = parquet::Codec::kSnappy;  // what Spark writes; every reader has it
  const std::string final_path = JoinPath(log_dir, CheckpointName(snapshot.version));
  const std::string tmp = final_path + ".tmp-checkpoint";
  Status s = WriteNestedParquet(storage, tmp, CheckpointSchema(), rows, options);
  if (s.ok()) s = storage.Rename(tmp, final_path);
  if (!s.ok()) {
    (void)storage.Delete(tmp);
    return s.WithContext(fmt::format("writing checkpoint {}", final_path));
  }
  json last = {{"version", snapshot.version}, {"size", rows.size()}};
  std::string last_text = last.dump();
  return WriteFileAtomically(storage, JoinPath(log_dir, "_last_checkpoint"), AsBytes(last_text));
}

std::vector<std::string> CheckpointFiles(const std::vector<std::string>& names, int64_t version) {
  const std::string classic = CheckpointName(version);
  const std::string prefix = fmt::format("{:020d}.checkpoint.", version);
  std::map<int64_t, std::vector<std::string>> parts_by_total;  // multi-part: parts -> names
  for (const auto& n : names) {
    if (n == classic) return {n};
    // <version>.checkpoint.<10-digit part>.<10-digit parts>.parquet
    if (n.size() == prefix.size() + 10 + 1 + 10 + 8 && n.compare(0, prefix.size(), prefix) == 0 &&
        n.compare(n.size() - 8, 8, ".parquet") == 0 && n[prefix.size() + 10] == '.') {
      int64_t total = std::strtoll(n.substr(prefix.size() + 11, 10).c_str(), nullptr, 10);
      parts_by_total[total].push_back(n);
    }
  }
  for (auto& [total, files] : parts_by_total) {
    if (total > 0 && static_cast<int64_t>(files.size()) == total) {
      std::sort(files.begin(), files.end());
      return files;
    }
  }
  return {};
}

Result<std::vector<Action>> ReadCheckpoint(Storage& storage, const std::string& log_dir, int64_t version) {
  STOKE_ASSIGN_OR_RETURN(auto names, storage.ListNames(log_dir));
  std::vector<std::string> files = CheckpointFiles(names, version);
  if (files.empty()) return Status::NotFound(fmt::format("{}: no complete checkpoint at version {}", log_dir, version));
  std::vector<Action> out;
  for (const auto& name : files) {
    const std::string path = JoinPath(log_dir, name);
    STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(storage, path));
    STOKE_ASSIGN_OR_RETURN(auto rows, ReadNestedParquet(*reader));
    // One action per row, checked by the same parser as commit lines.
    for (size_t r = 0; r < rows.size(); ++r) {
      auto& row = rows[r];
      if (!row.is_object()) return Status::Corruption(fmt::format("{}: a row is not a struct", path));
      for (auto it = row.begin(); it != row.end(); ++it) {
        if (it->is_null() || it.key() == "commitInfo") continue;
        if (it.key() == "sidecar" || it.key() == "checkpointMetadata") {
          return Status::Unsupported(fmt::format("{}: V2 checkpoint ({} actions)", path, it.key()));
        }
        json action = json::object();
        action[it.key()] = std::move(it.value());
        StripNulls(&action[it.key()]);
        STOKE_ASSIGN_OR_RETURN(auto parsed, ParseAction(action, path, r + 1));
        if (parsed) out.push_back(std::move(*parsed));
      }
    }
  }
  return out;
}

}  // namespace stoke::delta
