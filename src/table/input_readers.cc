#include "table/input_readers.h"

#include <utility>

namespace stoke {

Result<std::unique_ptr<ParquetReader>> OpenInput(const TableView& t, const delta::AddFile& add, uint64_t whole_file_bytes) {
  const uint64_t size = static_cast<uint64_t>(add.size);
  STOKE_ASSIGN_OR_RETURN(auto file, t.storage->OpenForReadWithSize(t.FilePath(add), size));
  return ParquetReader::Open(std::move(file), size <= whole_file_bytes ? size : 0);
}

InputReaders::InputReaders(const TableView& t, const std::vector<const delta::AddFile*>& inputs, uint64_t budget_bytes,
                           size_t max_readers)
    : t_(t), inputs_(inputs), budget_(budget_bytes), max_readers_(max_readers), cells_left_(inputs.size(), 0) {}

void InputReaders::Keep(size_t input, std::unique_ptr<ParquetReader> reader, int64_t cells) {
  const uint64_t bytes = reader ? reader->memory_bytes() : 0;
  MutexLock l(&mu_);
  cells_left_[input] = cells;
  if (reader && cells > 0 && held_.find(input) == held_.end() && bytes <= budget_ - held_bytes_ &&
      held_.size() < max_readers_) {
    InsertLocked(input, std::move(reader), bytes);
  }
}

Status InputReaders::ReadCell(size_t input, int64_t row, size_t column, AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const ParquetReader> reader, Get(input));
  Status st = reader->ReadBinaryCell(row, column, out);
  MutexLock l(&mu_);
  if (--cells_left_[input] <= 0) {
    DropLocked(input);
    return st;
  }
  // The read may have grown the reader (a page index decoded): counted again, and room made for it
  // from the least recently used others, or it goes.
  if (auto it = held_.find(input); it != held_.end()) {
    const uint64_t now = it->second.reader->memory_bytes();  // mu_, then the reader's own lock
    held_bytes_ = held_bytes_ - it->second.bytes + now;
    it->second.bytes = now;
    while (held_bytes_ > budget_ && lru_.back() != input) {
      const size_t victim = lru_.back();
      DropLocked(victim);
    }
    if (held_bytes_ > budget_) DropLocked(input);
  }
  return st;
}

size_t InputReaders::held() const {
  MutexLock l(&mu_);
  return held_.size();
}

uint64_t InputReaders::held_bytes() const {
  MutexLock l(&mu_);
  return held_bytes_;
}

Result<std::shared_ptr<const ParquetReader>> InputReaders::Get(size_t input) {
  {
    MutexLock l(&mu_);
    if (auto it = held_.find(input); it != held_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.use);
      return it->second.reader;
    }
  }
  // Opened without the lock; when two threads open the same input, the first one kept wins.
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> opened, OpenInput(t_, *inputs_[input], 0));
  std::shared_ptr<const ParquetReader> reader = std::move(opened);
  const uint64_t bytes = reader->memory_bytes();
  MutexLock l(&mu_);
  if (auto it = held_.find(input); it != held_.end()) return it->second.reader;
  // Kept when the input has cells left besides the one it was opened for.
  if (cells_left_[input] > 1 && bytes <= budget_ && max_readers_ > 0) {
    while (held_bytes_ + bytes > budget_ || held_.size() >= max_readers_) {
      const size_t victim = lru_.back();
      DropLocked(victim);
    }
    InsertLocked(input, std::move(reader), bytes);
    return held_.at(input).reader;
  }
  return reader;
}

void InputReaders::InsertLocked(size_t input, std::shared_ptr<const ParquetReader> reader, uint64_t bytes) {
  lru_.push_front(input);
  held_.emplace(input, Held{std::move(reader), bytes, lru_.begin()});
  held_bytes_ += bytes;
}

// A reader still in use by another thread stays alive until that read ends (shared_ptr).
void InputReaders::DropLocked(size_t input) {
  auto it = held_.find(input);
  if (it == held_.end()) return;
  held_bytes_ -= it->second.bytes;
  lru_.erase(it->second.use);
  held_.erase(it);
}

}  // namespace stoke
