// The loader's binary-cell stage (binary_cells.h).
#include "loader/binary_cells.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <variant>

#include "format/npy.h"

namespace stoke {
namespace {

Status NotBinary(const std::string& name) {
  return Status::Unsupported(fmt::format(
      "column '{}' is neither a binary column nor a struct with a binary field 'bytes': the loader delivers binary "
      "cells that hold .npy arrays or JPEG/PNG images",
      name));
}

bool IsBinaryLeaf(const LeafColumn& c) {
  return c.type == parquet::Type::kByteArray && !c.is_string && c.max_repetition_level == 0;
}

}  // namespace

Result<size_t> FindBinaryLeaf(const ParquetReader& reader, const std::string& name) {
  auto flat = reader.FindColumn(name);
  if (flat.ok()) {
    if (!IsBinaryLeaf(reader.columns()[*flat])) return NotBinary(name);
    return *flat;
  }
  auto field = reader.FindColumn(name + ".bytes");
  if (field.ok()) {
    if (!IsBinaryLeaf(reader.columns()[*field])) return NotBinary(name);
    return *field;
  }
  for (const LeafColumn& c : reader.columns()) {
    if (c.name.rfind(name + ".", 0) == 0) return NotBinary(name);
  }
  return Status::NotFound(fmt::format("{}: no column '{}'", reader.path(), name));
}

CellKind CellKindOf(ByteView cell) {
  static constexpr uint8_t kNpyMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  static constexpr uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto starts = [&](const uint8_t* magic, size_t n) { return cell.size() >= n && std::memcmp(cell.data(), magic, n) == 0; };
  if (starts(kNpyMagic, sizeof(kNpyMagic))) return CellKind::kNpy;
  if (starts(kPngMagic, sizeof(kPngMagic))) return CellKind::kImage;
  if (cell.size() >= 3 && cell[0] == 0xFF && cell[1] == 0xD8 && cell[2] == 0xFF) return CellKind::kImage;  // JPEG SOI
  return CellKind::kOther;
}

Result<ByteView> NpyCellData(ByteView cell, DType dtype, const std::vector<int64_t>& shape, AlignedBuffer* scratch) {
  STOKE_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(cell, "cell"));
  if (h.dtype != dtype || h.shape != shape) {
    return Status::InvalidArgument(fmt::format("the cell holds a .npy array of {} [{}], the column's first row {} [{}]",
                                               DTypeName(h.dtype), fmt::join(h.shape, ", "), DTypeName(dtype),
                                               fmt::join(shape, ", ")));
  }
  if (!h.big_endian && !h.fortran_order) {
    if (cell.size() != h.data_offset + h.data_size) {
      return Status::Corruption(fmt::format("the .npy cell holds {} bytes of data where its header needs {}",
                                            cell.size() - std::min(cell.size(), h.data_offset), h.data_size));
    }
    return cell.subspan(h.data_offset, h.data_size);
  }
  STOKE_ASSIGN_OR_RETURN(NpyArray a, DecodeNpy(cell, "cell"));
  *scratch = std::move(a.data);
  return scratch->view();
}

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
    size_t next = 0;
    for (size_t k = 0; k < levels.num_levels; ++k) {
      if (max_def > 0 && levels.def_levels[k] != max_def) {
        decoded->offsets.push_back(DecodedPage::kNull);
        continue;
      }
      if (next >= values->size()) return Status::Corruption(fmt::format("{}: fewer values than levels", reader.path()));
      const std::string& v = (*values)[next++];
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
