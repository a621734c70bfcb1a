// The loader's array-column stage (array_cells.h).
#include "loader/array_cells.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace stoke {

static_assert(ArrayRows::kNull == DecodedPage::kNull);

// A chunk read again to say what is wrong with a row is at most this large (uncompressed).
constexpr int64_t kReadAgainBytes = int64_t{8} << 20;

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

Result<std::shared_ptr<const DecodedPage>> ArrayCells::DecodeDense(const Place& place, const ArrayLeaf& leaf,
                                                                   std::vector<int64_t>* shape) {
  // The body comes from, and goes back to, the pool: a fresh megabyte a page cost more in page
  // faults than everything else the page needs.
  std::shared_ptr<DecodedPage> decoded = PooledDecodedPage(bodies_);
  DenseListPage dense;
  int64_t first = 0;
  const size_t value_size = DTypeSize(leaf.dtype);
  STOKE_ASSIGN_OR_RETURN(const bool is_dense, place.reader->ReadDenseListPage(place.row_group, leaf.leaf, place.row_in_group,
                                                                              value_size, &first, &decoded->body, &dense));
  if (!is_dense) return std::shared_ptr<const DecodedPage>();
  ArrayRows rows;
  FlattenDenseListRows(dense, value_size, shape, &rows);
  decoded->offsets = std::move(rows.offsets);
  decoded->value_size = rows.value_size;
  return std::shared_ptr<const DecodedPage>(std::move(decoded));
}

const ArrayPadding& ArrayCells::PaddingOf(const std::string& name) const {
  static const ArrayPadding kNone;
  auto it = padding_.find(name);
  return it == padding_.end() ? kNone : it->second;
}

Result<ColumnLevels> ArrayCells::ReadLevels(const Place& place, const ArrayLeaf& leaf, bool page, int64_t* first) {
  *first = 0;
  return page ? place.reader->ReadPageLevels(place.row_group, leaf.leaf, place.row_in_group, first)
              : place.reader->ReadColumnChunkLevels(place.row_group, leaf.leaf);
}

Result<std::shared_ptr<const DecodedPage>> ArrayCells::Decode(const Place& place, const ArrayLeaf& leaf, bool page,
                                                              const ArrayPadding& padding, std::vector<int64_t>* shape) {
  if (page && leaf.depth == 1 && padding.shape.empty() && ArrayValuesAreStoredBytes(*place.reader, leaf)) {
    // A flat list of plain values where every row is dense: the rows are copied from the page as it
    // is, its levels read run by run (Spark's array<float>). Any other page takes the general path.
    STOKE_ASSIGN_OR_RETURN(auto dense, DecodeDense(place, leaf, shape));
    if (dense) return dense;
  }
  int64_t first = 0;
  STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, ReadLevels(place, leaf, page, &first));
  auto decoded = std::make_shared<DecodedPage>();
  ArrayRows rows;
  if (padding.active()) {
    STOKE_ASSIGN_OR_RETURN(std::vector<uint8_t> fill, ArrayFillBytes(padding.fill.value_or(0), leaf.dtype));
    AlignedBuffer values;
    STOKE_RETURN_IF_ERROR(AppendArrayValues(*place.reader, leaf, std::move(levels.values), &values));
    STOKE_RETURN_IF_ERROR(PadArrayRows(levels, leaf, values.view(), padding, fill, shape, &decoded->body, &rows));
  } else {
    STOKE_RETURN_IF_ERROR(AppendArrayValues(*place.reader, leaf, std::move(levels.values), &decoded->body));
    levels.values = ValueVector{};
    STOKE_RETURN_IF_ERROR(FlattenArrayRows(levels, leaf, shape, &rows));
  }
  decoded->offsets = std::move(rows.offsets);
  decoded->value_size = rows.value_size;
  return std::shared_ptr<const DecodedPage>(std::move(decoded));
}

std::string ArrayCells::Problem(const std::string& name, const Place& place, const std::vector<int64_t>& shape,
                                bool page) {
  // The row's page (or a small chunk) is read again to say what is wrong with the row; a large chunk
  // is not, as every bad row of a skipping loader would read it again.
  auto leaf = LeafOf(name, place);
  const auto& columns = place.reader->metadata().row_groups[static_cast<size_t>(place.row_group)].columns;
  const bool small = leaf.ok() && leaf->leaf < columns.size() && columns[leaf->leaf].meta_data &&
                     columns[leaf->leaf].meta_data->total_uncompressed_size <= kReadAgainBytes;
  if (!page && !small) return "a null row, an empty or null list, a null element, or another shape";
  int64_t first = 0;
  auto levels = leaf.ok() ? ReadLevels(place, *leaf, page, &first) : Result<ColumnLevels>(leaf.status());
  if (!levels.ok()) return "unreadable: " + levels.status().ToString();
  return ArrayRowProblem(*levels, *leaf, place.row_in_group - first, shape, PaddingOf(name));
}

Result<ArrayCells::Piece> ArrayCells::Load(const std::string& name, const Place& place, DType dtype,
                                          std::vector<int64_t>* shape) {
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, LeafOf(name, place));
  if (leaf.dtype != dtype) {
    return Status::Corruption(fmt::format("{}: column '{}' holds {} values where other files hold {}", place.reader->path(),
                                          name, DTypeName(leaf.dtype), DTypeName(dtype)));
  }
  // One page when the chunk has an OffsetIndex (its key: the page's offset, bit 63 set), else the
  // chunk; and the chunk too where the page path fails (an OffsetIndex that disagrees with the pages,
  // a dictionary the chunk does not say where it is): the whole chunk is what the reader checks
  // every other way.
  const ArrayPadding& padding = PaddingOf(name);
  Piece piece;
  auto oi = place.reader->CachedOffsetIndex(place.row_group, leaf.leaf);
  if (oi.ok() && *oi && !(*oi)->page_locations.empty()) {
    const auto& locs = (*oi)->page_locations;
    auto it = std::upper_bound(locs.begin(), locs.end(), place.row_in_group,
                               [](int64_t r, const parquet::PageLocation& p) { return r < p.first_row_index; });
    if (it != locs.begin()) {
      piece.first_row = (it - 1)->first_row_index;
      piece.from_page = true;
      auto page = cache_.GetOrLoad(place.file, (uint64_t{1} << 63) | static_cast<uint64_t>((it - 1)->offset), [&] {
        return Decode(place, leaf, true, padding, shape);
      });
      if (page.ok()) {
        piece.rows = std::move(*page);
        return piece;
      }
    }
  }
  piece = Piece{};
  const uint64_t key = (uint64_t{leaf.leaf} << 32) | static_cast<uint32_t>(place.row_group);
  STOKE_ASSIGN_OR_RETURN(piece.rows,
                         cache_.GetOrLoad(place.file, key, [&] { return Decode(place, leaf, false, padding, shape); }));
  return piece;
}

Result<std::pair<DType, std::vector<int64_t>>> ArrayCells::Probe(const std::string& name, int64_t row) {
  STOKE_ASSIGN_OR_RETURN(Place place, readers_.Locate(row));
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(*place.reader, name));
  const ArrayPadding& padding = PaddingOf(name);
  if (padding.fill) {
    auto fill = ArrayFillBytes(*padding.fill, leaf.dtype);
    if (!fill.ok()) return Status::InvalidArgument(fmt::format("fill['{}']: {}", name, fill.status().message()));
  }
  STOKE_RETURN_IF_ERROR(CheckArrayPadding(padding, leaf, name));
  if (!padding.shape.empty()) return std::make_pair(leaf.dtype, padding.shape);
  int64_t first = 0;  // the page's first row, when the row's page alone is read
  auto levels = place.reader->ReadRowLevels(place.row_group, leaf.leaf, place.row_in_group, &first);
  if (!levels.ok()) return levels.status();
  auto shape = ArrayRowShape(*levels, leaf, place.row_in_group - first, padding.fill.has_value());
  if (!shape) {
    return Status::InvalidArgument(fmt::format(
        "{}: row {} of column '{}' is not an array the loader can deliver ({}), and its shape would set the "
        "column's: give the column a padding shape (the option pad)",
        place.reader->path(), place.row_in_file, name,
        ArrayRowProblem(*levels, leaf, place.row_in_group - first, {}, ArrayPadding{{}, padding.fill})));
  }
  return std::make_pair(leaf.dtype, std::move(*shape));
}

Result<ArrayCells::Cell> ArrayCells::ReadCell(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                               int64_t row) {
  STOKE_ASSIGN_OR_RETURN(Place place, readers_.Locate(row));
  std::vector<int64_t> expected = shape;
  STOKE_ASSIGN_OR_RETURN(Piece piece, Load(name, place, dtype, &expected));
  const DecodedPage* chunk = piece.rows.get();
  const size_t r = static_cast<size_t>(place.row_in_group - piece.first_row);
  if (r >= chunk->offsets.size()) {
    return Status::Corruption(fmt::format("{}: row group {} of column '{}': its {} holds {} rows, not {}",
                                          place.reader->path(), place.row_group, name, piece.from_page ? "page" : "chunk",
                                          chunk->offsets.size(), r + 1));
  }
  if (chunk->offsets[r] == DecodedPage::kNull) {
    const ArrayPadding& padding = PaddingOf(name);
    const char* hint = !padding.active()  ? " (the options pad and fill deliver ragged rows and null elements)"
                       : !padding.fill ? " (the option fill delivers null elements)"
                                       : "";
    return Status::InvalidArgument(fmt::format("not an array of the column's shape [{}]: {}{}", fmt::join(shape, ", "),
                                               Problem(name, place, shape, piece.from_page), hint));
  }
  const ByteView values(chunk->body.data() + chunk->offsets[r], chunk->value_size);
  return Cell{std::move(piece.rows), values};
}

}  // namespace stoke
