// The block shuffle's blocks where rows are decoded together (docs/architecture.md, "Block shuffle
// over pages and row groups"). A worker decodes the page holding a row once into its stage's cache
// and takes the page's other rows from there (array_cells.h, binary_cells.h): an array column's page
// found through the chunk's OffsetIndex, a binary column's page found by its header, or the row
// group's column chunk where neither works. A block shuffle over whole files spreads a page's rows
// across its shuffle buffer, and the cache lets most pages go before their last row is read. Over
// these units, in windows that fit the caches, each unit is decoded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/sample_decoder.h"
#include "loader/slow_cells.h"
#include "loader/tensor_column.h"
#include "stoke/status.h"
#include "table/sample_index.h"

namespace stoke {

struct DecodeUnits {
  // The first table row of each unit, ascending from 0: every file's row groups, cut again at the
  // pages of its chunked column with the largest pages (array columns' pages where the chunk has an
  // OffsetIndex, binary columns' where they are read a page at a time).
  std::vector<int64_t> starts;
  // Units a window of the block shuffle takes (SamplerOptions::window_blocks): as many as fill half
  // of each stage's cache with the largest unit of each of its columns (the other half holds the
  // previous window's units while its last batches are read), at least 1. A unit's size: its share
  // of its chunk's uncompressed bytes, or for an array column its rows at the column's delivered row
  // size (TensorColumn::in_bytes; padded rows) where that is more.
  int64_t window = 1;
};

// The units of `tensors`' chunked columns over the table of `index` (REQUIRES: one of them is
// chunked()); `cache_bytes`: the array stage's and the binary stage's cache, each. Reads each data
// file's footer, the array columns' OffsetIndexes and the binary columns' page headers through
// `cells` (cells.slow's readers; cells.binary keeps the page lists for its reads), a few files at
// once. What a file holds decides its units alone: a column not in a file, or pages that cannot be
// read one by one, add no cut there (the rows' own reads report what is wrong), so every rank finds
// the same units. A read that fails (an I/O error) fails, naming the file: a rank must not shuffle
// other blocks than the others.
Result<DecodeUnits> FindDecodeUnits(const SampleIndex& index, SampleDecoder::Cells cells,
                                    const std::vector<TensorColumn>& tensors, size_t cache_bytes);

}  // namespace stoke
