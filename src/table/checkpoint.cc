#include "table/checkpoint.h"

#include <fmt/format.h>

#include <functional>
#include <map>

#include "core/thread_pool.h"
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

// Checkpoint leaves no action field is read from: commitInfo, the add statistics' typed copies
// (optional in the protocol; their JSON forms are read), and what a tombstone carries beyond what
// vacuum and reconciliation need (its tags and statistics).
bool IsSkippedCheckpointLeaf(std::string_view name) {
  for (std::string_view prefix : {"commitInfo.", "add.stats_parsed.", "add.partitionValues_parsed.", "remove.tags.",
                                  "remove.stats", "remove.numRecords"}) {
    if (name.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// The columnar reader: builds actions straight from the leaf columns' levels and values, with no
// JSON in between (a checkpoint of 650,000 adds is read in a fraction of the time). It reads the
// shapes Delta writers produce: top-level optional structs of optional scalar fields, maps of
// string to string and lists of strings (standard or legacy layouts, one repetition level). Any
// other shape makes it decline, and the generic reader (rows of JSON) takes over.

// One leaf column of a row group, consumed row by row.
struct LeafCursor {
  const LeafColumn* col = nullptr;
  ColumnLevels levels;
  int16_t entry_def = 0;  // repeated leaves: an entry (list element, map pair) exists at this def level
  size_t level = 0;       // next level entry
  size_t value = 0;       // next present value
  size_t row_begin = 0, row_end = 0;  // repeated leaves: the level entries of the current row

  uint32_t Def(size_t i) const { return levels.def_levels.empty() ? static_cast<uint32_t>(col->max_definition_level) : levels.def_levels[i]; }
  bool Present(size_t i) const { return Def(i) >= static_cast<uint32_t>(col->max_definition_level); }
  template <typename T>
  const T& ValueAt(size_t k) const { return std::get<std::vector<T>>(levels.values)[k]; }
  // Each value is read once: strings are moved out, not copied.
  std::string TakeString(size_t k) { return std::move(std::get<std::vector<std::string>>(levels.values)[k]); }
};

class ColumnarCheckpoint {
 public:
  explicit ColumnarCheckpoint(const ParquetReader& reader) : reader_(reader) {}

  // False when the file's shape is not one this reader handles: a leaf repeated more than once,
  // or a top-level field that is not an optional group (an action's presence is then not
  // definition level 1 of its leaves).
  bool Bind() {
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

  Status ReadRowGroup(int g, CheckpointActions* out) {
    cursors_.clear();
    repeated_.clear();
    auto open = [&](const std::string& name, parquet::Type type, bool repeated) -> Result<LeafCursor*> {
      auto it = by_name_.find(name);
      if (it == by_name_.end()) return nullptr;
      const LeafColumn& col = reader_.columns()[it->second];
      if (col.type != type || (col.max_repetition_level == 1) != repeated) {
        return Status::Unsupported(fmt::format("{}: column '{}' has an unexpected type", reader_.path(), name));
      }
      auto [pos, inserted] = cursors_.try_emplace(name);
      if (inserted) {
        pos->second.col = &col;
        STOKE_ASSIGN_OR_RETURN(pos->second.levels, reader_.ReadColumnChunkLevels(g, it->second));
        const auto& element = reader_.metadata().schema[col.schema_index];
        const bool optional_leaf = element.repetition == parquet::Repetition::kOptional;
        pos->second.entry_def = static_cast<int16_t>(col.max_definition_level - (optional_leaf ? 1 : 0));
        // Each present entry has a value: checked once here, so reading values by position is safe.
        size_t present = 0;
        for (size_t i = 0; i < pos->second.levels.num_levels; ++i) present += pos->second.Present(i) ? 1 : 0;
        const size_t values = std::visit([](const auto& v) { return v.size(); }, pos->second.levels.values);
        if (present != values || (col.max_repetition_level > 0 && pos->second.levels.rep_levels.size() != pos->second.levels.num_levels) ||
            (col.max_definition_level > 0 && pos->second.levels.def_levels.size() != pos->second.levels.num_levels)) {
          return Status::Corruption(fmt::format("{}: row group {}: column '{}' has {} values for {} present entries",
                                                reader_.path(), g, name, values, present));
        }
        if (repeated) repeated_.push_back(&pos->second);
      }
      return &pos->second;
    };
    const int64_t rows = reader_.metadata().row_groups[g].num_rows;
    STOKE_ASSIGN_OR_RETURN(LeafCursor* add_path, open("add.path", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* add_size, open("add.size", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* add_mtime, open("add.modificationTime", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* add_change, open("add.dataChange", parquet::Type::kBoolean, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* add_stats, open("add.stats", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(MapCursors add_pv, OpenMap("add.partitionValues", open));
    STOKE_ASSIGN_OR_RETURN(MapCursors add_tags, OpenMap("add.tags", open));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* rm_path, open("remove.path", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* rm_time, open("remove.deletionTimestamp", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* rm_change, open("remove.dataChange", parquet::Type::kBoolean, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* rm_ext, open("remove.extendedFileMetadata", parquet::Type::kBoolean, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* rm_size, open("remove.size", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(MapCursors rm_pv, OpenMap("remove.partitionValues", open));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* txn_app, open("txn.appId", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* txn_version, open("txn.version", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* txn_updated, open("txn.lastUpdated", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_id, open("metaData.id", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_name, open("metaData.name", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_desc, open("metaData.description", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_provider, open("metaData.format.provider", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(MapCursors md_options, OpenMap("metaData.format.options", open));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_schema, open("metaData.schemaString", parquet::Type::kByteArray, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_parts, OpenList("metaData.partitionColumns", open));
    STOKE_ASSIGN_OR_RETURN(MapCursors md_config, OpenMap("metaData.configuration", open));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* md_created, open("metaData.createdTime", parquet::Type::kInt64, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* pr_reader, open("protocol.minReaderVersion", parquet::Type::kInt32, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* pr_writer, open("protocol.minWriterVersion", parquet::Type::kInt32, false));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* pr_rfeat, OpenList("protocol.readerFeatures", open));
    STOKE_ASSIGN_OR_RETURN(LeafCursor* pr_wfeat, OpenList("protocol.writerFeatures", open));
    // Every leaf must be one of these (plus commitInfo and the add statistics' typed copies, skipped:
    // the protocol makes stats_parsed and partitionValues_parsed optional, and the JSON stats and
    // partitionValues are read instead): anything else (V2 checkpoint sidecars, deletion vectors, ...)
    // goes to the generic reader, which knows what to refuse.
    for (const auto& [name, c] : by_name_) {
      if (!cursors_.count(name) && !IsSkippedCheckpointLeaf(name)) {
        return Status::Unsupported(fmt::format("{}: column '{}' is not read by the columnar path", reader_.path(), name));
      }
    }
    if (add_path == nullptr && rm_path == nullptr && md_id == nullptr && pr_reader == nullptr && txn_app == nullptr) {
      return Status::Unsupported(fmt::format("{}: no action columns", reader_.path()));
    }
    for (auto& [name, cur] : cursors_) {
      if (cur.col->max_repetition_level == 0 && static_cast<int64_t>(cur.levels.num_levels) != rows) {
        return Status::Corruption(fmt::format("{}: row group {}: column '{}' has {} entries for {} rows", reader_.path(), g,
                                              name, cur.levels.num_levels, rows));
      }
    }
    // Nearly every row of a large checkpoint is an add (the count is the column's decoded levels).
    if (add_path != nullptr) out->adds.reserve(out->adds.size() + add_path->levels.num_levels);

    for (int64_t r = 0; r < rows; ++r) {
      const size_t row = static_cast<size_t>(r);
      const size_t line = static_cast<size_t>(reader_.row_group_starts()[g] + r) + 1;
      auto error = [&](std::string_view action, std::string_view what) {
        return Status::Corruption(fmt::format("{}: row {}: {}: {}", reader_.path(), line, action, what));
      };
      // Repeated leaves advance by whole rows, whatever the row holds.
      for (LeafCursor* cur : repeated_) {
        const size_t begin = cur->level;
        if (begin >= cur->levels.num_levels || cur->levels.rep_levels[begin] != 0) {
          return Status::Corruption(fmt::format("{}: row group {}: column '{}' ends before row {}", reader_.path(), g,
                                                cur->col->name, r));
        }
        size_t end = begin + 1;
        while (end < cur->levels.num_levels && cur->levels.rep_levels[end] != 0) ++end;
        cur->row_begin = begin;
        cur->row_end = end;
        cur->level = end;
      }
      auto struct_present = [&](LeafCursor* any) { return any != nullptr && any->Def(row) >= 1; };
      auto str = [&](LeafCursor* c) -> std::optional<std::string> {
        if (c == nullptr || !c->Present(row)) return std::nullopt;
        return c->TakeString(c->value++);
      };
      auto i64 = [&](LeafCursor* c) -> std::optional<int64_t> {
        if (c == nullptr || !c->Present(row)) return std::nullopt;
        return c->ValueAt<int64_t>(c->value++);
      };
      auto i32 = [&](LeafCursor* c) -> std::optional<int32_t> {
        if (c == nullptr || !c->Present(row)) return std::nullopt;
        return c->ValueAt<int32_t>(c->value++);
      };
      auto boolean = [&](LeafCursor* c) -> std::optional<bool> {
        if (c == nullptr || !c->Present(row)) return std::nullopt;
        return c->ValueAt<uint8_t>(c->value++) != 0;
      };
      // A map's (key, value) pairs in this row; a null value stays null.
      auto map = [&](const MapCursors& m) -> Result<std::vector<std::pair<std::string, std::optional<std::string>>>> {
        std::vector<std::pair<std::string, std::optional<std::string>>> pairs;
        if (m.key == nullptr) return pairs;
        const size_t begin = m.key->row_begin, end = m.key->row_end;
        const size_t vbegin = m.value != nullptr ? m.value->row_begin : 0, vend = m.value != nullptr ? m.value->row_end : 0;
        if (m.value != nullptr && vend - vbegin != end - begin) {
          return Status::Corruption(fmt::format("{}: row {}: map keys and values disagree", reader_.path(), line));
        }
        for (size_t i = begin; i < end; ++i) {
          if (m.key->Def(i) < static_cast<uint32_t>(m.key->entry_def)) continue;  // null or empty map
          std::string key = m.key->TakeString(m.key->value++);
          std::optional<std::string> value;
          if (m.value != nullptr && m.value->Present(vbegin + (i - begin))) value = m.value->TakeString(m.value->value++);
          pairs.emplace_back(std::move(key), std::move(value));
        }
        return pairs;
      };
      auto list = [&](LeafCursor* c) -> std::vector<std::string> {
        std::vector<std::string> items;
        if (c == nullptr) return items;
        for (size_t i = c->row_begin; i < c->row_end; ++i) {
          if (c->Def(i) < static_cast<uint32_t>(c->entry_def)) continue;
          if (c->Present(i)) items.push_back(c->TakeString(c->value++));
        }
        return items;
      };
      auto string_map = [&](const MapCursors& m, std::map<std::string, std::string>* out) -> Status {
        STOKE_ASSIGN_OR_RETURN(auto pairs, map(m));
        for (auto& [k, v] : pairs) {
          if (v) (*out)[k] = std::move(*v);
        }
        return Status::OK();
      };
      auto nullable_map = [&](const MapCursors& m, std::map<std::string, std::optional<std::string>>* out) -> Status {
        STOKE_ASSIGN_OR_RETURN(auto pairs, map(m));
        for (auto& [k, v] : pairs) (*out)[k] = std::move(v);
        return Status::OK();
      };
      // Values of absent structs are consumed nowhere: a leaf's values belong to rows where it is
      // present, so reading only present structs keeps every cursor aligned.
      // In the order of the action names, as the generic reader yields a row's actions.
      if (struct_present(add_path)) {
        AddFile a;
        auto path = str(add_path);
        if (!path || path->empty()) return error("add", "missing string field \"path\"");
        a.path = std::move(*path);
        auto size = i64(add_size), mtime = i64(add_mtime);
        auto change = boolean(add_change);
        if (!size) return error("add", "missing integer field \"size\"");
        if (*size < 0) return error("add", fmt::format("field \"size\" is negative ({})", *size));
        if (!mtime) return error("add", "missing integer field \"modificationTime\"");
        if (!change) return error("add", "missing boolean field \"dataChange\"");
        a.size = *size;
        a.modification_time = *mtime;
        a.data_change = *change;
        a.stats = str(add_stats);
        STOKE_RETURN_IF_ERROR(nullable_map(add_pv, &a.partition_values));
        STOKE_RETURN_IF_ERROR(string_map(add_tags, &a.tags));
        out->adds.push_back(std::move(a));
      } else {
        (void)map(add_pv);
        (void)map(add_tags);
      }
      if (struct_present(md_id)) {
        Metadata m;
        auto id = str(md_id);
        if (!id) return error("metaData", "missing string field \"id\"");
        m.id = std::move(*id);
        m.name = str(md_name);
        m.description = str(md_desc);
        auto provider = str(md_provider);
        if (!provider) return error("metaData", "field \"format\" needs a string \"provider\"");
        m.format_provider = std::move(*provider);
        STOKE_RETURN_IF_ERROR(string_map(md_options, &m.format_options));
        auto schema = str(md_schema);
        if (!schema) return error("metaData", "missing string field \"schemaString\"");
        m.schema_string = std::move(*schema);
        m.partition_columns = list(md_parts);
        STOKE_RETURN_IF_ERROR(string_map(md_config, &m.configuration));
        m.created_time = i64(md_created);
        out->others.push_back(std::move(m));
      } else {
        (void)map(md_options);
        (void)map(md_config);
        (void)list(md_parts);
      }
      if (struct_present(pr_reader)) {
        Protocol p;
        auto rv = i32(pr_reader), wv = i32(pr_writer);
        if (!rv) return error("protocol", "missing integer field \"minReaderVersion\"");
        if (!wv) return error("protocol", "missing integer field \"minWriterVersion\"");
        p.min_reader_version = *rv;
        p.min_writer_version = *wv;
        p.reader_features = list(pr_rfeat);
        p.writer_features = list(pr_wfeat);
        out->others.push_back(std::move(p));
      } else {
        (void)list(pr_rfeat);
        (void)list(pr_wfeat);
      }
      if (struct_present(rm_path)) {
        RemoveFile rm;
        auto path = str(rm_path);
        if (!path || path->empty()) return error("remove", "missing string field \"path\"");
        rm.path = std::move(*path);
        rm.deletion_timestamp = i64(rm_time);
        auto change = boolean(rm_change);
        if (!change) return error("remove", "missing boolean field \"dataChange\"");
        rm.data_change = *change;
        rm.extended_file_metadata = boolean(rm_ext).value_or(false);
        STOKE_RETURN_IF_ERROR(nullable_map(rm_pv, &rm.partition_values));
        rm.size = i64(rm_size);
        if (rm.size && *rm.size < 0) return error("remove", fmt::format("field \"size\" is negative ({})", *rm.size));
        out->removes.push_back(std::move(rm));
      } else {
        (void)map(rm_pv);
      }
      if (struct_present(txn_app)) {
        Txn t;
        auto app = str(txn_app);
        auto version = i64(txn_version);
        if (!app) return error("txn", "missing string field \"appId\"");
        if (!version) return error("txn", "missing integer field \"version\"");
        t.app_id = std::move(*app);
        t.version = *version;
        t.last_updated = i64(txn_updated);
        out->others.push_back(std::move(t));
      }
    }
    return Status::OK();
  }

 private:
  struct MapCursors {
    LeafCursor* key = nullptr;
    LeafCursor* value = nullptr;
  };
  template <typename Open>
  Result<MapCursors> OpenMap(const std::string& field, Open& open) {
    MapCursors m;
    for (const auto& [name, c] : by_name_) {
      if (name.rfind(field + ".", 0) != 0) continue;
      const std::string rest = name.substr(field.size() + 1);
      // key_value.key / map.key (legacy) and the matching value.
      if (rest.size() > 4 && rest.compare(rest.size() - 4, 4, ".key") == 0 && rest.find('.') == rest.size() - 4) {
        STOKE_ASSIGN_OR_RETURN(m.key, open(name, parquet::Type::kByteArray, true));
      } else if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, ".value") == 0 && rest.find('.') == rest.size() - 6) {
        STOKE_ASSIGN_OR_RETURN(m.value, open(name, parquet::Type::kByteArray, true));
      } else {
        return Status::Unsupported(fmt::format("{}: map column '{}' has an unexpected layout", reader_.path(), name));
      }
    }
    return m;
  }
  template <typename Open>
  Result<LeafCursor*> OpenList(const std::string& field, Open& open) {
    LeafCursor* leaf = nullptr;
    for (const auto& [name, c] : by_name_) {
      if (name != field && name.rfind(field + ".", 0) != 0) continue;
      if (leaf != nullptr) return Status::Unsupported(fmt::format("{}: list '{}' has more than one leaf", reader_.path(), field));
      STOKE_ASSIGN_OR_RETURN(leaf, open(name, parquet::Type::kByteArray, true));
    }
    return leaf;
  }

  const ParquetReader& reader_;
  std::map<std::string, size_t> by_name_;
  std::map<std::string, LeafCursor> cursors_;  // node-based: pointers into it stay valid
  std::vector<LeafCursor*> repeated_;          // the cursors of repeated leaves
};

}  // namespace

Status ReadCheckpointColumns(const ParquetReader& reader, CheckpointActions* out) {
  ColumnarCheckpoint columns(reader);
  if (!columns.Bind()) {
    return Status::Unsupported(fmt::format("{}: a shape the columnar checkpoint reader does not handle", reader.path()));
  }
  for (int g = 0; g < reader.num_row_groups(); ++g) STOKE_RETURN_IF_ERROR(columns.ReadRowGroup(g, out));
  return Status::OK();
}

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
  // One row per action (protocol, metaData, txns, adds, tombstones), each as Delta's JSON, streamed
  // into parts of kCheckpointPartActions actions: a large table gets a multi-part checkpoint, at most
  // one row group of one part is in memory, and readers can read the parts in parallel.
  const size_t total = 2 + snapshot.app_versions.size() + snapshot.files.size() + snapshot.tombstones.size();
  const size_t parts = std::max<size_t>(1, (total + kCheckpointPartActions - 1) / kCheckpointPartActions);
  WriterOptions options;
  options.codec = parquet::Codec::kSnappy;  // what Spark writes; every reader has it
  const SchemaNode schema = CheckpointSchema();
  std::unique_ptr<NestedParquetWriter> writer;
  std::string tmp, final_path;
  size_t part = 0, in_part = 0;
  auto fail = [&](Status s) {
    writer.reset();
    if (!tmp.empty()) (void)storage.Delete(tmp);
    return s.WithContext(fmt::format("writing checkpoint {}", final_path));
  };
  auto finish_part = [&]() -> Status {
    Status s = writer->Close();
    writer.reset();
    if (s.ok()) s = storage.Rename(tmp, final_path);
    if (!s.ok()) return fail(s);
    tmp.clear();
    in_part = 0;
    return Status::OK();
  };
  auto emit = [&](const Action& a) -> Status {
    if (!writer) {
      ++part;
      const std::string name = parts == 1 ? CheckpointName(snapshot.version)
                                          : fmt::format("{:020d}.checkpoint.{:010d}.{:010d}.parquet", snapshot.version, part, parts);
      final_path = JoinPath(log_dir, name);
      tmp = final_path + ".tmp-checkpoint";
      auto created = NestedParquetWriter::Create(storage, tmp, schema, options);
      if (!created.ok()) return fail(created.status());
      writer = std::move(*created);
    }
    // The action as its commit line's JSON object ({"add": {...}}); a missing field is null.
    Status s = writer->AddRow(json(ActionJson(a)));
    if (!s.ok()) return fail(s);
    return ++in_part == kCheckpointPartActions ? finish_part() : Status::OK();
  };
  STOKE_RETURN_IF_ERROR(emit(snapshot.protocol));
  STOKE_RETURN_IF_ERROR(emit(snapshot.metadata));
  for (const auto& [app, version] : snapshot.app_versions) STOKE_RETURN_IF_ERROR(emit(Txn{app, version, std::nullopt}));
  for (const auto& f : snapshot.files) STOKE_RETURN_IF_ERROR(emit(f));
  for (const auto& r : snapshot.tombstones) STOKE_RETURN_IF_ERROR(emit(r));
  if (writer) STOKE_RETURN_IF_ERROR(finish_part());
  json last = {{"version", snapshot.version}, {"size", total}};
  if (parts > 1) last["parts"] = parts;
  std::string last_text = last.dump();
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
    ThreadPool pool(std::min<size_t>(paths.size(), storage.CreateIsAtomic() ? 16 : 0));
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
  STOKE_ASSIGN_OR_RETURN(auto names, storage.ListNames(log_dir));
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
