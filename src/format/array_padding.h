// Array rows that are not dense arrays of one shape, delivered anyway when the user asks
// (LoaderOptions::pad and fill): ragged lists padded to a fixed shape, null elements filled in.
//
// An array column's row (parquet_cells.h) nests lists depth levels deep. Without padding, every
// row must be a dense rectangular array of the column's one shape. With a padding shape (one length
// per level), a row is laid out in a tensor of that shape: each list's elements at the start of its
// dimension, the rest `fill` (0 unless given); an empty or null list, or a null row, is all fill; a
// list longer than its length is still an error. With a fill value, a null element is that value
// instead of an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_cells.h"
#include "stoke/status.h"

namespace stoke {

// How one array column's rows are laid out beyond the dense ones.
struct ArrayPadding {
  std::vector<int64_t> shape;  // pad every row to this shape (one length per level); empty: no padding
  std::optional<double> fill;  // null elements and padding; nullopt: a null element is an error, padding 0
  bool active() const { return !shape.empty() || fill.has_value(); }
};

// `fill` as one element of `dtype`, in its bytes (little-endian). InvalidArgument when `dtype` cannot
// hold it exactly: a fraction or an out-of-range value for an integer, anything but 0 or 1 for a bool.
Result<std::vector<uint8_t>> ArrayFillBytes(double fill, DType dtype);

// Checks that `padding` fits column `name` of `leaf`'s nesting: one positive length per level.
Status CheckArrayPadding(const ArrayPadding& padding, const ArrayLeaf& leaf, const std::string& name);

// Lays out every row of a decoded list-column chunk or page as its own `*shape` tensor in *body:
// `values` are the chunk's present values (AppendArrayValues), `fill` one element (ArrayFillBytes).
// out->offsets[r] is row r's offset in *body, or ArrayRows::kNull for a row that does not fit
// (ArrayRowProblem says why). *shape: padding.shape when given; else, when empty, set from the first
// row that is rectangular once its null elements count as elements.
Status PadArrayRows(const ColumnLevels& levels, const ArrayLeaf& leaf, ByteView values, const ArrayPadding& padding,
                    const std::vector<uint8_t>& fill, std::vector<int64_t>* shape, AlignedBuffer* body, ArrayRows* out);

// Why row `row` of a chunk's levels is not delivered as a `shape` array under `padding` (a null row,
// an empty list, a null element, a list longer than the padding, another shape); empty when it is.
std::string ArrayRowProblem(const ColumnLevels& levels, const ArrayLeaf& leaf, int64_t row,
                            const std::vector<int64_t>& shape, const ArrayPadding& padding);

}  // namespace stoke
