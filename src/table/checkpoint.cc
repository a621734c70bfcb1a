#include "table/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

#include "core/thread_pool.h"
#include "format/parquet_reader.h"
#include "table/checkpoint_stats.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using Kind = SchemaNode::Kind;

SchemaNode Leaf(std::string name, parquet::Type type, bool is_string = false) {
  return LeafNode(std::move(name), ColumnSpec{.type = type, .is_string = is_string});
}
SchemaNode String(std::string name) { return Leaf(std::move(name), parquet::Type::kByteArray, true); }
SchemaNode Long(std::string name) { return Leaf(std::move(name), parquet::Type::kInt64); }
SchemaNode Int(std::string name) { return Leaf(std::move(name), parquet::Type::kInt32); }
SchemaNode Bool(std::string name) { return Leaf(std::move(name), parquet::Type::kBoolean); }
SchemaNode Struct(std::string name, std::vector<SchemaNode> fields) { return StructNode(std::move(name), std::move(fields)); }
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

// PROTOCOL.md, "Deletion Vector Descriptor Schema" (maxRowIndex as delta-spark writes it).
SchemaNode DeletionVectorStruct() {
  return Struct("deletionVector", {String("storageType"), String("pathOrInlineDv"), Int("offset"), Int("sizeInBytes"),
                                   Long("cardinality"), Long("maxRowIndex")});
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

SchemaNode CheckpointSchema(bool v2_spec, const std::vector<SchemaNode>& typed_stats) {
  SchemaNode schema =
      Struct("spark_schema",
                {Struct("txn", {String("appId"), Long("version"), Long("lastUpdated")}),
                 Struct("add", {String("path"), StringMap("partitionValues"), Long("size"), Long("modificationTime"),
                                Bool("dataChange"), String("stats"), StringMap("tags"), DeletionVectorStruct(),
                                Long("baseRowId"), Long("defaultRowCommitVersion"), String("clusteringProvider")}),
                 Struct("remove", {String("path"), Long("deletionTimestamp"), Bool("dataChange"),
                                   Bool("extendedFileMetadata"), StringMap("partitionValues"), Long("size"),
                                   DeletionVectorStruct(), Long("baseRowId"), Long("defaultRowCommitVersion")}),
                 Struct("metaData", {String("id"), String("name"), String("description"),
                                     Struct("format", {String("provider"), StringMap("options")}), String("schemaString"),
                                     StringList("partitionColumns"), StringMap("configuration"), Long("createdTime")}),
                 Struct("protocol", {Int("minReaderVersion"), Int("minWriterVersion"), StringList("readerFeatures"),
                                     StringList("writerFeatures")}),
                 Struct("domainMetadata", {String("domain"), String("configuration"), Bool("removed")})});
  if (v2_spec) schema.children.push_back(Struct("checkpointMetadata", {Long("version"), StringMap("tags")}));
  std::vector<SchemaNode>& add = schema.children[1].children;
  add.insert(add.end(), typed_stats.begin(), typed_stats.end());
  return schema;
}

namespace {

// Whether the table's checkpoints follow the V2 spec: the v2Checkpoint feature with
// delta.checkpointPolicy v2.
bool UsesV2Spec(const Snapshot& snapshot) {
  const auto& features = snapshot.protocol.writer_features;
  auto policy = snapshot.metadata.configuration.find("delta.checkpointPolicy");
  return std::find(features.begin(), features.end(), "v2Checkpoint") != features.end() &&
         policy != snapshot.metadata.configuration.end() && policy->second == "v2";
}

// Writes every action of `snapshot` as a row of `writer`, each as Delta's JSON ({"add": {...}}; a
// missing field is null): the V2 spec's checkpointMetadata first (`v2_spec`), then protocol,
// metaData, txns, domains, adds (with their typed statistics where `typed`) and tombstones.
Status WriteActionRows(NestedParquetWriter& writer, const Snapshot& snapshot, bool v2_spec,
                       const std::optional<TypedStats>& typed) {
  auto emit = [&](const Action& a) { return writer.AddRow(json(ActionJson(a))); };
  if (v2_spec) {
    STOKE_RETURN_IF_ERROR(writer.AddRow({{"checkpointMetadata", {{"version", snapshot.version}, {"tags", json::object()}}}}));
  }
  STOKE_RETURN_IF_ERROR(emit(snapshot.protocol));
  STOKE_RETURN_IF_ERROR(emit(snapshot.metadata));
  for (const auto& [app, version] : snapshot.app_versions) STOKE_RETURN_IF_ERROR(emit(Txn{app, version, std::nullopt}));
  for (const auto& [name, domain] : snapshot.domains) STOKE_RETURN_IF_ERROR(emit(domain));
  for (const auto& f : snapshot.files) {
    if (!typed) {
      STOKE_RETURN_IF_ERROR(emit(f));
      continue;
    }
    json row(ActionJson(f));
    typed->AddTo(f, &row["add"]);
    STOKE_RETURN_IF_ERROR(writer.AddRow(row));
  }
  for (const auto& r : snapshot.tombstones) STOKE_RETURN_IF_ERROR(emit(r));
  return Status::OK();
}

}  // namespace

Status WriteCheckpoint(Storage& storage, const std::string& log_dir, const Snapshot& snapshot) {
  // One classic file, one row per action, streamed in row groups of kCheckpointRowGroupActions: at
  // most one row group is in memory, and readers read the row groups in parallel. (Multi-part
  // checkpoints are deprecated, must be hash-partitioned by path, and a v2Checkpoint table forbids
  // them: PROTOCOL.md, "Multi-part checkpoint".)
  const bool v2_spec = UsesV2Spec(snapshot);
  STOKE_ASSIGN_OR_RETURN(const std::optional<TypedStats> typed, TypedStats::For(snapshot, log_dir));
  const size_t total = 2 + snapshot.app_versions.size() + snapshot.domains.size() + snapshot.files.size() +
                       snapshot.tombstones.size() + (v2_spec ? 1 : 0);
  WriterOptions options;
  options.codec = parquet::Codec::kSnappy;  // what Spark writes; every reader has it
  options.row_group_rows = static_cast<int64_t>(kCheckpointRowGroupActions);
  const std::string final_path = JoinPath(log_dir, CheckpointName(snapshot.version));
  const std::string tmp = final_path + ".tmp-checkpoint";
  auto fail = [&](Status s) {
    (void)storage.Delete(tmp);
    return s.WithContext(fmt::format("writing checkpoint {}", final_path));
  };
  auto writer = NestedParquetWriter::Create(storage, tmp, CheckpointSchema(v2_spec, typed ? typed->fields() : std::vector<SchemaNode>{}),
                                            options);
  if (!writer.ok()) return fail(writer.status());
  Status written = WriteActionRows(**writer, snapshot, v2_spec, typed);
  if (written.ok()) written = (*writer)->Close();
  writer->reset();
  if (written.ok()) written = storage.Rename(tmp, final_path);
  if (!written.ok()) return fail(written);
  const std::string last_text = json{{"version", snapshot.version}, {"size", total}}.dump();
  return WriteFileAtomically(storage, JoinPath(log_dir, "_last_checkpoint"), AsBytes(last_text));
}

std::vector<std::string> CheckpointFiles(const std::vector<std::string>& names, int64_t version) {
  const std::string classic = CheckpointName(version);
  const std::string prefix = fmt::format("{:020d}.checkpoint.", version);
  std::map<int64_t, std::vector<std::string>> parts_by_total;  // multi-part: parts -> names
  for (const auto& n : names) {
    if (n == classic || IsV2CheckpointName(n, version)) return {n};
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

void CheckpointActions::Add(Action&& action) {
  if (auto* add = std::get_if<AddFile>(&action)) {
    adds.push_back(std::move(*add));
  } else if (auto* rm = std::get_if<RemoveFile>(&action)) {
    removes.push_back(std::move(*rm));
  } else {
    others.push_back(std::move(action));
  }
}

void CheckpointActions::Append(CheckpointActions&& part) {
  if (adds.empty() && adds.capacity() < part.adds.size()) {
    adds = std::move(part.adds);
  } else {
    adds.insert(adds.end(), std::make_move_iterator(part.adds.begin()), std::make_move_iterator(part.adds.end()));
  }
  removes.insert(removes.end(), std::make_move_iterator(part.removes.begin()), std::make_move_iterator(part.removes.end()));
  others.insert(others.end(), std::make_move_iterator(part.others.begin()), std::make_move_iterator(part.others.end()));
  part = CheckpointActions{};
}

std::vector<Action> CheckpointActions::ToActions() && {
  std::vector<Action> out = std::move(others);
  out.reserve(out.size() + adds.size() + removes.size());
  for (auto& a : adds) out.push_back(std::move(a));
  for (auto& r : removes) out.push_back(std::move(r));
  *this = CheckpointActions{};
  return out;
}

namespace {

// Every add and remove path decodes (checked on the part's thread: the replay takes them as they
// are). A path without '%' or NUL decodes to itself and is checked without a copy.
Status CheckPaths(const CheckpointActions& part, const std::string& path) {
  auto check = [&](const std::string& p) -> Status {
    if (p.find_first_of(std::string_view("%\0", 2)) == std::string::npos) return Status::OK();
    auto decoded = DecodePath(p);
    if (!decoded.ok()) return Status::Corruption(fmt::format("{}: {}", path, decoded.status().message()));
    return Status::OK();
  };
  for (const AddFile& a : part.adds) STOKE_RETURN_IF_ERROR(check(a.path));
  for (const RemoveFile& r : part.removes) STOKE_RETURN_IF_ERROR(check(r.path));
  return Status::OK();
}

// The rows of a checkpoint (or sidecar) file read as JSON, one action per row. A V2 checkpoint's
// sidecar actions go to *sidecars (null for a sidecar file itself, where they are Corruption).
Status ReadCheckpointRows(const ParquetReader& reader, const std::string& log_dir, CheckpointActions* out,
                          std::vector<std::string>* sidecars) {
  const std::string& path = reader.path();
  STOKE_ASSIGN_OR_RETURN(auto rows, ReadNestedParquet(reader));
  for (size_t r = 0; r < rows.size(); ++r) {
    auto& row = rows[r];
    if (!row.is_object()) return Status::Corruption(fmt::format("{}: a row is not a struct", path));
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it->is_null() || it.key() == "commitInfo" || it.key() == "checkpointMetadata") continue;
      if (it.key() == "sidecar") {
        if (sidecars == nullptr) return Status::Corruption(fmt::format("{}: row {}: a sidecar names a sidecar", path, r + 1));
        STOKE_ASSIGN_OR_RETURN(std::string sidecar, SidecarPath(it.value(), log_dir, fmt::format("{}: row {}", path, r + 1)));
        sidecars->push_back(std::move(sidecar));
        continue;
      }
      json action = json::object();
      action[it.key()] = std::move(it.value());
      StripNulls(&action[it.key()]);
      STOKE_ASSIGN_OR_RETURN(auto parsed, ParseAction(action, path, r + 1));
      if (parsed) out->Add(std::move(*parsed));
    }
  }
  return Status::OK();
}

// One file of a checkpoint: a JSON V2 top-level file, or a Parquet file read column by column where
// it can be, else as rows.
Status ReadCheckpointFile(Storage& storage, const std::string& path, const std::string& log_dir, CheckpointActions* out,
                          std::vector<std::string>* sidecars) {
  if (path.ends_with(".json")) {
    if (sidecars == nullptr) return Status::Corruption(fmt::format("{}: a sidecar must be a Parquet file", path));
    STOKE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(storage, path));
    STOKE_RETURN_IF_ERROR(ReadJsonCheckpoint(text, path, log_dir, out, sidecars));
    return CheckPaths(*out, path);
  }
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(storage, path));
  Status columnar = ReadCheckpointColumns(*reader, out);
  if (columnar.ok()) return CheckPaths(*out, path);
  if (columnar.code() != StatusCode::kUnsupported) return columnar;
  *out = CheckpointActions{};  // the generic reader starts this file again
  STOKE_RETURN_IF_ERROR(ReadCheckpointRows(*reader, log_dir, out, sidecars));
  return CheckPaths(*out, path);
}

// Reads `paths` (in parallel when there are several) into one CheckpointActions, in order.
Result<CheckpointActions> ReadCheckpointFiles(Storage& storage, const std::vector<std::string>& paths,
                                              const std::string& log_dir, std::vector<std::string>* sidecars) {
  std::vector<CheckpointActions> part_actions(paths.size());
  std::vector<std::vector<std::string>> part_sidecars(paths.size());
  auto read_part = [&](size_t k) -> Status {
    return ReadCheckpointFile(storage, paths[k], log_dir, &part_actions[k], sidecars ? &part_sidecars[k] : nullptr);
  };
  if (paths.size() == 1) {
    STOKE_RETURN_IF_ERROR(read_part(0));
  } else if (!paths.empty()) {
    ThreadPool pool(std::min<size_t>(paths.size(), storage.remote() ? 16 : 0));
    STOKE_RETURN_IF_ERROR(ParallelFor(pool, paths.size(), read_part));
  }
  CheckpointActions out;
  size_t adds = 0;
  for (const auto& part : part_actions) adds += part.adds.size();
  out.adds.reserve(adds);
  for (auto& part : part_actions) out.Append(std::move(part));
  if (sidecars != nullptr) {
    for (auto& s : part_sidecars) sidecars->insert(sidecars->end(), s.begin(), s.end());
  }
  return out;
}

}  // namespace

Result<CheckpointActions> ReadCheckpoint(Storage& storage, const std::string& log_dir, int64_t version) {
  // Only this version's names (on an object store one short listing, however long the log).
  STOKE_ASSIGN_OR_RETURN(auto names, storage.ListNamesWithPrefix(log_dir, fmt::format("{:020d}.", version)));
  return ReadCheckpoint(storage, log_dir, version, names);
}

Result<CheckpointActions> ReadCheckpoint(Storage& storage, const std::string& log_dir, int64_t version,
                                         const std::vector<std::string>& names) {
  std::vector<std::string> files = CheckpointFiles(names, version);
  if (files.empty()) return Status::NotFound(fmt::format("{}: no complete checkpoint at version {}", log_dir, version));
  for (std::string& f : files) f = JoinPath(log_dir, f);
  // A V2 checkpoint's top-level file names sidecars holding its adds and removes (after its own).
  std::vector<std::string> sidecars;
  STOKE_ASSIGN_OR_RETURN(CheckpointActions out, ReadCheckpointFiles(storage, files, log_dir, &sidecars));
  if (sidecars.empty()) return out;
  STOKE_ASSIGN_OR_RETURN(CheckpointActions files_part, ReadCheckpointFiles(storage, sidecars, log_dir, nullptr));
  if (!files_part.others.empty()) {  // PROTOCOL.md, "Sidecar Files": add and remove actions only
    return Status::Corruption(fmt::format("{}: the sidecars of the checkpoint at version {} hold actions other than add "
                                          "and remove",
                                          log_dir, version));
  }
  out.Append(std::move(files_part));
  return out;
}

}  // namespace stoke::delta
