#include "loader/array_cells.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>
#include <variant>

#include "format/logical_value.h"
#include "format/parquet_nested.h"
#include "loader/scalar_columns.h"

namespace stoke {
namespace {

Status NotAnArray(const std::string& name, std::string_view why) {
  return Status::Unsupported(fmt::format("column '{}' {}: the loader delivers arrays (lists, nested to any depth) of "
                                         "numbers, booleans, dates and timestamps as tensors; select other columns, "
                                         "or read it with a query",
                                         name, why));
}

// Appends the present values of a chunk, converted to the leaf's delivered type, to `out` as bytes.
Status AppendValueBytes(const ParquetReader& reader, const ArrayLeaf& leaf, ValueVector values, AlignedBuffer* out) {
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

// The shape of one row of a list column: entries [begin, end) of `levels` (repetition level 0 at
// begin, none after), or nullopt unless every entry is a present value and every list at each depth
// has as many elements as the others at that depth.
std::optional<std::array<int64_t, ArrayCells::kMaxDepth + 1>> RowShape(const ColumnLevels& levels,
                                                                         const ArrayLeaf& leaf, size_t begin,
                                                                         size_t end) {
  std::array<int64_t, ArrayCells::kMaxDepth + 1> count{}, shape{};
  shape.fill(-1);
  // Closes the list open at depth j: it must have as many elements as the first closed there.
  auto close = [&](int j) {
    if (shape[j] < 0) shape[j] = count[j];
    return shape[j] == count[j];
  };
  for (size_t k = begin; k < end; ++k) {
    if (leaf.max_def > 0 && levels.def_levels[k] != leaf.max_def) return std::nullopt;  // a null or an empty list
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

// The entries [begin, end) of row `row` (counted from 0 at the first entry) of a chunk's levels.
std::optional<std::pair<size_t, size_t>> RowEntries(const ColumnLevels& levels, int64_t row) {
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
  if (depth > ArrayCells::kMaxDepth) return NotAnArray(name, fmt::format("nests lists deeper than {}", ArrayCells::kMaxDepth));
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
  const ColumnSpec spec = ColumnOfStored(reader.metadata().schema[it->schema_index]);
  if (spec.is_string || spec.logical == LogicalType::kDecimal || spec.type == parquet::Type::kByteArray ||
      spec.type == parquet::Type::kFixedLenByteArray || spec.type == parquet::Type::kInt96) {
    return NotAnArray(name, "is a list of strings, binary values or decimals");
  }
  STOKE_ASSIGN_OR_RETURN(leaf.dtype, ScalarColumns::DTypeOf(spec));
  return leaf;
}

Status FlattenArrayRows(const ColumnLevels& levels, const ArrayLeaf& leaf, std::vector<int64_t>* shape,
                        DecodedPage* out) {
  const size_t es = DTypeSize(leaf.dtype);
  const size_t n = levels.num_levels;
  if (levels.rep_levels.size() != n || (leaf.max_def > 0 && levels.def_levels.size() != n)) {
    return Status::Internal("array column levels of an unexpected size");
  }
  out->offsets.clear();
  size_t value = 0;  // present values before the row
  for (size_t begin = 0, end = 0; begin < n; begin = end) {
    end = begin + 1;
    while (end < n && levels.rep_levels[end] != 0) ++end;
    size_t present = 0;
    for (size_t k = begin; k < end; ++k) present += leaf.max_def == 0 || levels.def_levels[k] == leaf.max_def;
    const auto row = RowShape(levels, leaf, begin, end);
    const std::vector<int64_t> row_shape =
        row ? std::vector<int64_t>(row->begin() + 1, row->begin() + 1 + leaf.depth) : std::vector<int64_t>{};
    if (row && shape->empty()) *shape = row_shape;  // learnt from the first dense row
    out->offsets.push_back(row && row_shape == *shape ? static_cast<uint32_t>(value * es) : DecodedPage::kNull);
    value += present;
  }
  int64_t row_values = 1;
  for (int64_t d : *shape) row_values *= d;
  out->value_size = static_cast<size_t>(row_values) * es;
  if (value * es > UINT32_MAX) return Status::Unsupported("an array column chunk of more than 4 GiB");
  return Status::OK();
}

Result<ArrayLeaf> ArrayCells::LeafOf(const std::string& name, const Place& place) {
  {
    MutexLock l(&mu_);
    auto it = leaves_.find({place.file, name});
    if (it != leaves_.end()) return it->second;
  }
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(*place.reader, name));
  MutexLock l(&mu_);
  leaves_.emplace(std::make_pair(place.file, name), leaf);
  return leaf;
}

Result<std::shared_ptr<const DecodedPage>> ArrayCells::Chunk(const std::string& name, const Place& place, DType dtype,
                                                             std::vector<int64_t>* shape) {
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, LeafOf(name, place));
  if (leaf.dtype != dtype) {
    return Status::Corruption(fmt::format("{}: column '{}' holds {} values where other files hold {}", place.reader->path(),
                                          name, DTypeName(leaf.dtype), DTypeName(dtype)));
  }
  const uint64_t key = (uint64_t{leaf.leaf} << 32) | static_cast<uint32_t>(place.row_group);
  return cache_.GetOrLoad(place.file, key, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
    STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, place.reader->ReadColumnChunkLevels(place.row_group, leaf.leaf));
    auto decoded = std::make_shared<DecodedPage>();
    STOKE_RETURN_IF_ERROR(AppendValueBytes(*place.reader, leaf, std::move(levels.values), &decoded->body));
    levels.values = ValueVector{};
    STOKE_RETURN_IF_ERROR(FlattenArrayRows(levels, leaf, shape, decoded.get()));
    return std::shared_ptr<const DecodedPage>(std::move(decoded));
  });
}

Result<std::pair<DType, std::vector<int64_t>>> ArrayCells::Probe(const std::string& name, int64_t row) {
  STOKE_ASSIGN_OR_RETURN(Place place, readers_.Locate(row));
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(*place.reader, name));
  STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, place.reader->ReadColumnChunkLevels(place.row_group, leaf.leaf));
  const auto entries = RowEntries(levels, place.row_in_group);
  const auto shape = entries ? RowShape(levels, leaf, entries->first, entries->second) : std::nullopt;
  if (!shape) {
    return Status::InvalidArgument(fmt::format(
        "{}: row {} of column '{}' is not an array the loader can deliver (a null, an empty or ragged list, or a null "
        "element), and its shape would set the column's",
        place.reader->path(), place.row_in_file, name));
  }
  return std::make_pair(leaf.dtype, std::vector<int64_t>(shape->begin() + 1, shape->begin() + 1 + leaf.depth));
}

Status ArrayCells::ReadCell(const std::string& name, DType dtype, const std::vector<int64_t>& shape, int64_t row,
                            AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(Place place, readers_.Locate(row));
  std::vector<int64_t> expected = shape;
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const DecodedPage> chunk, Chunk(name, place, dtype, &expected));
  const size_t r = static_cast<size_t>(place.row_in_group);
  if (r >= chunk->offsets.size()) {
    return Status::Corruption(fmt::format("{}: row group {} of column '{}' holds {} rows, not {}", place.reader->path(),
                                          place.row_group, name, chunk->offsets.size(), r + 1));
  }
  if (chunk->offsets[r] == DecodedPage::kNull) {
    return Status::InvalidArgument(fmt::format(
        "not an array of shape [{}] (a null, an empty or ragged list, a null element, or another shape)",
        fmt::join(shape, ", ")));
  }
  out->Clear();
  out->Append(chunk->body.data() + chunk->offsets[r], chunk->value_size);
  return Status::OK();
}

}  // namespace stoke
