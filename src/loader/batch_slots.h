// The loader's batch slots (docs/architecture.md, "The loader"): the reusable buffers a batch is
// planned, read and decoded into, and the reads planned for it. Private to src/loader.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/host_memory.h"
#include "core/mutex.h"
#include "format/parquet_reader.h"
#include "io/mapped_file.h"
#include "loader/fetcher.h"
#include "loader/mapped_reads.h"
#include "loader/scalar_columns.h"
#include "loader/tensor_column.h"
#include "stoke/loader.h"
#include "table/sample_index.h"

namespace stoke {

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

// A read's members, the first held in the Read itself: most reads (a split read, a random row of
// a packed page) have one, and a block of its own per read was a cache miss per sample when the
// batch was planned and again when it was decoded. From the second member on, all of them are in
// the vector, whose capacity a reused Read keeps.
class ReadMembers {
 public:
  void clear() {
    n_ = 0;
    more_.clear();
  }
  // May throw std::bad_alloc from the second member on, with nothing changed.
  void push_back(const ReadMember& m) {
    if (n_ == 1) {
      more_.reserve(2);
      more_.push_back(one_);
    }
    if (n_ == 0) {
      one_ = m;
    } else {
      more_.push_back(m);
    }
    ++n_;
  }
  size_t size() const { return n_; }
  const ReadMember* begin() const { return n_ <= 1 ? &one_ : more_.data(); }
  const ReadMember* end() const { return begin() + n_; }
  const ReadMember& back() const { return end()[-1]; }

 private:
  ReadMember one_;
  std::vector<ReadMember> more_;  // every member once there are two or more
  size_t n_ = 0;
};

struct Slot;

// The most head bytes (page header and length prefix, some tens of bytes in stoke's pages) of a split
// read done at once (ReadsNow): they land on the reading thread's stack.
constexpr uint32_t kMaxReadNowHead = 256;

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
  ReadMembers members;
  AlignedBuffer data;  // the completed read's buffer, until its samples are decoded
  ByteView bytes;      // the read's bytes within `data` (FetchResult::bytes())
  // The CRC-32 of the page body of a split read (SplitPrefixCrc, then the tail), when its reader took
  // it (FetchResult::tail_crc).
  std::optional<uint32_t> body_crc;
  Status status;
  bool out_of_memory = false;  // status is an allocation failure: fails the batch even with on_error=skip
  Read* next_in_task = nullptr;  // the next read of the same decode task (set by the completer)
  bool now = false;   // done at once (Slot::now_reads), not through the fetcher
  int now_fd = -1;    // its file's descriptor, pinned for the batch (Slot::now_files)

  // Readies a reused Read for another batch, keeping the capacity of `members`.
  void Reset(Slot* s, uint32_t f, uint64_t off, uint32_t len);
};

// A sample copied out of a mapping (ReadsNow) instead of read: a page of one uncompressed value, as a
// split read's, whose bytes the page cache held when the batch was planned (MappedReads: its file's
// mapping, or its blocks' read cache entries). One cache line, all that the copying thread reads of
// the plan: the planner's Reads went back and forth between the planning and the copying cores
// (four lines a sample, as many misses at 512 bytes).
struct MappedCopy {
  MappedRange from;
  uint8_t* tail = nullptr;   // the sample's row of its tensor
  uint32_t length = 0;       // page bytes
  uint32_t head_length = 0;  // header and length prefix, before the value
  uint32_t sample = 0;       // row of the batch
  uint32_t column = 0;       // index into tensor columns
};
static_assert(sizeof(MappedCopy) <= 64, "a copy's plan is one cache line");

// What a copy out of a mapping left for its check, on the copying thread's stack.
struct CopiedHead {
  uint8_t bytes[kMaxReadNowHead];  // the page's header and length prefix
  // The CRC-32 of the page body (SplitPrefixCrc, then the value) when the copy took it.
  std::optional<uint32_t> body_crc;
  bool copied = false;  // false: the file (or cache entry) shrank under the mapping
};

// A tensor cell of a batch and where its page is, for planning.
struct PlannedCell {
  SampleIndex::Location loc;
  uint32_t sample, column;
};

// A planned cell's place in file order: 16 bytes to sort instead of the cell's 56.
struct CellOrder {
  uint64_t offset;
  uint32_t file;
  uint32_t cell;  // index in Slot::cells
  friend bool operator<(const CellOrder& a, const CellOrder& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  }
};

// A batch's cell for the slow path (SlowCells, ArrayCells, BinaryCells), in planning: its page's
// file and offset, or for a chunked column (TensorColumn::chunked) the file kChunkedFile and its
// table row.
struct SlowCell {
  static constexpr uint32_t kChunkedFile = ~uint32_t{0};
  uint64_t offset = 0;
  uint32_t file = 0;
  uint32_t sample = 0;  // row of the batch
  uint32_t column = 0;  // index into tensor columns
};

// Slow-path cells decoded by one task, one after another (SampleDecoder::SubmitSlow): Slot::slow_cells
// [begin, end), the cells of one page (one file and offset) or of one decode unit (decode_units.h),
// so that the worker that decodes a cached page copies its rows, and two workers do not wait for
// each other's page.
struct SlowRun {
  Slot* slot = nullptr;
  uint32_t begin = 0;
  uint32_t end = 0;
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
  // Reads done at once instead of through the fetcher (ReadsNow): their indices in `reads`, claimed
  // one at a time (now_next) by the producer and by a consumer waiting for this batch. now_left
  // counts those not yet read (or handed to the fetcher); the thread that takes it to 0 unpins
  // now_files (one pin per file). Set before the slot is queued, which publishes them.
  std::vector<uint32_t> now_reads;
  std::vector<uint32_t> now_files;
  std::atomic<uint32_t> now_next{0};
  std::atomic<uint32_t> now_left{0};
  // The samples copied out of mappings (ReadPlanner), claimed several at a time (mapped_next) by
  // the producer and the consumer (Loader::Impl::CopyOnce). They are not reads: they pin no file.
  std::vector<MappedCopy> mapped_copies;
  std::atomic<uint32_t> mapped_next{0};
  uint32_t mapped_claim = 1;                      // copies claimed at a time (ReadsNow::Plan)
  CopyStores mapped_stores = CopyStores::kCached;  // how their checked copies store (ReadsNow::Plan)
  // The scalar columns' rows are copied in chunks of kGatherRows rows, claimed (gather_next) by the
  // producer and by a consumer waiting for a batch (Loader::Impl::CopyOnce); each chunk is one of
  // `pending`. Set before the slot is queued.
  uint32_t gather_chunks = 0;
  std::atomic<uint32_t> gather_next{0};
  // The batch's slow-path cells, sorted by page (file and offset) and cut into runs of one task each.
  // Set before the slot is queued; read by the workers until the batch is done.
  std::vector<SlowCell> slow_cells;
  std::vector<SlowRun> slow_runs;
  std::vector<PlannedCell> cells;  // planning scratch
  std::vector<CellOrder> cell_order;  // planning scratch: cells sorted by file and offset
  std::vector<SampleIndex::Location> locations;  // planning scratch: [column][sample]
  // Sample-columns not yet decoded, + the scalar chunks not yet gathered, + 1 while the producer
  // plans. The batch is ready when it reaches 0: every decrement is an acq_rel read-modify-write,
  // so they form one release sequence, and the consumer's acquire load that reads 0 sees every
  // worker's writes into the slot. Set (reset) by the producer before the slot is queued under
  // BatchQueue's lock, which publishes it to the consumer.
  std::atomic<int64_t> pending{0};
  Mutex mu;  // workers failing samples of the batch at once
  Status error GUARDED_BY(mu);                  // first error (on_error=raise)
  std::vector<uint8_t> skipped GUARDED_BY(mu);  // per row (on_error=skip)
  int64_t skipped_count GUARDED_BY(mu) = 0;
};

// A batch whose tensors take this many bytes or more has its checked mapped reads copied around
// the caches (CopyStores::kAroundCaches, ReadsNow::StoresFor). With the batches in flight (two
// planned ahead, one being copied, one with the consumer) it fills more than a core complex's
// last-level cache (32 MiB on the machine measured, shared), so its rows have left the caches
// before the consumer reads them; the ordinary stores' read of every destination line is saved.
// Measured at batches of 32: 115 KB samples (3.7 MB a batch) ran 0.8x as fast around the caches,
// 360 KB ones (11.8 MB) 1.1-1.3x, 4 MiB ones 1.2-1.9x; 16 KiB samples in batches of 1,024 (16.8 MB)
// 1.1-1.3x.
inline constexpr uint64_t kStreamBatchBytes = 8 << 20;

// Rows of a batch's scalar columns copied in one claim.
inline constexpr uint32_t kGatherRows = 128;

// The fetcher's request for read g of slot s; its tag is (s.id << 32) | g, by which the completer
// finds the read again: the slot by SlotIdOfTag (BatchSlots::SlotsOf), then ReadOfTag.
inline FetchRequest RequestOf(const Slot& s, uint32_t g) {
  const Read& r = s.reads[g];
  return FetchRequest{.file = r.file, .offset = r.offset, .length = r.length, .tag = (uint64_t{s.id} << 32) | g,
                      .tail = r.tail, .head_length = r.head_length};
}
inline uint32_t SlotIdOfTag(uint64_t tag) { return static_cast<uint32_t>(tag >> 32); }
inline Read& ReadOfTag(Slot& s, uint64_t tag) { return s.reads[static_cast<uint32_t>(tag)]; }

// The slots, shared by the loader and the batches it delivered (which may outlive it).
struct SlotPool {
  Mutex mu;
  CondVar cv;  // a slot was freed, the consumer took one, or stop
  std::vector<std::unique_ptr<Slot>> all GUARDED_BY(mu);
  std::vector<Slot*> free GUARDED_BY(mu);
  int64_t held_by_consumer GUARDED_BY(mu) = 0;

  // A batch the consumer held comes back.
  void Return(Slot* s) EXCLUDES(mu);
};

struct Batch::Impl {
  std::shared_ptr<SlotPool> pool;
  Slot* slot = nullptr;
  int64_t size = 0;
};

// The batch slots: at most max_slots buffers (the back-pressure on the producer), each sized for
// batch_rows rows of every column.
//
// Thread-safe: the pool has its own lock. Acquire is the producer's, CompactSkipped the consumer's,
// SlotsOf the completer's.
class BatchSlots {
 public:
  struct Options {
    size_t max_slots = 2;
    size_t batch_rows = 1;     // a batch's most rows
    int64_t batch_size = 1;    // for messages
    bool pin_memory = false;
  };
  // `tensors` and `scalars` outlive it.
  BatchSlots(const std::vector<TensorColumn>& tensors, const ScalarColumns& scalars, Options o)
      : tensors_(tensors), scalars_(scalars), o_(o) {}

  // A free slot, or a new one while the pool may grow; null once `stop` is set. OutOfMemoryError when
  // a new slot cannot be allocated.
  Result<Slot*> Acquire(const std::atomic<bool>& stop) EXCLUDES(pool_->mu);
  // Whether Acquire would wait now: no slot is free and the pool may not grow.
  bool WouldWait() const EXCLUDES(pool_->mu);
  // Puts back a slot the consumer never held (planning failed, or the run stopped). Allocates nothing.
  void PutBack(Slot* s) EXCLUDES(pool_->mu);
  // The consumer took a slot: it comes back through its Batch (SlotPool::Return).
  void HandedOver() EXCLUDES(pool_->mu);
  // Wakes a producer waiting in Acquire (to see stop, or a slot freed).
  void Wake() EXCLUDES(pool_->mu);
  // The slots of `n` fetch results (by their tags' slot ids), into slots[0, n).
  void SlotsOf(const FetchResult* results, size_t n, Slot** slots) EXCLUDES(pool_->mu);
  const std::shared_ptr<SlotPool>& pool() const { return pool_; }

  // Once every sample of the slot is done: its skipped rows removed (before the consumer's view of
  // the slot, Loader::Impl::BuildColumns).
  void CompactSkipped(Slot* s) REQUIRES(s->mu);

 private:
  Result<Slot*> NewSlotLocked() REQUIRES(pool_->mu);
  bool MayGrowLocked() const REQUIRES(pool_->mu);
  static void ReclaimStrings(Slot* s);

  const std::vector<TensorColumn>& tensors_;
  const ScalarColumns& scalars_;
  const Options o_;
  const std::shared_ptr<SlotPool> pool_ = std::make_shared<SlotPool>();
};

}  // namespace stoke
