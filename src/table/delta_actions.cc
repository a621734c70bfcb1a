// Delta actions as JSON: parsing the action of one commit line (and a whole commit), serializing
// actions with Spark's key order, and the percent-encoding of paths. Protocol references are to
// delta-io/delta PROTOCOL.md.
//
// Decisions recorded here because readers of the code need them:
// - A commit line holds exactly one action object ({"add": {...}}). Unknown fields inside a known
//   action are ignored (the protocol requires it). Action kinds that readers may ignore (cdc,
//   checkpointMetadata, sidecar) are skipped. Any other top-level key is
//   Corruption: a new action kind only ever appears together with a table feature in the protocol,
//   which stoke refuses anyway, so an unknown key in a table stoke accepts means a damaged or
//   foreign file, and silently dropping it could drop data.
// - Paths are compared in their decoded form (the protocol allows different encodings of one path).
//   Snapshot::tombstones is keyed by the decoded path, which is the file's name on storage.
#include "table/delta_log.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "core/text.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Action kinds readers may skip (PROTOCOL.md: "Change Data Files", "Checkpoint Metadata", "Sidecar
// File Information").
constexpr const char* kIgnorableActions[] = {"cdc", "checkpointMetadata", "sidecar"};

std::string Dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

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

  // The "deletionVector" field; null when absent.
  Result<std::shared_ptr<const DeletionVectorDescriptor>> DeletionVector() const {
    const json* f = Field("deletionVector");
    if (f == nullptr) return std::shared_ptr<const DeletionVectorDescriptor>();
    auto dv = ParseDeletionVectorDescriptor(*f, fmt::format("{}: line {}: {}", file_, line_, action_));
    if (!dv.ok()) return dv.status();
    return std::make_shared<const DeletionVectorDescriptor>(std::move(*dv));
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

// The row tracking and clustering fields of an add or remove (`clustering`: an add's
// clusteringProvider too); null when it has none.
Result<std::shared_ptr<const FileTracking>> ParseTracking(const FieldReader& r, bool clustering) {
  FileTracking t;
  STOKE_RETURN_IF_ERROR(r.OptInt64("baseRowId", &t.base_row_id));
  STOKE_RETURN_IF_ERROR(r.OptInt64("defaultRowCommitVersion", &t.default_row_commit_version));
  if (clustering) STOKE_RETURN_IF_ERROR(r.OptString("clusteringProvider", &t.clustering_provider));
  if (t == FileTracking{}) return std::shared_ptr<const FileTracking>();
  return std::make_shared<const FileTracking>(std::move(t));
}

// Adds the row tracking and clustering fields of `t` (when not null) to an action's JSON object.
void TrackingJson(const std::shared_ptr<const FileTracking>& t, ordered_json* o) {
  if (!t) return;
  if (t->base_row_id) (*o)["baseRowId"] = *t->base_row_id;
  if (t->default_row_commit_version) (*o)["defaultRowCommitVersion"] = *t->default_row_commit_version;
  if (t->clustering_provider) (*o)["clusteringProvider"] = *t->clustering_provider;
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
  STOKE_ASSIGN_OR_RETURN(a.deletion_vector, r.DeletionVector());
  STOKE_ASSIGN_OR_RETURN(a.tracking, ParseTracking(r, /*clustering=*/true));
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
  STOKE_ASSIGN_OR_RETURN(rm.deletion_vector, r.DeletionVector());
  STOKE_ASSIGN_OR_RETURN(rm.tracking, ParseTracking(r, /*clustering=*/false));
  return rm;
}

Result<Txn> ParseTxn(const FieldReader& r) {
  Txn t;
  STOKE_RETURN_IF_ERROR(r.String("appId", &t.app_id));
  STOKE_RETURN_IF_ERROR(r.Int64("version", &t.version));
  STOKE_RETURN_IF_ERROR(r.OptInt64("lastUpdated", &t.last_updated));
  return t;
}

Result<DomainMetadata> ParseDomainMetadata(const FieldReader& r) {
  DomainMetadata d;
  STOKE_RETURN_IF_ERROR(r.String("domain", &d.domain));
  STOKE_RETURN_IF_ERROR(r.String("configuration", &d.configuration));
  STOKE_RETURN_IF_ERROR(r.Bool("removed", &d.removed));
  return d;
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

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

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
        } else if constexpr (std::is_same_v<T, Boxed<Metadata>>) {
          const Metadata& m = *a;
          o["id"] = m.id;
          if (m.name) o["name"] = *m.name;
          if (m.description) o["description"] = *m.description;
          o["format"] = ordered_json{{"provider", m.format_provider}, {"options", StringMapJson(m.format_options)}};
          o["schemaString"] = m.schema_string;
          o["partitionColumns"] = m.partition_columns;
          o["configuration"] = StringMapJson(m.configuration);
          if (m.created_time) o["createdTime"] = *m.created_time;
          line["metaData"] = std::move(o);
        } else if constexpr (std::is_same_v<T, AddFile>) {
          o["path"] = a.path;
          o["partitionValues"] = NullableMapJson(a.partition_values);
          o["size"] = a.size;
          o["modificationTime"] = a.modification_time;
          o["dataChange"] = a.data_change;
          if (a.stats) o["stats"] = *a.stats;
          if (!a.tags.empty()) o["tags"] = StringMapJson(a.tags);
          if (a.deletion_vector) o["deletionVector"] = DeletionVectorDescriptorJson(*a.deletion_vector);
          TrackingJson(a.tracking, &o);
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
          if (a.deletion_vector) o["deletionVector"] = DeletionVectorDescriptorJson(*a.deletion_vector);
          TrackingJson(a.tracking, &o);
          line["remove"] = std::move(o);
        } else if constexpr (std::is_same_v<T, Txn>) {
          o["appId"] = a.app_id;
          o["version"] = a.version;
          if (a.last_updated) o["lastUpdated"] = *a.last_updated;
          line["txn"] = std::move(o);
        } else if constexpr (std::is_same_v<T, DomainMetadata>) {
          o["domain"] = a.domain;
          o["configuration"] = a.configuration;
          o["removed"] = a.removed;
          line["domainMetadata"] = std::move(o);
        } else {
          static_assert(std::is_same_v<T, CommitInfo>);
          line["commitInfo"] = a.value.is_object() ? ordered_json(a.value) : ordered_json::object();
        }
      },
      action);
  return line;
}

RemoveFile RemoveOf(const AddFile& add, int64_t deletion_timestamp, bool data_change) {
  RemoveFile r;
  r.path = add.path;
  r.deletion_timestamp = deletion_timestamp;
  r.data_change = data_change;
  r.extended_file_metadata = true;
  r.partition_values = add.partition_values;
  r.size = add.size;
  r.deletion_vector = add.deletion_vector;
  if (add.tracking && (add.tracking->base_row_id || add.tracking->default_row_commit_version)) {
    r.tracking = std::make_shared<const FileTracking>(
        FileTracking{add.tracking->base_row_id, add.tracking->default_row_commit_version, std::nullopt});
  }
  return r;
}

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
  if (kind == "domainMetadata") {
    STOKE_ASSIGN_OR_RETURN(auto a, ParseDomainMetadata(r));
    return std::optional<Action>(std::move(a));
  }
  return bad(fmt::format("unknown action \"{}\" (expected add, remove, metaData, protocol, txn, commitInfo, "
                         "domainMetadata, or one of the ignorable cdc, checkpointMetadata, sidecar)",
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
