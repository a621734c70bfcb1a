// The loader's reads at once (docs/architecture.md, "The loader"): a batch's small split reads whose
// pages are in the page cache are read and decoded by the producer, or by a consumer waiting for
// that batch, instead of going through the fetcher. Private to src/loader.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "loader/batch_slots.h"
#include "loader/fetcher.h"
#include "loader/loader_telemetry.h"
#include "loader/sample_decoder.h"

namespace stoke {

// Split reads below this size are done at once when their pages are cached: for a 512-byte sample
// the hand-offs through the fetcher (a ring completion, a wake-up, a lock per group) cost more than
// the read. From this size on the fetcher's reading threads copy cached pages on every core.
constexpr uint32_t kReadNowBytes = static_cast<uint32_t>(kParallelReadBytes);
// The most head bytes (page header and length prefix, some tens of bytes in stoke's pages) of a read
// done at once: they land on the reading thread's stack.
constexpr uint32_t kMaxReadNowHead = 256;

// Thread-safe as documented per method: Plan is the producer's; ReadClaimed may run on the producer
// and a consumer at once, each claiming reads of its own.
class ReadsNow {
 public:
  // Every pointer outlives it. `fetcher` is null when no tensor column is selected.
  ReadsNow(Fetcher* fetcher, SampleDecoder* decoder, LoaderTelemetry* telemetry)
      : fetcher_(fetcher), decoder_(decoder), telemetry_(telemetry) {}

  // Chooses the batch's reads to do at once (Slot::now_reads: split reads below kReadNowBytes, their
  // files pinned) unless the back-off says the page cache missed lately. Producer thread, before the
  // slot is queued.
  void Plan(Slot* s);
  // Unpins the files Plan pinned for a batch that will not be queued.
  void Unplan(Slot* s);
  // Whether some of the batch's reads at once are not claimed yet.
  static bool Unclaimed(const Slot& s) { return s.now_next.load(std::memory_order_relaxed) < s.now_reads.size(); }
  // Claims the batch's reads at once one by one and reads and decodes each (Fetcher::ReadNow) until
  // none is left. The producer passes `missed`: when the page cache lacks a read, that read and every
  // one not yet claimed go there, for the fetcher. A consumer passes null: it waits for the disk for
  // such a read, then stops and leaves the rest to the producer. Returns true when a read met the
  // disk (and the claiming stopped there), false when every read claimed was in the page cache.
  bool ReadClaimed(Slot* s, std::vector<FetchRequest>* missed);

 private:
  // Counts n of the batch's reads at once done; the last unpins their files.
  void Finish(Slot* s, uint32_t n);
  // Reads the claimed read r (request q) into `head`, without waiting for the disk unless `wait`:
  // false when the page cache lacks some of its bytes (only without `wait`), else true, with
  // *error set when it failed.
  bool ReadOne(Read& r, const FetchRequest& q, uint8_t* head, bool wait, Status* error);

  Fetcher* const fetcher_;
  SampleDecoder* const decoder_;
  LoaderTelemetry* const telemetry_;
  // Plan's back-off (producer thread): after a read at once that the page cache could not serve, the
  // next skip_ batches go whole to the fetcher, backoff_ doubling (to 64) while misses go on, so that
  // a cold table costs a failed attempt per many batches, not per read.
  int64_t skip_ = 0;
  int64_t backoff_ = 0;
  bool tried_ = false;               // the last batch planned had reads at once
  std::atomic<bool> missed_{false};  // a read at once met an uncached page (any thread)
};

}  // namespace stoke
