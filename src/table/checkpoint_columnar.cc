// The columnar checkpoint reader (checkpoint.h, ReadCheckpointColumns): builds actions straight from
// the leaf columns' levels and values, with no JSON in between (a checkpoint of 650,000 adds is read
// in a fraction of the time). It reads the shapes Delta writers produce: top-level optional structs
// of optional scalar fields and structs (an add's deletionVector), maps of string to string and lists
// of strings (standard or legacy layouts, one repetition level). Any other shape makes it decline,
// and the generic reader (rows of JSON) takes over.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "format/parquet_reader.h"
#include "table/checkpoint.h"
#include "table/deletion_vector.h"

namespace stoke::delta {
namespace {

// Checkpoint leaves no action field is read from: commitInfo, a V2 checkpoint's checkpointMetadata
// (its version is the file name's), the add statistics' typed copies (optional in the protocol;
// their JSON forms are read), and what a tombstone carries beyond what vacuum and reconciliation need
// (its tags and statistics).
bool IsSkippedCheckpointLeaf(std::string_view name) {
  for (std::string_view prefix : {"commitInfo.", "checkpointMetadata.", "add.stats_parsed.", "add.partitionValues_parsed.",
                                  "remove.tags.", "remove.stats", "remove.numRecords"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// One leaf column of a row group, consumed row by row.
struct LeafCursor {
  const LeafColumn* col = nullptr;
  ColumnLevels levels;
  // The def level at which the leaf's parent exists: for repeated leaves, an entry (list element,
  // map pair); for a struct's scalar field, the struct.
  int16_t entry_def = 0;
  size_t level = 0;       // next level entry
  size_t value = 0;       // next present value
  size_t row_begin = 0, row_end = 0;  // repeated leaves: the level entries of the current row

  uint32_t Def(size_t i) const {
    return levels.def_levels.empty() ? static_cast<uint32_t>(col->max_definition_level) : levels.def_levels[i];
  }
  bool Present(size_t i) const { return Def(i) >= static_cast<uint32_t>(col->max_definition_level); }
  template <typename T>
  const T& ValueAt(size_t k) const { return std::get<std::vector<T>>(levels.values)[k]; }
  // Each value is read once: strings are moved out, not copied.
  std::string TakeString(size_t k) { return std::move(std::get<std::vector<std::string>>(levels.values)[k]); }
};

struct MapCursors {
  LeafCursor* key = nullptr;
  LeafCursor* value = nullptr;
};

// The leaves of one action kind's fields (null where the file lacks the column).
struct DvCursors {
  LeafCursor *type = nullptr, *path = nullptr, *offset = nullptr, *size = nullptr, *cardinality = nullptr,
             *max_row = nullptr;
};
struct TrackingCursors {  // row tracking and clustering fields (FileTracking)
  LeafCursor *base_row = nullptr, *commit_version = nullptr, *clustering = nullptr;
};
struct AddCursors {
  LeafCursor *path = nullptr, *size = nullptr, *mtime = nullptr, *change = nullptr, *stats = nullptr;
  MapCursors pv, tags;
  DvCursors dv;
  TrackingCursors tracking;
};
struct RemoveCursors {
  LeafCursor *path = nullptr, *time = nullptr, *change = nullptr, *ext = nullptr, *size = nullptr;
  MapCursors pv;
  DvCursors dv;
  TrackingCursors tracking;
};
struct MetadataCursors {
  LeafCursor *id = nullptr, *name = nullptr, *desc = nullptr, *provider = nullptr, *schema = nullptr,
             *parts = nullptr, *created = nullptr;
  MapCursors options, config;
};
struct ProtocolCursors {
  LeafCursor *reader = nullptr, *writer = nullptr, *reader_features = nullptr, *writer_features = nullptr;
};
struct TxnCursors {
  LeafCursor *app = nullptr, *version = nullptr, *updated = nullptr;
};
struct DomainCursors {
  LeafCursor *domain = nullptr, *configuration = nullptr, *removed = nullptr;
};

class ColumnarCheckpoint {
 public:
  explicit ColumnarCheckpoint(const ParquetReader& reader) : reader_(reader) {}

  // False when the file's shape is not one this reader handles: a leaf repeated more than once,
  // or a top-level field that is not an optional group (an action's presence is then not
  // definition level 1 of its leaves).
  bool Bind();
  Status ReadRowGroup(int g, CheckpointActions* out);

 private:
  // Opening the leaves of row group g_.
  Result<LeafCursor*> Open(const std::string& name, parquet::Type type, bool repeated);
  Status CheckLevels(const std::string& name, const LeafCursor& cur) const;
  Result<MapCursors> OpenMap(const std::string& field);
  Result<LeafCursor*> OpenList(const std::string& field);
  Result<DvCursors> OpenDv(const std::string& field);
  Status OpenAll();
  Status CheckLeaves(int64_t rows) const;

  // Reading row row_: repeated leaves advance by whole rows, whatever the row holds.
  Status AdvanceRepeated(int64_t r);
  // A top-level struct (an action) is present at definition level 1 of its leaves (see Bind).
  bool StructPresent(const LeafCursor* any) const { return any != nullptr && any->Def(row_) >= 1; }
  // The struct holding the scalar leaf `c` is present in this row.
  bool ParentPresent(const LeafCursor* c) const {
    return c != nullptr && c->Def(row_) >= static_cast<uint32_t>(c->entry_def);
  }
  std::optional<std::string> Str(LeafCursor* c);
  template <typename T>
  std::optional<T> Scalar(LeafCursor* c);
  std::optional<bool> Bool(LeafCursor* c);
  Result<std::vector<std::pair<std::string, std::optional<std::string>>>> Map(const MapCursors& m);
  std::vector<std::string> List(LeafCursor* c);
  Status StringMap(const MapCursors& m, std::map<std::string, std::string>* out);
  Status NullableMap(const MapCursors& m, std::map<std::string, std::optional<std::string>>* out);
  Status Error(std::string_view action, std::string_view what) const;

  // One action of row row_, when present; its repeated leaves are consumed either way.
  Status ReadAdd(CheckpointActions* out);
  Status ReadMetadata(CheckpointActions* out);
  Status ReadProtocol(CheckpointActions* out);
  Status ReadRemove(CheckpointActions* out);
  Status ReadTxn(CheckpointActions* out);
  Status ReadDomain(CheckpointActions* out);
  Result<std::shared_ptr<const DeletionVectorDescriptor>> ReadDv(const DvCursors& c, std::string_view action);
  Result<TrackingCursors> OpenTracking(const std::string& action, bool clustering);
  std::shared_ptr<const FileTracking> ReadTracking(const TrackingCursors& c);

  const ParquetReader& reader_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, LeafCursor> cursors_;  // node-based: pointers into it stay valid
  std::vector<LeafCursor*> repeated_;          // the cursors of repeated leaves
  AddCursors add_;
  RemoveCursors rm_;
  MetadataCursors md_;
  ProtocolCursors pr_;
  TxnCursors txn_;
  DomainCursors domain_;
  int g_ = 0;         // the row group being read
  size_t row_ = 0;    // its row being read
  size_t line_ = 0;   // that row's number in the file, from 1, for messages
};

bool ColumnarCheckpoint::Bind() {
  for (size_t c = 0; c < reader_.columns().size(); ++c) by_name_[reader_.columns()[c].name] = c;
  for (const auto& [name, c] : by_name_) {
    if (reader_.columns()[c].max_repetition_level > 1) return false;
  }
  const auto& schema = reader_.metadata().schema;
  if (schema.empty()) return false;
  // Walk the flattened schema tree: each element is followed by its num_children subtrees.
  size_t next = 1;
  std::function<bool(size_t)> skip_subtree = [&](size_t index) {
    if (index >= schema.size()) return false;
    next = index + 1;
    for (int32_t k = 0; k < schema[index].num_children.value_or(0); ++k) {
      if (!skip_subtree(next)) return false;
    }
    return true;
  };
  for (int32_t k = 0; k < schema[0].num_children.value_or(0); ++k) {
    const size_t top = next;
    if (top >= schema.size()) return false;
    const bool group = schema[top].num_children.value_or(0) > 0;
    if (!group || schema[top].repetition != parquet::Repetition::kOptional) return false;
    if (!skip_subtree(top)) return false;
  }
  return true;
}

Result<LeafCursor*> ColumnarCheckpoint::Open(const std::string& name, parquet::Type type, bool repeated) {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return nullptr;
  const LeafColumn& col = reader_.columns()[it->second];
  if (col.type != type || (col.max_repetition_level == 1) != repeated) {
    return Status::Unsupported(fmt::format("{}: column '{}' has an unexpected type", reader_.path(), name));
  }
  auto [pos, inserted] = cursors_.try_emplace(name);
  if (!inserted) return &pos->second;
  LeafCursor& cur = pos->second;
  cur.col = &col;
  STOKE_ASSIGN_OR_RETURN(cur.levels, reader_.ReadColumnChunkLevels(g_, it->second));
  const auto& element = reader_.metadata().schema[col.schema_index];
  const bool optional_leaf = element.repetition == parquet::Repetition::kOptional;
  cur.entry_def = static_cast<int16_t>(col.max_definition_level - (optional_leaf ? 1 : 0));
  STOKE_RETURN_IF_ERROR(CheckLevels(name, cur));
  if (repeated) repeated_.push_back(&cur);
  return &cur;
}

// Each present entry has a value: checked once here, so reading values by position is safe.
Status ColumnarCheckpoint::CheckLevels(const std::string& name, const LeafCursor& cur) const {
  size_t present = 0;
  for (size_t i = 0; i < cur.levels.num_levels; ++i) present += cur.Present(i) ? 1 : 0;
  const size_t values = std::visit([](const auto& v) { return v.size(); }, cur.levels.values);
  const LeafColumn& col = *cur.col;
  if (present != values || (col.max_repetition_level > 0 && cur.levels.rep_levels.size() != cur.levels.num_levels) ||
      (col.max_definition_level > 0 && cur.levels.def_levels.size() != cur.levels.num_levels)) {
    return Status::Corruption(fmt::format("{}: row group {}: column '{}' has {} values for {} present entries",
                                          reader_.path(), g_, name, values, present));
  }
  return Status::OK();
}

Result<MapCursors> ColumnarCheckpoint::OpenMap(const std::string& field) {
  MapCursors m;
  for (const auto& [name, c] : by_name_) {
    if (name.rfind(field + ".", 0) != 0) continue;
    const std::string rest = name.substr(field.size() + 1);
    // key_value.key / map.key (legacy) and the matching value.
    if (rest.size() > 4 && rest.compare(rest.size() - 4, 4, ".key") == 0 && rest.find('.') == rest.size() - 4) {
      STOKE_ASSIGN_OR_RETURN(m.key, Open(name, parquet::Type::kByteArray, true));
    } else if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, ".value") == 0 && rest.find('.') == rest.size() - 6) {
      STOKE_ASSIGN_OR_RETURN(m.value, Open(name, parquet::Type::kByteArray, true));
    } else {
      return Status::Unsupported(fmt::format("{}: map column '{}' has an unexpected layout", reader_.path(), name));
    }
  }
  return m;
}

Result<LeafCursor*> ColumnarCheckpoint::OpenList(const std::string& field) {
  LeafCursor* leaf = nullptr;
  for (const auto& [name, c] : by_name_) {
    if (name != field && name.rfind(field + ".", 0) != 0) continue;
    if (leaf != nullptr) return Status::Unsupported(fmt::format("{}: list '{}' has more than one leaf", reader_.path(), field));
    STOKE_ASSIGN_OR_RETURN(leaf, Open(name, parquet::Type::kByteArray, true));
  }
  return leaf;
}

// PROTOCOL.md, "Deletion Vector Descriptor Schema", as a struct of the checkpoint.
Result<DvCursors> ColumnarCheckpoint::OpenDv(const std::string& field) {
  DvCursors d;
  STOKE_ASSIGN_OR_RETURN(d.type, Open(field + ".storageType", parquet::Type::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(d.path, Open(field + ".pathOrInlineDv", parquet::Type::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(d.offset, Open(field + ".offset", parquet::Type::kInt32, false));
  STOKE_ASSIGN_OR_RETURN(d.size, Open(field + ".sizeInBytes", parquet::Type::kInt32, false));
  STOKE_ASSIGN_OR_RETURN(d.cardinality, Open(field + ".cardinality", parquet::Type::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(d.max_row, Open(field + ".maxRowIndex", parquet::Type::kInt64, false));
  // ReadDv tells a DV's presence by these two; without them the generic reader decides (it refuses
  // a descriptor that lacks them).
  const bool other_fields = d.offset || d.size || d.cardinality || d.max_row;
  if (other_fields && (d.type == nullptr || d.path == nullptr)) {
    return Status::Unsupported(fmt::format("{}: '{}' lacks storageType or pathOrInlineDv", reader_.path(), field));
  }
  return d;
}

Status ColumnarCheckpoint::OpenAll() {
  using T = parquet::Type;
  STOKE_ASSIGN_OR_RETURN(add_.path, Open("add.path", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(add_.size, Open("add.size", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(add_.mtime, Open("add.modificationTime", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(add_.change, Open("add.dataChange", T::kBoolean, false));
  STOKE_ASSIGN_OR_RETURN(add_.stats, Open("add.stats", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(add_.pv, OpenMap("add.partitionValues"));
  STOKE_ASSIGN_OR_RETURN(add_.tags, OpenMap("add.tags"));
  STOKE_ASSIGN_OR_RETURN(add_.dv, OpenDv("add.deletionVector"));
  STOKE_ASSIGN_OR_RETURN(add_.tracking, OpenTracking("add", /*clustering=*/true));
  STOKE_ASSIGN_OR_RETURN(rm_.path, Open("remove.path", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(rm_.time, Open("remove.deletionTimestamp", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(rm_.change, Open("remove.dataChange", T::kBoolean, false));
  STOKE_ASSIGN_OR_RETURN(rm_.ext, Open("remove.extendedFileMetadata", T::kBoolean, false));
  STOKE_ASSIGN_OR_RETURN(rm_.size, Open("remove.size", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(rm_.pv, OpenMap("remove.partitionValues"));
  STOKE_ASSIGN_OR_RETURN(rm_.dv, OpenDv("remove.deletionVector"));
  STOKE_ASSIGN_OR_RETURN(rm_.tracking, OpenTracking("remove", /*clustering=*/false));
  STOKE_ASSIGN_OR_RETURN(txn_.app, Open("txn.appId", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(txn_.version, Open("txn.version", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(txn_.updated, Open("txn.lastUpdated", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(domain_.domain, Open("domainMetadata.domain", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(domain_.configuration, Open("domainMetadata.configuration", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(domain_.removed, Open("domainMetadata.removed", T::kBoolean, false));
  STOKE_ASSIGN_OR_RETURN(md_.id, Open("metaData.id", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(md_.name, Open("metaData.name", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(md_.desc, Open("metaData.description", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(md_.provider, Open("metaData.format.provider", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(md_.options, OpenMap("metaData.format.options"));
  STOKE_ASSIGN_OR_RETURN(md_.schema, Open("metaData.schemaString", T::kByteArray, false));
  STOKE_ASSIGN_OR_RETURN(md_.parts, OpenList("metaData.partitionColumns"));
  STOKE_ASSIGN_OR_RETURN(md_.config, OpenMap("metaData.configuration"));
  STOKE_ASSIGN_OR_RETURN(md_.created, Open("metaData.createdTime", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(pr_.reader, Open("protocol.minReaderVersion", T::kInt32, false));
  STOKE_ASSIGN_OR_RETURN(pr_.writer, Open("protocol.minWriterVersion", T::kInt32, false));
  STOKE_ASSIGN_OR_RETURN(pr_.reader_features, OpenList("protocol.readerFeatures"));
  STOKE_ASSIGN_OR_RETURN(pr_.writer_features, OpenList("protocol.writerFeatures"));
  return Status::OK();
}

// Every leaf must be one of those OpenAll opens (plus commitInfo and the add statistics' typed
// copies, skipped: the protocol makes stats_parsed and partitionValues_parsed optional, and the JSON
// stats and partitionValues are read instead): anything else (V2 checkpoint sidecars, row tracking,
// ...) goes to the generic reader, which knows what to refuse.
Status ColumnarCheckpoint::CheckLeaves(int64_t rows) const {
  for (const auto& [name, c] : by_name_) {
    if (!cursors_.count(name) && !IsSkippedCheckpointLeaf(name)) {
      return Status::Unsupported(fmt::format("{}: column '{}' is not read by the columnar path", reader_.path(), name));
    }
  }
  if (add_.path == nullptr && rm_.path == nullptr && md_.id == nullptr && pr_.reader == nullptr && txn_.app == nullptr &&
      domain_.domain == nullptr) {
    return Status::Unsupported(fmt::format("{}: no action columns", reader_.path()));
  }
  for (const auto& [name, cur] : cursors_) {
    if (cur.col->max_repetition_level == 0 && static_cast<int64_t>(cur.levels.num_levels) != rows) {
      return Status::Corruption(fmt::format("{}: row group {}: column '{}' has {} entries for {} rows", reader_.path(), g_,
                                            name, cur.levels.num_levels, rows));
    }
  }
  return Status::OK();
}

Status ColumnarCheckpoint::ReadRowGroup(int g, CheckpointActions* out) {
  g_ = g;
  cursors_.clear();
  repeated_.clear();
  STOKE_RETURN_IF_ERROR(OpenAll());
  const int64_t rows = reader_.metadata().row_groups[g].num_rows;
  STOKE_RETURN_IF_ERROR(CheckLeaves(rows));
  // Nearly every row of a large checkpoint is an add (the count is the column's decoded levels).
  if (add_.path != nullptr) out->adds.reserve(out->adds.size() + add_.path->levels.num_levels);
  for (int64_t r = 0; r < rows; ++r) {
    row_ = static_cast<size_t>(r);
    line_ = static_cast<size_t>(reader_.row_group_starts()[g] + r) + 1;
    STOKE_RETURN_IF_ERROR(AdvanceRepeated(r));
    // Values of absent structs are consumed nowhere: a leaf's values belong to rows where it is
    // present, so reading only present structs keeps every cursor aligned. In the order of the
    // action names, as the generic reader yields a row's actions.
    STOKE_RETURN_IF_ERROR(ReadAdd(out));
    STOKE_RETURN_IF_ERROR(ReadDomain(out));
    STOKE_RETURN_IF_ERROR(ReadMetadata(out));
    STOKE_RETURN_IF_ERROR(ReadProtocol(out));
    STOKE_RETURN_IF_ERROR(ReadRemove(out));
    STOKE_RETURN_IF_ERROR(ReadTxn(out));
  }
  return Status::OK();
}

Status ColumnarCheckpoint::AdvanceRepeated(int64_t r) {
  for (LeafCursor* cur : repeated_) {
    const size_t begin = cur->level;
    if (begin >= cur->levels.num_levels || cur->levels.rep_levels[begin] != 0) {
      return Status::Corruption(
          fmt::format("{}: row group {}: column '{}' ends before row {}", reader_.path(), g_, cur->col->name, r));
    }
    size_t end = begin + 1;
    while (end < cur->levels.num_levels && cur->levels.rep_levels[end] != 0) ++end;
    cur->row_begin = begin;
    cur->row_end = end;
    cur->level = end;
  }
  return Status::OK();
}

std::optional<std::string> ColumnarCheckpoint::Str(LeafCursor* c) {
  if (c == nullptr || !c->Present(row_)) return std::nullopt;
  return c->TakeString(c->value++);
}

template <typename T>
std::optional<T> ColumnarCheckpoint::Scalar(LeafCursor* c) {
  if (c == nullptr || !c->Present(row_)) return std::nullopt;
  return c->ValueAt<T>(c->value++);
}

std::optional<bool> ColumnarCheckpoint::Bool(LeafCursor* c) {
  if (c == nullptr || !c->Present(row_)) return std::nullopt;
  return c->ValueAt<uint8_t>(c->value++) != 0;
}

// A map's (key, value) pairs in this row; a null value stays null.
Result<std::vector<std::pair<std::string, std::optional<std::string>>>> ColumnarCheckpoint::Map(const MapCursors& m) {
  std::vector<std::pair<std::string, std::optional<std::string>>> pairs;
  if (m.key == nullptr) return pairs;
  const size_t begin = m.key->row_begin, end = m.key->row_end;
  const size_t vbegin = m.value != nullptr ? m.value->row_begin : 0, vend = m.value != nullptr ? m.value->row_end : 0;
  if (m.value != nullptr && vend - vbegin != end - begin) {
    return Status::Corruption(fmt::format("{}: row {}: map keys and values disagree", reader_.path(), line_));
  }
  for (size_t i = begin; i < end; ++i) {
    if (m.key->Def(i) < static_cast<uint32_t>(m.key->entry_def)) continue;  // null or empty map
    std::string key = m.key->TakeString(m.key->value++);
    std::optional<std::string> value;
    if (m.value != nullptr && m.value->Present(vbegin + (i - begin))) value = m.value->TakeString(m.value->value++);
    pairs.emplace_back(std::move(key), std::move(value));
  }
  return pairs;
}

std::vector<std::string> ColumnarCheckpoint::List(LeafCursor* c) {
  std::vector<std::string> items;
  if (c == nullptr) return items;
  for (size_t i = c->row_begin; i < c->row_end; ++i) {
    if (c->Def(i) < static_cast<uint32_t>(c->entry_def)) continue;
    if (c->Present(i)) items.push_back(c->TakeString(c->value++));
  }
  return items;
}

Status ColumnarCheckpoint::StringMap(const MapCursors& m, std::map<std::string, std::string>* out) {
  STOKE_ASSIGN_OR_RETURN(auto pairs, Map(m));
  for (auto& [k, v] : pairs) {
    if (v) (*out)[k] = std::move(*v);
  }
  return Status::OK();
}

Status ColumnarCheckpoint::NullableMap(const MapCursors& m, std::map<std::string, std::optional<std::string>>* out) {
  STOKE_ASSIGN_OR_RETURN(auto pairs, Map(m));
  for (auto& [k, v] : pairs) (*out)[k] = std::move(v);
  return Status::OK();
}

Status ColumnarCheckpoint::Error(std::string_view action, std::string_view what) const {
  return Status::Corruption(fmt::format("{}: row {}: {}: {}", reader_.path(), line_, action, what));
}

Status ColumnarCheckpoint::ReadAdd(CheckpointActions* out) {
  if (!StructPresent(add_.path)) {
    (void)Map(add_.pv);
    (void)Map(add_.tags);
    return Status::OK();
  }
  AddFile a;
  auto path = Str(add_.path);
  if (!path || path->empty()) return Error("add", "missing string field \"path\"");
  a.path = std::move(*path);
  auto size = Scalar<int64_t>(add_.size), mtime = Scalar<int64_t>(add_.mtime);
  auto change = Bool(add_.change);
  if (!size) return Error("add", "missing integer field \"size\"");
  if (*size < 0) return Error("add", fmt::format("field \"size\" is negative ({})", *size));
  if (!mtime) return Error("add", "missing integer field \"modificationTime\"");
  if (!change) return Error("add", "missing boolean field \"dataChange\"");
  a.size = *size;
  a.modification_time = *mtime;
  a.data_change = *change;
  a.stats = Str(add_.stats);
  STOKE_RETURN_IF_ERROR(NullableMap(add_.pv, &a.partition_values));
  STOKE_RETURN_IF_ERROR(StringMap(add_.tags, &a.tags));
  STOKE_ASSIGN_OR_RETURN(a.deletion_vector, ReadDv(add_.dv, "add"));
  a.tracking = ReadTracking(add_.tracking);
  out->adds.push_back(std::move(a));
  return Status::OK();
}

// PROTOCOL.md, "Row Tracking" and "Clustered Table": an action's baseRowId, defaultRowCommitVersion
// and (adds) clusteringProvider.
Result<TrackingCursors> ColumnarCheckpoint::OpenTracking(const std::string& action, bool clustering) {
  using T = parquet::Type;
  TrackingCursors c;
  STOKE_ASSIGN_OR_RETURN(c.base_row, Open(action + ".baseRowId", T::kInt64, false));
  STOKE_ASSIGN_OR_RETURN(c.commit_version, Open(action + ".defaultRowCommitVersion", T::kInt64, false));
  if (clustering) {
    STOKE_ASSIGN_OR_RETURN(c.clustering, Open(action + ".clusteringProvider", T::kByteArray, false));
  }
  return c;
}

std::shared_ptr<const FileTracking> ColumnarCheckpoint::ReadTracking(const TrackingCursors& c) {
  FileTracking t{Scalar<int64_t>(c.base_row), Scalar<int64_t>(c.commit_version), Str(c.clustering)};
  if (t == FileTracking{}) return nullptr;
  return std::make_shared<const FileTracking>(std::move(t));
}

Result<std::shared_ptr<const DeletionVectorDescriptor>> ColumnarCheckpoint::ReadDv(const DvCursors& c,
                                                                                   std::string_view action) {
  if (!ParentPresent(c.type) && !ParentPresent(c.path)) return nullptr;  // the action has none
  DeletionVectorDescriptor dv;
  auto type = Str(c.type);
  auto path = Str(c.path);
  auto offset = Scalar<int32_t>(c.offset), size = Scalar<int32_t>(c.size);
  auto cardinality = Scalar<int64_t>(c.cardinality);
  dv.max_row_index = Scalar<int64_t>(c.max_row);
  if (!type || type->size() != 1) return Error(action, "deletionVector field \"storageType\" must be one character");
  if (!path) return Error(action, "deletionVector field \"pathOrInlineDv\" is missing");
  if (!size || !cardinality) return Error(action, "deletionVector needs \"sizeInBytes\" and \"cardinality\"");
  dv.storage_type = (*type)[0];
  dv.path_or_inline_dv = std::move(*path);
  dv.offset = offset;
  dv.size_in_bytes = *size;
  dv.cardinality = *cardinality;
  Status checked = CheckDeletionVectorDescriptor(dv, action);  // the message is built only on error
  if (!checked.ok()) return Status::Corruption(fmt::format("{}: row {}: {}", reader_.path(), line_, checked.message()));
  return std::make_shared<const DeletionVectorDescriptor>(std::move(dv));
}

Status ColumnarCheckpoint::ReadMetadata(CheckpointActions* out) {
  if (!StructPresent(md_.id)) {
    (void)Map(md_.options);
    (void)Map(md_.config);
    (void)List(md_.parts);
    return Status::OK();
  }
  Metadata m;
  auto id = Str(md_.id);
  if (!id) return Error("metaData", "missing string field \"id\"");
  m.id = std::move(*id);
  m.name = Str(md_.name);
  m.description = Str(md_.desc);
  auto provider = Str(md_.provider);
  if (!provider) return Error("metaData", "field \"format\" needs a string \"provider\"");
  m.format_provider = std::move(*provider);
  STOKE_RETURN_IF_ERROR(StringMap(md_.options, &m.format_options));
  auto schema = Str(md_.schema);
  if (!schema) return Error("metaData", "missing string field \"schemaString\"");
  m.schema_string = std::move(*schema);
  m.partition_columns = List(md_.parts);
  STOKE_RETURN_IF_ERROR(StringMap(md_.config, &m.configuration));
  m.created_time = Scalar<int64_t>(md_.created);
  out->others.push_back(std::move(m));
  return Status::OK();
}

Status ColumnarCheckpoint::ReadProtocol(CheckpointActions* out) {
  if (!StructPresent(pr_.reader)) {
    (void)List(pr_.reader_features);
    (void)List(pr_.writer_features);
    return Status::OK();
  }
  Protocol p;
  auto rv = Scalar<int32_t>(pr_.reader), wv = Scalar<int32_t>(pr_.writer);
  if (!rv) return Error("protocol", "missing integer field \"minReaderVersion\"");
  if (!wv) return Error("protocol", "missing integer field \"minWriterVersion\"");
  p.min_reader_version = *rv;
  p.min_writer_version = *wv;
  p.reader_features = List(pr_.reader_features);
  p.writer_features = List(pr_.writer_features);
  out->others.push_back(std::move(p));
  return Status::OK();
}

Status ColumnarCheckpoint::ReadRemove(CheckpointActions* out) {
  if (!StructPresent(rm_.path)) {
    (void)Map(rm_.pv);
    return Status::OK();
  }
  RemoveFile rm;
  auto path = Str(rm_.path);
  if (!path || path->empty()) return Error("remove", "missing string field \"path\"");
  rm.path = std::move(*path);
  rm.deletion_timestamp = Scalar<int64_t>(rm_.time);
  auto change = Bool(rm_.change);
  if (!change) return Error("remove", "missing boolean field \"dataChange\"");
  rm.data_change = *change;
  rm.extended_file_metadata = Bool(rm_.ext).value_or(false);
  STOKE_RETURN_IF_ERROR(NullableMap(rm_.pv, &rm.partition_values));
  rm.size = Scalar<int64_t>(rm_.size);
  if (rm.size && *rm.size < 0) return Error("remove", fmt::format("field \"size\" is negative ({})", *rm.size));
  STOKE_ASSIGN_OR_RETURN(rm.deletion_vector, ReadDv(rm_.dv, "remove"));
  rm.tracking = ReadTracking(rm_.tracking);
  out->removes.push_back(std::move(rm));
  return Status::OK();
}

Status ColumnarCheckpoint::ReadTxn(CheckpointActions* out) {
  if (!StructPresent(txn_.app)) return Status::OK();
  Txn t;
  auto app = Str(txn_.app);
  auto version = Scalar<int64_t>(txn_.version);
  if (!app) return Error("txn", "missing string field \"appId\"");
  if (!version) return Error("txn", "missing integer field \"version\"");
  t.app_id = std::move(*app);
  t.version = *version;
  t.last_updated = Scalar<int64_t>(txn_.updated);
  out->others.push_back(std::move(t));
  return Status::OK();
}

Status ColumnarCheckpoint::ReadDomain(CheckpointActions* out) {
  if (!StructPresent(domain_.domain)) return Status::OK();
  auto domain = Str(domain_.domain);
  auto configuration = Str(domain_.configuration);
  auto removed = Bool(domain_.removed);
  if (!domain) return Error("domainMetadata", "missing string field \"domain\"");
  if (!configuration) return Error("domainMetadata", "missing string field \"configuration\"");
  if (!removed) return Error("domainMetadata", "missing boolean field \"removed\"");
  out->others.push_back(DomainMetadata{std::move(*domain), std::move(*configuration), *removed});
  return Status::OK();
}

}  // namespace

Status ReadCheckpointColumns(const ParquetReader& reader, CheckpointActions* out) {
  const size_t groups = static_cast<size_t>(reader.num_row_groups());
  std::vector<CheckpointActions> parts(groups);
  // Each row group with a reader state of its own: in parallel when there are several (stoke writes
  // a checkpoint in row groups of kCheckpointRowGroupActions), appended in order.
  auto read_group = [&](size_t g) -> Status {
    ColumnarCheckpoint columns(reader);
    if (!columns.Bind()) {
      return Status::Unsupported(fmt::format("{}: a shape the columnar checkpoint reader does not handle", reader.path()));
    }
    return columns.ReadRowGroup(static_cast<int>(g), &parts[g]);
  };
  if (groups <= 1) {
    for (size_t g = 0; g < groups; ++g) STOKE_RETURN_IF_ERROR(read_group(g));
  } else {
    ThreadPool pool(std::min<size_t>(groups, 16));
    STOKE_RETURN_IF_ERROR(ParallelFor(pool, groups, read_group));
  }
  size_t adds = out->adds.size();
  for (const auto& part : parts) adds += part.adds.size();
  out->adds.reserve(adds);
  for (auto& part : parts) out->Append(std::move(part));
  return Status::OK();
}

}  // namespace stoke::delta
