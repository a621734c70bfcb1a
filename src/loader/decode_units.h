// The block shuffle's blocks where rows are decoded together (docs/architecture.md, "Block shuffle
// over pages and row groups"). A worker decodes an array column's page holding a row (the row
// group's column chunk where the chunk has no OffsetIndex) and a binary column's page (its chunk
// where the pages are not all PLAIN) once,
// into a cache of their stage, and takes the other rows from there while the cache holds it
// (array_cells.h, binary_cells.h). A block shuffle over whole files spreads a page's rows across
// its shuffle buffer, and the cache lets most pages go before their last row is read. Over these
// units, in windows that fit the caches, each unit is decoded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/sample_decoder.h"
#include "loader/slow_cells.h"
#include "loader/tensor_column.h"
#include "table/sample_index.h"

namespace stoke {

struct DecodeUnits {
  // The first table row of each unit, ascending from 0: every file's row groups, cut again at the
  // pages of the array columns whose chunks have an OffsetIndex and of the binary columns read a
  // page at a time.
  std::vector<int64_t> starts;
  // Units a window of the block shuffle takes (SamplerOptions::window_blocks): as many as fill half
  // of each stage's cache with the largest unit of each of its columns (the other half holds the
  // previous window's units while its last batches are read), at least 1.
  int64_t window = 1;
};

// The units of `tensors`' chunked columns over the table of `index` (REQUIRES: one of them is
// chunked()); `cache_bytes`: the array stage's and the binary stage's cache, each. Reads each data
// file's footer (the array columns' OffsetIndexes, the binary columns' page headers) through
// `cells` (cells.slow's readers; cells.binary's page lists, kept for its reads). Never fails: a file
// whose footer cannot be read is one unit and a column not found in a file adds no cut there,
// since the unit choice only orders the reads, and the rows' own reads report such errors.
DecodeUnits FindDecodeUnits(const SampleIndex& index, SampleDecoder::Cells cells, const std::vector<TensorColumn>& tensors,
                            size_t cache_bytes);

}  // namespace stoke
