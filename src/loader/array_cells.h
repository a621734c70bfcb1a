// The loader's array-column stage (docs/architecture.md): columns of numeric arrays, nested to any
// depth, as other engines write them (Spark's array<float>, DuckDB's FLOAT[] and FLOAT[][], Hugging
// Face's fixed-size nested lists), delivered as tensors: a row of rectangular nesting [n1][n2]...
// becomes one [n1, n2, ...] sample. The shape is the first served row's; every row must have it.
//
// An array column's rows share large pages, so a row is not one read: a worker decodes the page
// holding the row (found through the chunk's OffsetIndex; the whole column chunk of the row's row
// group where there is none, or where the page path fails) once, through a ParquetReader of the
// file kept by SlowCells, into a cache of its own (least recently used out beyond its budget), and
// the row's values are copied out of it once, into their batch row; the page's other rows come from
// the cache while it holds it.
// With an OffsetIndex a global shuffle costs a decode per page as a block shuffle does; without one,
// a global shuffle over chunks larger than the budget decodes a chunk again for most rows.
//
// A row that is null, holds an empty or null list or a null element, or whose nesting is ragged or
// of another shape, is an error naming the row and what is wrong with it (the loader's on_error
// applies), unless the column is padded to a fixed shape or given a fill value for null elements
// (LoaderOptions::pad and fill, format/array_padding.h): its pages are then laid out row by row, as
// padded tensors, when they are decoded. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_pool.h"
#include "core/mutex.h"
#include "format/array_padding.h"
#include "format/parquet_cells.h"
#include "format/parquet_reader.h"
#include "loader/page_cache.h"
#include "loader/slow_cells.h"
#include "stoke/dtype.h"
#include "stoke/status.h"
#include "table/sample_index.h"

namespace stoke {

class ArrayCells {
 public:
  static constexpr int kMaxDepth = kMaxArrayDepth;

  // `index` and `readers` must outlive this. `cache_bytes`: the decoded chunks' budget. `padding`:
  // the columns padded or given a fill value, by name.
  ArrayCells(const SampleIndex& index, SlowCells& readers, size_t cache_bytes,
             std::map<std::string, ArrayPadding> padding = {})
      : index_(index), readers_(readers), cache_(cache_bytes), padding_(std::move(padding)) {}

  // The element dtype and shape of top-level column `name`, from table row `row` (the first served);
  // with padding, its padding shape, checked against the column's nesting and its fill value
  // against its dtype.
  Result<std::pair<DType, std::vector<int64_t>>> Probe(const std::string& name, int64_t row);

  // One row's values, in place within its decoded page (or chunk), which the cell keeps alive.
  struct Cell {
    std::shared_ptr<const DecodedPage> page;
    ByteView values;
  };
  // The values of table row `row` of column `name` (of `dtype` and `shape`, as Probe gave them): the
  // caller copies them where they go, once. Errors name the file and the row in it.
  Result<Cell> ReadCell(const std::string& name, DType dtype, const std::vector<int64_t>& shape, int64_t row);

  int64_t chunks_decoded() const { return cache_.loads(); }

 private:
  using Place = SlowCells::RowPlace;
  // The decoded rows holding place's row: the row's page when the chunk has an OffsetIndex (other
  // writers' pages of about 1 MiB: a shuffled read decodes a page, not a whole row group), else the
  // whole chunk of `name` in place.row_group. `*shape` empty: learnt from the first dense row.
  struct Piece {
    std::shared_ptr<const DecodedPage> rows;
    int64_t first_row = 0;  // in the row group
    bool from_page = false;
  };
  Result<Piece> Load(const std::string& name, const Place& place, DType dtype, std::vector<int64_t>* shape);
  // Load's decode: the page holding place's row (`page`), or the chunk, flattened (laid out row by
  // row when `padding` is active).
  Result<std::shared_ptr<const DecodedPage>> Decode(const Place& place, const ArrayLeaf& leaf, bool page,
                                                    const ArrayPadding& padding, std::vector<int64_t>* shape);
  // The levels of the page holding place's row (`page`; *first its first row in the row group) or of
  // the chunk (*first 0).
  static Result<ColumnLevels> ReadLevels(const Place& place, const ArrayLeaf& leaf, bool page, int64_t* first);
  // What is wrong with place's row (a kNull of its piece), for the error; read from its levels again.
  std::string Problem(const std::string& name, const Place& place, const std::vector<int64_t>& shape, bool page);
  // padding_'s entry for `name`, or no padding.
  const ArrayPadding& PaddingOf(const std::string& name) const;
  // Decode's fast path for a page of a flat list of plain values whose rows are all dense
  // (ParquetReader::ReadDenseListPage): the page's body as it is, each row's offset into it; null
  // where the page is not such a page.
  Result<std::shared_ptr<const DecodedPage>> DecodeDense(const Place& place, const ArrayLeaf& leaf,
                                                         std::vector<int64_t>* shape);
  // FindArrayLeaf of `name` in place.file, found once per file.
  Result<ArrayLeaf> LeafOf(const std::string& name, const Place& place) EXCLUDES(mu_);

  const SampleIndex& index_;
  SlowCells& readers_;
  std::shared_ptr<BufferPool> bodies_ = std::make_shared<BufferPool>();  // DecodeDense's page bodies
  PageCache cache_;  // keyed by (file, leaf << 32 | row group) for chunks, (file, 1 << 63 | offset) for pages
  const std::map<std::string, ArrayPadding> padding_;
  Mutex mu_;
  std::map<std::pair<uint32_t, std::string>, ArrayLeaf> leaves_ GUARDED_BY(mu_);
};

}  // namespace stoke
