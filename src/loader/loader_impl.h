// The loader's coordinator, Loader::Impl (docs/architecture.md, "The loader"). Private to src/loader.
// It opens the table and builds the stages (loader.cc), and runs them (loader_run.cc): the producer
// thread plans batches, the completer thread hands completed reads on, and the consumer's Next() takes
// the oldest batch. The stages are objects of their own, each in its files and with its own lock where
// it needs one: the columns (loader_columns.h, with scalar_columns.h), the sampler (sampler.h), the batch slots
// (batch_slots.h), read planning (read_planner.h), the fetcher (fetcher.h), reads at once
// (reads_now.h), the completer (read_completer.h), decoding (sample_decoder.h, with slow_cells.h,
// array_cells.h and binary_cells.h) and the queue of planned batches (batch_queue.h).
#pragma once

#include "stoke/loader.h"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "loader/array_cells.h"
#include "loader/batch_queue.h"
#include "loader/batch_slots.h"
#include "loader/binary_cells.h"
#include "loader/fetcher.h"
#include "loader/loader_columns.h"
#include "loader/loader_telemetry.h"
#include "loader/out_of_memory.h"
#include "loader/read_completer.h"
#include "loader/read_planner.h"
#include "loader/reads_now.h"
#include "loader/sample_decoder.h"
#include "loader/sampler.h"
#include "loader/scalar_columns.h"
#include "loader/slow_cells.h"
#include "loader/tensor_column.h"
#include "table/sample_index.h"
#include "table/scan.h"

namespace stoke {

// Next() waits for a batch awake, spinning, for at most this long when its last wait for a batch that
// was not ready at once was no longer: a sleeping consumer costs the thread that finishes each batch
// a futex wake-up (an inter-processor interrupt, microseconds in a virtual machine: 12 % of the
// producer's time at 512-byte samples). Batches that come slower than this are waited for asleep.
constexpr int64_t kSpinWaitNs = 100'000;

// One turn of a wait that spins: gives the core to any other thread ready to run (the caller's
// other threads, a Python thread waiting for the GIL Next() released) and returns at once otherwise.
inline void CpuRelax() { std::this_thread::yield(); }
// Default queue depths (LoaderOptions::queue_depth = 0): local reads complete in microseconds to a
// millisecond, so 64 keep a disk (or the page cache's copies) busy; object-store GETs wait tens of
// milliseconds each, so it takes hundreds in flight to fill a link (256 x 360 KB every 20 ms is
// about 4.6 GB/s), and they cost no thread each (the HTTP client's event loop runs them).
constexpr int kLocalQueueDepth = 64;
constexpr int kRemoteQueueDepth = 256;
// The read cache's blocks being fetched take at most prefetch_bytes / kCacheFetchBudgetDivisor
// (OpenFetcher).
constexpr int64_t kCacheFetchBudgetDivisor = 8;
// Opened from a log of at least this many data files, the loader gives the heap's free pages back
// once it no longer needs the log (a few ms; for small tables it is not worth the page faults after).
constexpr size_t kReleaseHeapAfterFiles = 10000;

class Loader::Impl {
 public:
  Impl(std::string dir, LoaderOptions o) : dir_(std::move(dir)), o_(std::move(o)), telemetry_(o_.trace) {}
  ~Impl() { StopRun(); }

  Status Open();
  Status SetEpoch(int64_t epoch);
  Status Restore(const State& s);
  Result<std::optional<Batch>> Next() EXCLUDES(mu_);
  State state() const EXCLUDES(mu_);
  LoaderStats stats() const;
  Status WriteTrace(const std::string& path) const;
  ShuffleQuality MeasureShuffle(bool global) const;

  int64_t epoch() const { return sampler_->epoch(); }
  int64_t num_rows() const { return sampler_->num_rows(); }
  int64_t samples_per_epoch() const { return sampler_->size(); }
  int64_t batches_per_epoch() const {
    const int64_t n = sampler_->size();
    return o_.drop_last ? n / o_.batch_size : (n + o_.batch_size - 1) / o_.batch_size;
  }
  int64_t table_version() const { return index_->version(); }
  bool index_from_cache() const { return index_->from_cache(); }

 private:
  // Open's steps (loader.cc). Sets threads_ (o_.threads, or one per available CPU) and max_decoded_bytes_.
  void SizeWorkers();
  // The rows served of each range of table rows that `starts` begins (ascending from 0; the last
  // range ends at the table's end), for the sampler's blocks (one empty block when there are none).
  // REQUIRES: the columns were selected (LoaderColumns::Select).
  std::vector<int64_t> ServedSizes(const std::vector<int64_t>& starts) const;
  // Creates sampler_ over the blocks of block shuffle: the table's files, or the units its chunked
  // columns are decoded in (decode_units.h) in windows; keeps them and the options for MeasureShuffle.
  Status CreateSampler();
  // Divides prefetch_bytes: returns the most batch slots, and sets *fetch_budget to the bytes that
  // reads in flight may take (the last quarter went to the slow path's caches in
  // LoaderColumns::SetUpCells). REQUIRES: the tensor columns' output sizes are known (SetUpCells).
  size_t DivideMemoryBudget(int64_t* fetch_budget) const;
  // Opens fetcher_ over the sample index's data files, when a tensor column is selected;
  // `file_versions` (ReadCacheFileVersions) name their bytes in the read cache, when there is one.
  Status OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget);
  // Builds the run's stages over what Open set up.
  void CreateStages(size_t max_slots);
  // The mappings reads are copied out of (mapped_): local files read with the default backend, or
  // the read cache's entries for object stores read through one; none otherwise.
  void CreateMappedReads();

  // The run (loader_run.cc).
  Status StartRun() EXCLUDES(mu_);
  void StopRun() EXCLUDES(mu_);
  void ProducerLoop(int64_t run);
  // Takes the next batch from the sampler and plans it into a slot (rows, scalars, reads). Returns
  // null at the end of the epoch or on stop. A slot returned is queued; on error none is.
  Result<Slot*> PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids);
  // PlanBatch's step for the slot `s` it took: the batch's rows, scalars and reads.
  void FillSlot(Slot* s, int64_t run, int64_t batch_index, const std::vector<int64_t>& ids, size_t n);
  // ProducerLoop's step for a planned (queued) slot: its slow-path cells to the workers, its reads at
  // once, and the rest to the fetcher (`requests`: reused storage); it completes through
  // FinishPending, whatever fails. `on_started` counts the reads the fetcher starts.
  void SubmitBatch(Slot* s, std::vector<FetchRequest>& requests, const std::function<void(size_t)>& on_started);
  // A queued batch's copies (its scalar rows, kGatherRows at a time, and its mapped reads,
  // ReadsNow::CopyMappedOnce) are claimed by the producer and by a consumer waiting for a batch, one
  // claim at a time, the oldest batch's first. The producer plans kPlanAhead batches with copies
  // left before it helps copy them (or sooner, when no slot is free), so that a consumer that
  // waits always finds some; each chunk gathered is one of the slot's `pending`.
  static constexpr size_t kPlanAhead = 2;
  static bool HasCopies(const Slot& s) {
    return s.gather_next.load(std::memory_order_relaxed) < s.gather_chunks || ReadsNow::MappedUnclaimed(s);
  }
  // Claims and does one copy of `s`: a chunk of scalar rows, else some mapped reads. False when `s`
  // had none left.
  bool CopyOnce(Slot* s);
  // One copy of the oldest queued batch that has some; false when none has.
  bool CopyOldest();
  // The producer's turn: one copy of the oldest batch that has some, when kPlanAhead batches have
  // copies left or no slot is free. False when it should plan a batch instead.
  bool ProducerCopies();
  // The consumer's wait for the oldest batch before it sleeps: it does that batch's reads at once
  // and the copies of any queued batch (CopyOnce, the oldest first) nobody has claimed yet, and
  // spins until `deadline` (NowNanos; 0: not at all) for the batch to be ready. Past the deadline,
  // where there are reads at once, it sleeps until a batch is queued or ready and helps again.
  // Returns when the batch is ready or none will come, or (without reads at once) nothing is left
  // to do before the deadline: true when the batch was ready at once (no wait).
  bool WaitAwake(int64_t deadline);
  // Next()'s wait: the oldest batch, taken from the queue once ready; null at the end of the epoch;
  // the producer's error when it failed (the epoch is failed then).
  Result<Slot*> TakeOldestBatch() EXCLUDES(mu_);
  // Next()'s step for the batch in `s`, handed to the consumer: its failure, or its columns collated.
  Status Deliver(Slot* s);
  // Fills s->columns, the consumer's view of the slot. Out of memory when the strings cannot be copied.
  Status BuildColumns(Slot* s);
  // The epoch failed: Next() says so until SetEpoch or Restore.
  void Fail() EXCLUDES(mu_) {
    MutexLock l(&mu_);
    failed_ = true;
  }

  // What Open sets up, read by the stages.
  const std::string dir_;
  std::string root_;  // what data file paths join to: dir_, or a plain dataset's root (TableView::location)
  const LoaderOptions o_;
  std::unique_ptr<SampleIndex> index_;
  LoaderColumns columns_{dir_, o_};  // the selected columns, the rows served, the slow path's readers
  // The table is on an object store (its location is a URI): no split reads (each read is one
  // ranged GET into one buffer), no O_DIRECT, pages merged within a gap, the read cache.
  bool remote_ = false;
  int queue_depth_ = kLocalQueueDepth;  // o_.queue_depth, or its default for where the table is
  size_t batch_rows_ = 1;  // a batch's most rows: batch_size, at most the rank's samples of an epoch
  size_t threads_ = 1;
  // The most bytes one decode worker may hold for one decoded image (and for a blob page's body).
  int64_t max_decoded_bytes_ = int64_t{64} << 20;
  mutable LoaderTelemetry telemetry_;

  // The stages.
  std::unique_ptr<Sampler> sampler_;             // used by the producer while a run is active
  std::vector<int64_t> block_sizes_;             // the sampler's blocks, for MeasureShuffle
  std::vector<int64_t> decode_units_;            // the first table row of each (decode_units.h); empty: none
  std::vector<int64_t> file_starts_;             // the files' first served rows, for MeasureShuffle
  SamplerOptions sampler_options_;
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<BatchSlots> slots_;
  std::unique_ptr<ReadPlanner> planner_;
  BatchQueue queue_;
  std::unique_ptr<SampleDecoder> decoder_;
  std::unique_ptr<MappedReads> mapped_;  // with reads_now_: cached reads out of mappings
  std::unique_ptr<ReadsNow> reads_now_;
  std::unique_ptr<ReadCompleter> completer_;

  // Run state.
  mutable Mutex mu_;
  bool running_ GUARDED_BY(mu_) = false;
  bool epoch_done_ GUARDED_BY(mu_) = false;  // Next() returned the end, or failed
  bool failed_ GUARDED_BY(mu_) = false;
  int64_t run_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::thread producer_, completer_thread_;

  // Position for state(): the run started at global position start_consumed_ of the sampler's epoch.
  // The consumer thread's alone (Next, SetEpoch, Restore, state: the Loader has one consumer), so not
  // guarded; StartRun, StopRun and state() happen to touch them under mu_.
  int64_t start_consumed_ = 0;
  int64_t ids_delivered_ = 0;  // ids of batches Next() returned (skipped ones included) this run
  bool end_reached_ = false;
  int64_t next_batch_index_ = 0;

  // Statistics.
  int64_t first_next_ns_ = 0;
  // How long the consumer's last wait in Next() for a batch not ready at once took: it spins when
  // this was short.
  int64_t last_wait_ns_ = 0;
};

}  // namespace stoke
