// The loader's coordinator, Loader::Impl, and the types its stages share (docs/architecture.md).
// Private to src/loader: its methods are defined by stage, one file each: loader.cc (open), loader_reads.cc
// (batch slots and read planning), loader_decode.cc (decode workers, failures, collation) and
// loader_run.cc (the producer, the completer and the consumer's Next()); the scalar columns
// (scalar_columns.h), the slow path (slow_cells.h), the fetcher (fetcher.h), the sampler
// (sampler.h) and the transforms are stage objects of their own.
#pragma once

#include "stoke/loader.h"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <thread>
#include <new>
#include <system_error>

#include "core/clock.h"
#include "core/cpus.h"
#include "core/fd_limit.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "format/image.h"
#include "format/npy.h"
#include "format/parquet_reader.h"
#include "io/read_cache.h"
#include "io/storage.h"
#include "io/uri.h"
#include "loader/array_cells.h"
#include "loader/binary_cells.h"
#include "loader/fetcher.h"
#include "loader/image_transform.h"
#include "loader/out_of_memory.h"
#include "loader/page_decoder.h"
#include "loader/sampler.h"
#include "loader/scalar_columns.h"
#include "loader/slow_cells.h"
#include "loader/transform.h"
#include "table/parquet_dataset.h"
#include "table/sample_index.h"
#include "table/scan.h"

namespace stoke {

// A tensor column, or an image column (a blob column named in `stoke.images`: one encoded JPEG/PNG
// per cell, decoded and transformed by `image`).
struct TensorColumn {
  std::string name;
  size_t index_column = 0;  // in SampleIndex::tensor_columns()
  TensorSpec in;
  TransformPipeline transforms;  // tensor columns without image transforms
  // Image columns (encoded_image), and uint8 [H, W, C] tensor columns whose transforms start with
  // image transforms (use_image): the whole chain.
  bool encoded_image = false;
  bool use_image = false;
  // An array column (array_cells.h): `file_name` is its field in the data files; `in` is set from
  // the first served row (SetUpArrayColumns). index_column is unused.
  bool array = false;
  // A binary column of other writers' files (binary_cells.h), or a struct with a binary `bytes`
  // field: its cells are .npy arrays (`in` set from the first served row) or encoded images
  // (encoded_image). `file_name` is its field in the data files; index_column is unused.
  bool binary_cells = false;
  std::string file_name;
  std::vector<int64_t> array_shape;  // the shape the rows' lists nest to (`in.shape` may reshape it)
  ImagePipeline image;
  size_t in_bytes = 0;   // the cell's bytes (0 for image columns: cells vary)
  size_t out_bytes = 0;
  DType out_dtype = DType::kUInt8;
  std::vector<int64_t> out_shape;
  bool direct() const { return !use_image && transforms.empty(); }  // cells go to the batch as they are
  // Decoded from its column chunks by a stage of its own, row by row, not read page by page.
  bool chunked() const { return array || binary_cells; }
};

// The largest coalesced read: offsets within a read are 32-bit (ReadMember::offset, FetchRequest::length).
constexpr int64_t kMaxCoalesceBytes = int64_t{1} << 30;
// Split reads below this size are done at once, by the producer and by a consumer waiting for their
// batch, when their pages are cached (Loader::Impl::ReadClaimedNow): for a 512-byte sample the
// hand-offs through the fetcher (a ring completion, a wake-up, a lock per group) cost more than the
// read. From this size on the fetcher's reading threads copy cached pages on every core.
constexpr uint32_t kReadNowBytes = static_cast<uint32_t>(kParallelReadBytes);
// The most head bytes (page header and length prefix, some tens of bytes in stoke's pages) of a read
// done at once: they land on the reading thread's stack.
constexpr uint32_t kMaxReadNowHead = 256;
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
// The read cache's blocks being fetched take at most this share of prefetch_bytes (from the quarter
// left as headroom; see Open).
constexpr int64_t kCacheFetchBudgetDivisor = 8;
// Opened from a log of at least this many data files, the loader gives the heap's free pages back
// once it no longer needs the log (a few ms; for small tables it is not worth the page faults after).
constexpr size_t kReleaseHeapAfterFiles = 10000;

// One sample's cell inside a read.
struct ReadMember {
  uint32_t sample = 0;   // row of the batch
  uint32_t column = 0;   // index into tensor columns
  uint32_t offset = 0;   // within the read
  uint32_t length = 0;   // page bytes
  uint32_t row_in_page = 0;
  uint32_t rows_in_page = 0;
  parquet::Codec codec = parquet::Codec::kUncompressed;
  bool definition_levels = false;  // the page body starts with definition levels (OPTIONAL column)
};


struct Slot;


// One read (a page, or neighbouring pages of one file coalesced).
struct Read {
  Slot* slot = nullptr;  // the batch it belongs to
  uint32_t file = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  int64_t submit_ns = 0;
  // Split read (one uncompressed single-value page, no transforms, no O_DIRECT): the sample lands
  // straight in its batch row (`tail`), only header + length prefix in `data`.
  uint8_t* tail = nullptr;
  uint32_t head_length = 0;
  std::vector<ReadMember> members;
  AlignedBuffer data;  // the completed read's buffer, until its samples are decoded
  ByteView bytes;      // the read's bytes within `data` (FetchResult::bytes())
  std::optional<uint32_t> tail_crc;  // FetchResult::tail_crc
  Status status;
  bool out_of_memory = false;  // status is an allocation failure: fails the batch even with on_error=skip
  Read* next_in_task = nullptr;  // the next read of the same decode task (set by the completer)
  bool now = false;   // done at once (Slot::now_reads), not through the fetcher
  int now_fd = -1;    // its file's descriptor, pinned for the batch (Slot::now_files)

  // Readies a reused Read for another batch, keeping the capacity of `members`.
  void Reset(Slot* s, uint32_t f, uint64_t off, uint32_t len) {
    slot = s;
    file = f;
    offset = off;
    length = len;
    submit_ns = 0;
    tail = nullptr;
    head_length = 0;
    members.clear();
    data = AlignedBuffer();
    bytes = ByteView();
    tail_crc.reset();
    status = Status::OK();
    out_of_memory = false;
    now = false;
    now_fd = -1;
  }
};

// A tensor cell of a batch and where its page is, for planning.
struct PlannedCell {
  SampleIndex::Location loc;
  uint32_t sample, column;
};


// A reusable batch buffer and the state of the batch it currently holds.
struct Slot {
  uint32_t id = 0;
  std::vector<HostBuffer> tensors;                // per tensor column: batch_size * out_bytes
  std::vector<std::vector<uint8_t>> scalars;      // per scalar column: batch_size * element size
  std::vector<std::vector<uint8_t>> scalar_valid; // per scalar column (empty when never null)
  std::vector<std::vector<std::string>> strings;  // per scalar column (string columns only)
  std::vector<BatchColumn> columns;               // what the consumer sees (data points above)
  // The batch it holds.
  int64_t run = 0;
  int64_t epoch = 0;
  int64_t index = 0;
  int64_t size = 0;                  // rows in the batch (before skipped rows are removed)
  std::vector<int64_t> rows;         // table rows
  // The batch's reads: the first num_reads entries. Entries beyond stay allocated (with their members'
  // capacity) for the slot's next batch, so planning allocates nothing in steady state.
  std::vector<Read> reads;
  size_t num_reads = 0;
  // Reads done at once instead of through the fetcher (Loader::Impl::ReadClaimedNow): their indices in
  // `reads`, claimed one at a time (now_next) by the producer and by a consumer waiting for this batch.
  // now_left counts those not yet read (or handed to the fetcher); the thread that takes it to 0
  // unpins now_files (one pin per file). Set before the slot is queued, which publishes them.
  std::vector<uint32_t> now_reads;
  std::vector<uint32_t> now_files;
  std::atomic<uint32_t> now_next{0};
  std::atomic<uint32_t> now_left{0};
  std::vector<PlannedCell> cells;  // planning scratch
  std::vector<SampleIndex::Location> locations;  // planning scratch: [column][sample]
  // Sample-columns not yet decoded, + 1 while the producer plans. The batch is ready when it reaches 0:
  // every decrement is an acq_rel read-modify-write, so they form one release sequence, and the
  // consumer's acquire load that reads 0 sees every worker's writes into the slot. Set (reset) by the
  // producer before the slot is queued under Loader::Impl::mu_, which publishes it to the consumer.
  std::atomic<int64_t> pending{0};
  Mutex mu;  // workers failing samples of the batch at once
  Status error GUARDED_BY(mu);                  // first error (on_error=raise)
  std::vector<uint8_t> skipped GUARDED_BY(mu);  // per row (on_error=skip)
  int64_t skipped_count GUARDED_BY(mu) = 0;
};

// The fetcher's request for read g of slot s; its tag is (s.id << 32) | g, by which the completer
// finds the read again.
inline FetchRequest RequestOf(const Slot& s, uint32_t g) {
  const Read& r = s.reads[g];
  return FetchRequest{.file = r.file, .offset = r.offset, .length = r.length, .tag = (uint64_t{s.id} << 32) | g,
                      .tail = r.tail, .head_length = r.head_length};
}

// The slots, shared by the loader and the batches it delivered (which may outlive it).
struct SlotPool {
  Mutex mu;
  CondVar cv;  // a slot was freed, the consumer took one, or stop
  std::vector<std::unique_ptr<Slot>> all GUARDED_BY(mu);
  std::vector<Slot*> free GUARDED_BY(mu);
  int64_t held_by_consumer GUARDED_BY(mu) = 0;

  void Return(Slot* s) EXCLUDES(mu) {
    {
      MutexLock l(&mu);
      free.push_back(s);
      --held_by_consumer;
    }
    cv.SignalAll();
  }
};

struct Batch::Impl {
  std::shared_ptr<SlotPool> pool;
  Slot* slot = nullptr;
  int64_t size = 0;
};

class Loader::Impl {
 public:
  Impl(std::string dir, LoaderOptions o) : dir_(std::move(dir)), o_(std::move(o)), trace_(o_.trace) {}
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
  // Open's steps. Sets up tensors_, scalars_ and column_order_ for the `selected` columns (indices in
  // view.columns; `image_columns`: the blob columns holding images).
  Status SetUpColumns(const TableView& view, const std::vector<size_t>& selected,
                      const std::vector<std::string>& image_columns);
  // The column `spec` (a tensor, or an image column when it is a blob) with its transforms; image
  // pipelines are made once the rows are known (CreateImagePipelines).
  Result<TensorColumn> MakeTensorColumn(const ColumnSpec& spec) const;
  // The tensor column `t` (its input dtype and shape set) with its transforms (none of them image
  // transforms, unless `t` is a uint8 [H, W, C] tensor: then the image pipeline is made later).
  Status SetTransforms(TensorColumn* t) const;
  // Creates slow_cells_, array_cells_ and binary_cells_, and sets the array and binary columns' dtype
  // and shape from the first served row, with their transforms (binary columns of images become
  // image columns). REQUIRES: scalars_ were read.
  Status SetUpChunkedColumns();
  // SetUpChunkedColumns' step for the binary column `t`: what its first served cell (`first`, when
  // a row is served) holds.
  Status SetUpBinaryColumn(TensorColumn* t, std::optional<int64_t> first);
  // Sets t->in.shape to o_.shapes' entry for the array column `t`, or else to metadata_shapes_', when
  // there is one (its value count must be the rows').
  Status ReshapeArrayColumn(TensorColumn* t) const;
  // Sets threads_ (o_.threads, or one per available CPU) and max_decoded_bytes_.
  void SizeWorkers();
  // The blocks for block shuffle: the table's files, counted in selected rows (one empty block when
  // there are none). REQUIRES: scalars_ were read.
  std::vector<int64_t> BlockSizes() const;
  // Creates sampler_ over BlockSizes(), and keeps its blocks and options for MeasureShuffle.
  Status CreateSampler();
  // Divides prefetch_bytes: sets max_slots_, and returns the bytes that reads in flight may take (the
  // caches' quarter went to the chunked columns' stages in SetUpChunkedColumns). REQUIRES: the tensor columns' output sizes are known (CreateImagePipelines).
  int64_t DivideMemoryBudget();
  // Opens fetcher_ over the sample index's data files, when a tensor column is selected;
  // `file_versions` (ReadCacheFileVersions) name their bytes in the read cache, when there is one.
  Status OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget);
  Status StartRun() EXCLUDES(mu_);
  void StopRun() EXCLUDES(mu_);
  void ProducerLoop(int64_t run) EXCLUDES(mu_);
  // ProducerLoop's step for a planned (queued) slot: its slow-path cells to the workers, its reads at
  // once, and the rest to the fetcher (`requests`: reused storage); it completes through
  // FinishPending, whatever fails. `on_started` counts the reads the fetcher starts.
  void SubmitBatch(Slot* s, const std::vector<Read>& slow, std::vector<FetchRequest>& requests,
                   const std::function<void(size_t)>& on_started) EXCLUDES(mu_);
  void CompleterLoop() EXCLUDES(mu_);
  // CompleterLoop's step for `live` completed reads: decoded at once when they leave little to do,
  // else handed to the workers in tasks of a share of them each.
  void HandOutDecodes(Read* const* reads, size_t live) EXCLUDES(mu_);
  // A free slot, or a new one while the pool may grow; null once stop_ is set. OutOfMemoryError when a
  // new slot cannot be allocated.
  Result<Slot*> AcquireSlot();
  // Takes the next batch from the sampler and plans it into a slot (rows, scalars, reads). Returns
  // null at the end of the epoch or on stop. A slot returned is in queue_; on error none is.
  Result<Slot*> PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids, std::vector<Read>* slow);
  Status PlanReads(Slot* s, std::vector<Read>* slow);
  // PlanReads' steps: the batch's cells in s->cells, sorted by file and offset, and those of the slow
  // path (SlowCells) as one-cell reads in *slow; then the cells coalesced into s->reads.
  void FindCells(Slot* s, std::vector<Read>* slow) const;
  void CoalesceCells(Slot* s) const;
  void DecodeRead(Read& r);
  // The bytes DecodeRead still has to go through: a split read whose sample's CRC the fetcher took
  // (or that is not checked) leaves only its head, a few dozen bytes.
  uint64_t DecodeBytes(const Read& r) const {
    if (r.tail != nullptr && (r.tail_crc.has_value() || !o_.verify_crc)) return r.bytes.size();
    return r.length;
  }
  // Chooses the batch's reads to do at once (Slot::now_reads: split reads below kReadNowBytes, files
  // pinned) unless the back-off says the page cache missed lately. Producer thread, before queueing.
  void PlanReadsNow(Slot* s);
  // Claims the batch's reads-at-once one by one and reads and decodes each (Fetcher::ReadNow) until
  // none is left. The producer passes `missed`: when the page cache lacks a read, that read and every
  // one not yet claimed go there, for the fetcher. A consumer passes null: it waits for the disk for
  // such a read, then stops and leaves the rest to the producer. Returns true when a read met the
  // disk (and the claiming stopped there), false when every read claimed was in the page cache.
  bool ReadClaimedNow(Slot* s, std::vector<FetchRequest>* missed);
  // Counts n of the batch's reads-at-once done; the last unpins their files.
  void FinishReadsNow(Slot* s, uint32_t n);
  Status DecodeMember(Slot* s, const Read& r, const ReadMember& m);
  void DecodeSlow(Slot* s, uint32_t sample, uint32_t column);
  // Records the failure of one sample; `status` names the file and row.
  void FailSample(Slot* s, uint32_t sample, const Status& status) EXCLUDES(s->mu);
  // Fails the whole batch, whatever on_error says (out of memory is not the sample's fault).
  // Allocates nothing.
  void FailBatch(Slot* s, Status status) EXCLUDES(s->mu);
  // Queue the decode of a chain of reads (`first`, linked by next_in_task), or a slow-path sample's,
  // on the workers, counted in tasks_. An out-of-memory error when the task cannot be queued (then it
  // will not run).
  Status SubmitDecode(Read* first) EXCLUDES(mu_);
  Status SubmitSlowDecode(Slot* s, uint32_t sample, uint32_t column) EXCLUDES(mu_);
  void TaskDone() EXCLUDES(mu_);  // a worker task finished
  // Counts n sample-columns of the batch done; the last one wakes the consumer.
  void FinishPending(Slot* s, int64_t n) EXCLUDES(mu_);
  // The oldest batch is ready, or none will come.
  bool FrontReadyLocked() const REQUIRES(mu_) {
    return queue_.empty() ? producer_done_ : queue_.front()->pending.load(std::memory_order_acquire) == 0;
  }
  // The consumer's wait for the oldest batch before it sleeps: it does that batch's reads-at-once
  // nobody has claimed yet (ReadClaimedNow), and spins until `deadline` (NowNanos; 0: not at all)
  // for the batch to be ready. Returns when FrontReadyLocked() held, or nothing is left to do
  // before the deadline: true when the batch was ready at once (no wait).
  bool WaitAwake(int64_t deadline) EXCLUDES(mu_);
  // Next()'s wait: the oldest batch, taken from queue_ once ready; null at the end of the epoch; the
  // producer's error when it failed (the epoch is failed then).
  Result<Slot*> TakeOldestBatch() EXCLUDES(mu_);
  // "<file> row <r> (table row <row>) column '<name>'" for error messages; formats a string, so it is
  // called only once something failed.
  std::string Context(int64_t row, uint32_t column) const;
  void CompactSkipped(Slot* s) REQUIRES(s->mu);
  // Fills s->columns, the consumer's view of the slot. Out of memory when the strings cannot be copied.
  Status BuildColumns(Slot* s);
  Status WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes);
  // A binary-cell column's value of table row `row` as the decode stage sees it: an image's bytes, or a
  // .npy cell's array data (into *out either way).
  Status ReadBinaryCell(const TensorColumn& t, int64_t row, AlignedBuffer* out) const;
  // Image columns: the size of the first selected row's image, for a chain that does not fix one.
  Result<std::pair<int64_t, int64_t>> ProbeImageSize(const TensorColumn& t) const;
  // Sets up the image pipelines of the image columns (after the rows are known).
  Status CreateImagePipelines();
  // trace_.Record, losing the span rather than throwing when the trace cannot grow.
  void Trace(TraceStage stage, int64_t start_ns, int64_t end_ns, int64_t batch, int64_t bytes) const noexcept {
    try {
      trace_.Record(stage, start_ns, end_ns, batch, bytes);
    } catch (const std::bad_alloc&) {
    }
  }
  // Names the thread in traces and, as "stoke-<name>" (cut to 15 bytes), for top, perf and gdb.
  void NameThisThread(std::string_view name) const noexcept {
    char os_name[16] = "stoke-";  // the kernel keeps 15 bytes
    const size_t n = std::min(name.size(), sizeof(os_name) - 7);
    std::memcpy(os_name + 6, name.data(), n);
    os_name[6 + n] = '\0';
    pthread_setname_np(pthread_self(), os_name);
    try {
      trace_.SetThreadName(name);
    } catch (const std::bad_alloc&) {
    }
  }

  const std::string dir_;
  std::string root_;  // what data file paths join to: dir_, or a plain dataset's root (TableView::location)
  const LoaderOptions o_;
  std::unique_ptr<SampleIndex> index_;
  std::vector<TensorColumn> tensors_;
  ScalarColumns scalars_;                        // the scalar columns, and the rows served
  std::vector<std::string> column_order_;        // selected columns in the requested order
  // Array shapes a dataset's metadata gives (Hugging Face features), used where o_.shapes has none.
  std::map<std::string, std::vector<int64_t>> metadata_shapes_;
  // The table is on an object store (its location is a URI): no split reads (each read is one
  // ranged GET into one buffer), no O_DIRECT, pages merged within a gap, the read cache.
  bool remote_ = false;
  int queue_depth_ = kLocalQueueDepth;  // o_.queue_depth, or its default for where the table is
  std::unique_ptr<Sampler> sampler_;             // used by the producer while a run is active
  std::vector<int64_t> block_sizes_;             // the sampler's blocks (files), for MeasureShuffle
  SamplerOptions sampler_options_;
  std::unique_ptr<Fetcher> fetcher_;
  std::unique_ptr<ThreadPool> workers_;
  std::shared_ptr<SlotPool> pool_ = std::make_shared<SlotPool>();
  size_t max_slots_ = 2;
  size_t batch_rows_ = 1;  // a batch's most rows: batch_size, at most the rank's samples of an epoch
  size_t threads_ = 1;
  // The most bytes one decode worker may hold for one decoded image (and for a blob page's body).
  int64_t max_decoded_bytes_ = int64_t{64} << 20;
  mutable TraceRecorder trace_;

  // Cells that are not a page of their own (other writers' files), read by the workers.
  std::unique_ptr<SlowCells> slow_cells_;
  // Array columns' cells, decoded from their column chunks by the workers.
  std::unique_ptr<ArrayCells> array_cells_;
  // Binary columns' cells (other writers' .npy and image cells), likewise.
  std::unique_ptr<BinaryCells> binary_cells_;

  // Run state.
  mutable Mutex mu_;
  CondVar cv_;            // consumer: a slot became ready / producer finished
  CondVar completer_cv_;  // completer: a read was submitted / producer finished
  CondVar tasks_cv_;      // StopRun: worker tasks drained
  CondVar completed_cv_;  // producer: completed_ reached submitted_
  bool running_ GUARDED_BY(mu_) = false;
  bool epoch_done_ GUARDED_BY(mu_) = false;  // Next() returned the end, or failed
  bool failed_ GUARDED_BY(mu_) = false;
  int64_t run_ GUARDED_BY(mu_) = 0;
  std::atomic<bool> stop_{false};
  std::deque<Slot*> queue_ GUARDED_BY(mu_);  // planned batches in order
  bool producer_done_ GUARDED_BY(mu_) = false;
  Status producer_error_ GUARDED_BY(mu_);
  int64_t submitted_ GUARDED_BY(mu_) = 0;  // reads submitted this run
  int64_t taken_ GUARDED_BY(mu_) = 0;      // reads the completer started to take this run
  int64_t completed_ GUARDED_BY(mu_) = 0;  // reads the completer has taken this run
  int64_t tasks_ GUARDED_BY(mu_) = 0;      // worker tasks not finished
  std::thread producer_, completer_;
  // PlanReadsNow's back-off (producer thread): after a read-at-once that the page cache could not
  // serve, the next read_now_skip_ batches go whole to the fetcher, read_now_backoff_ doubling (to 64)
  // while misses go on, so that a cold table costs a failed attempt per many batches, not per read.
  int64_t read_now_skip_ = 0;
  int64_t read_now_backoff_ = 0;
  bool read_now_tried_ = false;               // the last batch planned had reads-at-once
  std::atomic<bool> read_now_missed_{false};  // a read-at-once met an uncached page (any thread)

  // Position for state(): the run started at global position start_consumed_ of epoch start_epoch_.
  // The consumer thread's alone (Next, SetEpoch, Restore, state: the Loader has one consumer), so not
  // guarded; StartRun, StopRun and state() happen to touch them under mu_.
  int64_t start_consumed_ = 0;
  int64_t ids_delivered_ = 0;  // ids of batches Next() returned (skipped ones included) this run
  bool end_reached_ = false;
  int64_t next_batch_index_ = 0;

  // Statistics.
  int64_t first_next_ns_ = 0;
  // Counts the events that can make FrontReadyLocked() true or give a waiting consumer reads to do (a
  // batch queued, a batch ready, the producer done), so that WaitAwake looks again under mu_ only when
  // something happened.
  std::atomic<uint64_t> ready_events_{0};
  // How long the consumer's last wait in Next() for a batch not ready at once took: it spins when
  // this was short.
  int64_t last_wait_ns_ = 0;
  std::atomic<int64_t> stat_batches_{0}, stat_samples_{0}, stat_skipped_{0}, stat_bytes_read_{0},
      stat_sample_bytes_{0}, stat_wait_ns_{0}, stat_reads_at_once_{0};
};

// OutOfMemoryError(describe()), or a bare "out of memory" (short enough for std::string's inline
// buffer: allocates nothing) when even the message cannot be allocated.
template <typename Describe>
Status OutOfMemory(Describe describe) noexcept {
  try {
    return OutOfMemoryError(describe());
  } catch (const std::bad_alloc&) {
    return Status::IOError("out of memory");
  }
}

}  // namespace stoke
