// Opening a table's data files to rewrite them (OPTIMIZE), and a byte-bounded set of open readers for
// reading their cells in any order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "stoke/status.h"
#include "format/parquet_reader.h"
#include "table/delta_log.h"
#include "table/scan.h"

namespace stoke {

// A data file of the table opened for reading, with its size from the log (no request for it): read
// whole in one request when it is no larger than `whole_file_bytes`, else its footer's tail.
Result<std::unique_ptr<ParquetReader>> OpenInput(const TableView& t, const delta::AddFile& add, uint64_t whole_file_bytes);

// Readers of some of a table's data files (`inputs`, by index) for reading their cells in any order,
// shared by the threads that read them. A caller that has opened an input already hands its reader
// over (Keep), so a file read whole is not read again and another's footer is not read again.
// Readers are held up to `budget_bytes` in all (ParquetReader::memory_bytes, counted again after each
// read, as a reader keeps the page indexes it decoded) and `max_readers` at once (a local file's
// reader holds a descriptor): one is closed once the last of its input's cells has been read, and the
// least recently used first when a reader opened here, or grown, needs room. An input not held is
// opened with its footer's tail only (OpenInput), which holds the whole of a small file. Thread-safe;
// `t` and `inputs` must outlive it.
class InputReaders {
 public:
  InputReaders(const TableView& t, const std::vector<const delta::AddFile*>& inputs, uint64_t budget_bytes,
               size_t max_readers = SIZE_MAX);

  // `cells`: how many cells of `input` ReadCell will be asked for; `reader`, open on that input (or
  // null), is kept when it fits in what the budget has left (readers held already are not closed for
  // it). An input never named here is read as one with a single cell: its reader is not kept.
  void Keep(size_t input, std::unique_ptr<ParquetReader> reader, int64_t cells) EXCLUDES(mu_);

  // The BYTE_ARRAY cell of file-global `row` in the file's column `column` of `input`, into `out`
  // (ParquetReader::ReadBinaryCell): counts one of the input's cells as read.
  Status ReadCell(size_t input, int64_t row, size_t column, AlignedBuffer* out) EXCLUDES(mu_);

  // Readers held now, and their bytes.
  size_t held() const EXCLUDES(mu_);
  uint64_t held_bytes() const EXCLUDES(mu_);

 private:
  struct Held {
    std::shared_ptr<const ParquetReader> reader;
    uint64_t bytes = 0;
    std::list<size_t>::iterator use;  // in lru_
  };

  Result<std::shared_ptr<const ParquetReader>> Get(size_t input) EXCLUDES(mu_);
  void InsertLocked(size_t input, std::shared_ptr<const ParquetReader> reader, uint64_t bytes) REQUIRES(mu_);
  void DropLocked(size_t input) REQUIRES(mu_);

  const TableView& t_;
  const std::vector<const delta::AddFile*>& inputs_;
  const uint64_t budget_;
  const size_t max_readers_;
  mutable Mutex mu_;
  std::vector<int64_t> cells_left_ GUARDED_BY(mu_);  // by input
  std::unordered_map<size_t, Held> held_ GUARDED_BY(mu_);
  std::list<size_t> lru_ GUARDED_BY(mu_);  // the inputs held, most recently used first
  uint64_t held_bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoke
