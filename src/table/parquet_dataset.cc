#include "table/parquet_dataset.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>

#include "format/logical_value.h"
#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "stoke/table.h"

namespace stoke {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kGlobChars = "*?[";
// Hive's name for a null partition value.
constexpr std::string_view kHiveNull = "__HIVE_DEFAULT_PARTITION__";
// RefuseToCoverParquetDataset opens this many Parquet files at most.
constexpr size_t kFilesLookedAt = 16;

struct DataFile {
  std::string rel;  // relative to the root, '/'-separated
  DirEntry entry;
  std::string full;  // the root's path in its storage joined with rel: where partition directories are read
};

bool Hidden(const std::string& name) { return !name.empty() && (name[0] == '_' || name[0] == '.'); }

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Directories a dataset's walk descends at most: deeper is a symbolic link that loops.
constexpr int kMaxDepth = 64;

// Every file under `dir` (at any depth, hidden directories skipped) that `keep` accepts, by its
// path relative to the walk's root (`prefix` + name).
Status Walk(Storage& storage, const std::string& dir, const std::string& prefix,
            const std::function<bool(const std::string& rel, const DirEntry&)>& keep, std::vector<DataFile>* out,
            int depth = 0) {
  if (depth > kMaxDepth) {
    return Status::InvalidArgument(fmt::format("{}: directories nested deeper than {} (a symbolic link that loops?)", dir,
                                               kMaxDepth));
  }
  STOKE_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, storage.List(dir));
  for (DirEntry& e : entries) {
    const std::string rel = prefix.empty() ? e.name : prefix + "/" + e.name;
    if (e.is_directory) {
      if (!Hidden(e.name)) STOKE_RETURN_IF_ERROR(Walk(storage, JoinPath(dir, e.name), rel, keep, out, depth + 1));
    } else if (keep(rel, e)) {
      out->push_back(DataFile{rel, std::move(e)});
    }
  }
  return Status::OK();
}

std::vector<std::string_view> Components(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Whether `text` matches `pattern` component by component ("**" matching any number of them): a
// table of the matches of every pattern suffix against every text suffix, so that many "**" cost
// their product, never an exponential search.
bool MatchComponents(std::span<const std::string_view> pattern, std::span<const std::string_view> text) {
  const size_t p = pattern.size(), t = text.size();
  // match[i][j]: pattern[i:] matches text[j:]; filled from the ends.
  std::vector<std::vector<uint8_t>> match(p + 1, std::vector<uint8_t>(t + 1, 0));
  match[p][t] = 1;
  for (size_t i = p; i-- > 0;) {
    const std::string pat(pattern[i]);
    for (size_t j = t + 1; j-- > 0;) {
      if (pattern[i] == "**") {
        match[i][j] = match[i + 1][j] || (j < t && match[i][j + 1]);
      } else if (j < t) {
        const std::string comp(text[j]);
        match[i][j] = match[i + 1][j + 1] && fnmatch(pat.c_str(), comp.c_str(), FNM_PERIOD) == 0;
      }
    }
  }
  return match[0][0] != 0;
}

// The directory holding what location[slash + 1...] names, as a location: "." for a relative name,
// "/" at the file system's root, the container or bucket itself (its URI) at its top.
std::string ParentLocation(const std::string& location, size_t slash, size_t path_start) {
  if (slash == std::string::npos || slash < path_start) {
    std::string head = location.substr(0, path_start);
    while (head.size() > 1 && head.back() == '/' && head.find("://") + 3 != head.size()) head.pop_back();
    return head.empty() ? "." : head;
  }
  return slash == 0 ? "/" : location.substr(0, slash);
}

// The location's glob: its root (the location up to the last '/' before the first glob character)
// and the pattern after it.
std::pair<std::string, std::string> SplitGlob(const std::string& location, size_t path_start) {
  const size_t glob = location.find_first_of(kGlobChars, path_start);
  const size_t slash = location.rfind('/', glob);
  const size_t rest = slash == std::string::npos || slash < path_start ? path_start : slash + 1;
  return {ParentLocation(location, slash, path_start), location.substr(rest)};
}

// Where the path part of `location` starts (after "scheme://container/" for URIs).
size_t PathStart(const std::string& location) {
  if (!HasUriScheme(location)) return 0;
  auto uri = ParseStorageUri(location);
  if (!uri.ok() || uri->path.empty()) return location.size();
  const size_t at = location.rfind(uri->path);
  return at == std::string::npos ? location.size() : at;
}

std::string HiveUnescape(std::string_view s) {
  std::string out;
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned byte = 0;
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) && hex(s[i + 2]) &&
        std::from_chars(s.data() + i + 1, s.data() + i + 3, byte, 16).ptr == s.data() + i + 3) {
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// The partition values of a file: the directories of its full path of the form key=value, in order
// (those of the root too, as DuckDB reads them).
std::vector<std::pair<std::string, std::optional<std::string>>> HivePartitions(std::string_view rel) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  auto parts = Components(rel);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string value = HiveUnescape(parts[i].substr(eq + 1));
    out.emplace_back(HiveUnescape(parts[i].substr(0, eq)),
                     value == kHiveNull ? std::nullopt : std::optional<std::string>(std::move(value)));
  }
  return out;
}

bool IsInteger(std::string_view s) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The Delta type of a partition key from its values (see OpenParquetDataset).
std::string PartitionType(const std::vector<DataFile>& files, size_t k) {
  bool integers = true, dates = true;
  for (const DataFile& f : files) {
    const auto value = HivePartitions(f.full)[k].second;
    if (!value) continue;
    integers = integers && IsInteger(*value);
    dates = dates && value->size() == 10 && ParseDate(*value).has_value();
  }
  return integers ? "long" : dates ? "date" : "string";
}

// The Delta type (PROTOCOL.md, "Schema Serialization Format") of a node of a file's schema tree.
ordered_json DeltaType(const SchemaNode& n, const ParquetReader& reader) {
  auto nullable = [](const SchemaNode& c) { return c.repetition != parquet::Repetition::kRequired; };
  switch (n.kind) {
    case SchemaNode::Kind::kLeaf: {
      ColumnSpec spec = ColumnOfStored(reader.metadata().schema[reader.columns()[n.leaf].schema_index]);
      spec.is_string = n.is_string;
      return SparkTypeName(spec);
    }
    case SchemaNode::Kind::kList:
      return ordered_json{{"type", "array"},
                          {"elementType", DeltaType(n.children[0], reader)},
                          {"containsNull", nullable(n.children[0])}};
    case SchemaNode::Kind::kMap:
      return ordered_json{{"type", "map"},
                          {"keyType", DeltaType(n.children[0], reader)},
                          {"valueType", n.children.size() > 1 ? DeltaType(n.children[1], reader) : ordered_json("string")},
                          {"valueContainsNull", n.children.size() < 2 || nullable(n.children[1])}};
    case SchemaNode::Kind::kStruct: {
      ordered_json fields = ordered_json::array();
      for (const SchemaNode& c : n.children) {
        fields.push_back(ordered_json{{"name", c.name}, {"type", DeltaType(c, reader)}, {"nullable", nullable(c)},
                                      {"metadata", ordered_json::object()}});
      }
      return ordered_json{{"type", "struct"}, {"fields", std::move(fields)}};
    }
  }
  return "binary";
}

// The files the location names, sorted by path, and the root they are relative to.
Result<std::vector<DataFile>> ListDataFiles(const std::string& location, std::string* root) {
  const size_t path_start = PathStart(location);
  if (IsGlobLocation(location)) {
    auto [glob_root, pattern] = SplitGlob(location, path_start);
    *root = glob_root;
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(*root));
    const auto want = Components(pattern);
    std::vector<DataFile> files;
    STOKE_RETURN_IF_ERROR(Walk(*where.storage, where.path, "", [&](const std::string& rel, const DirEntry&) {
      return MatchComponents(want, Components(rel));
    }, &files));
    return files;
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(location));
  auto stat = where.storage->Stat(where.path);
  if (stat.ok() && !stat->is_directory) {
    const size_t slash = location.rfind('/');
    *root = ParentLocation(location, slash, path_start);
    DataFile f{location.substr(slash == std::string::npos || slash < path_start ? path_start : slash + 1), *stat};
    return std::vector<DataFile>{std::move(f)};
  }
  *root = location;
  std::vector<DataFile> files;
  STOKE_RETURN_IF_ERROR(Walk(*where.storage, where.path, "", [](const std::string& rel, const DirEntry& e) {
    return !Hidden(e.name) && EndsWith(rel, ".parquet");
  }, &files));
  return files;
}

// The schema of the first file as Delta schema JSON, with the partition columns after it; the file's
// `huggingface` metadata, when it has one, in *huggingface.
Result<std::string> DatasetSchema(const StorageLocation& root, const std::vector<DataFile>& files,
                                  const std::vector<std::pair<std::string, std::string>>& partitions,
                                  std::map<std::string, std::string>* configuration) {
  const std::string path = JoinPath(root.path, files[0].rel);
  auto reader = ParquetReader::Open(*root.storage, path);
  if (!reader.ok()) return reader.status().WithContext(path);
  auto tree = SchemaTree(**reader);
  if (!tree.ok()) return tree.status().WithContext(path);
  ordered_json schema = DeltaType(*tree, **reader);
  std::set<std::string> names;
  for (const SchemaNode& c : tree->children) names.insert(c.name);
  for (const auto& [key, type] : partitions) {
    if (names.count(key)) {
      return Status::InvalidArgument(fmt::format("{}: column '{}' is both in the file and a partition directory "
                                                 "({}=...)", path, key, key));
    }
    schema["fields"].push_back(ordered_json{{"name", key}, {"type", type}, {"nullable", true},
                                            {"metadata", ordered_json::object()}});
  }
  for (const auto& kv : (*reader)->metadata().key_value_metadata) {
    if (!kv.value) continue;
    // stoke's own files (`stoke convert`'s output) say which columns hold tensors and images.
    for (const char* key : {kTensorsMetadataKey, kBlobsMetadataKey, kImagesMetadataKey, kClassesMetadataKey}) {
      if (kv.key == key) (*configuration)[key] = *kv.value;
    }
    if (kv.key != kHuggingFaceMetadataKey) continue;
    (*configuration)[kHuggingFaceMetadataKey] = *kv.value;
    if (auto classes = HuggingFaceClassNames(*kv.value)) (*configuration)[kClassesMetadataKey] = *classes;
  }
  return schema.dump();
}

// The partition keys and types of the files; InvalidArgument when files disagree on the keys.
Result<std::vector<std::pair<std::string, std::string>>> DatasetPartitions(const std::vector<DataFile>& files,
                                                                          const std::string& location) {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const auto& [key, value] : HivePartitions(files[0].full)) keys.emplace_back(key, "");
  for (const DataFile& f : files) {
    const auto parts = HivePartitions(f.full);
    bool same = parts.size() == keys.size();
    for (size_t k = 0; same && k < parts.size(); ++k) same = parts[k].first == keys[k].first;
    if (!same) {
      return Status::InvalidArgument(fmt::format("{}: '{}' and '{}' sit under different partition directories "
                                                 "(key=value/); every file of a dataset must have the same keys",
                                                 location, files[0].rel, f.rel));
    }
  }
  for (size_t k = 0; k < keys.size(); ++k) keys[k].second = PartitionType(files, k);
  return keys;
}

// The features object of Hugging Face metadata, or null.
nlohmann::json HuggingFaceFeatures(const std::string& metadata) {
  const auto j = nlohmann::json::parse(metadata, nullptr, false);
  if (!j.is_object()) return nullptr;
  const auto& holder = j.contains("info") && j["info"].is_object() ? j["info"] : j;
  auto f = holder.find("features");
  return f != holder.end() && f->is_object() ? *f : nlohmann::json(nullptr);
}

// The fixed shape of a feature (see HuggingFaceArrayShapes), or nullopt.
std::optional<std::vector<int64_t>> FeatureShape(const nlohmann::json& f) {
  if (!f.is_object()) return std::nullopt;
  const std::string type = f.value("_type", "");
  if (type.size() == 7 && type.starts_with("Array") && type.ends_with("D") && f.contains("shape") && f["shape"].is_array()) {
    std::vector<int64_t> shape;
    for (const auto& d : f["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return std::nullopt;  // a dynamic first dimension
      shape.push_back(d.get<int64_t>());
    }
    return shape;
  }
  if (type != "Sequence" || !f.contains("length") || !f["length"].is_number_integer() || f["length"].get<int64_t>() < 0) {
    return std::nullopt;
  }
  std::vector<int64_t> shape{f["length"].get<int64_t>()};
  const auto& inner = f.contains("feature") ? f["feature"] : nlohmann::json(nullptr);
  if (inner.is_object() && inner.value("_type", "") == "Value") return shape;
  auto rest = FeatureShape(inner);
  if (!rest) return std::nullopt;
  shape.insert(shape.end(), rest->begin(), rest->end());
  return shape;
}

}  // namespace

std::optional<std::string> HuggingFaceClassNames(const std::string& metadata) {
  const auto features = HuggingFaceFeatures(metadata);
  if (!features.is_object()) return std::nullopt;
  nlohmann::ordered_json classes = nlohmann::ordered_json::object();
  for (auto it = features.begin(); it != features.end(); ++it) {
    const auto& f = it.value();
    if (!f.is_object() || f.value("_type", "") != "ClassLabel" || !f.contains("names") || !f["names"].is_array()) continue;
    classes[it.key()] = f["names"];
  }
  if (classes.empty()) return std::nullopt;
  return classes.dump();
}

std::map<std::string, std::vector<int64_t>> HuggingFaceArrayShapes(const std::string& metadata) {
  std::map<std::string, std::vector<int64_t>> shapes;
  const auto features = HuggingFaceFeatures(metadata);
  if (!features.is_object()) return shapes;
  for (auto it = features.begin(); it != features.end(); ++it) {
    if (auto shape = FeatureShape(it.value())) shapes[it.key()] = std::move(*shape);
  }
  return shapes;
}

bool IsGlobLocation(const std::string& location) {
  if (location.find_first_of(kGlobChars, PathStart(location)) == std::string::npos) return false;
  // A name that holds '[' or '*' itself (a directory "run[2]") is that name, not a pattern.
  auto where = ResolveStorageLocation(location);
  return !where.ok() || !where->storage->Stat(where->path).ok();
}

Status RefuseToCoverParquetDataset(const std::string& location, std::string_view what) {
  if (IsGlobLocation(location)) {
    return Status::InvalidArgument(fmt::format("{}: '{}' is a glob; a table is a directory", what, location));
  }
  if (IsTableDirectory(location)) return Status::OK();
  auto where = ResolveStorageLocation(location);
  if (!where.ok()) return where.status();
  auto stat = where->storage->Stat(where->path);
  if (!stat.ok() || !stat->is_directory) return Status::OK();  // nothing there yet (or a file: the writer says)
  // stoke's own files are what a first write that failed before its commit left: the next write
  // goes on over them (vacuum removes them). A file another writer wrote is someone's data. The
  // first kFilesLookedAt Parquet files found, breadth first, tell; a subdirectory that cannot be
  // listed is passed over (this is a safety check, not a listing the write needs).
  std::vector<std::string> dirs = {""};
  size_t looked_at = 0;
  for (size_t d = 0; d < dirs.size() && d < 4096 && looked_at < kFilesLookedAt; ++d) {  // 4096: a link loop ends
    auto entries = where->storage->List(JoinPath(where->path, dirs[d]));
    if (!entries.ok()) continue;
    for (const DirEntry& e : *entries) {
      if (Hidden(e.name) || looked_at >= kFilesLookedAt) continue;
      const std::string rel = dirs[d].empty() ? e.name : dirs[d] + "/" + e.name;
      if (e.is_directory) {
        dirs.push_back(rel);
        continue;
      }
      if (!EndsWith(e.name, ".parquet")) continue;
      ++looked_at;
      auto reader = ParquetReader::Open(*where->storage, JoinPath(where->path, rel));
      if (!reader.ok() || CreatedByStoke((*reader)->metadata().created_by)) continue;  // unreadable: a torn write of ours
      return Status::InvalidArgument(fmt::format("{}: '{}' holds Parquet files that another writer wrote ({}, ...) but "
                                                 "no Delta log: a plain Parquet dataset, which a table written there "
                                                 "would hide; write the table elsewhere",
                                                 what, location, rel));
    }
  }
  return Status::OK();
}

bool MatchesGlob(std::string_view pattern, std::string_view text) {
  const auto p = Components(pattern), t = Components(text);
  return MatchComponents(p, t);
}

Result<ParquetDataset> OpenParquetDataset(const std::string& location) {
  ParquetDataset d;
  STOKE_ASSIGN_OR_RETURN(std::vector<DataFile> files, ListDataFiles(location, &d.root));
  if (files.empty()) {
    return Status::NotFound(fmt::format("'{}' holds no Delta log and no Parquet files (a directory's files must be "
                                        "named *.parquet; a glob such as 'dir/*.parq' names others)",
                                        location));
  }
  std::sort(files.begin(), files.end(), [](const DataFile& a, const DataFile& b) { return a.rel < b.rel; });
  STOKE_ASSIGN_OR_RETURN(d.where, ResolveStorageLocation(d.root));
  for (DataFile& f : files) f.full = JoinPath(d.where.path, f.rel);
  STOKE_ASSIGN_OR_RETURN(auto partitions, DatasetPartitions(files, location));
  delta::Snapshot& snap = d.snapshot;
  snap.version = 0;
  STOKE_ASSIGN_OR_RETURN(snap.metadata.schema_string,
                         DatasetSchema(d.where, files, partitions, &snap.metadata.configuration));
  for (const auto& p : partitions) snap.metadata.partition_columns.push_back(p.first);
  for (DataFile& f : files) {
    delta::AddFile add;
    add.path = delta::EncodePath(f.rel);
    for (auto& [key, value] : HivePartitions(f.full)) add.partition_values[key] = std::move(value);
    add.size = static_cast<int64_t>(f.entry.size);
    add.modification_time = f.entry.modification_time_ms;
    snap.timestamp = std::max(snap.timestamp, add.modification_time);
    snap.files.push_back(std::move(add));
  }
  return d;
}

}  // namespace stoke
