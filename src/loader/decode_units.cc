// The block shuffle's units (decode_units.h).
#include "loader/decode_units.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "core/thread_pool.h"
#include "format/parquet_cells.h"
#include "format/parquet_reader.h"
#include "loader/binary_cells.h"

namespace stoke {
namespace {

// Files whose units are found at once.
constexpr size_t kFileReaders = 8;

// Whether `s` says what the file holds (every rank reads the same and decides the same), rather
// than that reading it failed this time.
bool SaysWhatTheFileHolds(const Status& s) {
  switch (s.code()) {
    case StatusCode::kCorruption:
    case StatusCode::kUnsupported:
    case StatusCode::kNotFound:
    case StatusCode::kInvalidArgument:
      return true;
    default:
      return false;
  }
}

// Where one column's cells of one file are decoded: its pieces' cuts (file rows, ascending) and the
// largest piece's decoded bytes, estimated from the chunks' uncompressed sizes.
struct ColumnPieces {
  std::vector<int64_t> cuts;
  int64_t largest_bytes = 0;
};

// The uncompressed size the footer gives column `leaf`'s chunk in row group `g`, at most the file's.
int64_t ChunkBytes(const ParquetReader& r, int g, size_t leaf) {
  const auto& columns = r.metadata().row_groups[static_cast<size_t>(g)].columns;
  if (leaf >= columns.size() || !columns[leaf].meta_data) return 0;
  return std::clamp<int64_t>(columns[leaf].meta_data->total_uncompressed_size, 0, static_cast<int64_t>(r.file_size()));
}

// The bytes `rows` rows of `row_bytes` take decoded (a padded column's rows may take far more than
// the file holds), kept far from overflowing.
int64_t RowsBytes(int64_t rows, int64_t row_bytes) {
  const __int128 bytes = static_cast<__int128>(std::max<int64_t>(rows, 0)) * std::max<int64_t>(row_bytes, 0);
  return static_cast<int64_t>(std::min<__int128>(bytes, int64_t{1} << 62));
}

// An array column's pages of row group `g` (its OffsetIndex) into *out, each estimated at its share of
// rows of the chunk's bytes, or at its rows of `row_bytes` (the rows as delivered) where that is
// more; false where the chunk has no usable OffsetIndex.
Result<bool> AddArrayPages(const ParquetReader& r, int g, size_t leaf, int64_t row_bytes, ColumnPieces* out) {
  auto oi = r.CachedOffsetIndex(g, leaf);
  if (!oi.ok()) return SaysWhatTheFileHolds(oi.status()) ? Result<bool>(false) : Result<bool>(oi.status());
  if (!*oi || (*oi)->page_locations.empty()) return false;
  const auto& starts = r.row_group_starts();
  const int64_t first = starts[static_cast<size_t>(g)], rows = starts[static_cast<size_t>(g) + 1] - first;
  const int64_t chunk = ChunkBytes(r, g, leaf);
  const auto& pages = (*oi)->page_locations;
  ColumnPieces found;
  for (size_t p = 0; p < pages.size(); ++p) {
    const int64_t begin = pages[p].first_row_index, end = p + 1 < pages.size() ? pages[p + 1].first_row_index : rows;
    if (begin < 0 || begin > rows || end < begin || end > rows) return false;  // the page path refuses it too
    if (begin > 0) found.cuts.push_back(first + begin);
    const __int128 share = rows > 0 ? (static_cast<__int128>(chunk) * (end - begin) + rows - 1) / rows : 0;
    found.largest_bytes = std::max({found.largest_bytes, static_cast<int64_t>(share),  // share <= chunk
                                    RowsBytes(end - begin, row_bytes)});
  }
  out->cuts.insert(out->cuts.end(), found.cuts.begin(), found.cuts.end());
  out->largest_bytes = std::max(out->largest_bytes, found.largest_bytes);
  return true;
}

// A binary column's pages of row group `g` into *out, where they are read one at a time; false
// where the chunk is decoded whole.
Result<bool> AddBinaryPages(BinaryCells& cells, uint32_t f, const ParquetReader& r, int g, size_t leaf,
                            ColumnPieces* out) {
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const BinaryCells::Pages> pages, cells.PagesOf(f, r, g, leaf));
  if (pages->empty()) return false;
  const int64_t first = r.row_group_starts()[static_cast<size_t>(g)];
  for (const BinaryCells::Page& p : *pages) {
    if (p.first_row > 0) out->cuts.push_back(first + p.first_row);
    out->largest_bytes = std::max(out->largest_bytes, std::min(p.decoded_bytes, static_cast<int64_t>(r.file_size())));
  }
  return true;
}

// Column `t`'s pieces in file `f`: its pages, or its row groups' chunks. A file without the column
// (or with it in another shape) has none: its rows' own reads say what is wrong.
Result<ColumnPieces> PiecesOf(BinaryCells* cells, uint32_t f, const ParquetReader& r, const TensorColumn& t) {
  ColumnPieces out;
  Result<size_t> leaf = FindBinaryLeaf(r, t.file_name);
  if (t.array) {
    auto array = FindArrayLeaf(r, t.file_name);
    leaf = array.ok() ? Result<size_t>(array->leaf) : Result<size_t>(array.status());
  }
  if (!leaf.ok()) return SaysWhatTheFileHolds(leaf.status()) ? Result<ColumnPieces>(out) : Result<ColumnPieces>(leaf.status());
  for (int g = 0; g < r.num_row_groups(); ++g) {
    bool paged = false;
    // An array column's rows as delivered (padded ones may be larger than stored); a binary column's
    // cells are its stored values.
    const int64_t row_bytes = t.array ? static_cast<int64_t>(t.in_bytes) : 0;
    if (t.array) {
      STOKE_ASSIGN_OR_RETURN(paged, AddArrayPages(r, g, *leaf, row_bytes, &out));
    } else if (cells != nullptr) {
      STOKE_ASSIGN_OR_RETURN(paged, AddBinaryPages(*cells, f, r, g, *leaf, &out));
    }
    if (!paged) {
      const auto& starts = r.row_group_starts();
      const int64_t rows = starts[static_cast<size_t>(g) + 1] - starts[static_cast<size_t>(g)];
      out.largest_bytes = std::max({out.largest_bytes, ChunkBytes(r, g, *leaf), RowsBytes(rows, row_bytes)});
    }
  }
  return out;
}

// The units of file `f` (first table row `first`, `rows` rows) into *starts: its row groups, cut at
// the pages of its chunked column with the largest pieces (the costliest to decode again; another
// column's page that straddles a cut may be decoded once per side). The largest piece of each column
// into largest[column]. Thread-safe for distinct outputs.
Status AddFileUnits(SampleDecoder::Cells cells, uint32_t f, int64_t first, int64_t rows,
                    const std::vector<TensorColumn>& tensors, std::vector<int64_t>* starts,
                    std::vector<int64_t>* largest) {
  auto opened = cells.slow->ReaderOf(f);
  if (!opened.ok()) {
    if (!SaysWhatTheFileHolds(opened.status())) return opened.status();
    if (rows > 0) starts->push_back(first);  // a file that does not open is one unit
    return Status::OK();
  }
  const std::shared_ptr<const ParquetReader>& reader = *opened;
  const auto& group_starts = reader->row_group_starts();
  std::vector<int64_t> cuts(group_starts.begin(), group_starts.end());
  cuts.push_back(0);
  const ColumnPieces* leading = nullptr;
  std::vector<ColumnPieces> pieces(tensors.size());
  for (size_t c = 0; c < tensors.size(); ++c) {
    if (!tensors[c].chunked()) continue;
    STOKE_ASSIGN_OR_RETURN(pieces[c], PiecesOf(cells.binary, f, *reader, tensors[c]));
    (*largest)[c] = pieces[c].largest_bytes;
    if (leading == nullptr || pieces[c].largest_bytes > leading->largest_bytes) leading = &pieces[c];
  }
  if (leading != nullptr) cuts.insert(cuts.end(), leading->cuts.begin(), leading->cuts.end());
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  for (int64_t cut : cuts) {
    if (cut >= 0 && cut < rows) starts->push_back(first + cut);
  }
  return Status::OK();
}

}  // namespace

Result<DecodeUnits> FindDecodeUnits(const SampleIndex& index, SampleDecoder::Cells cells,
                                    const std::vector<TensorColumn>& tensors, size_t cache_bytes) {
  // Files are read at once by a few threads (each is a footer and index reads: round trips on object
  // storage), their units kept apart and joined in file order.
  const size_t files = index.num_files();
  std::vector<std::vector<int64_t>> starts(files), largest(files, std::vector<int64_t>(tensors.size(), 0));
  ThreadPool pool(std::clamp<size_t>(files, 1, kFileReaders));
  STOKE_RETURN_IF_ERROR(ParallelFor(pool, files, [&](size_t i) {
    const auto f = static_cast<uint32_t>(i);
    return AddFileUnits(cells, f, index.file_first_row(f), index.file_num_rows(f), tensors, &starts[i], &largest[i])
        .WithContext(fmt::format("the block shuffle's pages of {}", index.FilePath(f)));
  }));
  DecodeUnits units;
  for (const auto& file : starts) units.starts.insert(units.starts.end(), file.begin(), file.end());
  if (units.starts.empty() || units.starts.front() != 0) units.starts.insert(units.starts.begin(), 0);
  std::vector<int64_t> widest(tensors.size(), 0);
  for (const auto& file : largest) {
    for (size_t c = 0; c < tensors.size(); ++c) widest[c] = std::max(widest[c], file[c]);
  }
  // The stages' caches are separate: a window must fit each. Each piece is at most its file's size,
  // so the sums stay far from overflowing.
  int64_t array_bytes = 0, binary_bytes = 0;
  for (size_t c = 0; c < tensors.size(); ++c) (tensors[c].array ? array_bytes : binary_bytes) += widest[c];
  const int64_t half = static_cast<int64_t>(cache_bytes / 2);
  int64_t window = INT64_MAX;
  for (int64_t need : {array_bytes, binary_bytes}) {
    if (need > 0) window = std::min(window, half / need);
  }
  units.window = window == INT64_MAX ? 1 : std::max<int64_t>(window, 1);
  return units;
}

}  // namespace stoke
