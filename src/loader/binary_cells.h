// The loader's binary-cell stage (docs/architecture.md): binary columns as other writers store
// tensors and images, one value per row among many rows per page:
//  - a binary column whose cells are .npy files (Petastorm's NdarrayCodec writes np.save's bytes);
//  - a binary column whose cells are JPEG or PNG files;
//  - a struct column with a binary field `bytes` (Hugging Face's Image feature, {bytes, path}),
//    whose bytes are the encoded image.
// What a column holds is told by its first served cell (CellKindOf, format/parquet_cells.h). A worker decodes the column
// chunk of a row's row group once into a decoded chunk held in a cache of its own (least recently
// used out beyond its budget) and copies the row's bytes out of it, as ArrayCells does for arrays;
// the file readers are SlowCells'. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/buffer.h"
#include "format/parquet_cells.h"
#include "format/parquet_reader.h"
#include "loader/page_cache.h"
#include "loader/slow_cells.h"
#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke {

class BinaryCells {
 public:
  // `readers` must outlive this. `cache_bytes`: the decoded chunks' budget.
  BinaryCells(SlowCells& readers, size_t cache_bytes) : readers_(readers), cache_(cache_bytes) {}

  // The bytes of table row `row` of column `name` (its name in the data files) into *out. A null
  // cell (or a null struct) is InvalidArgument; other errors name the file.
  Status ReadCell(const std::string& name, int64_t row, AlignedBuffer* out);

  int64_t chunks_decoded() const { return cache_.loads(); }

 private:
  // The decoded chunk of `name` in place.row_group: per row, a 4-byte length and the bytes (the
  // offsets point at the length; kNull for a null).
  Result<std::shared_ptr<const DecodedPage>> Chunk(const std::string& name, const SlowCells::RowPlace& place);

  SlowCells& readers_;
  PageCache cache_;  // keyed by (file, leaf << 32 | row group)
};

}  // namespace stoke
