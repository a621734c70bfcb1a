// The loader pipeline (include/stoke/loader.h; ARCHITECTURE.md, "The loader pipeline").
//
// Threads of one run (a run lasts from the first Next() after Open/SetEpoch/Restore to the end of the
// epoch or the next SetEpoch/Restore/destruction):
//   producer    takes batch_size ids from the sampler, takes a free batch slot (blocks: back-pressure),
//               gathers the scalar columns into it, plans the page reads (coalescing neighbours) and
//               submits them to the Fetcher (blocks on queue depth and the byte budget)
//   completer   takes completed reads from the Fetcher and hands each to the worker pool; nothing
//               else: per read it only moves a buffer and queues a task, so it never limits throughput
//   workers     check the CRC of and decompress each page (or check a split read's header and CRC),
//               transform the sample into its row of the slot, give the read buffer back
//               (Fetcher::Release, any thread); the last sample of a batch marks the slot ready
//   consumer    Next() waits for the oldest slot to be ready and returns it as a Batch; the slot goes
//               back to the free list when the Batch is destroyed
// Every per-byte pass (CRC, decompression, copies, transforms) runs on the workers, in parallel; the
// producer and the completer do per-read bookkeeping only.
//
// Out of memory: core's buffers throw std::bad_alloc. Each pipeline thread catches it around the step
// that allocates and turns it into OutOfMemoryError, which fails the batch (whatever on_error says) and
// reaches the consumer from Next(); no exception leaves a pipeline thread.
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
#include "format/parquet_reader.h"
#include "io/read_cache.h"
#include "io/storage.h"
#include "io/uri.h"
#include "loader/fetcher.h"
#include "loader/image_transform.h"
#include "loader/out_of_memory.h"
#include "loader/page_decoder.h"
#include "loader/sampler.h"
#include "loader/scalar_columns.h"
#include "loader/slow_cells.h"
#include "loader/transform.h"
#include "table/sample_index.h"
#include "table/scan.h"

namespace stoke {
namespace {

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
  ImagePipeline image;
  size_t in_bytes = 0;   // the cell's bytes (0 for image columns: cells vary)
  size_t out_bytes = 0;
  DType out_dtype = DType::kUInt8;
  std::vector<int64_t> out_shape;
  bool direct() const { return !use_image && transforms.empty(); }  // cells go to the batch as they are
};

// The largest coalesced read: offsets within a read are 32-bit (ReadMember::offset, FetchRequest::length).
constexpr int64_t kMaxCoalesceBytes = int64_t{1} << 30;
// Split reads below this size are done at once, by the producer and by a consumer waiting for their
// batch, when their pages are cached (Loader::Impl::ReadClaimedNow): for a 512-byte sample the
// hand-offs through the fetcher (a ring completion, a wake-up, a lock per group) cost more than the
// read. From this size on the fetcher's reading threads copy cached pages on every core.
constexpr uint32_t kReadNowBytes = 64 << 10;
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

}  // namespace

struct Slot;

namespace {

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

}  // namespace

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

namespace {
// The fetcher's request for read g of slot s; its tag is (s.id << 32) | g, by which the completer
// finds the read again.
FetchRequest RequestOf(const Slot& s, uint32_t g) {
  const Read& r = s.reads[g];
  return FetchRequest{.file = r.file, .offset = r.offset, .length = r.length, .tag = (uint64_t{s.id} << 32) | g,
                      .tail = r.tail, .head_length = r.head_length};
}
}  // namespace

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

Batch::Batch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Batch::~Batch() {
  if (impl_ && impl_->slot) impl_->pool->Return(impl_->slot);
}
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&& o) noexcept {
  if (this != &o) {
    if (impl_ && impl_->slot) impl_->pool->Return(impl_->slot);
    impl_ = std::move(o.impl_);
  }
  return *this;
}
int64_t Batch::size() const { return impl_->size; }
int64_t Batch::epoch() const { return impl_->slot->epoch; }
int64_t Batch::index() const { return impl_->slot->index; }
const std::vector<int64_t>& Batch::row_ids() const { return impl_->slot->rows; }
std::span<const BatchColumn> Batch::columns() const { return impl_->slot->columns; }
std::span<BatchColumn> Batch::columns() { return impl_->slot->columns; }
const BatchColumn* Batch::column(std::string_view name) const {
  for (const auto& c : impl_->slot->columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
BatchColumn* Batch::column(std::string_view name) { return const_cast<BatchColumn*>(std::as_const(*this).column(name)); }
bool Batch::pinned() const {
  for (const auto& t : impl_->slot->tensors) {
    if (!t.pinned()) return false;
  }
  return !impl_->slot->tensors.empty();
}

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
  // Sets threads_ (o_.threads, or one per available CPU) and max_decoded_bytes_.
  void SizeWorkers();
  // The blocks for block shuffle: the table's files, counted in selected rows (one empty block when
  // there are none). REQUIRES: scalars_ were read.
  std::vector<int64_t> BlockSizes() const;
  // Creates sampler_ over BlockSizes(), and keeps its blocks and options for MeasureShuffle.
  Status CreateSampler();
  // Divides prefetch_bytes: sets max_slots_ and slow_cells_ (its page cache), and returns the bytes that reads in
  // flight may take. REQUIRES: the tensor columns' output sizes are known (CreateImagePipelines).
  int64_t DivideMemoryBudget();
  // Opens fetcher_ over the sample index's data files, when a tensor column is selected;
  // `file_versions` (ReadCacheFileVersions) name their bytes in the read cache, when there is one.
  Status OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget);
  Status StartRun() EXCLUDES(mu_);
  void StopRun() EXCLUDES(mu_);
  void ProducerLoop(int64_t run) EXCLUDES(mu_);
  void CompleterLoop() EXCLUDES(mu_);
  // A free slot, or a new one while the pool may grow; null once stop_ is set. OutOfMemoryError when a
  // new slot cannot be allocated.
  Result<Slot*> AcquireSlot();
  // Takes the next batch from the sampler and plans it into a slot (rows, scalars, reads). Returns
  // null at the end of the epoch or on stop. A slot returned is in queue_; on error none is.
  Result<Slot*> PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids, std::vector<Read>* slow);
  Status PlanReads(Slot* s, std::vector<Read>* slow);
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
  // "<file> row <r> (table row <row>) column '<name>'" for error messages; formats a string, so it is
  // called only once something failed.
  std::string Context(int64_t row, uint32_t column) const;
  void CompactSkipped(Slot* s) REQUIRES(s->mu);
  // Fills s->columns, the consumer's view of the slot. Out of memory when the strings cannot be copied.
  Status BuildColumns(Slot* s);
  Status WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes);
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
  const LoaderOptions o_;
  std::unique_ptr<SampleIndex> index_;
  std::vector<TensorColumn> tensors_;
  ScalarColumns scalars_;                        // the scalar columns, and the rows served
  std::vector<std::string> column_order_;        // selected columns in the requested order
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

namespace {

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

// InvalidArgument naming the first of `o`'s sizes, counts and coalescing limits that is out of range.
Status CheckLoaderOptions(const LoaderOptions& o) {
  if (o.batch_size < 1) return Status::InvalidArgument(fmt::format("batch_size must be >= 1, got {}", o.batch_size));
  if (o.shuffle_buffer < 1) {  // whatever the shuffle: a bad value is a mistake even where unused
    return Status::InvalidArgument(fmt::format("shuffle_buffer must be >= 1, got {}", o.shuffle_buffer));
  }
  if (o.prefetch_bytes < 1) return Status::InvalidArgument(fmt::format("prefetch_bytes must be >= 1, got {}", o.prefetch_bytes));
  if (o.threads < 0 || o.threads > 4096) {
    return Status::InvalidArgument(fmt::format("threads must be in [1, 4096], or 0 for one per available CPU, got {}",
                                               o.threads));
  }
  if (o.queue_depth < 0 || o.queue_depth > 4096) {
    return Status::InvalidArgument(fmt::format("queue_depth must be in [1, 4096], or 0 for the default, got {}",
                                               o.queue_depth));
  }
  for (const auto& [name, value] : {std::pair{"coalesce_bytes", o.coalesce_bytes},
                                    std::pair{"remote_coalesce_bytes", o.remote_coalesce_bytes},
                                    std::pair{"remote_coalesce_gap_bytes", o.remote_coalesce_gap_bytes}}) {
    if (value < 0 || value > kMaxCoalesceBytes) {
      return Status::InvalidArgument(fmt::format("{} must be in [0, {}] (1 GiB), got {}", name, kMaxCoalesceBytes, value));
    }
  }
  if (o.cache_bytes < 1) return Status::InvalidArgument(fmt::format("cache_bytes must be >= 1, got {}", o.cache_bytes));
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return Status::InvalidArgument(fmt::format("rank {} is not in [0, world_size {})", o.rank, o.world_size));
  }
  return Status::OK();
}

// The indices in view.columns of the columns `names` asks for, in its order (every column, in table
// order, when it is empty). NotFound for a name the table lacks, InvalidArgument for one listed twice.
Result<std::vector<size_t>> SelectColumns(const TableView& view, const std::vector<std::string>& names) {
  std::vector<size_t> selected;
  if (names.empty()) {
    for (size_t c = 0; c < view.columns.size(); ++c) selected.push_back(c);
    return selected;
  }
  for (const auto& name : names) {
    auto it = std::find_if(view.columns.begin(), view.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
    if (it == view.columns.end()) {
      std::vector<std::string> all;
      for (const auto& c : view.columns) all.push_back(c.name);
      return Status::NotFound(fmt::format("columns: unknown column '{}' (the table has: {})", name, fmt::join(all, ", ")));
    }
    const size_t c = static_cast<size_t>(it - view.columns.begin());
    if (std::find(selected.begin(), selected.end(), c) != selected.end()) {
      return Status::InvalidArgument(fmt::format("columns: '{}' is listed twice", name));
    }
    selected.push_back(c);
  }
  return selected;
}

// The image columns: blob columns named in the table's stoke.images (docs/format.md). Corruption,
// naming `dir`, when that configuration is not a JSON object.
Result<std::vector<std::string>> ImageColumnNames(const TableView& view, const std::string& dir) {
  std::vector<std::string> image_columns;
  const auto& config = view.snapshot.metadata.configuration;
  auto it = config.find(kImagesMetadataKey);
  if (it == config.end()) return image_columns;
  const auto images = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!images.is_object()) {
    return Status::Corruption(fmt::format("{}: the table's {} configuration is not a JSON object", dir, kImagesMetadataKey));
  }
  for (auto e = images.begin(); e != images.end(); ++e) image_columns.push_back(e.key());
  return image_columns;
}

// The predicate `where` bound to `columns`; nullopt when `where` is empty.
Result<std::optional<Predicate>> BindWhere(const std::string& where, const std::vector<ColumnSpec>& columns) {
  std::optional<Predicate> predicate;
  if (where.empty()) return predicate;
  auto parsed = Predicate::Parse(where);
  if (!parsed.ok()) return parsed.status();
  predicate = std::move(*parsed);
  STOKE_RETURN_IF_ERROR(predicate->Bind(columns));
  return predicate;
}

// Whether the table at `dir` is on an object store (its location is a URI).
bool OnObjectStore(const std::string& dir) {
  auto location = ParseStorageUri(dir);
  return location.ok() && location->scheme != StorageScheme::kLocal;
}

// For the read cache, the version of each of the sample index's data files (`index_paths`, joined to
// the table's URI as the index joins them): its modification time in the log, which with the URI
// and size names the file's bytes; "" for a file the log does not list.
std::vector<std::string> ReadCacheFileVersions(const TableView& view, const std::string& dir,
                                               const std::vector<std::string>& index_paths) {
  std::map<std::string, int64_t> file_mtimes;
  for (const auto& add : view.snapshot.files) {
    auto rel = delta::DecodePath(add.path);
    file_mtimes[JoinPath(dir, rel.ok() ? *rel : add.path)] = add.modification_time;
  }
  std::vector<std::string> versions;
  versions.reserve(index_paths.size());
  for (const auto& path : index_paths) {
    auto it = file_mtimes.find(path);
    versions.push_back(it == file_mtimes.end() ? "" : fmt::format("mtime={}", it->second));
  }
  return versions;
}

// The sampler's options from the loader's.
SamplerOptions SamplerOptionsFor(const LoaderOptions& o) {
  SamplerOptions so;
  so.shuffle = o.shuffle == LoaderOptions::Shuffle::kNone    ? SamplerOptions::Shuffle::kNone
               : o.shuffle == LoaderOptions::Shuffle::kBlock ? SamplerOptions::Shuffle::kBlock
                                                             : SamplerOptions::Shuffle::kGlobal;
  so.seed = o.seed;
  so.rank = o.rank;
  so.world_size = o.world_size;
  so.drop_last = o.drop_last;
  so.shuffle_buffer = o.shuffle_buffer;
  return so;
}


}  // namespace

Status Loader::Impl::Open() {
  STOKE_RETURN_IF_ERROR(CheckLoaderOptions(o_));
  // Tables of many files: the fetcher sizes its descriptor cache from the soft limit.
  RaiseOpenFileLimitOnce();
  AllocationFaults::Instance().Check();
  STOKE_ASSIGN_OR_RETURN(TableView view, OpenTableView(dir_, o_.version));
  // An index built here (none cached for this version) takes the files from this snapshot: opened
  // again, the log's second copy took 3 s and 500 MB at 650,000 files.
  SampleIndex::Options index_options;
  index_options.snapshot = &view.snapshot;
  STOKE_ASSIGN_OR_RETURN(SampleIndex index, SampleIndex::Open(dir_, view.snapshot.version, index_options));
  remote_ = OnObjectStore(dir_);
  index_ = std::make_unique<SampleIndex>(std::move(index));
  queue_depth_ = o_.queue_depth > 0 ? o_.queue_depth : remote_ ? kRemoteQueueDepth : kLocalQueueDepth;

  STOKE_ASSIGN_OR_RETURN(std::vector<size_t> selected_cols, SelectColumns(view, o_.columns));
  STOKE_ASSIGN_OR_RETURN(std::vector<std::string> image_columns, ImageColumnNames(view, dir_));
  if (o_.image_channels != 1 && o_.image_channels != 3 && o_.image_channels != 4) {
    return Status::InvalidArgument(fmt::format("image_channels must be 1, 3 or 4, got {}", o_.image_channels));
  }
  STOKE_RETURN_IF_ERROR(SetUpColumns(view, selected_cols, image_columns));
  STOKE_ASSIGN_OR_RETURN(std::optional<Predicate> where, BindWhere(o_.where, view.columns));
  // Scalar columns and the filter, file by file (in parallel: footers are small, latency-bound reads).
  const ScalarColumns::ReadOptions scalar_read{dir_, index_->num_rows(), remote_,
                                               static_cast<uint64_t>(o_.remote_coalesce_gap_bytes)};
  STOKE_RETURN_IF_ERROR(scalars_.Read(view, where, scalar_read));
  std::vector<std::string> file_versions;
  if (remote_ && !o_.cache_dir.empty() && !tensors_.empty()) {
    file_versions = ReadCacheFileVersions(view, dir_, *index_->file_paths());
  }
  // Nothing below uses the log. A table of 650,000 files holds about 350 MB of add actions (paths,
  // statistics, slots): released here, with the heap's free pages, the fetcher's per-file state, the
  // sampler's blocks and the batch slots take their place instead of adding to them.
  const bool large_log = view.snapshot.files.size() >= kReleaseHeapAfterFiles;
  view = TableView{};
  if (large_log) ReleaseFreeHeapMemory();
  SizeWorkers();
  STOKE_RETURN_IF_ERROR(CreateImagePipelines());
  STOKE_RETURN_IF_ERROR(CreateSampler());
  // A batch never holds more than the rank's samples of an epoch: a batch_size beyond that sizes
  // nothing (batch buffers, id lists) past what can be filled.
  batch_rows_ = static_cast<size_t>(std::clamp<int64_t>(sampler_->size(), 1, o_.batch_size));
  const int64_t fetch_budget = DivideMemoryBudget();
  STOKE_RETURN_IF_ERROR(OpenFetcher(std::move(file_versions), fetch_budget));
  workers_ = std::make_unique<ThreadPool>(threads_);
  return Status::OK();
}

Status Loader::Impl::SetUpColumns(const TableView& view, const std::vector<size_t>& selected,
                                  const std::vector<std::string>& image_columns) {
  for (size_t c : selected) {
    const ColumnSpec& spec = view.columns[c];
    column_order_.push_back(spec.name);
    if (spec.blob && std::find(image_columns.begin(), image_columns.end(), spec.name) == image_columns.end()) {
      return Status::Unsupported(fmt::format("column '{}' is a blob column without image metadata (stoke.images); the "
                                             "loader delivers image columns and tensors: select other columns",
                                             spec.name));
    }
    if (spec.tensor || spec.blob) {
      STOKE_ASSIGN_OR_RETURN(TensorColumn t, MakeTensorColumn(spec));
      tensors_.push_back(std::move(t));
    } else {
      STOKE_RETURN_IF_ERROR(scalars_.Add(spec, c));
    }
  }
  return Status::OK();
}

Result<TensorColumn> Loader::Impl::MakeTensorColumn(const ColumnSpec& spec) const {
  const auto& names = index_->tensor_columns();
  auto it = std::find(names.begin(), names.end(), spec.name);
  if (it == names.end()) return Status::Internal(fmt::format("tensor column '{}' is not in the sample index", spec.name));
  TensorColumn t;
  t.name = spec.name;
  t.index_column = static_cast<size_t>(it - names.begin());
  if (spec.blob) {
    t.encoded_image = true;  // the pipeline is made once the rows are known (CreateImagePipelines)
    return t;
  }
  t.in = *spec.tensor;
  t.in_bytes = static_cast<size_t>(t.in.num_bytes());
  if (ImagePipeline::HasImageTransforms(o_.transforms)) {
    if (t.in.dtype != DType::kUInt8) {
      return Status::InvalidArgument(fmt::format("column '{}': image transforms need images: an image column or a "
                                                 "uint8 [H, W, C] tensor column, not {}", spec.name,
                                                 DTypeName(t.in.dtype)));
    }
    t.use_image = true;  // made in CreateImagePipelines too
    return t;
  }
  auto pipeline = TransformPipeline::Create(o_.transforms, t.in.dtype, t.in.shape);
  if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", spec.name));
  t.transforms = std::move(*pipeline);
  t.out_bytes = t.transforms.out_bytes();
  t.out_dtype = t.transforms.out_dtype();
  t.out_shape = t.transforms.out_shape();
  return t;
}

void Loader::Impl::SizeWorkers() {
  threads_ = o_.threads > 0 ? static_cast<size_t>(o_.threads) : AvailableCpus();
  // Each worker holds at most one decoded image: a quarter of the budget shared by the workers, but
  // never less than a 64 MiB image (a 20-megapixel RGB photo).
  max_decoded_bytes_ = std::max<int64_t>(o_.prefetch_bytes / 4 / static_cast<int64_t>(threads_), int64_t{64} << 20);
}

std::vector<int64_t> Loader::Impl::BlockSizes() const {
  std::vector<int64_t> block_sizes;
  size_t next = 0;
  for (uint32_t f = 0; f < index_->num_files(); ++f) {
    const int64_t first = index_->file_first_row(f), end = first + index_->file_num_rows(f);
    block_sizes.push_back(scalars_.ServedIn(first, end, &next));
  }
  if (block_sizes.empty()) block_sizes.push_back(0);
  return block_sizes;
}

Status Loader::Impl::CreateSampler() {
  std::vector<int64_t> block_sizes = BlockSizes();
  SamplerOptions so = SamplerOptionsFor(o_);
  block_sizes_ = block_sizes;
  sampler_options_ = so;
  auto sampler = Sampler::Create(block_sizes, so);
  if (!sampler.ok()) return sampler.status();
  sampler_ = std::make_unique<Sampler>(std::move(*sampler));
  return Status::OK();
}

int64_t Loader::Impl::DivideMemoryBudget() {
  // Batch slots take at most half the budget (at least 2 slots), reads in flight (and read results
  // waiting for a decode worker) a quarter; the last quarter is headroom for the fetcher's pooled
  // idle buffers, decode scratch and allocator slack, so the whole process stays near the budget
  // (measured: docs/benchmarks.md).
  size_t batch_bytes = 0;
  for (const auto& t : tensors_) batch_bytes += t.out_bytes * batch_rows_;
  batch_bytes = std::max<size_t>(batch_bytes, 1);
  max_slots_ = std::clamp<size_t>(static_cast<size_t>(o_.prefetch_bytes / 2) / batch_bytes, 2, 64);
  const int64_t fetch_budget = std::max<int64_t>(o_.prefetch_bytes / 4, int64_t{8} << 20);
  slow_cells_ = std::make_unique<SlowCells>(*index_, static_cast<size_t>(o_.prefetch_bytes / 4), o_.verify_crc);
  return fetch_budget;
}

Status Loader::Impl::OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget) {
  if (tensors_.empty()) return Status::OK();
  FetcherOptions fo;
  fo.backend = o_.backend == LoaderOptions::Backend::kIoUring ? FetcherOptions::Backend::kIoUring
               : o_.backend == LoaderOptions::Backend::kPread ? FetcherOptions::Backend::kPread
                                                              : FetcherOptions::Backend::kAuto;
  fo.queue_depth = queue_depth_;
  fo.max_bytes_in_flight = fetch_budget;
  fo.direct = o_.direct;
  // A sample read straight into its batch row by a reading thread is checksummed there, while in that
  // thread's cache (DecodeMember combines it with the page's length prefix).
  fo.checksum_tails = o_.verify_crc;
  if (remote_) {
    // Sizes from the log: no HEAD per data file.
    for (uint32_t f = 0; f < index_->num_files(); ++f) fo.file_sizes.push_back(index_->file_size(f));
    if (!o_.cache_dir.empty()) {
      ReadCacheOptions co;
      co.dir = o_.cache_dir;
      co.capacity_bytes = static_cast<uint64_t>(o_.cache_bytes);
      co.max_fetch_bytes = static_cast<uint64_t>(std::max<int64_t>(o_.prefetch_bytes / kCacheFetchBudgetDivisor, 1));
      STOKE_ASSIGN_OR_RETURN(fo.cache, ReadCache::Open(co));
      fo.file_versions = std::move(file_versions);
    }
  }
  STOKE_ASSIGN_OR_RETURN(fetcher_, Fetcher::Open(index_->file_paths(), fo));
  return Status::OK();
}

Result<std::pair<int64_t, int64_t>> Loader::Impl::ProbeImageSize(const TensorColumn& t) const {
  // No rows: any size batches nothing.
  const std::optional<int64_t> first = scalars_.FirstRow(index_->num_rows());
  if (!first) return std::make_pair(int64_t{1}, int64_t{1});
  const int64_t row = *first;
  const SampleIndex::Location loc = index_->Find(row, t.index_column);
  AlignedBuffer cell;
  if (loc.needs_decode) {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(*where.storage, where.path));
    STOKE_ASSIGN_OR_RETURN(size_t col, reader->FindColumn(t.name));
    STOKE_RETURN_IF_ERROR(reader->ReadBinaryCell(loc.row_in_file, col, &cell));
  } else {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, where.storage->OpenForRead(where.path));
    AlignedBuffer page(loc.length);
    STOKE_RETURN_IF_ERROR(file->ReadAt(loc.offset, page.mutable_view()));
    PageDecodeOptions po;
    po.verify_crc = o_.verify_crc;
    AlignedBuffer scratch;
    STOKE_ASSIGN_OR_RETURN(ByteView value, DecodeBlobFromPage(page.view(), loc.codec, loc.row_in_page, loc.rows_in_page,
                                                              loc.definition_levels, static_cast<uint64_t>(max_decoded_bytes_),
                                                              &scratch, po, "page"));
    cell.Append(value);
  }
  STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell.view(), "image"));
  return std::make_pair(int64_t{info.height}, int64_t{info.width});
}

Status Loader::Impl::CreateImagePipelines() {
  ImagePipelineOptions io;
  io.channels = o_.image_channels;
  io.jpeg_dct_scaling = o_.jpeg_dct_scaling;
  io.jpeg_region_decode = o_.jpeg_region_decode;
  io.max_decoded_bytes = max_decoded_bytes_;
  for (TensorColumn& t : tensors_) {
    if (!t.encoded_image && !t.use_image) continue;
    std::optional<std::pair<int64_t, int64_t>> uniform;
    if (t.encoded_image && !ImagePipeline::FixesSize(o_.transforms)) {
      auto probed = ProbeImageSize(t);
      if (!probed.ok()) {
        const int64_t row = scalars_.FirstRow(index_->num_rows()).value_or(0);
        return probed.status().WithContext(Context(row, static_cast<uint32_t>(&t - tensors_.data())));
      }
      uniform = *probed;
    }
    auto pipeline = ImagePipeline::Create(o_.transforms, io, t.encoded_image ? std::vector<int64_t>{} : t.in.shape, uniform);
    if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", t.name));
    t.image = std::move(*pipeline);
    t.out_bytes = t.image.out_bytes();
    t.out_dtype = t.image.out_dtype();
    t.out_shape = t.image.out_shape();
  }
  return Status::OK();
}

Status Loader::Impl::SetEpoch(int64_t epoch) {
  if (epoch < 0) return Status::InvalidArgument(fmt::format("epoch must be >= 0, got {}", epoch));
  StopRun();
  sampler_->SetEpoch(epoch);
  start_consumed_ = 0;
  return Status::OK();
}

Status Loader::Impl::Restore(const State& s) {
  StopRun();
  STOKE_RETURN_IF_ERROR(sampler_->Restore(Sampler::State{s.epoch, s.consumed}));
  start_consumed_ = s.consumed;
  return Status::OK();
}

Loader::State Loader::Impl::state() const {
  MutexLock l(&mu_);
  const int64_t n = sampler_->num_rows();
  if (end_reached_ || ids_delivered_ >= sampler_->size()) return State{sampler_->epoch(), n};
  return State{sampler_->epoch(), std::min(n, start_consumed_ + ids_delivered_ * o_.world_size)};
}

Status Loader::Impl::StartRun() {
  std::string refused;
  {
    MutexLock l(&mu_);
    if (running_) return Status::OK();
    running_ = true;
    ++run_;
    stop_ = false;
    producer_done_ = false;
    producer_error_ = Status::OK();
    submitted_ = taken_ = completed_ = 0;
    ids_delivered_ = 0;
    end_reached_ = false;
    epoch_done_ = false;
    failed_ = false;
    next_batch_index_ = 0;
    const int64_t run = run_;
    try {
      producer_ = std::thread([this, run] { ProducerLoop(run); });
      if (fetcher_) completer_ = std::thread([this] { CompleterLoop(); });
      return Status::OK();
    } catch (const std::system_error& e) {  // the system refused a thread (RLIMIT_NPROC, a pids limit)
      refused = e.what();
    }
  }
  StopRun();  // joins the thread that did start
  return Status::IOError(fmt::format("the loader could not start its threads: {}", refused), /*retryable=*/true);
}

void Loader::Impl::StopRun() {
  {
    MutexLock l(&mu_);
    if (!running_) {
      epoch_done_ = false;
      failed_ = false;
      ids_delivered_ = 0;
      end_reached_ = false;
      return;
    }
    stop_ = true;
  }
  { MutexLock pl(&pool_->mu); }  // a producer about to wait in AcquireSlot sees stop_
  pool_->cv.SignalAll();
  completer_cv_.SignalAll();
  if (producer_.joinable()) producer_.join();
  if (completer_.joinable()) completer_.join();
  {
    MutexLock l(&mu_);
    while (tasks_ != 0) tasks_cv_.Wait(&mu_);
    // Batches planned but not delivered go back to the free list.
    for (Slot* s : queue_) {
      MutexLock pl(&pool_->mu);
      pool_->free.push_back(s);
    }
    queue_.clear();
    running_ = false;
    epoch_done_ = false;
    failed_ = false;
    ids_delivered_ = 0;
    end_reached_ = false;
  }
  pool_->cv.SignalAll();
}

Result<Slot*> Loader::Impl::AcquireSlot() {
  MutexLock l(&pool_->mu);
  for (;;) {
    if (stop_) return static_cast<Slot*>(nullptr);
    if (!pool_->free.empty()) {
      Slot* s = pool_->free.back();
      pool_->free.pop_back();
      return s;
    }
    // Grow up to max_slots_; beyond it only when the consumer holds every slot (it could never
    // release one while waiting for the next batch): memory over the budget rather than a hang.
    const bool consumer_holds_all = pool_->held_by_consumer >= static_cast<int64_t>(pool_->all.size());
    if (pool_->all.size() < max_slots_ || consumer_holds_all) {
      const size_t bs = batch_rows_;
      try {
        if (pool_->all.size() == max_slots_) {
          STOKE_LOG(kWarn, "loader.over_budget", "held_batches={} note=\"the consumer holds every batch buffer; allocating "
                    "beyond prefetch_bytes (release batches sooner, or raise prefetch_bytes)\"", pool_->all.size());
        }
        AllocationFaults::Instance().Check();
        auto slot = std::make_unique<Slot>();
        slot->id = static_cast<uint32_t>(pool_->all.size());
        for (const auto& t : tensors_) slot->tensors.emplace_back(t.out_bytes * bs, o_.pin_memory);
        for (const auto& sc : scalars_.columns()) {
          slot->scalars.emplace_back(sc.is_string ? 0 : bs * DTypeSize(sc.dtype));
          slot->scalar_valid.emplace_back();
          slot->strings.emplace_back();
        }
        Slot* raw = slot.get();
        pool_->all.push_back(std::move(slot));
        // Room for every slot on the free list, so that returning one never allocates.
        pool_->free.reserve(pool_->all.size());
        return raw;
      } catch (const std::bad_alloc&) {
        size_t bytes = 0;
        for (const auto& t : tensors_) bytes += t.out_bytes * bs;
        const size_t number = pool_->all.size();  // read here, under the lock: the lambda is analysed apart
        return OutOfMemory([&] {
          return fmt::format("batch buffer {} ({} bytes of tensors for batch_size {}); lower batch_size or prefetch_bytes",
                             number, bytes, o_.batch_size);
        });
      }
    }
    pool_->cv.Wait(&pool_->mu);
  }
}

std::string Loader::Impl::Context(int64_t row, uint32_t column) const {
  const SampleIndex::Location loc = index_->Find(row, tensors_[column].index_column);
  return fmt::format("{} row {} (table row {}) column '{}'", index_->FilePath(loc.file), loc.row_in_file, row,
                     tensors_[column].name);
}

Status Loader::Impl::PlanReads(Slot* s, std::vector<Read>* slow) {
  s->num_reads = 0;
  auto new_read = [s](uint32_t file, uint64_t offset, uint32_t length) -> Read& {
    if (s->num_reads == s->reads.size()) s->reads.emplace_back();
    Read& r = s->reads[s->num_reads++];
    r.Reset(s, file, offset, length);
    return r;
  };
  std::vector<PlannedCell>& cells = s->cells;
  cells.clear();
  std::vector<SampleIndex::Location>& found = s->locations;  // [column][sample]
  found.resize(static_cast<size_t>(s->size) * tensors_.size());
  for (uint32_t c = 0; c < tensors_.size(); ++c) {
    index_->FindMany(s->rows.data(), static_cast<size_t>(s->size), tensors_[c].index_column,
                     found.data() + static_cast<size_t>(c) * static_cast<size_t>(s->size));
  }
  for (uint32_t i = 0; i < static_cast<uint32_t>(s->size); ++i) {
    for (uint32_t c = 0; c < tensors_.size(); ++c) {
      const SampleIndex::Location& loc = found[static_cast<size_t>(c) * static_cast<size_t>(s->size) + i];
      // Image pages are read one by one (the decoded-page cache holds fixed-size tensors).
      if (loc.needs_decode || (!tensors_[c].encoded_image && SlowCells::InPageCache(loc))) {
        Read r;
        r.file = loc.file;
        r.offset = loc.offset;
        r.members.push_back({.sample = i, .column = c});
        slow->push_back(std::move(r));
        continue;
      }
      cells.push_back({loc, i, c});
    }
  }
  std::sort(cells.begin(), cells.end(), [](const PlannedCell& a, const PlannedCell& b) {
    return a.loc.file != b.loc.file ? a.loc.file < b.loc.file : a.loc.offset < b.loc.offset;
  });
  // Cells of one cached page are queued together: the page is decoded once for all of them, even
  // when the cache cannot hold every page the batch touches.
  std::stable_sort(slow->begin(), slow->end(), [](const Read& a, const Read& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
  const uint64_t max_read = static_cast<uint64_t>(remote_ ? o_.remote_coalesce_bytes : o_.coalesce_bytes);
  const uint64_t max_gap = remote_ ? static_cast<uint64_t>(o_.remote_coalesce_gap_bytes) : 0;
  for (size_t k = 0; k < cells.size(); ++k) {
    const PlannedCell& cell = cells[k];
    const auto& loc = cell.loc;
    const TensorColumn& t = tensors_[cell.column];
    if (!o_.direct && !remote_ && loc.rows_in_page == 1 && loc.codec == parquet::Codec::kUncompressed &&
        !loc.definition_levels && t.direct() && !t.encoded_image && loc.length > t.in_bytes) {
      Read& r = new_read(loc.file, loc.offset, loc.length);
      r.tail = s->tensors[cell.column].data() + static_cast<size_t>(cell.sample) * t.out_bytes;
      r.head_length = static_cast<uint32_t>(loc.length - t.in_bytes);
      r.members.push_back({cell.sample, cell.column, 0, loc.length, 0, 1, loc.codec});
      continue;
    }
    Read* last = s->num_reads == 0 || s->reads[s->num_reads - 1].tail != nullptr ? nullptr : &s->reads[s->num_reads - 1];
    // Coalesce with the previous read when this page is the same page (another row of a packed page),
    // or starts where it ends (local files) or at most max_gap after (object stores, where a request
    // costs more than reading the gap), and the merged read stays within max_read.
    if (last != nullptr && last->file == loc.file && max_read > 0) {
      const uint64_t end = last->offset + last->length;
      const ReadMember& prev = last->members.back();
      const uint64_t prev_page = last->offset + prev.offset;
      if (loc.offset == prev_page && loc.length == prev.length) {
        last->members.push_back({cell.sample, cell.column, prev.offset, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                                  loc.definition_levels});
        continue;
      }
      // Open keeps max_read <= kMaxCoalesceBytes, so the merged length and offsets fit 32 bits.
      if (loc.offset >= end && loc.offset - end <= max_gap && loc.offset + loc.length - last->offset <= max_read) {
        const uint32_t at = static_cast<uint32_t>(loc.offset - last->offset);
        last->members.push_back({cell.sample, cell.column, at, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                                  loc.definition_levels});
        last->length = at + loc.length;
        continue;
      }
    }
    Read& r = new_read(loc.file, loc.offset, loc.length);
    r.members.push_back({cell.sample, cell.column, 0, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                                  loc.definition_levels});
  }
  return Status::OK();
}

Result<Slot*> Loader::Impl::PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids,
                                      std::vector<Read>* slow) {
  const int64_t t0 = NowNanos();
  const size_t n = sampler_->NextBatch(ids.data(), ids.size());
  if (n == 0 || (o_.drop_last && n < static_cast<size_t>(o_.batch_size))) return static_cast<Slot*>(nullptr);
  STOKE_ASSIGN_OR_RETURN(Slot* s, AcquireSlot());
  if (s == nullptr) return s;
  auto give_back = [&] {  // the slot was not queued
    for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
    s->now_files.clear();
    {
      MutexLock pl(&pool_->mu);
      pool_->free.push_back(s);  // reserved in AcquireSlot: does not allocate
    }
    pool_->cv.SignalAll();
  };
  try {
    s->now_files.clear();  // nothing pinned yet (give_back unpins what is listed)
    s->now_reads.clear();
    AllocationFaults::Instance().Check();
    s->run = run;
    s->epoch = sampler_->epoch();
    s->index = batch_index;
    s->size = static_cast<int64_t>(n);
    s->rows.resize(n);
    for (size_t i = 0; i < n; ++i) s->rows[i] = scalars_.TableRow(ids[i]);
    {
      MutexLock l(&s->mu);
      s->error = Status::OK();
      s->skipped.assign(n, 0);
      s->skipped_count = 0;
    }
    s->pending = static_cast<int64_t>(n * tensors_.size()) + 1;  // reaches the consumer through queue_ (mu_)
    const int64_t tc = NowNanos();
    scalars_.Gather(s->rows, {&s->scalars, &s->strings, &s->scalar_valid});
    Trace(TraceStage::kCollate, tc, NowNanos(), s->index, 0);
    slow->clear();
    if (Status plan = PlanReads(s, slow); !plan.ok()) {
      give_back();
      return plan;
    }
    PlanReadsNow(s);
    Trace(TraceStage::kPlan, t0, NowNanos(), s->index, 0);
    {
      MutexLock l(&mu_);
      queue_.push_back(s);  // last: when it throws, the slot was not queued
    }
    ready_events_.fetch_add(1, std::memory_order_release);  // a consumer waiting awake may help with its reads
  } catch (const std::bad_alloc&) {
    give_back();
    return OutOfMemory([&] { return fmt::format("planning batch {} ({} samples)", batch_index, n); });
  }
  return s;
}

void Loader::Impl::ProducerLoop(int64_t run) {
  NameThisThread("producer");
  std::vector<int64_t> ids;
  std::vector<Read> slow;
  std::vector<FetchRequest> requests;
  const std::function<void(size_t)> on_started = [this](size_t n) {
    {
      MutexLock l(&mu_);
      submitted_ += static_cast<int64_t>(n);
    }
    completer_cv_.Signal();
  };
  int64_t batch_index = 0;
  Status error;
  try {
    AllocationFaults::Instance().Check();
    ids.resize(batch_rows_);
    // At most one read per cell of a batch.
    requests.reserve(batch_rows_ * std::max<size_t>(tensors_.size(), 1));
  } catch (const std::bad_alloc&) {
    error = OutOfMemory([&] { return fmt::format("the sample ids of a batch of {}", o_.batch_size); });
  }
  while (error.ok() && !stop_) {
    Result<Slot*> planned = PlanBatch(run, batch_index, ids, &slow);
    if (!planned.ok()) {
      error = planned.status();
      break;
    }
    Slot* s = *planned;
    if (s == nullptr) break;
    ++batch_index;
    // The slot is queued: from here on it completes through FinishPending, whatever fails.
    for (auto& r : slow) {
      const ReadMember m = r.members[0];
      if (Status st = SubmitSlowDecode(s, m.sample, m.column); !st.ok()) {
        FailBatch(s, std::move(st));
        FinishPending(s, 1);
      }
    }
    // The batch's reads go to the fetcher together (one system call where nothing waits); the
    // completer learns of them as the fetcher starts them.
    requests.clear();
    const int64_t submit_ns = NowNanos();
    for (size_t g = 0; g < s->num_reads; ++g) {
      Read& r = s->reads[g];
      if (r.now) continue;  // the consumer may be reading it already
      r.submit_ns = submit_ns;
      requests.push_back(RequestOf(*s, static_cast<uint32_t>(g)));
    }
    // The reads at once first: until they are done their files stay pinned, and a Submit below may
    // wait for a descriptor (a batch can span more files than max_open_files) that only they free.
    // Those the page cache cannot serve join the fetcher's.
    if (!s->now_reads.empty()) ReadClaimedNow(s, &requests);
    // The read a request stands for.
    auto read_of = [s](const FetchRequest& q) -> Read& { return s->reads[static_cast<size_t>(q.tag & 0xFFFFFFFFu)]; };
    for (size_t g = 0; g < requests.size();) {
      if (stop_) {
        // Not submitted: account their samples as done so the slot can complete.
        for (; g < requests.size(); ++g) FinishPending(s, static_cast<int64_t>(read_of(requests[g]).members.size()));
        break;
      }
      size_t queued = 0;
      Status st = fetcher_->Submit(std::span(requests).subspan(g), &queued, on_started);
      g += queued;
      if (!st.ok()) {  // out of memory, or a request the planner should not have made: not the sample's fault
        FailBatch(s, std::move(st));
        FinishPending(s, static_cast<int64_t>(read_of(requests[g]).members.size()));
        ++g;
      }
    }
    FinishPending(s, 1);  // planning done
  }
  {
    // Reads submitted by this thread must complete before it exits: io_uring cancels (ECANCELED) the
    // requests of a task that exits while they are queued for its async workers.
    MutexLock l(&mu_);
    while (completed_ != submitted_) completed_cv_.Wait(&mu_);
    producer_done_ = true;
    producer_error_ = std::move(error);
  }
  ready_events_.fetch_add(1, std::memory_order_release);
  cv_.SignalAll();
  completer_cv_.SignalAll();
}

void Loader::Impl::PlanReadsNow(Slot* s) {
  s->now_reads.clear();
  s->now_files.clear();
  s->now_next.store(0, std::memory_order_relaxed);
  s->now_left.store(0, std::memory_order_relaxed);
  if (!fetcher_ || !fetcher_->read_now()) return;
  if (read_now_missed_.exchange(false, std::memory_order_relaxed)) {
    read_now_backoff_ = std::min<int64_t>(std::max<int64_t>(1, read_now_backoff_ * 2), 64);
    read_now_skip_ = read_now_backoff_;
  } else if (read_now_tried_) {
    read_now_backoff_ = 0;
  }
  read_now_tried_ = false;
  if (read_now_skip_ > 0) {
    --read_now_skip_;
    return;
  }
  // Room for every read first: a push below never throws with files pinned.
  s->now_reads.reserve(s->num_reads);
  s->now_files.reserve(s->num_reads);
  const int64_t now = NowNanos();
  uint32_t file = std::numeric_limits<uint32_t>::max();  // no file index is this large
  int fd = -1;
  for (size_t g = 0; g < s->num_reads; ++g) {
    Read& r = s->reads[g];
    if (r.tail == nullptr || r.length >= kReadNowBytes || r.head_length > kMaxReadNowHead) continue;
    // Reads are in file order: one pin (or one attempt) per file of the batch.
    if (r.file != file) {
      file = r.file;
      Result<int> pinned = fetcher_->PinForReadNow(file);  // -1: no descriptor free now
      fd = pinned.ok() ? *pinned : -1;  // an error comes again from Submit, naming the read
      if (fd >= 0) s->now_files.push_back(file);
    }
    if (fd < 0) continue;
    r.now = true;
    r.now_fd = fd;
    r.submit_ns = now;
    s->now_reads.push_back(static_cast<uint32_t>(g));
  }
  s->now_left.store(static_cast<uint32_t>(s->now_reads.size()), std::memory_order_relaxed);
  read_now_tried_ = !s->now_reads.empty();
}

void Loader::Impl::FinishReadsNow(Slot* s, uint32_t n) {
  if (s->now_left.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
}

bool Loader::Impl::ReadClaimedNow(Slot* s, std::vector<FetchRequest>* missed) {
  const uint32_t n = static_cast<uint32_t>(s->now_reads.size());
  auto request = [s](uint32_t k) { return RequestOf(*s, s->now_reads[k]); };
  for (;;) {
    const uint32_t k = s->now_next.fetch_add(1, std::memory_order_relaxed);
    if (k >= n) return false;
    Read& r = s->reads[s->now_reads[k]];
    const FetchRequest q = request(k);
    uint8_t head[kMaxReadNowHead];
    // False when the page cache lacks some of the bytes (only without `wait`); else the read is over,
    // failed when `error` says so. Its error message is the one allocation here: without memory for
    // it the read fails the batch (out of memory, as elsewhere) instead of an exception leaving the
    // claim unfinished.
    Status error;
    auto read_now = [&](bool wait) -> bool {
      try {
        Result<bool> got = fetcher_->ReadNow(r.now_fd, q, head, wait);
        if (got.ok()) return *got;
        error = got.status();
      } catch (const std::bad_alloc&) {
        r.out_of_memory = true;
        error = OutOfMemory([&] { return fmt::format("the error of a {}-byte read", q.length); });
      }
      return true;
    };
    const bool miss = !read_now(/*wait=*/false);
    if (miss) {  // not all in the page cache
      read_now_missed_.store(true, std::memory_order_relaxed);
      if (missed != nullptr) {
        // The producer: this read and those nobody claimed yet go to the fetcher, which keeps the
        // queue depth at the disk.
        const uint32_t rest = std::min(s->now_next.exchange(n, std::memory_order_relaxed), n);
        missed->push_back(q);
        for (uint32_t j = rest; j < n; ++j) missed->push_back(request(j));
        FinishReadsNow(s, 1 + (n - rest));
        return true;
      }
      read_now(/*wait=*/true);  // a consumer: this batch is what it waits for
    }
    FinishReadsNow(s, 1);  // before the decode counts the samples done: the slot is not handed over yet
    if (error.ok()) {
      Trace(TraceStage::kFetch, r.submit_ns, NowNanos(), s->index, r.length);
      stat_bytes_read_ += r.length;
      stat_reads_at_once_ += 1;
      r.bytes = ByteView(head, r.head_length);
    } else {
      r.status = std::move(error);
    }
    DecodeRead(r);  // counts the read's samples done: the batch may be handed over after it
    if (miss) return true;  // a consumer: one wait for the disk per batch, the producer does the rest
  }
}

Status Loader::Impl::SubmitDecode(Read* first) {
  {
    MutexLock l(&mu_);
    ++tasks_;
  }
  try {
    AllocationFaults::Instance().Check();
    // Two words of captures: std::function keeps them inline, so queueing reads allocates nothing.
    workers_->Submit([this, first] {
      for (Read* r = first; r != nullptr;) {
        // Read the link first: once its samples are done the batch may be delivered and its slot reused.
        Read* next = r->next_in_task;
        DecodeRead(*r);
        r = next;
      }
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing reads for the decode workers"); });
  }
  return Status::OK();
}

Status Loader::Impl::SubmitSlowDecode(Slot* s, uint32_t sample, uint32_t column) {
  {
    MutexLock l(&mu_);
    ++tasks_;
  }
  try {
    AllocationFaults::Instance().Check();
    workers_->Submit([this, s, sample, column] {
      DecodeSlow(s, sample, column);
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing a sample for the decode workers"); });
  }
  return Status::OK();
}

void Loader::Impl::TaskDone() {
  MutexLock l(&mu_);
  if (--tasks_ == 0) tasks_cv_.SignalAll();
}

void Loader::Impl::CompleterLoop() {
  NameThisThread("fetch-completion");
  // Results are taken in groups (all that completed, up to kMaxTaken) and their reads handed to the
  // workers in groups: per-read locks and wake-ups cost more than small cached reads themselves.
  constexpr size_t kMaxTaken = 64;
  std::array<FetchResult, kMaxTaken> results;
  std::array<Read*, kMaxTaken> reads{};
  std::array<Slot*, kMaxTaken> slots{};
  const size_t workers = workers_->size();
  for (;;) {
    size_t wanted;
    {
      MutexLock l(&mu_);
      while (submitted_ == taken_ && !producer_done_) completer_cv_.Wait(&mu_);
      if (submitted_ == taken_) return;  // the producer is done and every read was taken
      wanted = static_cast<size_t>(std::min<int64_t>(submitted_ - taken_, kMaxTaken));
      taken_ += static_cast<int64_t>(wanted);
    }
    // Blocks until at least one of the `wanted` outstanding reads completes; the rest of `wanted`
    // that did not come back yet are given back to taken_ below.
    const size_t n = fetcher_->Next(results.data(), wanted);
    {
      MutexLock l(&mu_);
      taken_ -= static_cast<int64_t>(wanted - n);
      completed_ += static_cast<int64_t>(n);
    }
    completed_cv_.SignalAll();
    const int64_t now = NowNanos();
    {
      MutexLock l(&pool_->mu);  // `all` may grow on the producer thread
      for (size_t k = 0; k < n; ++k) slots[k] = pool_->all[static_cast<size_t>(results[k].tag >> 32)].get();
    }
    size_t live = 0;
    for (size_t k = 0; k < n; ++k) {
      FetchResult& r = results[k];
      Slot* s = slots[k];
      Read& read = s->reads[static_cast<size_t>(r.tag & 0xFFFFFFFFu)];
      Trace(TraceStage::kFetch, read.submit_ns, now, s->index, read.length);
      stat_bytes_read_ += read.length;
      read.status = std::move(r.status);
      read.out_of_memory = r.out_of_memory;
      read.bytes = r.bytes();  // the buffer's memory does not move with it
      read.tail_crc = r.tail_crc;
      read.data = std::move(r.data);
      read.next_in_task = nullptr;
      if (stop_) {
        if (read.status.ok()) fetcher_->Release(std::move(read.data));
        FinishPending(s, static_cast<int64_t>(read.members.size()));
        continue;
      }
      reads[live++] = &read;
    }
    // Uncompressed reads that leave this little to do (a batch of 512-byte samples from the page
    // cache, or split reads whose sample a reading thread already put in its row and checksummed)
    // are decoded here: a header, a CRC and a copy cost less than waking a worker, and at 10,000s
    // of batches a second the hand-offs were what bounded the loader. Anything to decompress or
    // transform goes to the workers, on every core.
    constexpr uint64_t kInlineBytes = 32 << 10;
    uint64_t live_bytes = 0;
    bool plain = true;
    for (size_t k = 0; k < live && plain; ++k) {
      live_bytes += DecodeBytes(*reads[k]);
      for (const ReadMember& m : reads[k]->members) {
        plain = plain && m.codec == parquet::Codec::kUncompressed && tensors_[m.column].direct();
      }
    }
    if (plain && live_bytes <= kInlineBytes) {
      for (size_t k = 0; k < live; ++k) DecodeRead(*reads[k]);
      continue;
    }
    // One task per share of the workers, but a new task once one holds kTaskBytes, so that large
    // reads are still decoded in parallel.
    constexpr uint64_t kTaskBytes = 256 << 10;
    const size_t per_task = (live + workers - 1) / std::max<size_t>(workers, 1);
    for (size_t k = 0; k < live;) {
      size_t end = k + 1;
      uint64_t bytes = reads[k]->length;
      while (end < live && end - k < per_task && bytes < kTaskBytes) {
        reads[end - 1]->next_in_task = reads[end];
        bytes += reads[end]->length;
        ++end;
      }
      if (Status st = SubmitDecode(reads[k]); !st.ok()) {
        for (size_t j = k; j < end; ++j) {
          Read& read = *reads[j];
          FailBatch(read.slot, st);
          if (read.status.ok()) fetcher_->Release(std::move(read.data));
          FinishPending(read.slot, static_cast<int64_t>(read.members.size()));
        }
      }
      k = end;
    }
  }
}

namespace {
thread_local AlignedBuffer t_page_scratch;   // decompressed pages
thread_local AlignedBuffer t_sample_scratch; // a sample before its transforms
thread_local TransformScratch t_transform_scratch;
thread_local ImageScratch t_image_scratch;
}  // namespace

Status Loader::Impl::WriteSampleInto(Slot* s, uint32_t sample, uint32_t column, ByteView sample_bytes) {
  const TensorColumn& t = tensors_[column];
  uint8_t* dest = s->tensors[column].data() + static_cast<size_t>(sample) * t.out_bytes;
  if (t.encoded_image || t.use_image) {
    ImagePipeline::Timing timing;
    const int64_t t0 = NowNanos();
    Status st = t.image.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                              column, &t_image_scratch, &timing);
    // The image's decode counts as decode, the rest as transform.
    Trace(TraceStage::kDecode, t0, t0 + timing.decode_ns, s->index, static_cast<int64_t>(sample_bytes.size()));
    Trace(TraceStage::kTransform, t0 + timing.decode_ns, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
    if (t.encoded_image) stat_sample_bytes_ += static_cast<int64_t>(sample_bytes.size());
    return st;
  }
  const int64_t t0 = NowNanos();
  Status st = t.transforms.Apply(sample_bytes, MutableByteView(dest, t.out_bytes), o_.seed, s->epoch, s->rows[sample],
                                 column, &t_transform_scratch);
  Trace(TraceStage::kTransform, t0, NowNanos(), s->index, static_cast<int64_t>(t.out_bytes));
  return st;
}

void Loader::Impl::DecodeRead(Read& r) {
  Slot* s = r.slot;
  for (const ReadMember& m : r.members) {
    try {
      const int64_t row = s->rows[m.sample];
      if (!r.status.ok()) {
        Status st = r.status.WithContext(Context(row, m.column));
        if (r.out_of_memory) {
          FailBatch(s, std::move(st));
        } else {
          FailSample(s, m.sample, st);
        }
        continue;
      }
      AllocationFaults::Instance().Check();
      // The decoders name only "page"; the file and row are added when something failed.
      if (Status st = DecodeMember(s, r, m); !st.ok()) {
        FailSample(s, m.sample, st.WithContext(Context(row, m.column)));
        continue;
      }
      stat_sample_bytes_ += static_cast<int64_t>(tensors_[m.column].in_bytes);
    } catch (const std::bad_alloc&) {
      FailBatch(s, OutOfMemory([&] {
                  return fmt::format("decoding table row {} column '{}'", s->rows[m.sample], tensors_[m.column].name);
                }));
    }
  }
  if (r.status.ok() && r.data.capacity() > 0) fetcher_->Release(std::move(r.data));  // reads at once have none
  FinishPending(s, static_cast<int64_t>(r.members.size()));
}

Status Loader::Impl::DecodeMember(Slot* s, const Read& r, const ReadMember& m) {
  const TensorColumn& t = tensors_[m.column];
  const int64_t t0 = NowNanos();
  PageDecodeOptions po;
  po.verify_crc = o_.verify_crc;
  if (r.tail != nullptr) {  // the sample is already in its batch row: check the header and the CRC
    Status st = CheckSplitSample(r.bytes, ByteView(r.tail, t.in_bytes), po, "page", r.tail_crc);
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
    return st;
  }
  const ByteView page = r.bytes.subspan(m.offset, m.length);
  if (t.encoded_image) {  // the page's value is the encoded file: decoded and transformed in one go
    Result<ByteView> blob = DecodeBlobFromPage(page, m.codec, m.row_in_page, m.rows_in_page, m.definition_levels,
                                               static_cast<uint64_t>(max_decoded_bytes_), &t_page_scratch, po, "page");
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, 0);
    if (!blob.ok()) return blob.status();
    return WriteSampleInto(s, m.sample, m.column, *blob);
  }
  const bool direct = t.direct();
  MutableByteView dest;
  if (direct) {
    dest = MutableByteView(s->tensors[m.column].data() + static_cast<size_t>(m.sample) * t.out_bytes, t.in_bytes);
  } else {
    t_sample_scratch.Resize(t.in_bytes);
    dest = t_sample_scratch.mutable_view();
  }
  Status st = DecodeSampleFromPage(page, m.codec, m.row_in_page, m.rows_in_page, m.definition_levels, dest,
                                   &t_page_scratch, po, "page");
  Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
  if (st.ok() && !direct) st = WriteSampleInto(s, m.sample, m.column, t_sample_scratch.view());
  return st;
}

void Loader::Impl::DecodeSlow(Slot* s, uint32_t sample, uint32_t column) {
  const TensorColumn& t = tensors_[column];
  const int64_t row = s->rows[sample];
  try {
    AllocationFaults::Instance().Check();
    const SampleIndex::Location loc = index_->Find(row, t.index_column);
    const int64_t t0 = NowNanos();
    Status st = slow_cells_->ReadCell(t.name, t.in_bytes, t.encoded_image, loc, &t_sample_scratch);
    Trace(TraceStage::kDecode, t0, NowNanos(), s->index, static_cast<int64_t>(t.in_bytes));
    if (st.ok()) st = WriteSampleInto(s, sample, column, t_sample_scratch.view());
    if (!st.ok()) {
      FailSample(s, sample, st.WithContext(Context(row, column)));
    } else {
      stat_sample_bytes_ += static_cast<int64_t>(t.in_bytes);
    }
  } catch (const std::bad_alloc&) {
    FailBatch(s, OutOfMemory([&] { return fmt::format("decoding table row {} column '{}'", row, t.name); }));
  }
  FinishPending(s, 1);
}

void Loader::Impl::FailSample(Slot* s, uint32_t sample, const Status& status) {
  MutexLock l(&s->mu);
  if (o_.on_error == LoaderOptions::OnError::kSkip) {
    if (!s->skipped[sample]) {
      s->skipped[sample] = 1;
      ++s->skipped_count;
      STOKE_LOG(kWarn, "loader.sample_skipped", "error=\"{}\"", status.ToString());
    }
  } else if (s->error.ok()) {
    s->error = status;
  }
}

void Loader::Impl::FailBatch(Slot* s, Status status) {
  MutexLock l(&s->mu);
  if (s->error.ok()) s->error = std::move(status);  // a move: allocates nothing
}

void Loader::Impl::FinishPending(Slot* s, int64_t n) {
  if (s->pending.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  ready_events_.fetch_add(1, std::memory_order_release);
  // The batch is ready. A consumer that saw it pending holds mu_ until it sleeps on cv_, so taking mu_
  // here orders this signal after that wait (no lost wake-up). Nothing touches `s` from here on: the
  // consumer may already own it.
  { MutexLock l(&mu_); }
  cv_.SignalAll();
}

void Loader::Impl::CompactSkipped(Slot* s) {
  if (s->skipped_count == 0) return;
  const size_t n = static_cast<size_t>(s->size);
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s->skipped[i]) continue;
    if (w != i) {
      for (size_t c = 0; c < tensors_.size(); ++c) {
        const size_t b = tensors_[c].out_bytes;
        std::memmove(s->tensors[c].data() + w * b, s->tensors[c].data() + i * b, b);
      }
      for (size_t k = 0; k < scalars_.size(); ++k) {
        if (scalars_.column(k).is_string) {
          s->strings[k][w] = std::move(s->strings[k][i]);
        } else {
          const size_t es = DTypeSize(scalars_.column(k).dtype);
          std::memmove(s->scalars[k].data() + w * es, s->scalars[k].data() + i * es, es);
        }
        if (!s->scalar_valid[k].empty()) s->scalar_valid[k][w] = s->scalar_valid[k][i];
      }
      s->rows[w] = s->rows[i];
    }
    ++w;
  }
  s->rows.resize(w);
  for (size_t k = 0; k < scalars_.size(); ++k) {
    if (scalars_.column(k).is_string) s->strings[k].resize(w);
    if (!s->scalar_valid[k].empty()) s->scalar_valid[k].resize(w);
  }
  s->size = static_cast<int64_t>(w);
}

bool Loader::Impl::WaitAwake(int64_t deadline) {
  const Slot* missed = nullptr;  // a batch whose reads at once met the disk: left to the producer
  for (bool first = true;; first = false) {
    const uint64_t seen = ready_events_.load(std::memory_order_acquire);
    Slot* s = nullptr;
    {
      MutexLock l(&mu_);
      if (FrontReadyLocked()) return first;
      if (!queue_.empty()) s = queue_.front();  // stays the consumer's to read: only this thread pops the queue
    }
    if (s != nullptr && s != missed && s->now_next.load(std::memory_order_relaxed) < s->now_reads.size()) {
      if (ReadClaimedNow(s, nullptr)) missed = s;
      continue;
    }
    while (ready_events_.load(std::memory_order_acquire) == seen) {
      if (NowNanos() >= deadline) return false;
      CpuRelax();
    }
  }
}

Result<std::optional<Batch>> Loader::Impl::Next() {
  if (first_next_ns_ == 0) first_next_ns_ = NowNanos();
  {
    MutexLock l(&mu_);
    if (failed_) {
      return Status::InvalidArgument("the epoch failed earlier; call SetEpoch or Restore to start again");
    }
    if (epoch_done_) return std::optional<Batch>();
  }
  STOKE_RETURN_IF_ERROR(StartRun());
  for (;;) {
    Slot* s = nullptr;
    Status producer_error;
    {
      const int64_t t0 = NowNanos();
      const bool ready_at_once = WaitAwake(last_wait_ns_ <= kSpinWaitNs ? t0 + kSpinWaitNs : 0);
      MutexLock l(&mu_);
      // The oldest batch is ready (Slot::pending says why acquire suffices), or none will come.
      while (!FrontReadyLocked()) cv_.Wait(&mu_);
      const int64_t t1 = NowNanos();
      if (!ready_at_once) last_wait_ns_ = t1 - t0;
      stat_wait_ns_ += t1 - t0;
      Trace(TraceStage::kWait, t0, t1, next_batch_index_, 0);
      if (queue_.empty()) {
        epoch_done_ = true;
        end_reached_ = true;
        if (!producer_error_.ok()) {
          failed_ = true;
          return producer_error_;
        }
        return std::optional<Batch>();
      }
      s = queue_.front();
      queue_.pop_front();
      ids_delivered_ += s->size;
      ++next_batch_index_;
    }
    std::unique_ptr<Batch::Impl> impl;
    try {
      AllocationFaults::Instance().Check();
      impl = std::make_unique<Batch::Impl>();
    } catch (const std::bad_alloc&) {
      {
        MutexLock pl(&pool_->mu);
        pool_->free.push_back(s);  // reserved in AcquireSlot: does not allocate
      }
      pool_->cv.SignalAll();
      MutexLock l(&mu_);
      failed_ = true;
      return OutOfMemory([] { return std::string("the consumer's view of a batch"); });
    }
    {
      MutexLock pl(&pool_->mu);
      ++pool_->held_by_consumer;
    }
    pool_->cv.SignalAll();  // a producer waiting for a slot may now grow the pool
    impl->pool = pool_;
    impl->slot = s;
    Batch::Impl* batch_impl = impl.get();
    Batch batch(std::move(impl));  // returns the slot to the pool when it goes out of scope
    const int64_t tc = NowNanos();
    Status error;
    {
      // Uncontended: every worker is done with the slot (pending reached 0); the lock says so to the
      // analysis, and costs one uncontended lock per batch.
      MutexLock l(&s->mu);
      error = std::move(s->error);  // the slot is the consumer's now; its next use resets it
      if (error.ok()) {
        stat_skipped_ += s->skipped_count;
        CompactSkipped(s);
      }
    }
    if (!error.ok()) {
      MutexLock l(&mu_);
      failed_ = true;
      return error;
    }
    // The consumer's view of the slot.
    if (Status st = BuildColumns(s); !st.ok()) {
      MutexLock l(&mu_);
      failed_ = true;
      return st;
    }
    Trace(TraceStage::kCollate, tc, NowNanos(), s->index, 0);
    batch_impl->size = s->size;
    if (s->size == 0) continue;  // every sample skipped: the slot goes back, try the next batch
    ++stat_batches_;
    stat_samples_ += s->size;
    return std::optional<Batch>(std::move(batch));
  }
}

Status Loader::Impl::BuildColumns(Slot* s) {
  try {
    AllocationFaults::Instance().Check();
    s->columns.clear();
    size_t ti = 0, si = 0;
    for (const auto& name : column_order_) {
      BatchColumn bc;
      bc.name = name;
      if (ti < tensors_.size() && tensors_[ti].name == name) {
        const TensorColumn& t = tensors_[ti];
        bc.kind = ColumnKind::kTensor;
        bc.dtype = t.out_dtype;
        bc.shape.push_back(s->size);
        for (int64_t d : t.out_shape) bc.shape.push_back(d);
        bc.data_ = s->tensors[ti].data();
        bc.num_bytes = static_cast<size_t>(s->size) * t.out_bytes;
        ++ti;
      } else {
        const ScalarColumn& c = scalars_.column(si);
        bc.shape = {s->size};
        bc.dtype = c.dtype;
        bc.kind = c.is_string ? ColumnKind::kString : ColumnKind::kScalar;
        if (c.is_string) {
          bc.strings = s->strings[si];
        } else {
          bc.data_ = s->scalars[si].data();
          bc.num_bytes = static_cast<size_t>(s->size) * DTypeSize(c.dtype);
        }
        bc.valid = s->scalar_valid[si];
        ++si;
      }
      s->columns.push_back(std::move(bc));
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the consumer's view of batch {}", s->index); });
  }
  return Status::OK();
}

LoaderStats Loader::Impl::stats() const {
  LoaderStats st;
  st.batches = stat_batches_;
  st.samples = stat_samples_;
  st.samples_skipped = stat_skipped_;
  st.bytes_read = stat_bytes_read_ + (slow_cells_ ? slow_cells_->bytes_read() : 0);
  st.cells_decoded = slow_cells_ ? slow_cells_->cells_decoded() : 0;
  st.reads_at_once = stat_reads_at_once_;
  st.sample_bytes = stat_sample_bytes_;
  st.wall_seconds = first_next_ns_ == 0 ? 0 : (NowNanos() - first_next_ns_) * 1e-9;
  st.wait_seconds = stat_wait_ns_ * 1e-9;
  if (st.wall_seconds > 0) {
    st.samples_per_second = st.samples / st.wall_seconds;
    st.mb_per_second = st.bytes_read / st.wall_seconds / 1e6;
    st.wait_share = st.wait_seconds / st.wall_seconds;
  }
  const auto totals = trace_.Totals();
  for (int k = 0; k < kNumTraceStages; ++k) {
    st.stage_seconds.emplace_back(std::string(TraceStageName(static_cast<TraceStage>(k))), totals[k].busy_ns * 1e-9);
  }
  st.backend = fetcher_ ? fetcher_->backend_name() : "none";
  st.workers = static_cast<int64_t>(threads_);
  st.read_threads = fetcher_ ? static_cast<int64_t>(fetcher_->read_threads()) : 0;
  return st;
}

ShuffleQuality Loader::Impl::MeasureShuffle(bool global) const {
  // A sampler of its own: the loader's is the producer's while a run is active.
  SamplerOptions so = sampler_options_;
  if (global) so.shuffle = SamplerOptions::Shuffle::kGlobal;
  auto sampler = Sampler::Create(block_sizes_, so);
  if (!sampler.ok()) return {};
  // epoch() and start_consumed_ change only between runs, so reading them here does not race.
  if (!sampler->Restore({sampler_->epoch(), start_consumed_}).ok()) return {};
  const Sampler::Quality q = sampler->MeasureQuality(o_.batch_size);
  return ShuffleQuality{q.mean_jump, q.distinct_block_fraction};
}

Status Loader::Impl::WriteTrace(const std::string& path) const {
  if (!o_.trace) return Status::InvalidArgument("WriteTrace: the loader was opened without trace = true");
  return trace_.WriteChromeTrace(path, "stoke loader");
}

// Loader: forwards to Impl.
Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

Result<std::unique_ptr<Loader>> Loader::Open(const std::string& table_dir, LoaderOptions options) {
  try {
    auto impl = std::make_unique<Impl>(table_dir, std::move(options));
    STOKE_RETURN_IF_ERROR(impl->Open());
    return std::unique_ptr<Loader>(new Loader(std::move(impl)));
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("opening {} for loading", table_dir); });
  } catch (const std::system_error& e) {  // a reading thread the system refused
    return Status::IOError(fmt::format("opening {} for loading: could not start a thread: {}", table_dir, e.what()),
                           /*retryable=*/true);
  }
}
Status Loader::SetEpoch(int64_t epoch) {
  try {
    return impl_->SetEpoch(epoch);  // the sampler's permutation for the epoch
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the order of epoch {}", epoch); });
  }
}
Result<std::optional<Batch>> Loader::Next() { return impl_->Next(); }
Loader::State Loader::state() const { return impl_->state(); }
Status Loader::Restore(const State& s) {
  try {
    return impl_->Restore(s);
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the order of epoch {}", s.epoch); });
  }
}
int64_t Loader::epoch() const { return impl_->epoch(); }
int64_t Loader::num_rows() const { return impl_->num_rows(); }
int64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch(); }
int64_t Loader::batches_per_epoch() const { return impl_->batches_per_epoch(); }
int64_t Loader::table_version() const { return impl_->table_version(); }
bool Loader::index_from_cache() const { return impl_->index_from_cache(); }
LoaderStats Loader::stats() const { return impl_->stats(); }
ShuffleQuality Loader::shuffle_quality() const { return impl_->MeasureShuffle(false); }
ShuffleQuality Loader::global_shuffle_quality() const { return impl_->MeasureShuffle(true); }
Status Loader::WriteTrace(const std::string& path) const { return impl_->WriteTrace(path); }

}  // namespace stoke
