// Cells of other writers' columns as tensors (parquet_cells.h).
#include "format/parquet_cells.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "format/dtype.h"
#include "format/logical_value.h"
#include "format/npy.h"
#include "format/parquet_nested.h"

namespace stoke {
namespace {

Status NotAnArray(const std::string& name, std::string_view why) {
  return Status::Unsupported(fmt::format("column '{}' {}: stoke delivers arrays (lists, nested to any depth) of "
                                         "numbers, booleans, dates and timestamps as tensors; select other columns, "
                                         "or read it with a query",
                                         name, why));
}

// The shape of one row (entries [begin, end) of `levels`) with the outermost entry first (shape[0]
// unused, shape[j] the length of the lists at depth j), or nullopt unless every entry is an element
// (a present value, or with `with_nulls` a null one) and every list at each depth has as many
// elements as the others at that depth.
std::optional<std::array<int64_t, kMaxArrayDepth + 1>> RowShape(const ColumnLevels& levels, const ArrayLeaf& leaf,
                                                                size_t begin, size_t end, bool with_nulls) {
  std::array<int64_t, kMaxArrayDepth + 1> count{}, shape{};
  shape.fill(-1);
  // Closes the list open at depth j: it must have as many elements as the first closed there.
  auto close = [&](int j) {
    if (shape[j] < 0) shape[j] = count[j];
    return shape[j] == count[j];
  };
  const uint32_t element_def = with_nulls ? leaf.list_defs[leaf.depth - 1] : leaf.max_def;
  for (size_t k = begin; k < end; ++k) {
    if (leaf.max_def > 0 && levels.def_levels[k] < element_def) return std::nullopt;  // a null or an empty list
    const int rep = static_cast<int>(levels.rep_levels[k]);
    if (rep >= 1) ++count[rep];  // another element of the list at depth rep
    for (int j = rep + 1; j <= leaf.depth; ++j) {  // a new list at depth j, after the one before it
      if (k != begin && !close(j)) return std::nullopt;
      count[j] = 1;
    }
  }
  for (int j = 1; j <= leaf.depth; ++j) {
    if (!close(j)) return std::nullopt;
  }
  return shape;
}

size_t LeafCount(const SchemaNode& n) {
  if (n.kind == SchemaNode::Kind::kLeaf) return 1;
  size_t count = 0;
  for (const SchemaNode& c : n.children) count += LeafCount(c);
  return count;
}

// The dtype an array's elements are delivered as (that of the loader's scalar columns): dates as
// int32 days, timestamps as int64 microseconds, bytes and shorts as int32. Unsupported for others.
Result<DType> ElementDType(const ColumnSpec& c) {
  if (auto dtype = DTypeOfPhysicalType(c.type)) return *dtype;
  return Status::Unsupported(fmt::format("column '{}' of type {}", c.name, SparkTypeName(c)));
}

Status NotBinary(const std::string& name) {
  return Status::Unsupported(fmt::format(
      "column '{}' is neither a binary column nor a struct with a binary field 'bytes': stoke delivers binary "
      "cells that hold .npy arrays or JPEG/PNG images",
      name));
}

bool IsBinaryLeaf(const LeafColumn& c) {
  return c.type == parquet::Type::kByteArray && !c.is_string && c.max_repetition_level == 0;
}

}  // namespace

Result<ArrayLeaf> FindArrayLeaf(const ParquetReader& reader, const std::string& name) {
  STOKE_ASSIGN_OR_RETURN(SchemaNode root, SchemaTree(reader));
  auto field = std::find_if(root.children.begin(), root.children.end(), [&](const SchemaNode& f) { return f.name == name; });
  if (field == root.children.end()) return Status::NotFound(fmt::format("{}: no column '{}'", reader.path(), name));
  const SchemaNode* n = &*field;
  int depth = 0;
  while (n->kind == SchemaNode::Kind::kList) {
    n = &n->children[0];
    ++depth;
  }
  if (depth == 0) return NotAnArray(name, "is not a list");
  if (n->kind != SchemaNode::Kind::kLeaf) return NotAnArray(name, "is a list of structs or maps");
  if (depth > kMaxArrayDepth) return NotAnArray(name, fmt::format("nests lists deeper than {}", kMaxArrayDepth));
  ArrayLeaf leaf;
  leaf.depth = depth;
  const auto& columns = reader.columns();
  size_t before = 0;  // leaves of the top-level fields before this one (depth-first order)
  for (auto f = root.children.begin(); f != field; ++f) before += LeafCount(*f);
  auto it = columns.begin() + static_cast<std::ptrdiff_t>(std::min(before, columns.size()));
  if (it == columns.end() || it->name.rfind(name + ".", 0) != 0 || it->max_repetition_level != depth) {
    return Status::Corruption(fmt::format("{}: column '{}': its leaf does not match its list nesting", reader.path(), name));
  }
  leaf.leaf = static_cast<size_t>(it - columns.begin());
  leaf.max_def = static_cast<uint32_t>(it->max_definition_level);
  for (int j = 0; j < depth; ++j) leaf.list_defs[j] = static_cast<uint32_t>(it->repeated_def_levels[j]);
  const ColumnSpec spec = ColumnOfStored(reader.metadata().schema[it->schema_index]);
  if (spec.is_string || spec.logical == LogicalType::kDecimal || spec.type == parquet::Type::kByteArray ||
      spec.type == parquet::Type::kFixedLenByteArray || spec.type == parquet::Type::kInt96) {
    return NotAnArray(name, "is a list of strings, binary values or decimals");
  }
  STOKE_ASSIGN_OR_RETURN(leaf.dtype, ElementDType(spec));
  return leaf;
}

namespace {

// FlattenArrayRows for one level of lists (Spark's array<float>): a row is dense when every entry is
// a present value, its shape its length. One pass over the levels.
size_t FlattenFlatRows(const ColumnLevels& levels, const ArrayLeaf& leaf, size_t es, std::vector<int64_t>* shape,
                       ArrayRows* out) {
  const size_t n = levels.num_levels;
  const uint32_t* reps = levels.rep_levels.data();
  const uint32_t* defs = levels.def_levels.data();
  size_t value = 0;  // present values before the row
  for (size_t begin = 0, end = 0; begin < n; begin = end) {
    end = begin + 1;
    while (end < n && reps[end] != 0) ++end;
    size_t present = end - begin;
    if (leaf.max_def > 0) present = static_cast<size_t>(std::count(defs + begin, defs + end, leaf.max_def));
    const bool dense = present == end - begin;
    const auto length = static_cast<int64_t>(end - begin);
    if (dense && shape->empty()) shape->push_back(length);  // learnt from the first dense row
    const bool fits = dense && shape->size() == 1 && (*shape)[0] == length;
    out->offsets.push_back(fits ? static_cast<uint32_t>(value * es) : ArrayRows::kNull);
    value += present;
  }
  return value;
}

}  // namespace

Status FlattenArrayRows(const ColumnLevels& levels, const ArrayLeaf& leaf, std::vector<int64_t>* shape,
                        ArrayRows* out) {
  const size_t es = DTypeSize(leaf.dtype);
  const size_t n = levels.num_levels;
  if (levels.rep_levels.size() != n || (leaf.max_def > 0 && levels.def_levels.size() != n)) {
    return Status::Internal("array column levels of an unexpected size");
  }
  out->offsets.clear();
  size_t value = 0;  // present values before the row
  if (leaf.depth == 1) value = FlattenFlatRows(levels, leaf, es, shape, out);
  for (size_t begin = 0, end = 0; leaf.depth != 1 && begin < n; begin = end) {
    end = begin + 1;
    while (end < n && levels.rep_levels[end] != 0) ++end;
    size_t present = 0;
    for (size_t k = begin; k < end; ++k) present += leaf.max_def == 0 || levels.def_levels[k] == leaf.max_def;
    const auto row = RowShape(levels, leaf, begin, end, false);
    const std::vector<int64_t> row_shape =
        row ? std::vector<int64_t>(row->begin() + 1, row->begin() + 1 + leaf.depth) : std::vector<int64_t>{};
    if (row && shape->empty()) *shape = row_shape;  // learnt from the first dense row
    out->offsets.push_back(row && row_shape == *shape ? static_cast<uint32_t>(value * es) : ArrayRows::kNull);
    value += present;
  }
  int64_t row_values = 1;
  for (int64_t d : *shape) row_values *= d;
  out->value_size = static_cast<size_t>(row_values) * es;
  if (value * es > UINT32_MAX) return Status::Unsupported("an array column chunk of more than 4 GiB");
  return Status::OK();
}

void FlattenDenseListRows(const DenseListPage& page, size_t value_size, std::vector<int64_t>* shape, ArrayRows* out) {
  if (shape->empty() && !page.row_lengths.empty()) shape->push_back(page.row_lengths[0]);
  const int64_t length = shape->size() == 1 ? (*shape)[0] : -1;
  out->offsets.clear();
  out->offsets.reserve(page.row_lengths.size());
  size_t at = page.values_offset;
  for (uint32_t n : page.row_lengths) {
    out->offsets.push_back(n == length ? static_cast<uint32_t>(at) : ArrayRows::kNull);
    at += size_t{n} * value_size;
  }
  out->value_size = length < 0 ? 0 : static_cast<size_t>(length) * value_size;
}

Status AppendArrayValues(const ParquetReader& reader, const ArrayLeaf& leaf, ValueVector values, AlignedBuffer* out) {
  const parquet::SchemaElement& stored = reader.metadata().schema[reader.columns()[leaf.leaf].schema_index];
  ColumnValues converted{std::move(values), {}};
  STOKE_RETURN_IF_ERROR(ConvertToColumnType(stored, ColumnOfStored(stored), &converted, reader.path()));
  return std::visit(
      [&](const auto& v) -> Status {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_arithmetic_v<T>) {
          if (sizeof(T) != DTypeSize(leaf.dtype)) return Status::Internal("array values of an unexpected width");
          out->Append(v.data(), v.size() * sizeof(T));
          return Status::OK();
        } else {
          return Status::Internal("array values that are not numbers");
        }
      },
      converted.values);
}

bool ArrayValuesAreStoredBytes(const ParquetReader& reader, const ArrayLeaf& leaf) {
  const LeafColumn& col = reader.columns()[leaf.leaf];
  const parquet::SchemaElement& stored = reader.metadata().schema[col.schema_index];
  switch (col.type) {
    case parquet::Type::kFloat: return leaf.dtype == DType::kFloat32;
    case parquet::Type::kDouble: return leaf.dtype == DType::kFloat64;
    case parquet::Type::kInt32:
    case parquet::Type::kInt64:
      return !stored.logical_type && !stored.converted_type && DTypeOfPhysicalType(col.type) == leaf.dtype;
    default: return false;
  }
}

std::optional<std::pair<size_t, size_t>> ArrayRowEntries(const ColumnLevels& levels, int64_t row) {
  int64_t seen = -1;
  size_t begin = 0;
  for (size_t k = 0; k < levels.num_levels; ++k) {
    if (levels.rep_levels[k] != 0) continue;
    if (seen == row) return std::make_pair(begin, k);
    ++seen;
    begin = k;
  }
  if (seen == row) return std::make_pair(begin, levels.num_levels);
  return std::nullopt;
}

std::optional<std::vector<int64_t>> ArrayEntriesShape(const ColumnLevels& levels, const ArrayLeaf& leaf, size_t begin,
                                                      size_t end, bool with_nulls) {
  const auto shape = RowShape(levels, leaf, begin, end, with_nulls);
  if (!shape) return std::nullopt;
  return std::vector<int64_t>(shape->begin() + 1, shape->begin() + 1 + leaf.depth);
}

std::optional<std::vector<int64_t>> ArrayRowShape(const ColumnLevels& levels, const ArrayLeaf& leaf, int64_t row,
                                                  bool with_nulls) {
  const auto entries = ArrayRowEntries(levels, row);
  if (!entries) return std::nullopt;
  return ArrayEntriesShape(levels, leaf, entries->first, entries->second, with_nulls);
}

Result<size_t> FindBinaryLeaf(const ParquetReader& reader, const std::string& name) {
  auto flat = reader.FindColumn(name);
  if (flat.ok()) {
    if (!IsBinaryLeaf(reader.columns()[*flat])) return NotBinary(name);
    return *flat;
  }
  auto field = reader.FindColumn(name + ".bytes");
  if (field.ok()) {
    if (!IsBinaryLeaf(reader.columns()[*field])) return NotBinary(name);
    return *field;
  }
  for (const LeafColumn& c : reader.columns()) {
    if (c.name.rfind(name + ".", 0) == 0) return NotBinary(name);
  }
  return Status::NotFound(fmt::format("{}: no column '{}'", reader.path(), name));
}

std::vector<int64_t> ValueIndexOfRows(const ColumnLevels& levels, uint32_t max_def, int64_t rows) {
  std::vector<int64_t> index;
  int64_t next = 0;
  for (size_t k = 0; k < levels.num_levels && static_cast<int64_t>(index.size()) < rows; ++k) {
    const bool present = max_def == 0 || levels.def_levels[k] == max_def;
    index.push_back(present ? next++ : -1);
  }
  return index;
}

BinaryCellKind BinaryCellKindOf(ByteView cell) {
  static constexpr uint8_t kNpyMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  static constexpr uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto starts = [&](const uint8_t* magic, size_t n) { return cell.size() >= n && std::memcmp(cell.data(), magic, n) == 0; };
  if (starts(kNpyMagic, sizeof(kNpyMagic))) return BinaryCellKind::kNpy;
  if (starts(kPngMagic, sizeof(kPngMagic))) return BinaryCellKind::kImage;
  const bool jpeg = cell.size() >= 3 && cell[0] == 0xFF && cell[1] == 0xD8 && cell[2] == 0xFF;  // JPEG SOI
  if (jpeg) return BinaryCellKind::kImage;
  return BinaryCellKind::kOther;
}

Result<ByteView> NpyCellData(ByteView cell, DType dtype, const std::vector<int64_t>& shape, AlignedBuffer* scratch) {
  STOKE_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(cell, "cell"));
  if (h.dtype != dtype || h.shape != shape) {
    return Status::InvalidArgument(fmt::format("the cell holds a .npy array of {} [{}], the column's first row {} [{}]",
                                               DTypeName(h.dtype), fmt::join(h.shape, ", "), DTypeName(dtype),
                                               fmt::join(shape, ", ")));
  }
  if (!h.big_endian && !h.fortran_order) {
    if (cell.size() != h.data_offset + h.data_size) {
      return Status::Corruption(fmt::format("the .npy cell holds {} bytes of data where its header needs {}",
                                            cell.size() - std::min(cell.size(), h.data_offset), h.data_size));
    }
    return cell.subspan(h.data_offset, h.data_size);
  }
  STOKE_ASSIGN_OR_RETURN(NpyArray a, DecodeNpy(cell, "cell"));
  *scratch = std::move(a.data);
  return scratch->view();
}

}  // namespace stoke
