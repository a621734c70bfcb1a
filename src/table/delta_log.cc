// The Delta Lake transaction log. Protocol references are to delta-io/delta PROTOCOL.md.
//
// Decisions recorded here because readers of the code need them:
// - A commit line holds exactly one action object ({"add": {...}}). Unknown fields inside a known
//   action are ignored (the protocol requires it). Action kinds that readers may ignore (cdc,
//   domainMetadata, checkpointMetadata, sidecar) are skipped. Any other top-level key is
//   Corruption: a new action kind only ever appears together with a table feature in the protocol,
//   which stoke refuses anyway, so an unknown key in a table stoke accepts means a damaged or
//   foreign file, and silently dropping it could drop data.
// - Paths are compared in their decoded form (the protocol allows different encodings of one path).
//   Snapshot::tombstones is keyed by the decoded path, which is the file's name on storage.
// - Conflicts (Commit): a winner that changed protocol or metaData conflicts with every kind; a
//   winner that added a path this commit adds, or that carries a txn of an appId this commit
//   carries, conflicts too (Delta's ConcurrentTransactionException); for kRewrite, a winner that
//   removed a path this commit removes conflicts (ConcurrentDeleteDeleteException). A commit that
//   carries protocol/metaData, or creates the table, is treated as kExclusive whatever `kind` says;
//   a kBlindAppend that removes files is treated as kRewrite.
#include "table/delta_log.h"

#include "core/log.h"
#include "core/thread_pool.h"
#include "io/object_storage.h"
#include "table/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "core/mutex.h"
#include "core/random.h"
#include "core/text.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr char kEngineInfo[] = "stoke/0.1.0";
constexpr size_t kVersionDigits = 20;

// Action kinds readers may skip (PROTOCOL.md: "Change Data Files", "Domain Metadata",
// "Checkpoint Metadata", "Sidecar File Information").
constexpr const char* kIgnorableActions[] = {"cdc", "domainMetadata", "checkpointMetadata", "sidecar"};

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string Dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int64_t ParseVersionDigits(std::string_view digits) {
  int64_t v = 0;
  for (char c : digits) {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// What a file in _delta_log is, from its name.
struct LogFileName {
  enum Kind { kOther, kCommit, kCheckpoint } kind = kOther;
  int64_t version = -1;
};

LogFileName ClassifyLogFile(std::string_view name) {
  LogFileName out;
  if (name.size() < kVersionDigits + 1) return out;
  std::string_view digits = name.substr(0, kVersionDigits);
  std::string_view rest = name.substr(kVersionDigits);
  if (!IsDigits(digits)) return out;
  if (rest == ".json") {
    out.kind = LogFileName::kCommit;
  } else if (rest.starts_with(".checkpoint.") && (rest.ends_with(".parquet") || rest.ends_with(".json"))) {
    // Classic (".checkpoint.parquet"), multi-part and V2 (".checkpoint.<uuid>.json|parquet").
    out.kind = LogFileName::kCheckpoint;
  } else {
    return out;  // .crc, temporary files, compacted logs: not ours to read
  }
  out.version = ParseVersionDigits(digits);
  if (out.version < 0) out.kind = LogFileName::kOther;
  return out;
}

// The listing of _delta_log, reduced to what replay needs.
struct LogListing {
  std::set<int64_t> commits;           // versions with a commit file
  std::set<int64_t> checkpoints;       // versions with a checkpoint file
  std::vector<std::string> checkpoint_names;
  int64_t latest() const {
    int64_t v = commits.empty() ? -1 : *commits.rbegin();
    if (!checkpoints.empty()) v = std::max(v, *checkpoints.rbegin());
    return v;
  }
};

// ---------------------------------------------------------------------------------------------
// Parsing one action object.

// Reads the fields of one action, turning every type mismatch into Corruption naming the file,
// the line, the action and the field. JSON null is treated like an absent field.
class FieldReader {
 public:
  FieldReader(const json& obj, std::string_view action, std::string_view file, size_t line)
      : obj_(obj), action_(action), file_(file), line_(line) {}

  Status Error(std::string_view what) const {
    return Status::Corruption(fmt::format("{}: line {}: {}: {}", file_, line_, action_, what));
  }

  const json* Field(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status String(const char* key, std::string* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Error(fmt::format("missing string field \"{}\"", key));
    if (!f->is_string()) return Error(fmt::format("field \"{}\" must be a string", key));
    *out = f->get<std::string>();
    return Status::OK();
  }

  Status OptString(const char* key, std::optional<std::string>* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Status::OK();
    if (!f->is_string()) return Error(fmt::format("field \"{}\" must be a string", key));
    *out = f->get<std::string>();
    return Status::OK();
  }

  Status OptInt64(const char* key, std::optional<int64_t>* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Status::OK();
    if (!f->is_number_integer() || (f->is_number_unsigned() && f->get<uint64_t>() > uint64_t{INT64_MAX})) {
      return Error(fmt::format("field \"{}\" must be a 64-bit integer", key));
    }
    *out = f->get<int64_t>();
    return Status::OK();
  }

  Status Int64(const char* key, int64_t* out) const {
    std::optional<int64_t> v;
    STOKE_RETURN_IF_ERROR(OptInt64(key, &v));
    if (!v) return Error(fmt::format("missing integer field \"{}\"", key));
    *out = *v;
    return Status::OK();
  }

  Status Int32(const char* key, int32_t* out) const {
    int64_t v = 0;
    STOKE_RETURN_IF_ERROR(Int64(key, &v));
    if (v < INT32_MIN || v > INT32_MAX) return Error(fmt::format("field \"{}\" is out of the 32-bit range", key));
    *out = static_cast<int32_t>(v);
    return Status::OK();
  }

  Status OptBool(const char* key, std::optional<bool>* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Status::OK();
    if (!f->is_boolean()) return Error(fmt::format("field \"{}\" must be true or false", key));
    *out = f->get<bool>();
    return Status::OK();
  }

  Status Bool(const char* key, bool* out) const {
    std::optional<bool> v;
    STOKE_RETURN_IF_ERROR(OptBool(key, &v));
    if (!v) return Error(fmt::format("missing boolean field \"{}\"", key));
    *out = *v;
    return Status::OK();
  }

  // An object of strings; null values are skipped. Absent is an empty map.
  Status StringMap(const char* key, std::map<std::string, std::string>* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Status::OK();
    if (!f->is_object()) return Error(fmt::format("field \"{}\" must be an object of strings", key));
    for (auto it = f->begin(); it != f->end(); ++it) {
      if (it->is_null()) continue;
      if (!it->is_string()) return Error(fmt::format("field \"{}\": value of \"{}\" must be a string", key, it.key()));
      (*out)[it.key()] = it->get<std::string>();
    }
    return Status::OK();
  }

  // An object of strings or nulls (partitionValues). Absent is an empty map.
  Status NullableStringMap(const char* key, std::map<std::string, std::optional<std::string>>* out) const {
    const json* f = Field(key);
    if (f == nullptr) return Status::OK();
    if (!f->is_object()) return Error(fmt::format("field \"{}\" must be an object", key));
    for (auto it = f->begin(); it != f->end(); ++it) {
      if (it->is_null()) {
        (*out)[it.key()] = std::nullopt;
      } else if (it->is_string()) {
        (*out)[it.key()] = it->get<std::string>();
      } else {
        return Error(fmt::format("field \"{}\": value of \"{}\" must be a string or null", key, it.key()));
      }
    }
    return Status::OK();
  }

  Status StringList(const char* key, bool required, std::vector<std::string>* out) const {
    const json* f = Field(key);
    if (f == nullptr) {
      return required ? Error(fmt::format("missing array field \"{}\"", key)) : Status::OK();
    }
    if (!f->is_array()) return Error(fmt::format("field \"{}\" must be an array of strings", key));
    for (const auto& e : *f) {
      if (!e.is_string()) return Error(fmt::format("field \"{}\" must hold only strings", key));
      out->push_back(e.get<std::string>());
    }
    return Status::OK();
  }

 private:
  const json& obj_;
  std::string_view action_;
  std::string_view file_;
  size_t line_;
};

Result<Protocol> ParseProtocol(const FieldReader& r) {
  Protocol p;
  STOKE_RETURN_IF_ERROR(r.Int32("minReaderVersion", &p.min_reader_version));
  STOKE_RETURN_IF_ERROR(r.Int32("minWriterVersion", &p.min_writer_version));
  STOKE_RETURN_IF_ERROR(r.StringList("readerFeatures", false, &p.reader_features));
  STOKE_RETURN_IF_ERROR(r.StringList("writerFeatures", false, &p.writer_features));
  return p;
}

Result<Metadata> ParseMetadata(const FieldReader& r) {
  Metadata m;
  STOKE_RETURN_IF_ERROR(r.String("id", &m.id));
  STOKE_RETURN_IF_ERROR(r.OptString("name", &m.name));
  STOKE_RETURN_IF_ERROR(r.OptString("description", &m.description));
  const json* format = r.Field("format");
  if (format == nullptr || !format->is_object()) return r.Error("missing object field \"format\"");
  auto provider = format->find("provider");
  if (provider == format->end() || !provider->is_string()) {
    return r.Error("field \"format\" needs a string \"provider\"");
  }
  m.format_provider = provider->get<std::string>();
  auto options = format->find("options");
  if (options != format->end() && !options->is_null()) {
    if (!options->is_object()) return r.Error("field \"format.options\" must be an object of strings");
    for (auto it = options->begin(); it != options->end(); ++it) {
      if (it->is_null()) continue;
      if (!it->is_string()) return r.Error("field \"format.options\" must be an object of strings");
      m.format_options[it.key()] = it->get<std::string>();
    }
  }
  STOKE_RETURN_IF_ERROR(r.String("schemaString", &m.schema_string));
  STOKE_RETURN_IF_ERROR(r.StringList("partitionColumns", true, &m.partition_columns));
  STOKE_RETURN_IF_ERROR(r.StringMap("configuration", &m.configuration));
  STOKE_RETURN_IF_ERROR(r.OptInt64("createdTime", &m.created_time));
  return m;
}

Result<AddFile> ParseAdd(const FieldReader& r) {
  AddFile a;
  STOKE_RETURN_IF_ERROR(r.String("path", &a.path));
  if (a.path.empty()) return r.Error("field \"path\" is empty");
  STOKE_RETURN_IF_ERROR(r.NullableStringMap("partitionValues", &a.partition_values));
  STOKE_RETURN_IF_ERROR(r.Int64("size", &a.size));
  if (a.size < 0) return r.Error(fmt::format("field \"size\" is negative ({})", a.size));
  STOKE_RETURN_IF_ERROR(r.Int64("modificationTime", &a.modification_time));
  STOKE_RETURN_IF_ERROR(r.Bool("dataChange", &a.data_change));
  STOKE_RETURN_IF_ERROR(r.OptString("stats", &a.stats));
  STOKE_RETURN_IF_ERROR(r.StringMap("tags", &a.tags));
  return a;
}

Result<RemoveFile> ParseRemove(const FieldReader& r) {
  RemoveFile rm;
  STOKE_RETURN_IF_ERROR(r.String("path", &rm.path));
  if (rm.path.empty()) return r.Error("field \"path\" is empty");
  STOKE_RETURN_IF_ERROR(r.OptInt64("deletionTimestamp", &rm.deletion_timestamp));
  STOKE_RETURN_IF_ERROR(r.Bool("dataChange", &rm.data_change));
  std::optional<bool> extended;
  STOKE_RETURN_IF_ERROR(r.OptBool("extendedFileMetadata", &extended));
  rm.extended_file_metadata = extended.value_or(false);
  STOKE_RETURN_IF_ERROR(r.NullableStringMap("partitionValues", &rm.partition_values));
  STOKE_RETURN_IF_ERROR(r.OptInt64("size", &rm.size));
  if (rm.size && *rm.size < 0) return r.Error(fmt::format("field \"size\" is negative ({})", *rm.size));
  return rm;
}

Result<Txn> ParseTxn(const FieldReader& r) {
  Txn t;
  STOKE_RETURN_IF_ERROR(r.String("appId", &t.app_id));
  STOKE_RETURN_IF_ERROR(r.Int64("version", &t.version));
  STOKE_RETURN_IF_ERROR(r.OptInt64("lastUpdated", &t.last_updated));
  return t;
}

// ---------------------------------------------------------------------------------------------
// Serializing actions, with Spark's key order so that files read like Spark's.

ordered_json NullableMapJson(const std::map<std::string, std::optional<std::string>>& m) {
  ordered_json out = ordered_json::object();
  for (const auto& [k, v] : m) out[k] = v ? ordered_json(*v) : ordered_json(nullptr);
  return out;
}

ordered_json StringMapJson(const std::map<std::string, std::string>& m) {
  ordered_json out = ordered_json::object();
  for (const auto& [k, v] : m) out[k] = v;
  return out;
}

ordered_json ActionJson(const Action& action) {
  ordered_json line = ordered_json::object();
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        ordered_json o = ordered_json::object();
        if constexpr (std::is_same_v<T, Protocol>) {
          o["minReaderVersion"] = a.min_reader_version;
          o["minWriterVersion"] = a.min_writer_version;
          // Table features lists are required from reader version 3 / writer version 7 on.
          if (a.min_reader_version >= 3 || !a.reader_features.empty()) o["readerFeatures"] = a.reader_features;
          if (a.min_writer_version >= 7 || !a.writer_features.empty()) o["writerFeatures"] = a.writer_features;
          line["protocol"] = std::move(o);
        } else if constexpr (std::is_same_v<T, Metadata>) {
          o["id"] = a.id;
          if (a.name) o["name"] = *a.name;
          if (a.description) o["description"] = *a.description;
          o["format"] = ordered_json{{"provider", a.format_provider}, {"options", StringMapJson(a.format_options)}};
          o["schemaString"] = a.schema_string;
          o["partitionColumns"] = a.partition_columns;
          o["configuration"] = StringMapJson(a.configuration);
          if (a.created_time) o["createdTime"] = *a.created_time;
          line["metaData"] = std::move(o);
        } else if constexpr (std::is_same_v<T, AddFile>) {
          o["path"] = a.path;
          o["partitionValues"] = NullableMapJson(a.partition_values);
          o["size"] = a.size;
          o["modificationTime"] = a.modification_time;
          o["dataChange"] = a.data_change;
          if (a.stats) o["stats"] = *a.stats;
          if (!a.tags.empty()) o["tags"] = StringMapJson(a.tags);
          line["add"] = std::move(o);
        } else if constexpr (std::is_same_v<T, RemoveFile>) {
          o["path"] = a.path;
          if (a.deletion_timestamp) o["deletionTimestamp"] = *a.deletion_timestamp;
          o["dataChange"] = a.data_change;
          o["extendedFileMetadata"] = a.extended_file_metadata;
          if (!a.partition_values.empty() || a.extended_file_metadata) {
            o["partitionValues"] = NullableMapJson(a.partition_values);
          }
          if (a.size) o["size"] = *a.size;
          line["remove"] = std::move(o);
        } else if constexpr (std::is_same_v<T, Txn>) {
          o["appId"] = a.app_id;
          o["version"] = a.version;
          if (a.last_updated) o["lastUpdated"] = *a.last_updated;
          line["txn"] = std::move(o);
        } else {
          static_assert(std::is_same_v<T, CommitInfo>);
          line["commitInfo"] = a.value.is_object() ? ordered_json(a.value) : ordered_json::object();
        }
      },
      action);
  return line;
}

// ---------------------------------------------------------------------------------------------
// Protocol support.

Status CheckReadable(const Protocol& p, std::string_view where) {
  if (!p.reader_features.empty()) {
    return Status::Unsupported(fmt::format("{}: the table needs reader features [{}] (minReaderVersion {}) that stoke "
                                           "does not support",
                                           where, fmt::join(p.reader_features, ", "), p.min_reader_version));
  }
  if (p.min_reader_version == 2) {
    return Status::Unsupported(
        fmt::format("{}: the table needs reader version 2 (columnMapping), which stoke does not support", where));
  }
  if (p.min_reader_version > 3) {
    return Status::Unsupported(
        fmt::format("{}: the table needs reader version {}; stoke reads versions 1 and 3", where, p.min_reader_version));
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Replay.

class Replayer {
 public:
  // Applies the actions of one commit or checkpoint, in order. Adds and removes are moved out of
  // `actions` (a commit of 100,000s of files is not held twice); commitInfo stays.
  Status Apply(std::vector<Action>& actions, const std::string& file) {
    for (Action& action : actions) STOKE_RETURN_IF_ERROR(Apply(action, file));
    return Status::OK();
  }
  // Applies one action (an add or remove is moved out of it).
  Status Apply(Action& action, const std::string& file) {
    if (auto* add = std::get_if<AddFile>(&action)) {
      STOKE_ASSIGN_OR_RETURN(std::string key, DecodedPath(add->path, file));
      auto it = live_.find(key);
      if (it != live_.end()) adds_[it->second].reset();
      snapshot_.tombstones.erase(key);
      live_[std::move(key)] = adds_.size();
      adds_.push_back(std::move(*add));
    } else if (auto* rm = std::get_if<RemoveFile>(&action)) {
      STOKE_ASSIGN_OR_RETURN(std::string key, DecodedPath(rm->path, file));
      auto it = live_.find(key);
      if (it != live_.end()) {
        adds_[it->second].reset();
        live_.erase(it);
      }
      snapshot_.tombstones[std::move(key)] = std::move(*rm);
    } else if (const auto* p = std::get_if<Protocol>(&action)) {
      snapshot_.protocol = *p;
      has_protocol_ = true;
    } else if (const auto* m = std::get_if<Metadata>(&action)) {
      snapshot_.metadata = *m;
      has_metadata_ = true;
    } else if (const auto* t = std::get_if<Txn>(&action)) {
      auto [it, inserted] = snapshot_.app_versions.emplace(t->app_id, t->version);
      if (!inserted) it->second = std::max(it->second, t->version);
    }
    return Status::OK();
  }

  Result<Snapshot> Finish(int64_t version, int64_t timestamp, const std::string& log_dir) && {
    if (!has_protocol_) return Status::Corruption(fmt::format("{}: no protocol action in versions 0..{}", log_dir, version));
    if (!has_metadata_) return Status::Corruption(fmt::format("{}: no metaData action in versions 0..{}", log_dir, version));
    snapshot_.version = version;
    snapshot_.timestamp = timestamp;
    snapshot_.files.reserve(live_.size());
    for (auto& a : adds_) {
      if (a) snapshot_.files.push_back(std::move(*a));
    }
    return std::move(snapshot_);
  }

 private:
  static Result<std::string> DecodedPath(const std::string& path, const std::string& file) {
    auto decoded = DecodePath(path);
    if (!decoded.ok()) return Status::Corruption(fmt::format("{}: {}", file, decoded.status().message()));
    return std::move(decoded).value();
  }

  Snapshot snapshot_;
  std::vector<std::optional<AddFile>> adds_;          // in the order added; reset when superseded
  std::unordered_map<std::string, size_t> live_;      // decoded path -> index in adds_
  bool has_protocol_ = false;
  bool has_metadata_ = false;
};

// commitInfo.timestamp, when it is there and an int64.
std::optional<int64_t> CommitTimestamp(const CommitInfo& ci) {
  auto it = ci.value.find("timestamp");
  if (it != ci.value.end() && it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it != ci.value.end() && it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t{INT64_MAX}) {
    return it->get<int64_t>();
  }
  return std::nullopt;
}

// The commitInfo.timestamp of a commit, when it has one.
std::optional<int64_t> CommitTimestamp(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (const auto* ci = std::get_if<CommitInfo>(&a)) {
      if (auto ts = CommitTimestamp(*ci)) return ts;
    }
  }
  return std::nullopt;
}

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

// ---------------------------------------------------------------------------------------------
// Spark schema types.

std::string_view SparkTypeName(const ColumnSpec& c) {
  switch (c.type) {
    case parquet::Type::kBoolean: return "boolean";
    case parquet::Type::kInt32: return "integer";
    case parquet::Type::kInt64: return "long";
    case parquet::Type::kFloat: return "float";
    case parquet::Type::kDouble: return "double";
    case parquet::Type::kByteArray: return (c.is_string && !c.tensor) ? "string" : "binary";
    default: return "binary";  // INT96 / FIXED_LEN_BYTE_ARRAY: stoke never writes them
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Commit files.

Result<std::optional<Action>> ParseAction(const json& j, std::string_view file_name, size_t line_no) {
  auto bad = [&](std::string_view what) {
    return Status::Corruption(fmt::format("{}: line {}: {}", file_name, line_no, what));
  };
  if (!j.is_object()) return bad("expected a JSON object holding one action");
  if (j.size() != 1) {
    return bad(fmt::format("expected exactly one action key per line, found {}", j.size()));
  }
  const std::string& kind = j.begin().key();
  const json& body = j.begin().value();
  if (std::find(std::begin(kIgnorableActions), std::end(kIgnorableActions), kind) != std::end(kIgnorableActions)) {
    return std::optional<Action>();
  }
  if (!body.is_object()) return bad(fmt::format("action \"{}\" must be a JSON object", kind));
  FieldReader r(body, kind, file_name, line_no);
  if (kind == "add") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseAdd(r));
    return std::optional<Action>(std::move(a));
  }
  if (kind == "remove") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseRemove(r));
    return std::optional<Action>(std::move(a));
  }
  if (kind == "metaData") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseMetadata(r));
    return std::optional<Action>(std::move(a));
  }
  if (kind == "protocol") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseProtocol(r));
    return std::optional<Action>(std::move(a));
  }
  if (kind == "txn") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseTxn(r));
    return std::optional<Action>(std::move(a));
  }
  if (kind == "commitInfo") return std::optional<Action>(CommitInfo{body});
  return bad(fmt::format("unknown action \"{}\" (expected add, remove, metaData, protocol, txn, commitInfo, or "
                         "one of the ignorable cdc, domainMetadata, checkpointMetadata, sidecar)",
                         kind));
}

namespace {

// One line of a commit file (without its '\n'): the action it holds, or nullopt for a blank line or
// an action kind readers may ignore.
Result<std::optional<Action>> ParseCommitLine(std::string_view line, std::string_view file_name, size_t line_no) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return std::optional<Action>();
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Status::Corruption(
        fmt::format("{}: line {}: not valid JSON (expected one action object per line)", file_name, line_no));
  }
  return ParseAction(j, file_name, line_no);
}

}  // namespace

Result<std::vector<Action>> ParseCommit(std::string_view text, std::string_view file_name) {
  std::vector<Action> out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    STOKE_ASSIGN_OR_RETURN(auto action, ParseCommitLine(line, file_name, ++line_no));
    if (action) out.push_back(std::move(*action));
  }
  return out;
}

Status ForEachCommitAction(Storage& storage, const std::string& path, const std::function<Status(Action&)>& each,
                           uint64_t chunk_bytes) {
  const uint64_t kChunk = std::max<uint64_t>(chunk_bytes, 1);
  STOKE_ASSIGN_OR_RETURN(auto file, storage.OpenForRead(path));
  const uint64_t size = file->size();
  std::string buffer;  // the unparsed tail of what has been read: at most one partial line, then a chunk
  uint64_t offset = 0;
  size_t line_no = 0;
  while (offset < size || !buffer.empty()) {
    if (offset < size) {
      const size_t kept = buffer.size();
      const uint64_t n = std::min(kChunk, size - offset);
      buffer.resize(kept + n);
      STOKE_RETURN_IF_ERROR(file->ReadAt(offset, MutableByteView(reinterpret_cast<uint8_t*>(buffer.data()) + kept, n)));
      offset += n;
    }
    size_t pos = 0;
    for (;;) {
      size_t end = buffer.find('\n', pos);
      if (end == std::string::npos) {
        if (offset < size) break;  // a partial line: read on
        end = buffer.size();       // the last line, without a final newline
      }
      STOKE_ASSIGN_OR_RETURN(auto action, ParseCommitLine(std::string_view(buffer).substr(pos, end - pos), path, ++line_no));
      if (action) STOKE_RETURN_IF_ERROR(each(*action));
      pos = end + 1;
      if (pos >= buffer.size()) break;
    }
    buffer.erase(0, std::min(pos, buffer.size()));
  }
  return Status::OK();
}

std::string SerializeCommit(const std::vector<Action>& actions) {
  std::string out;
  for (const Action& a : actions) {
    out += Dump(ActionJson(a));
    out += '\n';
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Snapshot.

namespace {

// The top-level "numRecords" of a stats JSON object, read as parse events (no document is built:
// a table of 100,000s of files has as many of these). -1 when it is missing, not a non-negative
// int64, or the text is not a JSON object; the last of duplicate keys wins.
class NumRecordsEvents : public nlohmann::json_sax<json> {
 public:
  int64_t records() const { return records_; }
  bool null() override { return Value(-1); }
  bool boolean(bool) override { return Value(-1); }
  bool number_integer(number_integer_t v) override { return Value(v >= 0 ? v : -1); }
  bool number_unsigned(number_unsigned_t v) override {
    return Value(v <= uint64_t{INT64_MAX} ? static_cast<int64_t>(v) : -1);
  }
  bool number_float(number_float_t, const string_t&) override { return Value(-1); }
  bool string(string_t&) override { return Value(-1); }
  bool binary(binary_t&) override { return Value(-1); }
  bool start_object(std::size_t) override { return Open(true); }
  bool start_array(std::size_t) override { return Open(false); }
  bool end_object() override { return --depth_, true; }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& k) override {
    if (depth_ == 1) at_records_ = k == "numRecords";
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool Value(int64_t v) {
    if (depth_ == 0) return false;  // not an object
    if (depth_ == 1 && at_records_) records_ = v;
    return true;
  }
  bool Open(bool object) {
    if (depth_ == 0 && !object) return false;
    if (depth_ == 1 && at_records_) records_ = -1;
    ++depth_;
    return true;
  }
  int depth_ = 0;
  bool at_records_ = false;
  int64_t records_ = -1;
};

}  // namespace

int64_t Snapshot::num_records() const {
  // Sums of chunks of files, on every core when there are many.
  constexpr size_t kChunk = 8192;
  const size_t chunks = (files.size() + kChunk - 1) / kChunk;
  std::vector<int64_t> sums(chunks, 0);
  auto sum_chunk = [&](size_t c) -> Status {
    int64_t total = 0;
    for (size_t i = c * kChunk; i < std::min(files.size(), (c + 1) * kChunk); ++i) {
      const AddFile& f = files[i];
      NumRecordsEvents events;
      if (!f.stats || !json::sax_parse(*f.stats, &events) || events.records() < 0 ||
          __builtin_add_overflow(total, events.records(), &total)) {
        total = -1;
        break;
      }
    }
    sums[c] = total;
    return Status::OK();
  };
  if (chunks > 1) {
    ThreadPool pool(0);
    (void)ParallelFor(pool, chunks, sum_chunk);
  } else if (chunks == 1) {
    (void)sum_chunk(0);
  }
  int64_t total = 0;
  for (int64_t s : sums) {
    if (s < 0 || __builtin_add_overflow(total, s, &total)) return -1;
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// DeltaLog.

namespace {

Result<LogListing> ListLog(Storage& storage, const std::string& log_dir) {
  LogListing out;
  auto names = storage.ListNames(log_dir);
  if (!names.ok()) {
    if (names.status().code() == StatusCode::kNotFound) return out;
    return names.status();
  }
  for (const std::string& name : *names) {
    // _last_checkpoint only saves object stores a listing; the listing here finds checkpoints.
    LogFileName n = ClassifyLogFile(name);
    if (n.kind == LogFileName::kCommit) out.commits.insert(n.version);
    if (n.kind == LogFileName::kCheckpoint) {
      out.checkpoints.insert(n.version);
      out.checkpoint_names.push_back(name);
    }
  }
  return out;
}

// A commit's modification time (ms), the fallback timestamp of a commit without commitInfo.timestamp.
int64_t FileTime(Storage& storage, const std::string& path) {
  auto st = storage.Stat(path);
  return st.ok() ? st->modification_time_ms : 0;
}

// The commitInfo timestamp of a commit from its first line only (writers put commitInfo first), so
// that a snapshot taken from a checkpoint does not parse a commit of 100,000s of actions again.
// nullopt when the first line is not a commitInfo with a timestamp, or the file cannot be read.
std::optional<int64_t> FirstLineTimestamp(Storage& storage, const std::string& path) {
  constexpr uint64_t kHead = 64 * 1024;
  auto file = storage.OpenForRead(path);
  if (!file.ok()) return std::nullopt;
  std::string head(static_cast<size_t>(std::min<uint64_t>((*file)->size(), kHead)), '\0');
  if (!(*file)->ReadAt(0, MutableByteView(reinterpret_cast<uint8_t*>(head.data()), head.size())).ok()) return std::nullopt;
  const size_t nl = head.find('\n');
  if (nl == std::string::npos && head.size() == kHead) return std::nullopt;  // a first line longer than that
  auto actions = ParseCommit(std::string_view(head).substr(0, nl), path);
  if (!actions.ok()) return std::nullopt;
  return CommitTimestamp(*actions);
}

}  // namespace

DeltaLog::DeltaLog(Storage& storage, std::string table_dir) : storage_(storage), table_dir_(std::move(table_dir)) {}

std::string DeltaLog::log_dir() const { return JoinPath(table_dir_, kLogDirName); }

std::string DeltaLog::CommitPath(int64_t version) const {
  return JoinPath(log_dir(), fmt::format("{:020d}.json", version));
}

Result<int64_t> DeltaLog::LatestVersion() const {
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListLog(storage_, log_dir()));
  return listing.latest();
}

Result<Snapshot> DeltaLog::ReadSnapshot(std::optional<int64_t> version) const {
  const std::string dir = log_dir();
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListLog(storage_, dir));
  const int64_t latest = listing.latest();
  if (latest < 0) return Status::NotFound(fmt::format("no Delta table at '{}' (no commits in {})", table_dir_, dir));
  const int64_t target = version.value_or(latest);
  if (target < 0 || target > latest) {
    return Status::NotFound(
        fmt::format("table '{}' has no version {} (versions 0..{} exist)", table_dir_, target, latest));
  }
  // Start from the newest complete checkpoint at or below `target`; then every commit after it up
  // to `target` must be there. An unreadable checkpoint is skipped when the commits it summarises
  // are all present.
  Replayer replayer;
  int64_t start = 0;
  std::string checkpoint_path;
  for (auto it = listing.checkpoints.rbegin(); it != listing.checkpoints.rend(); ++it) {
    const int64_t cp = *it;
    if (cp > target || CheckpointFiles(listing.checkpoint_names, cp).empty()) continue;
    auto actions = ReadCheckpoint(storage_, dir, cp);
    if (!actions.ok()) {
      bool commits_cover = static_cast<int64_t>(std::distance(listing.commits.begin(), listing.commits.upper_bound(cp))) == cp + 1;
      if (!commits_cover) return actions.status();
      STOKE_LOG(kWarn, "delta.checkpoint_unreadable", "table={} version={} error=\"{}\"", table_dir_, cp,
                actions.status().ToString());
      continue;
    }
    checkpoint_path = JoinPath(dir, fmt::format("{:020d}.checkpoint.parquet", cp));
    STOKE_RETURN_IF_ERROR(replayer.Apply(*actions, checkpoint_path));
    start = cp + 1;
    break;
  }
  for (int64_t v = start; v <= target; ++v) {
    if (listing.commits.count(v)) continue;
    return Status::Corruption(fmt::format("{}: commit {} ({:020d}.json) is missing (versions {}..{} are needed for version {}{})",
                                          dir, v, v, start, target, target,
                                          start > 0 ? fmt::format(", after the checkpoint at version {}", start - 1) : ""));
  }
  int64_t timestamp = 0;
  for (int64_t v = start; v <= target; ++v) {
    const std::string path = CommitPath(v);
    std::optional<int64_t> ts;
    Status read = ForEachCommitAction(storage_, path, [&](Action& action) {
      if (const auto* ci = std::get_if<CommitInfo>(&action)) {
        if (!ts) ts = CommitTimestamp(*ci);
        return Status::OK();
      }
      return replayer.Apply(action, path);
    });
    if (!read.ok()) {
      if (read.code() == StatusCode::kNotFound) {
        return Status::Corruption(fmt::format("{}: commit {} vanished while reading the log", path, v));
      }
      return read;
    }
    // The file's time only when the commit has no timestamp (a stat is a request on object stores).
    if (v == target) timestamp = ts ? *ts : FileTime(storage_, path);
  }
  if (start > target) {  // the snapshot is the checkpoint itself
    std::optional<int64_t> ts = FirstLineTimestamp(storage_, CommitPath(target));
    if (!ts) {
      auto st = storage_.Stat(checkpoint_path);
      ts = st.ok() ? st->modification_time_ms : 0;
    }
    timestamp = *ts;
  }
  STOKE_ASSIGN_OR_RETURN(Snapshot snapshot, std::move(replayer).Finish(target, timestamp, dir));
  STOKE_RETURN_IF_ERROR(CheckReadable(snapshot.protocol, fmt::format("'{}' version {}", table_dir_, target)));
  return snapshot;
}

Status DeltaLog::Checkpoint(std::optional<int64_t> version) const {
  STOKE_ASSIGN_OR_RETURN(Snapshot snapshot, ReadSnapshot(version));
  return WriteCheckpoint(storage_, log_dir(), snapshot);
}

Result<std::vector<CommitSummary>> DeltaLog::History(int64_t limit) const {
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListLog(storage_, log_dir()));
  if (listing.commits.empty()) return Status::NotFound(fmt::format("no Delta table at '{}'", table_dir_));
  std::vector<CommitSummary> out;
  for (auto it = listing.commits.rbegin(); it != listing.commits.rend(); ++it) {
    const int64_t version = *it;
    if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
    const std::string path = CommitPath(version);
    CommitSummary s;
    s.version = version;
    s.info = nullptr;
    std::optional<int64_t> ts;
    STOKE_RETURN_IF_ERROR(ForEachCommitAction(storage_, path, [&](Action& a) {
      if (const auto* ci = std::get_if<CommitInfo>(&a)) {
        if (!ts) ts = CommitTimestamp(*ci);
        s.info = ci->value;
        auto op = ci->value.find("operation");
        if (op != ci->value.end() && op->is_string()) s.operation = op->get<std::string>();
      } else if (const auto* add = std::get_if<AddFile>(&a)) {
        ++s.files_added;
        s.bytes_added += add->size;
      } else if (const auto* rm = std::get_if<RemoveFile>(&a)) {
        ++s.files_removed;
        s.bytes_removed += rm->size.value_or(0);
      }
      return Status::OK();
    }));
    s.timestamp = ts ? *ts : FileTime(storage_, path);
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// Commits on an object store are conditional puts (If-None-Match: *). A server that ignores the
// condition (s3rver does; so did S3 before August 2024) would let a second writer overwrite a
// commit, losing it. Probed once per process and table (two small PUTs and a DELETE under
// _delta_log); such a server is refused unless STOKE_SINGLE_WRITER=1 says only this process writes.
Status CheckConditionalCommits(Storage& storage, const std::string& table_dir) {
  static Mutex mu;
  static std::map<std::pair<const Storage*, std::string>, Status> probed GUARDED_BY(mu);
  MutexLock lock(&mu);
  auto key = std::make_pair(static_cast<const Storage*>(&storage), table_dir);
  auto it = probed.find(key);
  if (it == probed.end()) {
    Status probe = ProbeConditionalPut(storage, JoinPath(table_dir, kLogDirName));
    if (probe.code() == StatusCode::kUnsupported) {
      const char* single = std::getenv("STOKE_SINGLE_WRITER");
      if (single != nullptr && std::string(single) == "1") {
        STOKE_LOG(kWarn, "delta.unconditional_commits", "table={} (STOKE_SINGLE_WRITER=1: committing without a guard)",
                  table_dir);
        probe = Status::OK();
      } else {
        probe = Status::Unsupported(fmt::format(
            "the object store holding '{}' ignores conditional writes (If-None-Match), so two writers could "
            "overwrite each other's commit; if only this process writes to the table, set STOKE_SINGLE_WRITER=1",
            table_dir));
      }
    }
    // A failed probe (the network, say) is not remembered: the next commit probes again.
    if (!probe.ok() && probe.code() != StatusCode::kUnsupported) return probe;
    it = probed.emplace(key, probe).first;
  }
  return it->second;
}

}  // namespace

Status CheckConcurrentCommit(const CommitClaims& mine, const std::vector<Action>& winner, int64_t winner_version,
                             std::string_view table_dir) {
  auto conflict = [&](std::string_view why) {
    return Status::Conflict(fmt::format("table '{}': concurrent commit at version {} {}; this commit (read version {}) was not written",
                                        table_dir, winner_version, why, mine.read_version));
  };
  if (mine.kind == CommitKind::kExclusive && !(mine.exclusive_allows && mine.exclusive_allows(winner))) {
    return conflict(mine.read_version == -1 ? "created the table first" : "came first, and this commit depends on the version it read");
  }
  for (const Action& a : winner) {
    if (std::holds_alternative<Protocol>(a)) return conflict("changed the protocol");
    if (std::holds_alternative<Metadata>(a)) return conflict("changed the table metadata");
    if (const auto* t = std::get_if<Txn>(&a); t && mine.app_ids.count(t->app_id)) {
      return conflict(fmt::format("carries a transaction of the same application '{}'", t->app_id));
    }
    if (const auto* add = std::get_if<AddFile>(&a)) {
      auto p = DecodePath(add->path);
      if (p.ok() && mine.adds.count(*p)) return conflict(fmt::format("added the same file '{}'", *p));
    }
    if (const auto* rm = std::get_if<RemoveFile>(&a)) {
      auto p = DecodePath(rm->path);
      if (p.ok() && mine.removes.count(*p)) return conflict(fmt::format("removed '{}', which this commit removes", *p));
    }
  }
  return Status::OK();
}

Result<int64_t> DeltaLog::Commit(int64_t read_version, std::vector<Action> actions, CommitKind kind,
                                 const std::string& operation, const nlohmann::json& operation_parameters,
                                 int max_attempts, std::function<bool(const std::vector<Action>&)> exclusive_allows) const {
  if (read_version < -1) return Status::InvalidArgument(fmt::format("Commit: read_version {} < -1", read_version));
  if (max_attempts < 1) return Status::InvalidArgument("Commit: max_attempts must be at least 1");

  // What this commit touches, for the conflict checks.
  CommitClaims claims;
  claims.read_version = read_version;
  std::set<std::string>& adds = claims.adds;
  std::set<std::string>& removes = claims.removes;
  std::set<std::string>& app_ids = claims.app_ids;
  bool has_protocol = false, has_metadata = false;
  int commit_infos = 0;
  for (Action& a : actions) {
    if (auto* add = std::get_if<AddFile>(&a)) {
      auto p = DecodePath(add->path);
      if (!p.ok() || p->empty()) return Status::InvalidArgument(fmt::format("Commit: bad add path '{}'", add->path));
      adds.insert(*p);
    } else if (auto* rm = std::get_if<RemoveFile>(&a)) {
      auto p = DecodePath(rm->path);
      if (!p.ok() || p->empty()) return Status::InvalidArgument(fmt::format("Commit: bad remove path '{}'", rm->path));
      removes.insert(*p);
    } else if (std::holds_alternative<Protocol>(a)) {
      has_protocol = true;
    } else if (auto* m = std::get_if<Metadata>(&a)) {
      has_metadata = true;
      if (m->id.empty()) m->id = RandomUuid();
      if (!m->created_time && read_version == -1) m->created_time = NowMillis();
    } else if (auto* t = std::get_if<Txn>(&a)) {
      app_ids.insert(t->app_id);
    } else if (std::holds_alternative<CommitInfo>(a)) {
      ++commit_infos;
    }
  }
  if (commit_infos > 1) return Status::InvalidArgument("Commit: at most one commitInfo action per commit");
  if (read_version == -1 && (!has_protocol || !has_metadata)) {
    return Status::InvalidArgument(
        fmt::format("Commit: creating the table at '{}' needs a protocol and a metaData action", table_dir_));
  }
  CommitKind effective = kind;
  if (read_version == -1 || has_protocol || has_metadata) {
    effective = CommitKind::kExclusive;
    exclusive_allows = nullptr;  // creating the table or changing metadata never goes on top of a winner
  } else if (kind == CommitKind::kBlindAppend && !removes.empty()) {
    effective = CommitKind::kRewrite;
  }
  claims.kind = effective;
  claims.exclusive_allows = std::move(exclusive_allows);

  if (commit_infos == 0) {
    json params = json::object();
    if (!operation_parameters.is_null()) {
      if (!operation_parameters.is_object()) {
        return Status::InvalidArgument("Commit: operation_parameters must be a JSON object");
      }
      // Spark writes every parameter value as a JSON string.
      for (auto it = operation_parameters.begin(); it != operation_parameters.end(); ++it) {
        params[it.key()] = it->is_string() ? it->get<std::string>() : Dump(*it);
      }
    }
    json info = json::object();
    info["timestamp"] = NowMillis();
    info["operation"] = operation;
    info["operationParameters"] = std::move(params);
    if (read_version >= 0) info["readVersion"] = read_version;
    info["isBlindAppend"] = effective == CommitKind::kBlindAppend;
    info["engineInfo"] = kEngineInfo;
    actions.insert(actions.begin(), CommitInfo{std::move(info)});
  }
  if (read_version == -1) {
    STOKE_RETURN_IF_ERROR(storage_.CreateDirectories(log_dir()));
  } else {
    auto st = storage_.Stat(CommitPath(read_version));
    if (!st.ok()) {
      if (st.status().code() == StatusCode::kNotFound) {
        return Status::NotFound(
            fmt::format("Commit: table '{}' has no version {} to commit on top of", table_dir_, read_version));
      }
      return st.status();
    }
  }

  if (storage_.CreateIsAtomic()) STOKE_RETURN_IF_ERROR(CheckConditionalCommits(storage_, table_dir_));

  // The commit's JSON, serialised one action at a time, each freed once written, so that a commit of
  // 100,000s of files is never held twice; from here on only the claims are needed. Where files can
  // be linked (local disks) it goes to a temporary file in the log directory, synced, and published
  // under the version's name by PublishIfAbsent, so it is never in memory whole (322 MB at 650,000
  // adds). On object stores, where a temporary object would cost two more requests, it is built in
  // memory and PUT with PutIfAbsent.
  const size_t num_actions = actions.size();
  const bool staged = !storage_.CreateIsAtomic();
  std::string bytes;
  std::string staged_path;  // staged: the temporary file, until published
  struct DeleteUnpublished {
    Storage& storage;
    const std::string& path;
    ~DeleteUnpublished() {
      if (!path.empty()) (void)storage.Delete(path);
    }
  } delete_unpublished{storage_, staged_path};
  if (staged) {
    staged_path = JoinPath(log_dir(), fmt::format(".commit-{}.json.tmp", RandomUuid()));
    STOKE_ASSIGN_OR_RETURN(auto file, storage_.Create(staged_path, /*exclusive=*/true));
    constexpr size_t kFlushBytes = 1 << 20;
    for (Action& a : actions) {
      bytes += Dump(ActionJson(a));
      bytes += '\n';
      a = CommitInfo{};
      if (bytes.size() >= kFlushBytes) {
        STOKE_RETURN_IF_ERROR(file->Append(AsBytes(bytes)));
        bytes.clear();
      }
    }
    std::vector<Action>().swap(actions);
    if (!bytes.empty()) STOKE_RETURN_IF_ERROR(file->Append(AsBytes(bytes)));
    std::string().swap(bytes);
    STOKE_RETURN_IF_ERROR(file->Sync());
    STOKE_RETURN_IF_ERROR(file->Close());
  } else {
    for (Action& a : actions) {
      bytes += Dump(ActionJson(a));
      bytes += '\n';
      a = CommitInfo{};
    }
    std::vector<Action>().swap(actions);
  }

  int64_t version = read_version + 1;
  int64_t checked = read_version;  // winners up to here hold nothing that conflicts
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    Status s = staged ? storage_.PublishIfAbsent(staged_path, CommitPath(version))
                      : storage_.PutIfAbsent(CommitPath(version), AsBytes(bytes));
    if (s.ok()) {
      staged_path.clear();  // published: nothing to delete
      // A checkpoint every kCheckpointInterval versions, and after a commit of very many actions,
      // keeps opening fast. It only speeds up reads, so failing to write one does not fail the commit.
      if ((version > 0 && version % kCheckpointInterval == 0) || num_actions > kCheckpointAfterActions) {
        std::string().swap(bytes);  // the commit's JSON (322 MB at 650,000 adds) is not held during the replay

        Status cs = Checkpoint(version);
        if (!cs.ok()) STOKE_LOG(kWarn, "delta.checkpoint_failed", "table={} version={} error=\"{}\"", table_dir_, version, cs.ToString());
      }
      return version;
    }
    if (s.code() != StatusCode::kAlreadyExists) return s;
    if (effective == CommitKind::kExclusive && !claims.exclusive_allows) {
      return Status::Conflict(fmt::format(
          "table '{}': version {} was committed by another writer first; a {} commit cannot be retried on top of it",
          table_dir_, version, read_version == -1 ? "table-creating" : "metadata-changing"));
    }
    STOKE_ASSIGN_OR_RETURN(int64_t latest, LatestVersion());
    latest = std::max(latest, version);
    for (int64_t w = checked + 1; w <= latest; ++w) {
      const std::string path = CommitPath(w);
      auto text = ReadFileToString(storage_, path);
      if (!text.ok()) {
        if (text.status().code() == StatusCode::kNotFound) {
          return Status::Corruption(fmt::format("{}: winning commit {} is missing", log_dir(), w));
        }
        return text.status();
      }
      STOKE_ASSIGN_OR_RETURN(auto winner, ParseCommit(*text, path));
      STOKE_RETURN_IF_ERROR(CheckConcurrentCommit(claims, winner, w, table_dir_));
      checked = w;
    }
    version = latest + 1;
  }
  return Status::Conflict(fmt::format("table '{}': gave up after {} attempts lost to concurrent writers (last tried version {})",
                                      table_dir_, max_attempts, version));
}

// ---------------------------------------------------------------------------------------------
// Schema.

std::string SchemaToSparkJson(const std::vector<ColumnSpec>& columns) {
  ordered_json fields = ordered_json::array();
  for (const ColumnSpec& c : columns) {
    ordered_json f = ordered_json::object();
    f["name"] = c.name;
    f["type"] = SparkTypeName(c);
    f["nullable"] = c.optional;
    f["metadata"] = ordered_json::object();
    fields.push_back(std::move(f));
  }
  ordered_json schema = ordered_json::object();
  schema["type"] = "struct";
  schema["fields"] = std::move(fields);
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
      auto nested = ftype->find("type");
      std::string what = (nested != ftype->end() && nested->is_string()) ? nested->get<std::string>() : "nested";
      return Status::Unsupported(fmt::format("Delta schema: column '{}' has the nested type '{}'; stoke supports flat "
                                             "columns of boolean, integer, long, float, double, string and binary",
                                             c.name, what));
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
    } else {
      return Status::Unsupported(fmt::format("Delta schema: column '{}' has type '{}'; stoke supports boolean, "
                                             "integer, long, float, double, string and binary",
                                             c.name, t));
    }
    auto nullable = f.find("nullable");
    if (nullable != f.end() && !nullable->is_null()) {
      if (!nullable->is_boolean()) return bad(fmt::format("column '{}': \"nullable\" must be true or false", c.name));
      c.optional = nullable->get<bool>();
    } else {
      c.optional = true;  // Spark's default
    }
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

Result<std::vector<ColumnSpec>> ColumnsFromMetadata(const Metadata& metadata, std::string_view context) {
  std::map<std::string, TensorSpec> tensors;
  auto it = metadata.configuration.find(kTensorsMetadataKey);
  if (it != metadata.configuration.end()) {
    STOKE_ASSIGN_OR_RETURN(tensors, TensorSpecsFromJson(it->second, context));
  }
  STOKE_ASSIGN_OR_RETURN(auto columns, SchemaFromSparkJson(metadata.schema_string, tensors));
  it = metadata.configuration.find(kBlobsMetadataKey);
  if (it != metadata.configuration.end()) {
    STOKE_ASSIGN_OR_RETURN(auto blobs, BlobColumnsFromJson(it->second, context));
    for (const std::string& name : blobs) {
      auto c = std::find_if(columns.begin(), columns.end(), [&](const ColumnSpec& col) { return col.name == name; });
      if (c == columns.end() || c->type != parquet::Type::kByteArray || c->is_string || c->tensor) {
        return Status::Corruption(fmt::format("{}: {} names column '{}', which is not a binary column of the schema", context,
                                              kBlobsMetadataKey, name));
      }
      c->blob = true;
    }
  }
  return columns;
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
      const parquet::ColumnMetaData* md = FindChunk(rg, c.name);
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
      min_values[c.name] = StatJson(*lo);
      max_values[c.name] = StatJson(*hi);
    }
    if (nulls_ok) null_count[c.name] = nulls;
  }
  ordered_json stats = ordered_json::object();
  stats["numRecords"] = footer.num_rows;
  stats["minValues"] = std::move(min_values);
  stats["maxValues"] = std::move(max_values);
  stats["nullCount"] = std::move(null_count);
  return Dump(stats);
}

// ---------------------------------------------------------------------------------------------
// Paths.

std::string JsonArrayText(const std::string& item) {
  if (item.empty()) return "[]";
  return json::array({item}).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EncodePath(std::string_view relative_path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(relative_path.size());
  for (char ch : relative_path) {
    unsigned char c = static_cast<unsigned char>(ch);
    // RFC 3986 path characters stay as they are: unreserved, sub-delims, ':' and '@', and '/'
    // between segments (Spark writes "split=train/part-...").
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '.' || c == '_' || c == '~' || c == '/';
    bool path_char = c && std::string_view("!$&'()*+,;=:@").find(static_cast<char>(c)) != std::string_view::npos;
    if (unreserved || path_char) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

Result<std::string> DecodePath(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      if (encoded[i] == '\0') return Status::InvalidArgument("path holds a NUL byte");
      out += encoded[i];
      continue;
    }
    if (i + 2 >= encoded.size()) {
      return Status::InvalidArgument(fmt::format("path '{}': truncated escape at offset {}", encoded, i));
    }
    int h = HexValue(encoded[i + 1]), l = HexValue(encoded[i + 2]);
    if (h < 0 || l < 0) {
      return Status::InvalidArgument(fmt::format("path '{}': bad escape '{}' at offset {}", encoded, encoded.substr(i, 3), i));
    }
    char c = static_cast<char>(h * 16 + l);
    if (c == '\0') return Status::InvalidArgument(fmt::format("path '{}': escape %00 at offset {}", encoded, i));
    out += c;
    i += 2;
  }
  return out;
}

}  // namespace stoke::delta
