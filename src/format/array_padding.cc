// Array rows padded to a fixed shape and null elements filled in (array_padding.h).
#include "format/array_padding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/small_float.h"

namespace stoke {
namespace {

template <typename T>
std::vector<uint8_t> BytesOf(T v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

// `fill` as integer type T, when T holds it exactly.
template <typename T>
std::optional<std::vector<uint8_t>> IntegerBytes(double fill) {
  if (std::trunc(fill) != fill) return std::nullopt;
  // The bounds as doubles: the lowest is exact (a power of two), one past the highest too.
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double past = 2.0 * static_cast<double>(std::numeric_limits<T>::max() / 2 + 1);
  if (!(fill >= lo && fill < past)) return std::nullopt;
  return BytesOf(static_cast<T>(fill));
}

std::optional<std::vector<uint8_t>> FillBytesOf(double fill, DType dtype) {
  switch (dtype) {
    case DType::kBool:
      if (fill != 0 && fill != 1) return std::nullopt;
      return BytesOf(static_cast<uint8_t>(fill));
    case DType::kInt8: return IntegerBytes<int8_t>(fill);
    case DType::kInt16: return IntegerBytes<int16_t>(fill);
    case DType::kInt32: return IntegerBytes<int32_t>(fill);
    case DType::kInt64: return IntegerBytes<int64_t>(fill);
    case DType::kUInt8: return IntegerBytes<uint8_t>(fill);
    case DType::kUInt16: return IntegerBytes<uint16_t>(fill);
    case DType::kUInt32: return IntegerBytes<uint32_t>(fill);
    case DType::kUInt64: return IntegerBytes<uint64_t>(fill);
    case DType::kFloat16: return BytesOf(Float64ToFloat16Bits(fill));
    case DType::kBFloat16: return BytesOf(Float64ToBFloat16Bits(fill));
    case DType::kFloat32: return BytesOf(static_cast<float>(fill));
    case DType::kFloat64: return BytesOf(fill);
  }
  return std::nullopt;
}

// Where the element at `index` lies in a row-major tensor of `shape`, in elements.
int64_t Position(const std::array<int64_t, kMaxArrayDepth>& index, const std::vector<int64_t>& shape) {
  int64_t at = 0;
  for (size_t j = 0; j < shape.size(); ++j) at = at * shape[j] + index[j];
  return at;
}

// Why an entry reaching only `reach` levels (an empty or null list at depth reach + 1) is not an
// element.
std::string Missing(const ArrayLeaf& leaf, int reach, uint32_t def) {
  const bool empty = def + 1 == leaf.list_defs[reach];
  if (reach == 0) return empty ? "an empty list" : "a null row";
  return fmt::format("{} list at depth {}", empty ? "an empty" : "a null", reach + 1);
}

// Lays out the row in entries [begin, end) of `levels` in a tensor of `shape`: put(position, k) for
// each element, k its entry. `pad`: lists shorter than the shape, and empty or null lists, leave
// their places to the caller's fill; else the row must fill the shape exactly. `null_elements`: a
// null element is put too (its entry's definition level below leaf.max_def); else it is a problem.
// Returns what is wrong with the row, or "" when it fits.
template <typename Put>
std::string LayOutRow(const ColumnLevels& levels, const ArrayLeaf& leaf, size_t begin, size_t end,
                      const std::vector<int64_t>& shape, bool pad, bool null_elements, Put put) {
  const int depth = leaf.depth;
  const bool bounded = static_cast<int>(shape.size()) == depth;  // else the shape is not known: no bounds
  std::array<int64_t, kMaxArrayDepth> index{};
  int64_t placed = 0;
  for (size_t k = begin; k < end; ++k) {
    const uint32_t def = levels.def_levels.empty() ? leaf.max_def : levels.def_levels[k];
    if (k != begin) {  // the next element of the list at depth rep; the lists inside it start anew
      const int rep = static_cast<int>(levels.rep_levels[k]);
      ++index[rep - 1];
      for (int j = rep; j < depth; ++j) index[j] = 0;
    }
    int reach = 0;  // the lists this entry has an element in
    while (reach < depth && def >= leaf.list_defs[reach]) ++reach;
    for (int j = 0; j < reach && bounded; ++j) {
      if (index[j] >= shape[j]) return fmt::format("a list of more than {} elements at depth {}", shape[j], j + 1);
    }
    if (reach < depth) {
      if (pad) continue;
      return Missing(leaf, reach, def);
    }
    if (def != leaf.max_def && !null_elements) {
      return fmt::format("a null element at [{}]", fmt::join(index.begin(), index.begin() + depth, ", "));
    }
    put(bounded ? Position(index, shape) : 0, k);
    ++placed;
  }
  int64_t size = 1;
  for (int64_t d : shape) size *= d;
  if (!bounded) return ArrayEntriesShape(levels, leaf, begin, end, null_elements) ? "" : "a ragged list";
  if (!pad && placed != size) return fmt::format("a ragged list, or another shape than [{}]", fmt::join(shape, ", "));
  return {};
}

// The chunk's entries, each with the index of its value among the present ones (-1: none); *present:
// how many there are.
std::vector<int64_t> ValueIndexOfEntries(const ColumnLevels& levels, uint32_t max_def, int64_t* present) {
  std::vector<int64_t> index(levels.num_levels, -1);
  int64_t next = 0;
  for (size_t k = 0; k < levels.num_levels; ++k) {
    if (levels.def_levels.empty() || levels.def_levels[k] == max_def) index[k] = next++;
  }
  *present = next;
  return index;
}

// Sets the `count` elements at `at` to `fill`.
void FillRow(uint8_t* at, size_t count, const std::vector<uint8_t>& fill) {
  if (std::all_of(fill.begin(), fill.end(), [](uint8_t b) { return b == 0; })) {
    std::memset(at, 0, count * fill.size());
    return;
  }
  for (size_t v = 0; v < count; ++v) std::memcpy(at + v * fill.size(), fill.data(), fill.size());
}

}  // namespace

Result<std::vector<uint8_t>> ArrayFillBytes(double fill, DType dtype) {
  auto bytes = FillBytesOf(fill, dtype);
  if (!bytes) {
    return Status::InvalidArgument(fmt::format("fill value {} is not a {} value", fill, DTypeName(dtype)));
  }
  return std::move(*bytes);
}

Status CheckArrayPadding(const ArrayPadding& padding, const ArrayLeaf& leaf, const std::string& name) {
  if (padding.shape.empty()) return Status::OK();
  if (static_cast<int>(padding.shape.size()) != leaf.depth) {
    return Status::InvalidArgument(fmt::format("pad['{}']: [{}] gives {} lengths, but the column nests {} lists", name,
                                               fmt::join(padding.shape, ", "), padding.shape.size(), leaf.depth));
  }
  int64_t size = static_cast<int64_t>(DTypeSize(leaf.dtype));
  for (int64_t d : padding.shape) {
    if (d <= 0 || __builtin_mul_overflow(size, d, &size) || size > (int64_t{1} << 31)) {
      return Status::InvalidArgument(fmt::format("pad['{}']: [{}] is not a shape of positive lengths of at most 2 GiB "
                                                 "a row", name, fmt::join(padding.shape, ", ")));
    }
  }
  return Status::OK();
}

Status PadArrayRows(const ColumnLevels& levels, const ArrayLeaf& leaf, ByteView values, const ArrayPadding& padding,
                    const std::vector<uint8_t>& fill, std::vector<int64_t>* shape, AlignedBuffer* body, ArrayRows* out) {
  const size_t es = DTypeSize(leaf.dtype);
  const size_t n = levels.num_levels;
  if (levels.rep_levels.size() != n || (!levels.def_levels.empty() && levels.def_levels.size() != n) ||
      fill.size() != es) {
    return Status::Internal("array column levels of an unexpected size");
  }
  const bool pad = !padding.shape.empty();
  if (pad) *shape = padding.shape;
  if (!shape->empty() && static_cast<int>(shape->size()) != leaf.depth) {
    return Status::InvalidArgument(fmt::format("the column nests {} lists here, where its shape is [{}]", leaf.depth,
                                               fmt::join(*shape, ", ")));
  }
  int64_t present = 0;
  const std::vector<int64_t> value_of = ValueIndexOfEntries(levels, leaf.max_def, &present);
  if (values.size() != static_cast<size_t>(present) * es) return Status::Corruption("array values that disagree with their levels in number");
  out->offsets.clear();
  std::vector<std::pair<size_t, size_t>> rows;
  for (size_t begin = 0, end = 0; begin < n; begin = end) {
    end = begin + 1;
    while (end < n && levels.rep_levels[end] != 0) ++end;
    rows.emplace_back(begin, end);
    if (shape->empty()) {
      if (auto learnt = ArrayEntriesShape(levels, leaf, begin, end, padding.fill.has_value())) *shape = *learnt;
    }
  }
  int64_t row_values = 1;
  for (int64_t d : *shape) row_values *= d;
  out->value_size = static_cast<size_t>(row_values) * es;
  if (rows.size() * out->value_size > UINT32_MAX) return Status::Unsupported("padded array rows of more than 4 GiB a page");
  body->Resize(rows.size() * out->value_size);
  uint8_t* at = body->data();
  for (const auto& [begin, end] : rows) {
    FillRow(at, static_cast<size_t>(row_values), fill);
    const std::string problem =
        shape->empty() ? "no row of the page has a shape"
                       : LayOutRow(levels, leaf, begin, end, *shape, pad, padding.fill.has_value(), [&](int64_t pos, size_t k) {
                           if (value_of[k] < 0) return;  // a null element: the fill is there already
                           const size_t from = static_cast<size_t>(value_of[k]) * es;
                           std::memcpy(at + static_cast<size_t>(pos) * es, values.data() + from, es);
                         });
    out->offsets.push_back(problem.empty() ? static_cast<uint32_t>(at - body->data()) : ArrayRows::kNull);
    at += out->value_size;
  }
  return Status::OK();
}

std::string ArrayRowProblem(const ColumnLevels& levels, const ArrayLeaf& leaf, int64_t row,
                            const std::vector<int64_t>& shape, const ArrayPadding& padding) {
  const auto entries = ArrayRowEntries(levels, row);
  if (!entries) return "no such row";
  return LayOutRow(levels, leaf, entries->first, entries->second, shape, !padding.shape.empty(),
                   padding.fill.has_value(), [](int64_t, size_t) {});
}

}  // namespace stoke
