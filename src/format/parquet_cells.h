// Cells of other writers' columns as tensors: what the loader delivers (loader/array_cells.h,
// loader/binary_cells.h) and what ingest re-lays out (ingest/parquet_source.h) from Parquet files
// that were not written one sample per page:
//  - array columns: lists of numbers, booleans, dates or timestamps, nested to any depth (Spark's
//    array<float>, DuckDB's FLOAT[] and FLOAT[][], Hugging Face's fixed-size nested lists); a row of
//    rectangular nesting [n1][n2]... is one [n1, n2, ...] tensor;
//  - binary cells: a binary column, or a struct's binary field `bytes` (Hugging Face's Image
//    feature), whose cells are .npy files (Petastorm's NdarrayCodec) or encoded JPEG/PNG images.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_reader.h"
#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke {

// The most nesting an array column may have.
inline constexpr int kMaxArrayDepth = 8;

// What a list column of a file holds: its leaf column and the element type delivered.
struct ArrayLeaf {
  size_t leaf = 0;        // the reader's column of the innermost values
  int depth = 0;          // nested lists: the leaf's repetition level
  uint32_t max_def = 0;   // the leaf's definition level where a value is present
  // list_defs[j]: the definition level from which an entry has an element in the list at depth j + 1
  // (below it, that list is empty or null). An entry reaching list_defs[depth - 1] but not max_def is
  // a null element.
  std::array<uint32_t, kMaxArrayDepth> list_defs{};
  DType dtype = DType::kFloat32;
};

// The leaf of top-level column `name` of `reader`'s file: a list (of lists ...) of a numeric,
// boolean, date or timestamp leaf, delivered as the loader's scalars are (dates int32 days,
// timestamps int64 microseconds). Unsupported, naming the column, for any other shape or leaf
// (strings, binary, decimals, structs, maps).
Result<ArrayLeaf> FindArrayLeaf(const ParquetReader& reader, const std::string& name);

// True when `leaf`'s stored values are the delivered ones byte for byte (FLOAT, DOUBLE, or INT32 and
// INT64 without a logical or converted type): its PLAIN pages can be copied from as they are.
bool ArrayValuesAreStoredBytes(const ParquetReader& reader, const ArrayLeaf& leaf);

// Where each row of a list-column chunk lies among the chunk's present values.
struct ArrayRows {
  static constexpr uint32_t kNull = 0xFFFFFFFFu;
  std::vector<uint32_t> offsets;  // per row: its first value's byte offset, or kNull
  size_t value_size = 0;          // a row's bytes: the shape's values times DTypeSize(leaf.dtype)
};

// Flattens the rows of one decoded list-column chunk: offsets[r] is where row r's values start
// among the chunk's present values (in bytes of leaf.dtype), or kNull for a row that is not a dense
// rectangular array of `*shape` (a null, an empty or ragged list, a null element, another shape).
// An empty *shape is set from the first dense row.
Status FlattenArrayRows(const ColumnLevels& levels, const ArrayLeaf& leaf, std::vector<int64_t>* shape, ArrayRows* out);

// The rows of a dense list page (ParquetReader::ReadDenseListPage) as FlattenArrayRows gives them
// for the same page: offsets[r] where row r's values start in the page's body, or kNull for a row
// whose length is not `*shape`'s (an empty *shape is set from the first row). A page body is at most
// 2 GiB (kMaxPageBytes), so every offset fits.
void FlattenDenseListRows(const DenseListPage& page, size_t value_size, std::vector<int64_t>* shape, ArrayRows* out);

// The entries [begin, end) of row `row` (counted from 0 at the first entry) of a chunk's levels;
// nullopt when there is no such row.
std::optional<std::pair<size_t, size_t>> ArrayRowEntries(const ColumnLevels& levels, int64_t row);

// The shape of the row in entries [begin, end) of a chunk's levels, or nullopt unless it is a dense
// rectangular array; `with_nulls`: null elements count as elements (a null row or an empty list
// never does).
std::optional<std::vector<int64_t>> ArrayEntriesShape(const ColumnLevels& levels, const ArrayLeaf& leaf, size_t begin,
                                                      size_t end, bool with_nulls);

// ArrayEntriesShape of row `row` of a chunk's levels (nullopt too when there is no such row).
std::optional<std::vector<int64_t>> ArrayRowShape(const ColumnLevels& levels, const ArrayLeaf& leaf, int64_t row,
                                                  bool with_nulls = false);

// Appends a chunk's present values (ColumnLevels::values), converted to leaf.dtype, to *out as bytes.
Status AppendArrayValues(const ParquetReader& reader, const ArrayLeaf& leaf, ValueVector values, AlignedBuffer* out);

// The leaf column holding the cells of top-level column `name`: the column itself when it is a flat
// binary column, or the `bytes` field of a struct column (not inside any list). Unsupported, naming
// the column, for anything else; NotFound when the file lacks it.
Result<size_t> FindBinaryLeaf(const ParquetReader& reader, const std::string& name);

// The index among a flat (unrepeated) column chunk's present values of each of its first `rows`
// rows, -1 for a null: the definition level says which rows hold a value (`max_def`, the column's
// maximum; 0 for a REQUIRED column).
std::vector<int64_t> ValueIndexOfRows(const ColumnLevels& levels, uint32_t max_def, int64_t rows);

// What a binary cell holds, by its first bytes: a .npy array, an encoded image (JPEG or PNG), or
// neither.
enum class BinaryCellKind { kNpy, kImage, kOther };
BinaryCellKind BinaryCellKindOf(ByteView cell);

// The array data of a .npy cell that must hold a `dtype` array of `shape` (C order, little-endian;
// other byte orders and Fortran order are converted, into *scratch). InvalidArgument naming the
// dtype and shape it holds instead; Corruption for a malformed header or data of another size.
Result<ByteView> NpyCellData(ByteView cell, DType dtype, const std::vector<int64_t>& shape, AlignedBuffer* scratch);

}  // namespace stoke
