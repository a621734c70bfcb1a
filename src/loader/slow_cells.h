// The loader's slow-path stage (docs/architecture.md): cells that are not one page of their own
// each. Two kinds, both from other writers' files:
//  - pages without an OffsetIndex (Location::needs_decode): the cell is read through a
//    ParquetReader of its file, kept open for the next cells (at most kMaxSlowPathReaders files,
//    least recently used closed first);
//  - large pages of many rows (InPageCache): read and decoded once into a PageCache, each row copied
//    out of it, instead of one read and decode of the whole page per sample.
// Thread-safe: decode workers call ReadCell at once; the readers' list has its own lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "format/parquet_reader.h"
#include "loader/page_cache.h"
#include "table/sample_index.h"

namespace stoke {

class SlowCells {
 public:
  // Readers of files without OffsetIndexes kept open at once; each holds a descriptor.
  static constexpr size_t kMaxSlowPathReaders = 16;
  // Pages of several rows at least this large go through the decoded-page cache.
  static constexpr uint32_t kCachedPageBytes = 256 << 10;

  // `index` must outlive this. `page_cache_bytes`: the decoded pages' budget.
  SlowCells(const SampleIndex& index, size_t page_cache_bytes, bool verify_crc)
      : index_(index), page_cache_(page_cache_bytes), verify_crc_(verify_crc) {}

  // Whether a cell at `loc` goes through the page cache rather than a read of its own.
  static bool InPageCache(const SampleIndex::Location& loc) {
    return loc.rows_in_page > 1 && loc.length >= kCachedPageBytes;
  }

  // The cell of column `column` at `loc` (needs_decode, or InPageCache) into *out. `cell_bytes`: the
  // column's cell size, checked unless `any_size` (encoded images). Errors name the page or cell.
  Status ReadCell(const std::string& column, size_t cell_bytes, bool any_size, const SampleIndex::Location& loc,
                  AlignedBuffer* out);

  // A reader of data file `file`, kept open for the next cells (the stages that decode whole column
  // chunks, array_cells.h and binary_cells.h, read through these readers too).
  Result<std::shared_ptr<const ParquetReader>> ReaderOf(uint32_t file) EXCLUDES(mu_);

  // Where table row `row` is: its file, the row group and the row within it, and the file's reader.
  struct RowPlace {
    uint32_t file = 0;
    int row_group = 0;
    int64_t row_in_group = 0;
    int64_t row_in_file = 0;
    std::shared_ptr<const ParquetReader> reader;
  };
  Result<RowPlace> Locate(int64_t row) EXCLUDES(mu_);

  int64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  int64_t cells_decoded() const { return cells_decoded_.load(std::memory_order_relaxed); }

 private:
  struct Reader {
    uint32_t file = 0;
    uint64_t last_use = 0;
    // Shared so that a worker still using a dropped reader keeps it alive.
    std::shared_ptr<const ParquetReader> reader;
  };
  Status ReadUnindexedCell(const std::string& column, size_t cell_bytes, bool any_size,
                           const SampleIndex::Location& loc, AlignedBuffer* out);
  Status ReadCachedPageCell(size_t cell_bytes, const SampleIndex::Location& loc, AlignedBuffer* out);

  const SampleIndex& index_;
  PageCache page_cache_;
  const bool verify_crc_;
  Mutex mu_;
  std::vector<Reader> readers_ GUARDED_BY(mu_);
  uint64_t clock_ GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> bytes_read_{0}, cells_decoded_{0};
};

}  // namespace stoke
