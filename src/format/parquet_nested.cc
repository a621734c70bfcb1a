#include "format/parquet_nested.h"

#include "core/text.h"
#include "format/logical_value.h"
#include "format/row_printer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace stoke {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using parquet::ConvertedType;
using parquet::LogicalTypeId;
using parquet::Repetition;
using parquet::Type;

namespace {

// Deeper schemas are refused (the reader refuses them too); bounds the recursion below.
constexpr int kMaxSchemaDepth = 64;

// A node of the physical schema (one SchemaElement) with its levels and how its value maps to JSON.
struct PhysNode {
  std::string name;
  std::string path;  // dotted, for messages
  std::vector<std::string> path_in_schema;
  Repetition repetition = Repetition::kRequired;
  std::optional<Type> type;
  bool is_string = false;
  // kStruct: an object of the children. kList3: the outer group of a three-level list (child: the
  // repeated group, whose only child is the element). kList2: the outer group of a two-level list
  // (child: the repeated element itself). kMap: the outer group of a map (child: the repeated
  // key_value group with the key and, optionally, the value).
  enum class Role { kLeaf, kStruct, kList3, kList2, kMap } role = Role::kLeaf;
  std::vector<PhysNode> children;
  int16_t parent_def = 0;  // definition level of the nearest present ancestor
  int16_t def = 0;         // definition level when this node is present
  int16_t rep = 0;         // repeated ancestors, itself included
  size_t leaf_begin = 0, leaf_end = 0;  // leaf columns under this node
};

bool HasAnnotation(const parquet::SchemaElement& e, ConvertedType ct, LogicalTypeId lt) {
  return (e.converted_type && *e.converted_type == ct) ||
         (lt != LogicalTypeId::kNone && e.logical_type && e.logical_type->id == lt);
}

bool IsStringElement(const parquet::SchemaElement& e) {
  if (e.type != Type::kByteArray) return false;
  if (e.logical_type && (e.logical_type->id == LogicalTypeId::kString || e.logical_type->id == LogicalTypeId::kJson ||
                         e.logical_type->id == LogicalTypeId::kEnum)) {
    return true;
  }
  return e.converted_type && (*e.converted_type == ConvertedType::kUtf8 || *e.converted_type == ConvertedType::kJson ||
                              *e.converted_type == ConvertedType::kEnum);
}

// The role of a LIST or MAP group whose children are built: a two- or three-level list, or a map.
Status SetCollectionRole(bool is_list, PhysNode* out) {
  const PhysNode& r = out->children[0];
  if (r.repetition != Repetition::kRepeated) {
    return Status::Unsupported(fmt::format("{} group '{}': its child '{}' is not repeated", is_list ? "LIST" : "MAP",
                                           out->path, r.name));
  }
  if (is_list) {
    // LogicalTypes.md: the repeated field is the element when it is a primitive, a group of several
    // fields, or a one-field group named "array" or "<list name>_tuple"; otherwise it wraps the element.
    bool two_level = r.role == PhysNode::Role::kLeaf || r.children.size() > 1 || r.name == "array" ||
                     r.name == out->name + "_tuple";
    out->role = two_level ? PhysNode::Role::kList2 : PhysNode::Role::kList3;
    return Status::OK();
  }
  if (r.role != PhysNode::Role::kStruct || r.children.empty() || r.children.size() > 2) {
    return Status::Unsupported(
        fmt::format("MAP group '{}': the repeated child must be a group of a key and a value", out->path));
  }
  if (r.children[0].role != PhysNode::Role::kLeaf || r.children[0].repetition == Repetition::kRepeated) {
    return Status::Unsupported(fmt::format("MAP group '{}': map keys must be primitive", out->path));
  }
  out->role = PhysNode::Role::kMap;
  return Status::OK();
}

// Builds the subtree of schema[*i] (advancing *i past it) and recognises lists and maps by the rules
// of parquet-format LogicalTypes.md, "Nested Types", backward-compatibility rules included.
// `in_collection`: the node is the repeated child of a LIST or MAP group.
Status BuildPhys(const std::vector<parquet::SchemaElement>& schema, size_t* i, const PhysNode& parent,
                 bool in_collection, int depth, size_t* leaf, PhysNode* out) {
  if (depth > kMaxSchemaDepth) return Status::Corruption("schema nested deeper than 64");
  if (*i >= schema.size()) return Status::Corruption("schema ends before all children are listed");
  const parquet::SchemaElement& e = schema[*i];
  ++*i;
  out->name = e.name;
  out->path = parent.path.empty() ? e.name : parent.path + "." + e.name;
  out->path_in_schema = parent.path_in_schema;
  out->path_in_schema.push_back(e.name);
  out->repetition = e.repetition.value_or(Repetition::kRequired);
  out->parent_def = parent.def;
  out->def = static_cast<int16_t>(parent.def + (out->repetition != Repetition::kRequired ? 1 : 0));
  out->rep = static_cast<int16_t>(parent.rep + (out->repetition == Repetition::kRepeated ? 1 : 0));
  out->leaf_begin = *leaf;
  const int children = e.num_children.value_or(0);
  if (children <= 0) {
    if (!e.type) return Status::Corruption(fmt::format("schema element '{}' has neither a type nor children", out->path));
    out->type = e.type;
    out->is_string = IsStringElement(e);
    out->role = PhysNode::Role::kLeaf;
    out->leaf_end = ++*leaf;
    return Status::OK();
  }
  if (static_cast<size_t>(children) > schema.size() - *i) {
    return Status::Corruption(fmt::format("schema group '{}' has a bad child count {}", out->path, children));
  }
  out->children.resize(static_cast<size_t>(children));
  const bool is_list = HasAnnotation(e, ConvertedType::kList, LogicalTypeId::kList);
  // MAP_KEY_VALUE (a converted type only; LogicalType has no counterpart) marks a map's outer group
  // in some old writers and its repeated group in others; on the repeated group it says nothing more
  // than the MAP parent does.
  const bool is_map = HasAnnotation(e, ConvertedType::kMap, LogicalTypeId::kMap) ||
                      (HasAnnotation(e, ConvertedType::kMapKeyValue, LogicalTypeId::kNone) &&
                       out->repetition != Repetition::kRepeated);
  if ((is_list || is_map) && out->repetition == Repetition::kRepeated && !in_collection) {
    return Status::Unsupported(fmt::format("{} group '{}' is itself repeated", is_list ? "LIST" : "MAP", out->path));
  }
  // The repeated child of a list or map is itself a list or map only where it is a two-level list's
  // element (named "array" or "<list>_tuple"; parquet-mr's old list of lists); a LIST or MAP
  // annotation on any other repeated child is refused below (no writer is known to make one).
  const bool repeated_child = in_collection && out->repetition == Repetition::kRepeated;
  const bool two_level_element = repeated_child && is_list && (e.name == "array" || e.name == parent.name + "_tuple");
  const bool collection = (is_list || is_map) && (!repeated_child || two_level_element);
  if (collection && children != 1) {
    return Status::Unsupported(fmt::format("{} group '{}' has {} children (expected one repeated group)",
                                           is_list ? "LIST" : "MAP", out->path, children));
  }
  for (auto& child : out->children) {
    STOKE_RETURN_IF_ERROR(BuildPhys(schema, i, *out, collection, depth + 1, leaf, &child));
  }
  out->leaf_end = *leaf;
  if (!collection) {
    if (in_collection && (is_list || is_map)) {
      return Status::Unsupported(fmt::format("repeated group '{}' annotated {} inside a list or map", out->path,
                                             is_list ? "LIST" : "MAP"));
    }
    out->role = PhysNode::Role::kStruct;
    return Status::OK();
  }
  return SetCollectionRole(is_list, out);
}

Result<PhysNode> BuildPhysRoot(const std::vector<parquet::SchemaElement>& schema) {
  if (schema.empty()) return Status::Corruption("empty schema");
  PhysNode root;
  root.name = schema[0].name;
  root.role = PhysNode::Role::kStruct;
  const int children = schema[0].num_children.value_or(0);
  if (children < 0 || static_cast<size_t>(children) > schema.size() - 1) {
    return Status::Corruption(fmt::format("schema root claims {} children", children));
  }
  root.children.resize(static_cast<size_t>(children));
  size_t i = 1, leaf = 0;
  for (auto& c : root.children) STOKE_RETURN_IF_ERROR(BuildPhys(schema, &i, root, false, 1, &leaf, &c));
  if (i != schema.size()) return Status::Corruption(fmt::format("schema has {} elements after the root's children", schema.size() - i));
  root.leaf_end = leaf;
  return root;
}

SchemaNode ToLogical(const PhysNode& n, bool as_element);

// The logical node of a bare repeated field or a two-level list element: the repeated node read as
// one REQUIRED occurrence.
SchemaNode RequiredOccurrence(const PhysNode& n) {
  SchemaNode s = ToLogical(n, /*as_element=*/true);
  s.repetition = Repetition::kRequired;
  return s;
}

SchemaNode ToLogical(const PhysNode& n, bool as_element) {
  if (n.repetition == Repetition::kRepeated && !as_element) {
    SchemaNode list;
    list.name = n.name;
    list.repetition = Repetition::kRequired;
    list.kind = SchemaNode::Kind::kList;
    list.children.push_back(RequiredOccurrence(n));
    return list;
  }
  SchemaNode s;
  s.name = n.name;
  s.repetition = n.repetition;
  switch (n.role) {
    case PhysNode::Role::kLeaf:
      s.kind = SchemaNode::Kind::kLeaf;
      s.type = n.type;
      s.is_string = n.is_string;
      s.leaf = n.leaf_begin;
      break;
    case PhysNode::Role::kStruct:
      s.kind = SchemaNode::Kind::kStruct;
      for (const auto& c : n.children) s.children.push_back(ToLogical(c, false));
      break;
    case PhysNode::Role::kList3:
      s.kind = SchemaNode::Kind::kList;
      s.children.push_back(ToLogical(n.children[0].children[0], false));
      break;
    case PhysNode::Role::kList2:
      s.kind = SchemaNode::Kind::kList;
      s.children.push_back(RequiredOccurrence(n.children[0]));
      break;
    case PhysNode::Role::kMap:
      s.kind = SchemaNode::Kind::kMap;
      for (const auto& c : n.children[0].children) s.children.push_back(ToLogical(c, false));
      break;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Writing: SchemaNode -> footer schema, then shredding.

Status AppendSchema(const SchemaNode& n, const std::string& path, int depth, std::vector<parquet::SchemaElement>* out) {
  if (depth > kMaxSchemaDepth) return Status::InvalidArgument("schema nested deeper than 64");
  if (n.name.empty()) return Status::InvalidArgument(fmt::format("field with an empty name under '{}'", path));
  const std::string here = path.empty() ? n.name : path + "." + n.name;
  if (n.repetition == Repetition::kRepeated) {
    return Status::InvalidArgument(fmt::format("field '{}': write repeated fields as kList", here));
  }
  parquet::SchemaElement e;
  e.name = n.name;
  e.repetition = n.repetition;
  switch (n.kind) {
    case SchemaNode::Kind::kLeaf: {
      if (!n.type) return Status::InvalidArgument(fmt::format("leaf '{}' has no type", here));
      if (!WritableType(*n.type)) {
        return Status::Unsupported(fmt::format("writing leaf '{}' of type {}", here, parquet::TypeName(*n.type)));
      }
      if (n.is_string && *n.type != Type::kByteArray) {
        return Status::InvalidArgument(fmt::format("string leaf '{}' must be BYTE_ARRAY", here));
      }
      e.type = n.type;
      if (n.is_string) {
        e.converted_type = ConvertedType::kUtf8;
        e.logical_type = parquet::LogicalType{.id = LogicalTypeId::kString};
      }
      AnnotateLogicalType(ColumnSpec{.type = *n.type, .logical = n.logical, .precision = n.precision, .scale = n.scale}, &e);
      out->push_back(e);
      return Status::OK();
    }
    case SchemaNode::Kind::kStruct: {
      if (n.children.empty()) return Status::InvalidArgument(fmt::format("struct '{}' has no fields", here));
      std::set<std::string> names;
      for (const auto& c : n.children) {
        if (!names.insert(c.name).second) return Status::InvalidArgument(fmt::format("struct '{}': duplicate field '{}'", here, c.name));
      }
      e.num_children = static_cast<int32_t>(n.children.size());
      out->push_back(e);
      for (const auto& c : n.children) STOKE_RETURN_IF_ERROR(AppendSchema(c, here, depth + 1, out));
      return Status::OK();
    }
    case SchemaNode::Kind::kList: {
      if (n.children.size() != 1) return Status::InvalidArgument(fmt::format("list '{}' needs exactly one element node", here));
      e.num_children = 1;
      e.converted_type = ConvertedType::kList;
      e.logical_type = parquet::LogicalType{.id = LogicalTypeId::kList};
      out->push_back(e);
      parquet::SchemaElement list;
      list.name = "list";
      list.repetition = Repetition::kRepeated;
      list.num_children = 1;
      out->push_back(list);
      SchemaNode element = n.children[0];
      element.name = "element";
      return AppendSchema(element, here + ".list", depth + 2, out);
    }
    case SchemaNode::Kind::kMap: {
      if (n.children.size() != 2) return Status::InvalidArgument(fmt::format("map '{}' needs a key and a value node", here));
      if (n.children[0].kind != SchemaNode::Kind::kLeaf) {
        return Status::InvalidArgument(fmt::format("map '{}': keys must be primitive", here));
      }
      e.num_children = 1;
      e.converted_type = ConvertedType::kMap;
      e.logical_type = parquet::LogicalType{.id = LogicalTypeId::kMap};
      out->push_back(e);
      parquet::SchemaElement kv;
      kv.name = "key_value";
      kv.repetition = Repetition::kRepeated;
      kv.num_children = 2;
      out->push_back(kv);
      SchemaNode key = n.children[0];
      key.name = "key";
      key.repetition = Repetition::kRequired;
      SchemaNode value = n.children[1];
      value.name = "value";
      STOKE_RETURN_IF_ERROR(AppendSchema(key, here + ".key_value", depth + 2, out));
      return AppendSchema(value, here + ".key_value", depth + 2, out);
    }
  }
  return Status::Internal("unknown schema node kind");
}

struct LeafSink {
  const PhysNode* leaf = nullptr;
  std::vector<uint32_t> defs, reps;
  ValueVector values;
};

// Shreds rows into leaf columns (Dremel): for each leaf, one level entry per occurrence of its value
// or of the nearest absent (null, or empty list/map) ancestor. The repetition level says at which
// repeated ancestor the entry starts a new element (0: a new record); the definition level how many
// optional or repeated ancestors (the leaf included) are present.
class Shredder {
 public:
  explicit Shredder(std::vector<LeafSink>* sinks) : sinks_(*sinks) {}

  Status Row(const PhysNode& root, const json& row, size_t index) {
    row_ = index;
    if (!row.is_object()) return Error(root, "a row must be a JSON object");
    for (const auto& c : root.children) {
      auto it = row.find(c.name);
      STOKE_RETURN_IF_ERROR(Field(c, it == row.end() ? nullptr : &*it, 0));
    }
    return Status::OK();
  }

 private:
  Status Error(const PhysNode& n, std::string_view why) const {
    return Status::InvalidArgument(fmt::format("row {}: field '{}': {}", row_, n.path, why));
  }

  void Absent(const PhysNode& n, uint32_t rep, uint32_t def) {
    for (size_t l = n.leaf_begin; l < n.leaf_end; ++l) {
      sinks_[l].reps.push_back(rep);
      sinks_[l].defs.push_back(def);
    }
  }

  // One field of a present parent: a non-repeated node, or a bare repeated field (a JSON array).
  Status Field(const PhysNode& n, const json* v, uint32_t rep) {
    if (n.repetition == Repetition::kRepeated) {
      if (v == nullptr || v->is_null()) return Elements(n, json::array(), rep);
      if (!v->is_array()) return Error(n, "expected an array");
      return Elements(n, *v, rep);
    }
    if (v == nullptr || v->is_null()) {
      if (n.repetition == Repetition::kRequired) return Error(n, "REQUIRED but null");
      Absent(n, rep, static_cast<uint32_t>(n.parent_def));
      return Status::OK();
    }
    return Present(n, *v, rep);
  }

  // The occurrences of repeated node `n`, one per element of `items`.
  Status Elements(const PhysNode& n, const json& items, uint32_t rep) {
    if (items.empty()) {
      Absent(n, rep, static_cast<uint32_t>(n.parent_def));
      return Status::OK();
    }
    uint32_t r = rep;
    for (const auto& item : items) {
      if (item.is_null() && n.role == PhysNode::Role::kLeaf) return Error(n, "null element in a list of REQUIRED elements");
      STOKE_RETURN_IF_ERROR(Present(n, item, r));
      r = static_cast<uint32_t>(n.rep);
    }
    return Status::OK();
  }

  Status Present(const PhysNode& n, const json& v, uint32_t rep) {
    const uint32_t def = static_cast<uint32_t>(n.def);
    switch (n.role) {
      case PhysNode::Role::kLeaf: return Leaf(n, v, rep, def);
      case PhysNode::Role::kStruct: {
        if (!v.is_object()) return Error(n, "expected an object");
        for (const auto& c : n.children) {
          auto it = v.find(c.name);
          STOKE_RETURN_IF_ERROR(Field(c, it == v.end() ? nullptr : &*it, rep));
        }
        return Status::OK();
      }
      case PhysNode::Role::kList2:
        if (!v.is_array()) return Error(n, "expected an array");
        return Elements(n.children[0], v, rep);
      case PhysNode::Role::kList3: {
        if (!v.is_array()) return Error(n, "expected an array");
        const PhysNode& r = n.children[0];
        if (v.empty()) {
          Absent(r, rep, def);
          return Status::OK();
        }
        uint32_t e_rep = rep;
        for (const auto& item : v) {
          STOKE_RETURN_IF_ERROR(Field(r.children[0], &item, e_rep));
          e_rep = static_cast<uint32_t>(r.rep);
        }
        return Status::OK();
      }
      case PhysNode::Role::kMap: {
        if (!v.is_object()) return Error(n, "expected an object (a map)");
        const PhysNode& r = n.children[0];
        if (v.empty()) {
          Absent(r, rep, def);
          return Status::OK();
        }
        const PhysNode& key = r.children[0];
        if (key.type != Type::kByteArray) return Error(n, "map keys must be strings to be written from JSON");
        uint32_t e_rep = rep;
        for (auto it = v.begin(); it != v.end(); ++it) {
          json k = it.key();
          STOKE_RETURN_IF_ERROR(Field(key, &k, e_rep));
          if (r.children.size() > 1) STOKE_RETURN_IF_ERROR(Field(r.children[1], &it.value(), e_rep));
          e_rep = static_cast<uint32_t>(r.rep);
        }
        return Status::OK();
      }
    }
    return Status::Internal("unknown node role");
  }

  Status Leaf(const PhysNode& n, const json& v, uint32_t rep, uint32_t def) {
    LeafSink& sink = sinks_[n.leaf_begin];
    switch (*n.type) {
      case Type::kBoolean:
        if (!v.is_boolean()) return Error(n, "expected a bool");
        std::get<std::vector<uint8_t>>(sink.values).push_back(v.get<bool>() ? 1 : 0);
        break;
      case Type::kInt32:
      case Type::kInt64: {
        if (!v.is_number_integer()) return Error(n, "expected an integer");
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
          return Error(n, "integer out of range");
        }
        int64_t x = v.get<int64_t>();
        if (*n.type == Type::kInt32) {
          if (x < INT32_MIN || x > INT32_MAX) return Error(n, "integer out of the INT32 range");
          std::get<std::vector<int32_t>>(sink.values).push_back(static_cast<int32_t>(x));
        } else {
          std::get<std::vector<int64_t>>(sink.values).push_back(x);
        }
        break;
      }
      case Type::kFloat:
        if (!v.is_number()) return Error(n, "expected a number");
        std::get<std::vector<float>>(sink.values).push_back(v.get<float>());
        break;
      case Type::kDouble:
        if (!v.is_number()) return Error(n, "expected a number");
        std::get<std::vector<double>>(sink.values).push_back(v.get<double>());
        break;
      case Type::kByteArray:
        if (!v.is_string()) return Error(n, "expected a string");
        std::get<std::vector<std::string>>(sink.values).push_back(v.get<std::string>());
        break;
      default: return Error(n, "unsupported type");
    }
    sink.reps.push_back(rep);
    sink.defs.push_back(def);
    return Status::OK();
  }

  std::vector<LeafSink>& sinks_;
  size_t row_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reading: assembling records from the levels of every leaf.

struct LeafCursor {
  const LeafColumn* col = nullptr;
  ColumnLevels levels;
  size_t pos = 0;    // next level entry
  size_t value = 0;  // next present value
  uint32_t Def(size_t i) const { return levels.def_levels.empty() ? 0 : levels.def_levels[i]; }
  uint32_t Rep(size_t i) const { return levels.rep_levels.empty() ? 0 : levels.rep_levels[i]; }
};

// Assembles records of Json (nlohmann's json or ordered_json) from the leaves' levels. With
// `prepared` (per leaf, one JSON value per present value), leaves take those values instead of
// their raw ones.
template <typename Json>
class Assembler {
 public:
  Assembler(std::vector<LeafCursor>* leaves, std::string context,
            const std::vector<std::vector<Json>>* prepared = nullptr)
      : leaves_(*leaves), context_(std::move(context)), prepared_(prepared) {}

  // The value of the top-level field `n` in the next record.
  Result<Json> TopField(const PhysNode& n) { return Field(n, 0); }

  Result<Json> Record(const PhysNode& root) {
    Json row = Json::object();
    for (const auto& c : root.children) {
      STOKE_ASSIGN_OR_RETURN(Json v, Field(c, 0));
      row[c.name] = std::move(v);
    }
    return row;
  }

  // Checks that the records consumed every level and value of the leaves [begin, end).
  Status Finish(size_t begin = 0, size_t end = SIZE_MAX) const {
    for (size_t i = begin; i < std::min(end, leaves_.size()); ++i) {
      const LeafCursor& l = leaves_[i];
      size_t values = std::visit([](const auto& v) { return v.size(); }, l.levels.values);
      if (l.pos != l.levels.num_levels || l.value != values) {
        return Status::Corruption(fmt::format("{} column '{}': {} of {} levels and {} of {} values belong to no record",
                                              context_, l.col->name, l.levels.num_levels - l.pos, l.levels.num_levels,
                                              values - l.value, values));
      }
    }
    return Status::OK();
  }

 private:
  Status Corrupt(const PhysNode& n, std::string_view why) const {
    return Status::Corruption(fmt::format("{} field '{}': {}", context_, n.path, why));
  }

  // Definition and repetition level of the next entry of the first leaf under `n`.
  Status Peek(const PhysNode& n, uint32_t* def, uint32_t* rep) const {
    const LeafCursor& l = leaves_[n.leaf_begin];
    if (l.pos >= l.levels.num_levels) return Corrupt(n, "levels end before the records do");
    *def = l.Def(l.pos);
    *rep = l.Rep(l.pos);
    if (*def < static_cast<uint32_t>(n.parent_def)) {
      return Corrupt(n, fmt::format("definition level {} below the present parent's {}", *def, n.parent_def));
    }
    return Status::OK();
  }

  // Consumes one entry of every leaf under `n` for an absent `n` (null, or no element).
  Status ConsumeAbsent(const PhysNode& n, uint32_t first_rep) {
    for (size_t i = n.leaf_begin; i < n.leaf_end; ++i) {
      LeafCursor& l = leaves_[i];
      if (l.pos >= l.levels.num_levels) return Corrupt(n, "levels end before the records do");
      uint32_t d = l.Def(l.pos), r = l.Rep(l.pos);
      if (r != first_rep || d >= static_cast<uint32_t>(n.def) || d < static_cast<uint32_t>(n.parent_def)) {
        return Corrupt(n, fmt::format("column '{}' disagrees with the field's structure (levels {}/{})", l.col->name, r, d));
      }
      ++l.pos;
    }
    return Status::OK();
  }

  // A field of a present parent. `first_rep`: the repetition level each leaf's first entry must have.
  Result<Json> Field(const PhysNode& n, uint32_t first_rep) {
    if (n.repetition == Repetition::kRepeated) return Elements(n, first_rep);
    if (n.repetition == Repetition::kOptional) {
      uint32_t d = 0, r = 0;
      STOKE_RETURN_IF_ERROR(Peek(n, &d, &r));
      if (d < static_cast<uint32_t>(n.def)) {
        STOKE_RETURN_IF_ERROR(ConsumeAbsent(n, first_rep));
        return Json(nullptr);
      }
    }
    return Present(n, first_rep);
  }

  Result<Json> Elements(const PhysNode& n, uint32_t first_rep) {
    Json items = Json::array();
    uint32_t d = 0, r = 0;
    STOKE_RETURN_IF_ERROR(Peek(n, &d, &r));
    if (d < static_cast<uint32_t>(n.def)) {
      STOKE_RETURN_IF_ERROR(ConsumeAbsent(n, first_rep));
      return items;
    }
    uint32_t rep = first_rep;
    for (;;) {
      STOKE_ASSIGN_OR_RETURN(Json item, Present(n, rep));
      items.push_back(std::move(item));
      const LeafCursor& l = leaves_[n.leaf_begin];
      if (l.pos >= l.levels.num_levels || l.Rep(l.pos) != static_cast<uint32_t>(n.rep)) break;
      rep = static_cast<uint32_t>(n.rep);
    }
    return items;
  }

  Result<Json> Present(const PhysNode& n, uint32_t first_rep) {
    if (n.role == PhysNode::Role::kLeaf) return LeafValue(n, first_rep);
    Json obj = Json::object();
    for (const auto& c : n.children) {
      STOKE_ASSIGN_OR_RETURN(Json v, Field(c, first_rep));
      obj[c.name] = std::move(v);
    }
    switch (n.role) {
      case PhysNode::Role::kList2: return std::move(obj[n.children[0].name]);
      case PhysNode::Role::kList3: {
        Json items = Json::array();
        const std::string& e = n.children[0].children[0].name;
        for (auto& item : obj[n.children[0].name]) items.push_back(std::move(item[e]));
        return items;
      }
      case PhysNode::Role::kMap: {
        Json map = Json::object();
        const PhysNode& r = n.children[0];
        for (auto& kv : obj[r.name]) {
          Json& k = kv[r.children[0].name];
          if (k.is_null()) return Corrupt(n, "null map key");
          std::string key = k.is_string() ? k.template get<std::string>() : k.dump();
          map[key] = r.children.size() > 1 ? std::move(kv[r.children[1].name]) : Json(nullptr);
        }
        return map;
      }
      default: return obj;
    }
  }

  Result<Json> LeafValue(const PhysNode& n, uint32_t first_rep) {
    LeafCursor& l = leaves_[n.leaf_begin];
    if (l.pos >= l.levels.num_levels) return Corrupt(n, "levels end before the records do");
    uint32_t d = l.Def(l.pos), r = l.Rep(l.pos);
    if (r != first_rep) return Corrupt(n, fmt::format("repetition level {} where {} was expected", r, first_rep));
    if (d != static_cast<uint32_t>(n.def)) {
      return Corrupt(n, fmt::format("definition level {} where the value must be present ({})", d, n.def));
    }
    ++l.pos;
    if (prepared_ != nullptr) {
      const auto& values = (*prepared_)[n.leaf_begin];
      if (l.value >= values.size()) return Corrupt(n, "fewer values than levels at the maximum definition level");
      return values[l.value++];
    }
    return std::visit(
        [&](const auto& v) -> Result<Json> {
          using T = typename std::decay_t<decltype(v)>::value_type;
          if (l.value >= v.size()) return Corrupt(n, "fewer values than levels at the maximum definition level");
          const T& x = v[l.value++];
          if constexpr (std::is_same_v<T, std::string>) {
            if (l.col->type == Type::kInt96) {  // a legacy timestamp (in checkpoints: stats_parsed)
              const auto micros = x.size() == 12 ? Int96Micros(x) : std::nullopt;
              if (!micros) return Corrupt(n, "an INT96 value that is not a timestamp");
              return Json(FormatTimestamp(*micros, /*utc=*/true));
            }
            if (!IsValidUtf8(x)) {
              return Status::Corruption(
                  fmt::format("{} column '{}': binary value is not valid UTF-8 (only text is read as JSON)", context_,
                              l.col->name));
            }
            return Json(x);
          } else if constexpr (std::is_same_v<T, uint8_t>) {
            return Json(x != 0);
          } else {
            return Json(x);
          }
        },
        l.levels.values);
  }

  std::vector<LeafCursor>& leaves_;
  std::string context_;
  const std::vector<std::vector<Json>>* prepared_;
};

Result<PhysNode> ReaderPhysRoot(const ParquetReader& reader) {
  auto root = BuildPhysRoot(reader.metadata().schema);
  if (!root.ok()) return root.status().WithContext(reader.path());
  if (root->leaf_end != reader.columns().size()) {
    return Status::Corruption(fmt::format("{}: schema has {} leaves but the reader {} columns", reader.path(),
                                          root->leaf_end, reader.columns().size()));
  }
  return root;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
Result<SchemaNode> SchemaTree(const ParquetReader& reader) {
  STOKE_ASSIGN_OR_RETURN(PhysNode root, ReaderPhysRoot(reader));
  SchemaNode tree;
  tree.name = root.name;
  tree.repetition = Repetition::kRequired;
  tree.kind = SchemaNode::Kind::kStruct;
  for (const auto& c : root.children) tree.children.push_back(ToLogical(c, false));
  return tree;
}

Result<std::vector<json>> ReadNestedParquet(const ParquetReader& reader) {
  STOKE_ASSIGN_OR_RETURN(PhysNode root, ReaderPhysRoot(reader));
  if (root.leaf_end == 0 && reader.num_rows() > 0) {
    return Status::Corruption(fmt::format("{}: {} rows but no columns", reader.path(), reader.num_rows()));
  }
  std::vector<json> rows;
  for (int g = 0; g < reader.num_row_groups(); ++g) {
    std::vector<LeafCursor> leaves(reader.columns().size());
    for (size_t c = 0; c < leaves.size(); ++c) {
      leaves[c].col = &reader.columns()[c];
      STOKE_ASSIGN_OR_RETURN(leaves[c].levels, reader.ReadColumnChunkLevels(g, c));
    }
    Assembler<json> assembler(&leaves, fmt::format("{}: row group {}", reader.path(), g));
    const int64_t n = reader.metadata().row_groups[g].num_rows;
    for (int64_t r = 0; r < n; ++r) {
      STOKE_ASSIGN_OR_RETURN(json row, assembler.Record(root));
      rows.push_back(std::move(row));
    }
    STOKE_RETURN_IF_ERROR(assembler.Finish());
  }
  return rows;
}

namespace {

// A leaf's present values as JSON, as `stoke query` prints scalars (see ReadNestedField).
Result<std::vector<ordered_json>> LeafJson(const ParquetReader& reader, size_t leaf, ValueVector raw) {
  const LeafColumn& col = reader.columns()[leaf];
  const parquet::SchemaElement& element = reader.metadata().schema[col.schema_index];
  ColumnSpec spec = ColumnOfStored(element);
  spec.is_string = col.is_string;
  ColumnValues values{std::move(raw), {}};
  STOKE_RETURN_IF_ERROR(ConvertToColumnType(element, spec, &values, reader.path()));
  const PrintedColumn printed{col.name, spec.type, spec.is_string, spec.logical, spec.scale};
  std::vector<ordered_json> out;
  out.reserve(values.num_values());
  std::visit(
      [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        for (size_t i = 0; i < v.size(); ++i) {
          if constexpr (std::is_same_v<T, uint8_t>) {
            out.emplace_back(v[i] != 0);
          } else if constexpr (std::is_floating_point_v<T>) {
            if (std::isfinite(v[i])) out.emplace_back(static_cast<double>(v[i]));
            else out.emplace_back(CellText(printed, values.values, i));  // "nan", "inf", "-inf"
          } else if constexpr (std::is_integral_v<T>) {
            if (spec.logical == LogicalType::kNone || spec.logical == LogicalType::kByte ||
                spec.logical == LogicalType::kShort) {
              out.emplace_back(static_cast<int64_t>(v[i]));
            } else {
              out.emplace_back(CellText(printed, values.values, i));
            }
          } else {
            out.emplace_back(CellText(printed, values.values, i));
          }
        }
      },
      values.values);
  return out;
}

}  // namespace

Result<std::vector<ordered_json>> ReadNestedField(const ParquetReader& reader, int row_group, std::string_view name) {
  STOKE_ASSIGN_OR_RETURN(PhysNode root, ReaderPhysRoot(reader));
  auto field = std::find_if(root.children.begin(), root.children.end(), [&](const PhysNode& c) { return c.name == name; });
  if (field == root.children.end()) {
    return Status::NotFound(fmt::format("{}: no column named '{}'", reader.path(), name));
  }
  std::vector<LeafCursor> leaves(reader.columns().size());
  std::vector<std::vector<ordered_json>> prepared(leaves.size());
  for (size_t c = field->leaf_begin; c < field->leaf_end; ++c) {
    leaves[c].col = &reader.columns()[c];
    STOKE_ASSIGN_OR_RETURN(leaves[c].levels, reader.ReadColumnChunkLevels(row_group, c));
    STOKE_ASSIGN_OR_RETURN(prepared[c], LeafJson(reader, c, leaves[c].levels.values));
  }
  Assembler<ordered_json> assembler(&leaves, fmt::format("{}: row group {}", reader.path(), row_group), &prepared);
  const int64_t n = reader.metadata().row_groups[row_group].num_rows;
  std::vector<ordered_json> values;
  values.reserve(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    STOKE_ASSIGN_OR_RETURN(ordered_json v, assembler.TopField(*field));
    values.push_back(std::move(v));
  }
  STOKE_RETURN_IF_ERROR(assembler.Finish(field->leaf_begin, field->leaf_end));
  return values;
}

struct NestedParquetWriter::State {
  PhysNode root;
  std::vector<const PhysNode*> leaves;  // in schema order
  std::unique_ptr<ParquetFileWriter> writer;
  std::unique_ptr<RowGroupEncoder> encoder;
  std::vector<LeafSink> sinks;  // the rows of the row group being filled
  size_t rows_in_group = 0;
  size_t rows = 0;
  size_t per_group = 1;

  void ResetSinks() {
    sinks.assign(leaves.size(), LeafSink{});
    for (size_t l = 0; l < leaves.size(); ++l) {
      sinks[l].leaf = leaves[l];
      sinks[l].values = EmptyValuesFor(*leaves[l]->type);
    }
    rows_in_group = 0;
  }

  Status FlushGroup() {
    if (rows_in_group == 0) return Status::OK();
    for (size_t l = 0; l < leaves.size(); ++l) {
      LeveledValues lv;
      lv.values = std::move(sinks[l].values);
      lv.max_def = leaves[l]->def;
      lv.max_rep = leaves[l]->rep;
      if (lv.max_def > 0) lv.def_levels = std::move(sinks[l].defs);
      if (lv.max_rep > 0) lv.rep_levels = std::move(sinks[l].reps);
      lv.path_in_schema = leaves[l]->path_in_schema;
      STOKE_RETURN_IF_ERROR(encoder->SetLeveledColumn(l, std::move(lv)));
    }
    STOKE_ASSIGN_OR_RETURN(auto rg, encoder->Finish());
    STOKE_RETURN_IF_ERROR(writer->WriteRowGroup(std::move(rg)));
    ResetSinks();
    return Status::OK();
  }
};

SchemaNode LeafNode(std::string name, const ColumnSpec& column) {
  SchemaNode n;
  n.name = std::move(name);
  n.type = column.type;
  n.is_string = column.is_string;
  n.logical = column.logical;
  n.precision = column.precision;
  n.scale = column.scale;
  return n;
}

SchemaNode StructNode(std::string name, std::vector<SchemaNode> fields) {
  SchemaNode n;
  n.name = std::move(name);
  n.kind = SchemaNode::Kind::kStruct;
  n.children = std::move(fields);
  return n;
}

NestedParquetWriter::NestedParquetWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
NestedParquetWriter::~NestedParquetWriter() = default;

Result<std::unique_ptr<NestedParquetWriter>> NestedParquetWriter::Create(Storage& storage, const std::string& path,
                                                                         const SchemaNode& root_fields,
                                                                         const WriterOptions& options) {
  if (root_fields.kind != SchemaNode::Kind::kStruct || root_fields.children.empty()) {
    return Status::InvalidArgument("a nested schema's root must be a struct with at least one field");
  }
  std::vector<parquet::SchemaElement> schema(1);
  schema[0].name = root_fields.name.empty() ? "schema" : root_fields.name;
  schema[0].num_children = static_cast<int32_t>(root_fields.children.size());
  std::set<std::string> names;
  for (const auto& c : root_fields.children) {
    if (!names.insert(c.name).second) return Status::InvalidArgument(fmt::format("duplicate top-level field '{}'", c.name));
    STOKE_RETURN_IF_ERROR(AppendSchema(c, "", 1, &schema));
  }
  auto state = std::make_unique<State>();
  STOKE_ASSIGN_OR_RETURN(state->root, BuildPhysRoot(schema));
  std::vector<const PhysNode*> stack = {&state->root};
  while (!stack.empty()) {
    const PhysNode* n = stack.back();
    stack.pop_back();
    if (n->role == PhysNode::Role::kLeaf) {
      state->leaves.push_back(n);
      continue;
    }
    for (auto it = n->children.rbegin(); it != n->children.rend(); ++it) stack.push_back(&*it);
  }
  std::vector<ColumnSpec> specs;
  for (const PhysNode* l : state->leaves) {
    specs.push_back({.name = l->path, .type = *l->type, .optional = l->def > 0, .is_string = l->is_string});
  }
  STOKE_ASSIGN_OR_RETURN(state->writer, ParquetFileWriter::CreateNested(storage, path, specs, schema, options));
  state->encoder = std::make_unique<RowGroupEncoder>(state->writer->columns(), state->writer->options());
  state->per_group = static_cast<size_t>(std::max<int64_t>(1, options.row_group_rows));
  state->ResetSinks();
  return std::unique_ptr<NestedParquetWriter>(new NestedParquetWriter(std::move(state)));
}

Status NestedParquetWriter::AddRow(const json& row) {
  Shredder shredder(&state_->sinks);
  STOKE_RETURN_IF_ERROR(shredder.Row(state_->root, row, state_->rows));
  ++state_->rows;
  if (++state_->rows_in_group == state_->per_group) return state_->FlushGroup();
  return Status::OK();
}

Status NestedParquetWriter::Close() {
  STOKE_RETURN_IF_ERROR(state_->FlushGroup());
  return state_->writer->Close();
}

Status WriteNestedParquet(Storage& storage, const std::string& path, const SchemaNode& root_fields,
                          const std::vector<json>& rows, const WriterOptions& options) {
  STOKE_ASSIGN_OR_RETURN(auto writer, NestedParquetWriter::Create(storage, path, root_fields, options));
  for (const json& row : rows) STOKE_RETURN_IF_ERROR(writer->AddRow(row));
  return writer->Close();
}

}  // namespace stoke
