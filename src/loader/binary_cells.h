// The loader's binary-cell stage (docs/architecture.md): binary columns as other writers store
// tensors and images, one value per row among many rows per page:
//  - a binary column whose cells are .npy files (Petastorm's NdarrayCodec writes np.save's bytes);
//  - a binary column whose cells are JPEG or PNG files;
//  - a struct column with a binary field `bytes` (Hugging Face's Image feature, {bytes, path}),
//    whose bytes are the encoded image.
// What a column holds is told by its first served cell (BinaryCellKindOf, format/parquet_cells.h).
// A worker decodes the data page holding a row (found by walking the chunk's page headers once), or
// the column chunk of the row's row group where the pages are not all PLAIN (a dictionary), once
// into a cache of its own (least recently used out beyond its budget) and copies the row's bytes
// out of it, as ArrayCells does for arrays; the file readers are SlowCells'. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "format/parquet_cells.h"
#include "format/parquet_reader.h"
#include "loader/page_cache.h"
#include "loader/slow_cells.h"
#include "stoke/dtype.h"
#include "stoke/status.h"

namespace stoke {

class BinaryCells {
 public:
  // `readers` must outlive this. `cache_bytes`: the decoded pages' and chunks' budget.
  BinaryCells(SlowCells& readers, size_t cache_bytes) : readers_(readers), cache_(cache_bytes) {}

  // The bytes of table row `row` of column `name` (its name in the data files) into *out. A null
  // cell (or a null struct) is InvalidArgument; other errors name the file.
  Status ReadCell(const std::string& name, int64_t row, AlignedBuffer* out);

  // A data page of a column chunk that is decoded alone.
  struct Page {
    uint64_t offset = 0;     // of its header
    uint64_t size = 0;       // header and stored body
    int64_t first_row = 0;   // in the row group
    int64_t rows = 0;
    int64_t decoded_bytes = 0;  // its uncompressed size
  };
  using Pages = std::vector<Page>;
  // The data pages of column `leaf` in `row_group` of data file `file` (read by `reader`), when the
  // chunk is read a page at a time: a flat BYTE_ARRAY column whose pages are all PLAIN data pages
  // (no dictionary), their rows adding up to the row group's, their headers walked to the chunk's
  // end without a fault. Empty otherwise: the chunk is decoded whole. Walks the chunk's page headers
  // once; kept for the next calls (errors other than such a fault are not kept). Thread-safe.
  Result<std::shared_ptr<const Pages>> PagesOf(uint32_t file, const ParquetReader& reader, int row_group, size_t leaf)
      EXCLUDES(mu_);

  // Pages and chunks decoded.
  int64_t chunks_decoded() const { return cache_.loads(); }

 private:
  // The decoded page holding place's row, or the decoded chunk of place.row_group, of column `leaf`:
  // per row, a 4-byte length and the bytes (the offsets point at the length; kNull for a null).
  // *first_row: the first row (in the row group) it holds.
  Result<std::shared_ptr<const DecodedPage>> Rows(size_t leaf, const SlowCells::RowPlace& place, int64_t* first_row);
  // Rows' decode of one PLAIN data page, in buffers of buffers_.
  Result<std::shared_ptr<const DecodedPage>> DecodePage(const ParquetReader& reader, size_t leaf,
                                                        const SlowCells::RowPlace& place, const Page& page);

  SlowCells& readers_;
  // Keyed by (file, leaf << 32 | row group) for chunks, (file, 1 << 63 | page offset) for pages.
  PageCache cache_;
  // Decoded pages' bodies and the pages' stored bytes: a few kept between pages (each may be tens of
  // megabytes; the cache holds the pages themselves).
  std::shared_ptr<BufferPool> buffers_ = std::make_shared<BufferPool>(4);
  Mutex mu_;
  std::map<std::tuple<uint32_t, int, size_t>, std::shared_ptr<const Pages>> pages_ GUARDED_BY(mu_);
};

}  // namespace stoke
