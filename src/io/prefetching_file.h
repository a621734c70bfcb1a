// A RandomAccessFile that answers reads from byte ranges fetched ahead, for readers that make many
// small reads of known places (a Parquet footer, then the column chunks it names): on an object store
// each read is a request, so the ranges are merged within a gap and fetched at once, all in flight
// together, and the reader's reads then cost none.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "io/storage.h"

namespace stoke {

// Thread-safe: Prefetch and the reads may be called concurrently.
class PrefetchingFile final : public RandomAccessFile {
 public:
  explicit PrefetchingFile(std::unique_ptr<RandomAccessFile> base) : base_(std::move(base)) {}

  // Fetches `ranges` ((offset, length) pairs; clipped to the file, empty ones ignored), merged where
  // at most `gap` bytes apart, with one base->ReadAtAsync per merged range, all started before any is
  // waited for, and keeps them in memory for the life of this file. Returns the first read error
  // (naming the file); what was fetched before stays usable.
  Status Prefetch(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t gap) EXCLUDES(mu_);

  // From the kept ranges when one holds all of [offset, offset + dst.size()), else from the base.
  Status ReadAt(uint64_t offset, MutableByteView dst) const override EXCLUDES(mu_);
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  bool remote() const override { return base_->remote(); }

  // Reads made of the base (Prefetch's included), for tests.
  uint64_t base_reads() const EXCLUDES(mu_);

 private:
  struct Kept {
    uint64_t offset = 0;
    std::shared_ptr<AlignedBuffer> bytes;  // shared: a read copies out of it without holding mu_
  };
  std::unique_ptr<RandomAccessFile> base_;
  mutable Mutex mu_;
  std::vector<Kept> kept_ GUARDED_BY(mu_);  // sorted by offset, not overlapping
  mutable uint64_t base_reads_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoke
