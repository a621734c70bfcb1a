// The Fetcher: positioned reads of byte ranges, issued asynchronously with a bounded queue depth and a
// bounded memory budget. Backends: io_uring (one ring, a completion thread) or a pread thread pool for
// local files; for object-store files, ranged GETs through the HTTP client's event loop (no thread per
// read), optionally through a local read cache. Local files are opened at their first read and kept
// in a bounded cache of descriptors, so a table of any number of files reads within the process's
// RLIMIT_NOFILE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_pool.h"
#include "core/huge_pages.h"
#include "core/mutex.h"
#include "loader/descriptor_cache.h"
#include "stoke/status.h"

namespace stoke {
class ReadCache;
class RandomAccessFile;
}  // namespace stoke

namespace stoke {

// One positioned read.
struct FetchRequest {
  uint32_t file = 0;     // index into the list of files given to Fetcher::Open
  uint64_t offset = 0;   // byte offset in that file
  uint32_t length = 0;   // bytes to read
  uint64_t tag = 0;      // caller's cookie, returned in the FetchResult untouched
  // Optional split read (not with O_DIRECT): when `tail` is set, bytes [0, head_length) of the range
  // arrive in FetchResult::data and bytes [head_length, length) are written by the kernel straight to
  // `tail`, which the caller owns and must not touch until the result arrives. Only head_length bytes
  // are charged to the budget (the tail is the caller's memory). Lets a sample land in its batch slot
  // without a copy in user space.
  uint8_t* tail = nullptr;
  uint32_t head_length = 0;
};

struct FetchResult {
  uint64_t tag = 0;      // FetchRequest::tag
  // The buffer read into; empty on error. The requested bytes are bytes(): with O_DIRECT the read was
  // widened to 4096-byte alignment and they start `offset` bytes in (no memmove on the completion
  // path: the consumer reads them where they are). Give `data` back whole to Release.
  AlignedBuffer data;
  size_t offset = 0;     // where the requested bytes start in `data` (0 unless O_DIRECT)
  size_t length = 0;     // requested bytes held in `data`: length, or head_length for a split read
  Status status;         // why the read failed (names the file path, offset and length)
  bool out_of_memory = false;  // the failure was an allocation failure, not the file's fault
  // With FetcherOptions::checksum_tails, a split read done by a thread of its own: the CRC-32 of the
  // bytes written to the request's tail (Crc32). Unset otherwise (then the caller takes it).
  std::optional<uint32_t> tail_crc;
  ByteView bytes() const { return ByteView(data.data() + offset, length); }
};

// kAuto: buffered reads from this size up to 1 MiB go to the reading threads (HybridBackend).
// Copied inline, a 115 KB or 360 KB page kept the submitting thread copying while the other cores
// idled; below this size the hand-off to a thread costs more than the copy (16 KiB pages: no gain).
// The loader reads cached pages below it at once with a system call where it does not copy them out of
// a mapping, without the fetcher (kReadNowBytes).
inline constexpr uint64_t kParallelReadBytes = uint64_t{64} << 10;

struct FetcherOptions {
  enum class Backend {
    // io_uring when io_uring_queue_init works here, else kPread; with io_uring, buffered reads of
    // 64 KiB up to 1 MiB go first to a pool of reading threads (parallel_read_threads), which copy
    // what the page cache holds on every core instead of inline on the submitting thread, and hand
    // what is not cached on to the ring (preadv2 with RWF_NOWAIT: they never wait for the disk).
    kAuto,
    kIoUring,  // io_uring only: Open fails with kUnsupported when the kernel or sandbox refuses it
    kPread,    // a pool of threads calling pread(2)
  };
  Backend backend = Backend::kAuto;  // Default: kAuto.
  int queue_depth = 32;              // Default: 32. Reads in flight at once (submitted, not yet completed).
  // Default: 256 MiB. Bytes charged for results not yet Released; Submit blocks beyond it. Charged at
  // Submit (the bytes of the result's buffer: the request's length, the head for a split read, the
  // aligned range with O_DIRECT), refunded by Release, or at completion when the read failed. One
  // request larger than the whole budget is admitted when nothing else is charged, so it cannot hang.
  int64_t max_bytes_in_flight = int64_t{256} << 20;
  // Default: false. Open files with O_DIRECT. Reads are widened to 4096-byte alignment (offset rounded
  // down, end rounded up); FetchResult::offset says where the requested range starts. Open fails with
  // kUnsupported where the file system refuses O_DIRECT (tmpfs; probed on the first file).
  bool direct = false;
  // Default: true. With `direct`, reads land in buffers carved out of transparent huge pages
  // (core/huge_pages.h): a device then takes a read as one or two scatter-gather entries instead of
  // one per 4 KiB page, which is what let the whole queue depth reach a virtio disk (cold reads of
  // 360 KB samples: 3-8 reads in flight at the device before, 57-64 with them).
  bool huge_page_buffers = true;
  size_t pread_threads = 4;  // Default: 4. Threads of the kPread backend.
  // Default: 0 = derived: AvailableCpus() + 1, at most queue_depth. Threads of kAuto's reading
  // pool (above). One more than the CPUs: a copying thread waits now and then (a lock, a wake-up).
  size_t parallel_read_threads = 0;
  // Default: false. Split reads done by a thread of their own (kAuto's reading pool, kPread) also
  // take the CRC-32 of the tail right after reading it, while it is in that thread's cache, and
  // return it in FetchResult::tail_crc. For a caller that checks a checksum over the tail.
  bool checksum_tails = false;
  // Default: 0 = derived from the soft RLIMIT_NOFILE at Open: half of it (the rest of the process keeps
  // the other half), at least min(queue_depth + 4, soft limit - 16) and 1, at most 65536. The most files
  // held open at once. A file is opened by the Submit of its first read and stays open while a read of
  // it is in flight; when the cache is full, Submit closes the least recently used file with no read in
  // flight, or waits for one (so even 1 works, with less parallelism across files).
  size_t max_open_files = 0;
  // Object-store files only (URIs; see io/uri.h). Default empty: a file's size comes from a HEAD
  // made by its first read, on the producer thread. Otherwise one size per file (from the table's
  // log): no request is made but the reads.
  std::vector<uint64_t> file_sizes;
  // Object-store files only. Default empty: one per file, what besides its URI and size names its
  // bytes for the read cache (the log's modification time, "mtime=<ms>").
  std::vector<std::string> file_versions;
  // Object-store files only. Default none. Reads go through this local read cache (io/read_cache.h).
  std::shared_ptr<ReadCache> cache;
};

// Threading contract: one producer thread calls Submit, one consumer thread calls Next (they may be
// the same thread only if it never lets Submit block on a budget that only its own Release could
// free). Release, backend_name, bytes_in_flight, max_open_files, open_files, read_now, ReadNow and
// UnpinForReadNow may be called from any thread, concurrently with each other and with Submit and
// Next (the loader's decode workers release the buffers they decoded, several at once). The
// destructor must not run concurrently with any other call; it waits for reads in flight to finish
// and drops results not yet taken. Descriptors are opened and closed only by Submit and
// PinForReadNow (the producer thread) and the destructor; completions and UnpinForReadNow only unpin
// them.
class Fetcher {
 public:
  // Opens no file (except the first one with O_DIRECT, to probe support). Errors opening a file arrive
  // in the FetchResult::status of the reads of that file (NotFound or IOError, naming the file).
  // `files` may be shared with the caller (a table's sample index keeps the same list, which is tens
  // of MB at hundreds of thousands of files).
  static Result<std::unique_ptr<Fetcher>> Open(std::shared_ptr<const std::vector<std::string>> files, FetcherOptions o);
  static Result<std::unique_ptr<Fetcher>> Open(std::vector<std::string> files, FetcherOptions o);
  ~Fetcher();
  Fetcher(const Fetcher&) = delete;
  Fetcher& operator=(const Fetcher&) = delete;

  // Queues a read. Blocks while queue_depth reads are in flight, the byte budget is exhausted, or every
  // cached descriptor is in use by a read in flight. Returns kInvalidArgument (and queues nothing) for
  // a file index out of range, or a split read (`tail`) with O_DIRECT or with head_length > length,
  // and an out-of-memory IOError when the result queue cannot grow; I/O errors, including failing to
  // open the file, a range past the end of the file, or no memory for the read's buffer, arrive later
  // in FetchResult::status.
  Status Submit(FetchRequest r) EXCLUDES(mu_);
  // Submit for each request in turn, with the reads started together (the io_uring backend submits
  // them with one system call) when nothing has to wait, and before any wait otherwise. Stops at the
  // first request refused and returns its status; `*queued` says how many were queued before it.
  // `on_started(n)` runs (on this thread, no lock held) each time n more of the queued requests have
  // been handed to the backend: before Submit blocks and before it returns, so a consumer that counts
  // reads can take them while Submit waits for the budget they hold.
  Status Submit(std::span<const FetchRequest> requests, size_t* queued,
                const std::function<void(size_t)>& on_started) EXCLUDES(mu_);

  // The next completed read, in completion order, blocking until one completes; nullopt at once when
  // nothing is outstanding (every submitted read was already returned). A consumer on another thread
  // than the producer must therefore know how many reads to expect.
  std::optional<FetchResult> Next() EXCLUDES(mu_);
  // The completed reads available now, at most `max` of them, into out[0..n) in completion order,
  // blocking until at least one completes; returns n, or 0 at once when nothing is outstanding (or
  // `max` is 0). One lock for many results: the consumer side of small cached reads.
  size_t Next(FetchResult* out, size_t max) EXCLUDES(mu_);

  // Reads done at once, on the caller's threads, for a caller to whom handing a small read over costs
  // more than the read itself (a 512-byte sample from the page cache). Only where read_now() is true:
  // kAuto over local files without O_DIRECT.
  bool read_now() const;
  // Object-store files: the read cache they are read through (FetcherOptions::cache; null without
  // one), and the identity file `f` has there (ReadCache::Wrap): its path and version.
  const std::shared_ptr<ReadCache>& cache() const { return options_.cache; }
  std::string CacheIdentity(uint32_t f) const;
  // Opens file `f` if it is not open (as Submit would: within max_open_files, evicting an idle file)
  // and pins its descriptor, which it returns; -1 where Submit would have to wait for a descriptor
  // (every one pinned; then Submit the reads). The descriptor stays open until as many
  // UnpinForReadNow(f) as pins. Submit's thread only (the only one that opens and closes
  // descriptors); errors as a read's (NotFound, IOError naming the file). Pins held by the caller's
  // thread can keep Submit waiting for a descriptor forever: do (or give up) the pinned files' reads
  // before Submitting reads that may need one.
  Result<int> PinForReadNow(uint32_t f) EXCLUDES(mu_);
  void UnpinForReadNow(uint32_t f) EXCLUDES(mu_);  // any thread
  // Reads r's bytes from `fd` (pinned by PinForReadNow(r.file)) on the calling thread, any thread: the
  // first head_length bytes (all `length` when r.tail is null) to `head`, the rest to r.tail. With
  // `wait` false it never waits for the disk (preadv2 with RWF_NOWAIT): false when some bytes are not
  // in the page cache or the file system cannot tell (what was read may be overwritten; read again,
  // e.g. through Submit). True when every byte was read; an IOError names the file, offset and
  // length when the read failed or the file ended first. Takes no slot and charges nothing to the
  // budget.
  Result<bool> ReadNow(int fd, const FetchRequest& r, uint8_t* head, bool wait) const;

  // Gives back a result's buffer the consumer is done with: refunds its size to the budget and keeps
  // the memory for later reads. Any thread, several at once (the budget is refunded under mu_, the
  // memory goes to a thread-safe pool). REQUIRES: `buffer` is a FetchResult::data of this Fetcher,
  // unresized.
  void Release(AlignedBuffer buffer) EXCLUDES(mu_);

  const char* backend_name() const;  // "io_uring", "io_uring+pread" (kAuto, buffered) or "pread"
  // Threads of the fetcher's own that do reads: kAuto's reading threads for cached pages (buffered
  // local files; parallel_read_threads), kPread's pool; 0 for io_uring alone and object stores.
  size_t read_threads() const;
  int64_t bytes_in_flight() const EXCLUDES(mu_);  // bytes currently charged to the budget
  size_t max_open_files() const { return max_open_files_; }
  size_t open_files() const EXCLUDES(mu_);       // descriptors currently open

 private:
  struct File;
  struct Slot;
  class Backend;
  class PreadBackend;
  class HybridBackend;
  class StorageBackend;
  class UringBackend;

  Fetcher(std::shared_ptr<const std::vector<std::string>> paths, bool remote, FetcherOptions o, size_t max_open_files);
  // The backend `o` asks for (fetcher_backends.cc): object-store reads when `remote`, else io_uring
  // (with reading threads for kAuto), or pread threads where io_uring is refused.
  static Result<std::unique_ptr<Backend>> CreateBackend(Fetcher* f, const FetcherOptions& o, bool remote);
  const std::string& path(uint32_t file) const { return (*paths_)[file]; }
  // The reads a batch Submit has prepared but not yet started, and how many requests it accepted and
  // reported to its on_started. Producer thread only.
  struct PendingStarts {
    std::vector<int>* prepared = nullptr;
    const std::function<void(size_t)>* on_started = nullptr;
    size_t accepted = 0;
    size_t reported = 0;
    size_t left = 1;  // requests of the Submit not yet accepted, the one in hand included
  };
  static bool HasPrepared(const PendingStarts* p) { return p != nullptr && !p->prepared->empty(); }
  // Starts the prepared reads and reports the accepted requests not yet reported.
  void StartPrepared(PendingStarts* p) EXCLUDES(mu_);
  // One request: a slot, the file pinned, a buffer, then started at once (pending == nullptr) or added
  // to pending->prepared. Before it would wait, it starts what is prepared.
  Status SubmitOne(const FetchRequest& r, PendingStarts* pending) EXCLUDES(mu_);
  // No free slot, or `charge` more bytes would exceed the budget.
  bool SubmitBlockedLocked(int64_t charge) const REQUIRES(mu_);
  // Makes room in the result queue for every outstanding read and one more, so that completions
  // never allocate. An out-of-memory error when it cannot grow.
  Status ReserveResultLocked() REQUIRES(mu_);
  // Gives slot `i` its buffer (s.buffered() bytes); false, the slot completed with an out-of-memory
  // error, when it cannot.
  bool TakeSlotBuffer(int i) EXCLUDES(mu_);
  // The free slots Submit, blocked with none free, waits for: as many as it has requests left, up to
  // an eighth of the queue depth (8 of 64), so the depth in flight stays within an eighth of full.
  size_t RefillSlots(const PendingStarts* p) const;
  // As many slots are free as a waiting Submit waits for (wake_at_free_slots_, at least 1).
  bool WaitedForSlotsFreeLocked() const REQUIRES(mu_);
  // After a slot was freed or in_flight_ dropped: wakes space_cv_'s waiters when they can go on.
  void SignalSpaceLocked() REQUIRES(mu_);
  // Makes slot `i`'s file open and pinned for its read, evicting an idle descriptor when the cache is
  // full; sets slot.fd. Producer thread only (it alone opens and closes); takes mu_ briefly, and opens
  // and closes outside it. On failure the file is left closed and unpinned.
  Status PinFile(int i, PendingStarts* pending) EXCLUDES(mu_);
  // PinFile's work for file `f`: its pinned descriptor into *fd. Without `wait`, *fd is -1 (and the
  // status OK) where a descriptor would have to be waited for.
  Status PinDescriptor(uint32_t f, PendingStarts* pending, bool wait, int* fd) EXCLUDES(mu_);
  // Opens file `f` (its place in the cache reserved), closing idle descriptors of ours while the
  // process has none left (EMFILE, ENFILE), and with `wait`, waiting for a read in flight to give one
  // back. Returns the descriptor, or -1 with *err set.
  int OpenDescriptor(uint32_t f, PendingStarts* pending, bool wait, int* err) EXCLUDES(mu_);
  // Drops slot `i`'s pin on its file (a file left with no pin becomes evictable).
  void UnpinFileLocked(const Slot& slot) REQUIRES(mu_);
  // Reads a slot synchronously (pread backend); returns the status of the whole read.
  Status ReadSlotWithPread(Slot& slot);
  // Reads what the page cache holds of a slot's remaining range without waiting for the disk
  // (preadv2 with RWF_NOWAIT). True when the read is over (*status says how); false when the rest is
  // not cached, or the file system cannot say (slot.done tells how far it got).
  bool ReadCachedSlot(Slot& slot, Status* status);
  // After a whole split read on the thread that did it: the tail's CRC-32 into slot.tail_crc, when
  // checksum_tails asks for it.
  void ChecksumTail(Slot& slot) const;
  // Object-store files (remote_): file `f`'s RandomAccessFile (through the cache when there is one),
  // opened by the first call. Producer thread.
  Result<const RandomAccessFile*> OpenRemoteFile(uint32_t f);
  // Fills slot.iov with the destinations of the bytes not yet read; returns how many entries.
  int PrepareIovecs(Slot& slot) const;
  // Finishes a slot: queues the result, unpins the file, frees the slot. Any thread.
  void CompleteSlot(int slot_index, Status status, bool out_of_memory = false) EXCLUDES(mu_);
  // A read's outcome, as the io_uring completion thread collects them.
  struct Completion {
    int slot = 0;
    Status status;
  };
  // CompleteSlot for each entry, under one lock and with one notification; clears `done`.
  void CompleteSlots(std::vector<Completion>* done) EXCLUDES(mu_);
  void CompleteSlots(std::span<Completion> done) EXCLUDES(mu_);  // the same, leaving `done` as it is
  // The slot's result (its buffer moved out, or given back to the pool on error). No lock: the slot
  // is the caller's until it is queued.
  FetchResult TakeResult(int slot_index, Status status, bool out_of_memory);
  // Queues a slot's result and frees the slot (refunds a failed read's charge, unpins its file).
  void QueueResultLocked(int slot_index, FetchResult result) REQUIRES(mu_);
  bool ShortDirectReadHitEnd(const Slot& slot) const;
  Status EndOfFileError(const Slot& slot) const;
  Status EndOfFileError(const FetchRequest& r, uint64_t file_end) const;
  Status ReadError(const Slot& slot, int err) const;
  Status ReadError(const FetchRequest& r, int err) const;
  Status OpenError(uint32_t file, int err) const;

  static constexpr uint32_t kNoFile = ~uint32_t{0};

  const std::shared_ptr<const std::vector<std::string>> paths_;  // the files, by FetchRequest::file
  // True when the files are named by URIs (az://, s3://, file://, test://): reads go through Storage's
  // RandomAccessFile::ReadAtAsync (ranged GETs with retries, on the HTTP client's event loop), and
  // the descriptor LRU is not used (a remote file holds no descriptor). Split reads and O_DIRECT do
  // not apply.
  const bool remote_;
  std::vector<File> files_;  // remote_: each file's opened state (see File); else empty
  const FetcherOptions options_;
  const size_t max_open_files_;
  BufferPool pool_;
  std::shared_ptr<HugePageBlocks> huge_pages_;  // direct reads' buffers (FetcherOptions::huge_page_buffers)
  std::vector<Slot> slots_;  // queue_depth of them; a slot is owned by the backend while in flight
  std::vector<int> prepared_;  // batch Submit's slots not yet started (capacity queue_depth; producer only)

  mutable Mutex mu_;
  CondVar space_cv_;  // signalled when a slot, budget or descriptor frees up, and when in_flight_ drops
  CondVar done_cv_;   // signalled when a result is queued
  std::vector<int> free_slots_ GUARDED_BY(mu_);
  int in_flight_ GUARDED_BY(mu_) = 0;  // slots owned by the backend
  // A completion wakes space_cv_'s waiters once this many slots are free (or none is in flight). It
  // is 1 but while Submit waits for a slot with more requests to queue: then it waits for a refill
  // (RefillSlots), one wake-up per several completions instead of one for each.
  size_t wake_at_free_slots_ GUARDED_BY(mu_) = 1;
  int64_t bytes_charged_ GUARDED_BY(mu_) = 0;
  int64_t outstanding_ GUARDED_BY(mu_) = 0;  // submitted and not yet returned by Next
  // Completed results not yet taken: a circular queue that grows by doubling (in Submit, so that it
  // always has room for every outstanding read and completions never allocate) and never shrinks, so
  // steady state allocates nothing.
  std::vector<FetchResult> done_ GUARDED_BY(mu_);
  size_t done_head_ GUARDED_BY(mu_) = 0;
  size_t done_count_ GUARDED_BY(mu_) = 0;
  // The descriptor cache (local files; no files when remote_): opened and closed by Submit and
  // PinForReadNow, outside mu_.
  DescriptorCache descriptors_ GUARDED_BY(mu_);

  std::unique_ptr<Backend> backend_;  // last: destroyed first (the destructor also stops it explicitly)
};

}  // namespace stoke
