// The loader's reads at once (docs/architecture.md, "The loader"): a batch's split pages that are in
// the page cache (its copies out of mappings, planned by the ReadPlanner, whatever their size; small
// split reads with a system call where the file is not mapped) are copied or read and checked by the
// producer, or by a consumer waiting for that batch, instead of going through the fetcher. Private
// to src/loader.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "loader/batch_slots.h"
#include "loader/fetcher.h"
#include "loader/loader_telemetry.h"
#include "loader/sample_decoder.h"

namespace stoke {

// Split reads below this size that cannot be copied out of a mapping are read at once with a system
// call when their pages are cached: for a 512-byte sample the hand-offs through the fetcher (a ring
// completion, a wake-up, a lock per group) cost more than the read. From this size on the fetcher's
// reading threads copy such pages on every core. (A read out of a mapping is done at once whatever
// its size: one memory copy, where a system call copies in the kernel and a reading thread adds the
// hand-offs; at 115 KB and 360 KB it ran 1.3-1.5x the fetcher's reading threads.)
constexpr uint32_t kReadNowBytes = static_cast<uint32_t>(kParallelReadBytes);

// Thread-safe as documented per method: Plan is the producer's; ReadClaimed and CopyMappedOnce may
// run on the producer and a consumer at once, each claiming reads (or copies) of its own.
class ReadsNow {
 public:
  // Every pointer outlives it. `fetcher` is null when no tensor column is selected.
  ReadsNow(Fetcher* fetcher, SampleDecoder* decoder, LoaderTelemetry* telemetry)
      : fetcher_(fetcher), decoder_(decoder), telemetry_(telemetry) {}

  // Sizes the claims of the batch's copies out of mappings (Slot::mapped_copies, planned by the
  // ReadPlanner) and chooses its reads to do at once: split reads below kReadNowBytes with their
  // files pinned (Slot::now_reads), unless the back-off says the page cache missed lately. Producer
  // thread, before the slot is queued.
  void Plan(Slot* s);
  // Unpins the files Plan pinned for a batch that will not be queued.
  void Unplan(Slot* s);
  // Whether some of the batch's reads at once with a system call are not claimed yet.
  static bool Unclaimed(const Slot& s) { return s.now_next.load(std::memory_order_relaxed) < s.now_reads.size(); }
  // Whether some of the batch's copies out of mappings are not claimed yet.
  static bool MappedUnclaimed(const Slot& s) {
    return s.mapped_next.load(std::memory_order_relaxed) < s.mapped_copies.size();
  }
  // Claims the batch's next Slot::mapped_claim copies, copies them out of their mappings and checks
  // them (SampleDecoder::CheckCopies); false when none was left to claim. Any thread, as many at
  // once as like.
  bool CopyMappedOnce(Slot* s);
  // Claims the batch's reads at once with a system call one by one and reads and decodes each
  // (Fetcher::ReadNow) until none is left. The producer passes `missed`: when the page cache lacks
  // a read, that read and every one not yet claimed go there, for the fetcher. A consumer passes
  // null: it waits for the disk for such a read, then stops and leaves the rest to the producer.
  // Returns true when a read met the disk (and the claiming stopped there), false when every read
  // claimed was in the page cache.
  bool ReadClaimed(Slot* s, std::vector<FetchRequest>* missed);

 private:
  // Counts n of the batch's reads at once with a system call done; the last unpins their files.
  void Finish(Slot* s, uint32_t n);
  // Reads the claimed read r (request q) into `head`, without waiting for the disk unless `wait`:
  // false when the page cache lacks some of its bytes (only without `wait`), else true, with
  // *error set when it failed.
  bool ReadOne(Read& r, const FetchRequest& q, uint8_t* head, bool wait, Status* error);
  // Copies are claimed up to this many at a time: the claim, the telemetry and the count of samples
  // done are shared by the threads that copy a batch, and updating them once per copy cost more
  // than the copy of a 512-byte sample.
  static constexpr uint32_t kMappedClaim = 16;
  // ... and up to about this many bytes a claim (at least one read): with 16 reads of 115 KB a
  // claim, a batch of 32 was two claims, and the thread that finished its claim first waited for
  // the other's (the batch, or the next one's planning): 171 % of 2 cores busy, 193 % with claims of
  // two reads.
  static constexpr uint64_t kMappedClaimBytes = 256 << 10;
  // The claim size for the batch's copies, by their mean length.
  static uint32_t ClaimSize(const Slot& s);
  // The stores for the batch's checked copies: around the caches from kStreamBatchBytes of tensors a
  // batch on (batch_slots.h).
  static CopyStores StoresFor(const Slot& s);
  // Copies ask the CPU for the bytes of the copy this many ahead: a copy from a random place of a
  // large file waits for memory (a TLB and a cache miss), and the work between two copies keeps the
  // CPU from overlapping those waits by itself.
  static constexpr uint32_t kPrefetchReads = 8;
  // Prefetches the bytes of the k-th copy of `s`, when there is one.
  static void Prefetch(const Slot& s, uint32_t k);
  // Copies [begin, end) of Slot::mapped_copies out of their mappings and checks them.
  void CopyMapped(Slot* s, uint32_t begin, uint32_t end);
  // The back-off: whether this batch's reads at once may be tried with a system call.
  bool TrySystemCalls();
  // A read's error when there is no memory for its message: out of memory, which fails the batch
  // (r.out_of_memory), where otherwise an exception would leave the claim unfinished.
  static Status NoMemoryForError(Read& r);

  Fetcher* const fetcher_;
  SampleDecoder* const decoder_;
  LoaderTelemetry* const telemetry_;
  // Plan's back-off (producer thread): after a read at once that the page cache could not serve, the
  // next skip_ batches go whole to the fetcher, backoff_ doubling (to 64) while misses go on, so that
  // a cold table costs a failed attempt per many batches, not per read.
  int64_t skip_ = 0;
  int64_t backoff_ = 0;
  bool tried_ = false;               // the last batch planned had reads at once with system calls
  std::atomic<bool> missed_{false};  // a read at once met an uncached page (any thread)
};

}  // namespace stoke
