// The loader's array-column stage (array_cells.h).
#include "loader/array_cells.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace stoke {

static_assert(ArrayRows::kNull == DecodedPage::kNull);

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
    STOKE_RETURN_IF_ERROR(AppendArrayValues(*place.reader, leaf, std::move(levels.values), &decoded->body));
    levels.values = ValueVector{};
    ArrayRows rows;
    STOKE_RETURN_IF_ERROR(FlattenArrayRows(levels, leaf, shape, &rows));
    decoded->offsets = std::move(rows.offsets);
    decoded->value_size = rows.value_size;
    return std::shared_ptr<const DecodedPage>(std::move(decoded));
  });
}

Result<std::pair<DType, std::vector<int64_t>>> ArrayCells::Probe(const std::string& name, int64_t row) {
  STOKE_ASSIGN_OR_RETURN(Place place, readers_.Locate(row));
  STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(*place.reader, name));
  STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, place.reader->ReadColumnChunkLevels(place.row_group, leaf.leaf));
  auto shape = ArrayRowShape(levels, leaf, place.row_in_group);
  if (!shape) {
    return Status::InvalidArgument(fmt::format(
        "{}: row {} of column '{}' is not an array the loader can deliver (a null, an empty or ragged list, or a null "
        "element), and its shape would set the column's",
        place.reader->path(), place.row_in_file, name));
  }
  return std::make_pair(leaf.dtype, std::move(*shape));
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
