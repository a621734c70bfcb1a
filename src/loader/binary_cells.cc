// The loader's binary-cell stage (binary_cells.h).
#include "loader/binary_cells.h"

#include <fmt/format.h>

#include <cstring>
#include <variant>

namespace stoke {

Result<std::shared_ptr<const DecodedPage>> BinaryCells::Chunk(const std::string& name, const SlowCells::RowPlace& place) {
  const ParquetReader& reader = *place.reader;
  STOKE_ASSIGN_OR_RETURN(size_t leaf, FindBinaryLeaf(reader, name));
  const uint64_t key = (uint64_t{leaf} << 32) | static_cast<uint32_t>(place.row_group);
  return cache_.GetOrLoad(place.file, key, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
    STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, reader.ReadColumnChunkLevels(place.row_group, leaf));
    const auto* values = std::get_if<std::vector<std::string>>(&levels.values);
    if (values == nullptr) return Status::Internal("binary values that are not bytes");
    const auto max_def = static_cast<uint32_t>(reader.columns()[leaf].max_definition_level);
    auto decoded = std::make_shared<DecodedPage>();
    size_t bytes = 0;
    for (const std::string& v : *values) bytes += 4 + v.size();
    if (bytes > UINT32_MAX) return Status::Unsupported(fmt::format("{}: a binary column chunk of more than 4 GiB", reader.path()));
    decoded->body.Reserve(bytes);
    decoded->offsets.reserve(levels.num_levels);
    for (int64_t v_index : ValueIndexOfRows(levels, max_def, static_cast<int64_t>(levels.num_levels))) {
      if (v_index < 0) {
        decoded->offsets.push_back(DecodedPage::kNull);
        continue;
      }
      if (static_cast<size_t>(v_index) >= values->size()) {
        return Status::Corruption(fmt::format("{}: fewer values than levels", reader.path()));
      }
      const std::string& v = (*values)[static_cast<size_t>(v_index)];
      decoded->offsets.push_back(static_cast<uint32_t>(decoded->body.size()));
      const uint32_t length = static_cast<uint32_t>(v.size());
      decoded->body.Append(&length, sizeof(length));
      decoded->body.Append(v.data(), v.size());
    }
    return std::shared_ptr<const DecodedPage>(std::move(decoded));
  });
}

Status BinaryCells::ReadCell(const std::string& name, int64_t row, AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(SlowCells::RowPlace place, readers_.Locate(row));
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const DecodedPage> chunk, Chunk(name, place));
  const size_t r = static_cast<size_t>(place.row_in_group);
  if (r >= chunk->offsets.size()) {
    return Status::Corruption(fmt::format("{}: row group {} of column '{}' holds {} rows, not {}", place.reader->path(),
                                          place.row_group, name, chunk->offsets.size(), r + 1));
  }
  if (chunk->offsets[r] == DecodedPage::kNull) return Status::InvalidArgument("a null cell");
  uint32_t length = 0;
  std::memcpy(&length, chunk->body.data() + chunk->offsets[r], sizeof(length));
  out->Clear();
  out->Append(chunk->body.data() + chunk->offsets[r] + sizeof(length), length);
  return Status::OK();
}

}  // namespace stoke
