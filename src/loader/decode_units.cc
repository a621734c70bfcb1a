// The block shuffle's units (decode_units.h).
#include "loader/decode_units.h"

#include <algorithm>

#include "format/parquet_cells.h"
#include "format/parquet_reader.h"
#include "loader/binary_cells.h"

namespace stoke {
namespace {

// Where `t`'s cells of one file are decoded: each row group's cuts (file rows) and the largest
// piece's decoded bytes, estimated from the chunks' uncompressed sizes.
struct ColumnPieces {
  std::vector<int64_t> cuts;
  int64_t largest_bytes = 0;
};

int64_t ChunkBytes(const ParquetReader& r, int g, size_t leaf) {
  const auto& columns = r.metadata().row_groups[static_cast<size_t>(g)].columns;
  if (leaf >= columns.size() || !columns[leaf].meta_data) return 0;
  return std::max<int64_t>(columns[leaf].meta_data->total_uncompressed_size, 0);
}

// An array column's pages of row group `g` (its OffsetIndex), each estimated at its share of rows of
// the chunk's bytes; false where the chunk has no usable OffsetIndex.
bool AddPages(const ParquetReader& r, int g, size_t leaf, ColumnPieces* out) {
  auto oi = r.CachedOffsetIndex(g, leaf);
  if (!oi.ok() || !*oi || (*oi)->page_locations.empty()) return false;
  const auto& starts = r.row_group_starts();
  const int64_t first = starts[static_cast<size_t>(g)], rows = starts[static_cast<size_t>(g) + 1] - first;
  const auto& pages = (*oi)->page_locations;
  for (size_t p = 0; p < pages.size(); ++p) {
    const int64_t begin = pages[p].first_row_index, end = p + 1 < pages.size() ? pages[p + 1].first_row_index : rows;
    if (begin < 0 || begin > rows || end < begin) return false;  // the page path refuses it too
    if (begin > 0) out->cuts.push_back(first + begin);
    const int64_t share = rows > 0 ? (ChunkBytes(r, g, leaf) * (end - begin) + rows - 1) / rows : 0;
    out->largest_bytes = std::max(out->largest_bytes, share);
  }
  return true;
}

// A binary column's pages of row group `g`, where they are read one at a time; false where the chunk
// is decoded whole.
bool AddBinaryPages(BinaryCells& cells, uint32_t f, const ParquetReader& r, int g, size_t leaf, ColumnPieces* out) {
  auto pages = cells.PagesOf(f, r, g, leaf);
  if (!pages.ok() || (*pages)->empty()) return false;
  const int64_t first = r.row_group_starts()[static_cast<size_t>(g)];
  for (const BinaryCells::Page& p : **pages) {
    if (p.first_row > 0) out->cuts.push_back(first + p.first_row);
    out->largest_bytes = std::max(out->largest_bytes, p.decoded_bytes);
  }
  return true;
}

ColumnPieces PiecesOf(BinaryCells* cells, uint32_t f, const ParquetReader& r, const TensorColumn& t) {
  ColumnPieces out;
  size_t leaf = 0;
  if (t.array) {
    auto found = FindArrayLeaf(r, t.file_name);
    if (!found.ok()) return out;
    leaf = found->leaf;
  } else {
    auto found = FindBinaryLeaf(r, t.file_name);
    if (!found.ok()) return out;
    leaf = *found;
  }
  for (int g = 0; g < r.num_row_groups(); ++g) {
    if (t.array && AddPages(r, g, leaf, &out)) continue;
    if (!t.array && cells != nullptr && AddBinaryPages(*cells, f, r, g, leaf, &out)) continue;
    out.largest_bytes = std::max(out.largest_bytes, ChunkBytes(r, g, leaf));
  }
  return out;
}

// The units of file `f` (first table row `first`, `rows` rows) into units->starts; the largest
// piece of each column into largest[column].
void AddFileUnits(SlowCells& readers, BinaryCells* cells, uint32_t f, int64_t first, int64_t rows, const std::vector<TensorColumn>& tensors,
                  std::vector<int64_t>* starts, std::vector<int64_t>* largest) {
  std::vector<int64_t> cuts = {0};
  auto reader = readers.ReaderOf(f);
  if (reader.ok()) {
    const auto& group_starts = (*reader)->row_group_starts();
    cuts.insert(cuts.end(), group_starts.begin(), group_starts.end());
    for (size_t c = 0; c < tensors.size(); ++c) {
      if (!tensors[c].chunked()) continue;
      ColumnPieces pieces = PiecesOf(cells, f, **reader, tensors[c]);
      cuts.insert(cuts.end(), pieces.cuts.begin(), pieces.cuts.end());
      (*largest)[c] = std::max((*largest)[c], pieces.largest_bytes);
    }
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (int64_t cut : cuts) {
    if (cut >= 0 && cut < rows) starts->push_back(first + cut);
  }
}

}  // namespace

DecodeUnits FindDecodeUnits(const SampleIndex& index, SampleDecoder::Cells cells, const std::vector<TensorColumn>& tensors,
                            size_t cache_bytes) {
  DecodeUnits units;
  std::vector<int64_t> largest(tensors.size(), 0);
  for (uint32_t f = 0; f < index.num_files(); ++f) {
    AddFileUnits(*cells.slow, cells.binary, f, index.file_first_row(f), index.file_num_rows(f), tensors, &units.starts, &largest);
  }
  if (units.starts.empty() || units.starts.front() != 0) units.starts.insert(units.starts.begin(), 0);
  // The stages' caches are separate: a window must fit each.
  int64_t array_bytes = 0, binary_bytes = 0;
  for (size_t c = 0; c < tensors.size(); ++c) (tensors[c].array ? array_bytes : binary_bytes) += largest[c];
  const int64_t half = static_cast<int64_t>(cache_bytes / 2);
  int64_t window = INT64_MAX;
  for (int64_t need : {array_bytes, binary_bytes}) {
    if (need > 0) window = std::min(window, half / need);
  }
  units.window = window == INT64_MAX ? 1 : std::max<int64_t>(window, 1);
  return units;
}

}  // namespace stoke
