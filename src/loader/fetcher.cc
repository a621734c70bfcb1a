#include "loader/fetcher.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "core/cpus.h"
#include "core/fd_limit.h"
#include "core/thread_pool.h"
#include "format/codec.h"
#include "io/local_files.h"
#include "io/read_cache.h"
#include "io/storage.h"
#include "io/uri.h"
#include "loader/fetcher_internal.h"
#include "loader/out_of_memory.h"

namespace stoke {

namespace {

// O_DIRECT needs the file offset, the length and the buffer address aligned to the logical block size;
// 4096 covers every common device and matches AlignedBuffer's default alignment.
constexpr uint64_t kDirectAlignment = 4096;
// Derived max_open_files: the share of the soft RLIMIT_NOFILE the fetcher takes (the rest of the
// process keeps the other half: sockets, the index cache, the io_uring ring, a host's own files), and
// a ceiling: beyond some tens of thousands of descriptors the kernel memory they pin buys little, as
// only queue_depth reads are in flight at once.
constexpr uint64_t kOpenFileShareDivisor = 2;
constexpr uint64_t kMaxDerivedOpenFiles = 65536;
// Descriptors left to the rest of the process when the derived size is raised to queue_depth + 4.
constexpr uint64_t kReservedDescriptors = 16;

size_t DerivedMaxOpenFiles(int queue_depth) {
  const uint64_t soft = OpenFileSoftLimit();
  uint64_t n = soft / kOpenFileShareDivisor;
  const uint64_t wanted = static_cast<uint64_t>(queue_depth) + 4;  // one per read in flight, and a few to reuse
  n = std::max(n, std::min(wanted, soft > kReservedDescriptors ? soft - kReservedDescriptors : 1));
  return static_cast<size_t>(std::clamp<uint64_t>(n, 1, kMaxDerivedOpenFiles));
}


// The destinations of bytes [done, length) of a read whose first head_length bytes go to `head` and
// the rest to `tail` (none when tail is null): into iov[0..n), returns n (at most 2).
int RangeIovecs(uint8_t* head, uint64_t head_length, uint8_t* tail, uint64_t length, uint64_t done, iovec* iov) {
  int n = 0;
  if (done < head_length) iov[n++] = iovec{head + done, static_cast<size_t>(head_length - done)};
  if (tail != nullptr && done < length) {
    const uint64_t from = std::max(done, head_length) - head_length;  // within the tail
    iov[n++] = iovec{tail + from, static_cast<size_t>(length - head_length - from)};
  }
  return n;
}}  // namespace

Result<std::unique_ptr<Fetcher>> Fetcher::Open(std::vector<std::string> files, FetcherOptions o) {
  return Open(std::make_shared<const std::vector<std::string>>(std::move(files)), std::move(o));
}

Result<std::unique_ptr<Fetcher>> Fetcher::Open(std::shared_ptr<const std::vector<std::string>> files, FetcherOptions o) {
  if (files == nullptr) files = std::make_shared<const std::vector<std::string>>();
  const std::vector<std::string>& paths = *files;
  if (o.queue_depth < 1) return Status::InvalidArgument("FetcherOptions.queue_depth must be >= 1");
  if (o.max_bytes_in_flight < 1) return Status::InvalidArgument("FetcherOptions.max_bytes_in_flight must be >= 1");
  if (paths.size() >= kNoFile) {
    return Status::InvalidArgument("a fetcher reads at most 2^32 - 2 files, got " + std::to_string(paths.size()));
  }
  if ((!o.file_sizes.empty() && o.file_sizes.size() != paths.size()) ||
      (!o.file_versions.empty() && o.file_versions.size() != paths.size())) {
    return Status::InvalidArgument("FetcherOptions.file_sizes and file_versions must be empty or have one entry per file");
  }
  if (o.direct && !paths.empty()) {
    // Support for O_DIRECT is a property of the file system: probe it once here, so that a table on
    // tmpfs fails at Open rather than on every read.
    STOKE_RETURN_IF_ERROR(CheckDirectReads(paths[0]));
  }
  // The fetcher opens plain local paths itself; it reads URIs (object stores, file://, storages
  // registered for tests) through their Storage. The files of one fetcher are all on one storage.
  const bool remote = !paths.empty() && HasUriScheme(paths[0]);
  if (remote && o.direct) o.direct = false;  // no page cache between us and an object store
  const size_t max_open = o.max_open_files > 0 ? o.max_open_files : DerivedMaxOpenFiles(o.queue_depth);
  std::unique_ptr<Fetcher> f(new Fetcher(std::move(files), remote, o, max_open));
  if (o.direct && o.huge_page_buffers) f->huge_pages_ = HugePageBlocks::Create();
  STOKE_ASSIGN_OR_RETURN(f->backend_, CreateBackend(f.get(), o, remote));
  return f;
}

Fetcher::Fetcher(std::shared_ptr<const std::vector<std::string>> paths, bool remote, FetcherOptions o,
                 size_t max_open_files)
    : paths_(std::move(paths)),
      remote_(remote),
      files_(remote ? paths_->size() : 0),
      options_(o),
      max_open_files_(max_open_files),
      pool_(static_cast<size_t>(o.queue_depth) * 2),
      slots_(static_cast<size_t>(o.queue_depth)),
      descriptors_(remote ? 0 : paths_->size(), max_open_files) {
  free_slots_.reserve(slots_.size());
  prepared_.reserve(slots_.size());
  for (int i = o.queue_depth - 1; i >= 0; --i) free_slots_.push_back(i);
  done_.resize(static_cast<size_t>(o.queue_depth) * 2);
}

Fetcher::~Fetcher() {
  {
    MutexLock lock(&mu_);
    while (in_flight_ != 0) space_cv_.Wait(&mu_);
  }
  // No read in flight and no other caller (the contract): the backend's threads touch nothing more.
  backend_.reset();
  std::vector<int> open;
  {
    MutexLock lock(&mu_);
    open = descriptors_.TakeAll();
  }
  for (int fd : open) CloseDescriptor(fd);
}

Status Fetcher::Submit(FetchRequest r) { return SubmitOne(r, nullptr); }

Status Fetcher::Submit(std::span<const FetchRequest> requests, size_t* queued,
                       const std::function<void(size_t)>& on_started) {
  PendingStarts pending{.prepared = &prepared_, .on_started = &on_started};
  *queued = 0;
  Status st;
  for (const FetchRequest& r : requests) {
    pending.left = requests.size() - pending.accepted;
    st = SubmitOne(r, &pending);
    if (!st.ok()) break;
    ++pending.accepted;
    ++*queued;
  }
  StartPrepared(&pending);
  return st;
}

void Fetcher::StartPrepared(PendingStarts* p) {
  if (!p->prepared->empty()) {
    backend_->Start(*p->prepared);
    p->prepared->clear();
  }
  if (p->accepted > p->reported) {
    const size_t n = p->accepted - p->reported;
    p->reported = p->accepted;
    (*p->on_started)(n);
  }
}

bool Fetcher::SubmitBlockedLocked(int64_t charge) const {
  return free_slots_.empty() || (bytes_charged_ != 0 && bytes_charged_ + charge > options_.max_bytes_in_flight);
}

size_t Fetcher::RefillSlots(const PendingStarts* p) const {
  const size_t left = p != nullptr ? p->left : 1;
  return std::clamp<size_t>(std::min(left, slots_.size() / 8), 1, slots_.size());
}

bool Fetcher::WaitedForSlotsFreeLocked() const { return free_slots_.size() >= wake_at_free_slots_; }

void Fetcher::SignalSpaceLocked() {
  if (WaitedForSlotsFreeLocked() || in_flight_ == 0) space_cv_.SignalAll();
}

Status Fetcher::SubmitOne(const FetchRequest& r, PendingStarts* pending) {
  if (r.file >= paths_->size()) {
    return Status::InvalidArgument("fetch request names file " + std::to_string(r.file) + " but the fetcher has " +
                                   std::to_string(paths_->size()));
  }
  if (r.tail != nullptr && (options_.direct || remote_ || r.head_length > r.length)) {
    return Status::InvalidArgument(options_.direct ? "split fetch requests cannot be used with O_DIRECT"
                                   : remote_       ? "split fetch requests cannot be used with object-store files"
                                                   : "split fetch request: head_length exceeds length");
  }
  uint64_t read_offset = r.offset, read_length = r.length;
  if (options_.direct) {
    read_offset = r.offset / kDirectAlignment * kDirectAlignment;
    const uint64_t end = (r.offset + r.length + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
    read_length = end - read_offset;
  }
  // The bytes of the result's buffer: what Release will refund.
  const int64_t charge = static_cast<int64_t>(r.tail != nullptr ? r.head_length : read_length);
  int i = -1;
  while (i < 0) {
    {
      MutexLock lock(&mu_);
      while (SubmitBlockedLocked(charge) && !HasPrepared(pending)) {
        wake_at_free_slots_ = free_slots_.empty() ? RefillSlots(pending) : 1;
        space_cv_.Wait(&mu_);
      }
      wake_at_free_slots_ = 1;
      if (!SubmitBlockedLocked(charge)) {
        STOKE_RETURN_IF_ERROR(ReserveResultLocked());
        i = free_slots_.back();
        free_slots_.pop_back();
        ++in_flight_;
        ++outstanding_;
        bytes_charged_ += charge;
      }
    }
    // Blocked, with reads of this batch prepared but not started: only their completions may free
    // what is missing, so start them and look again.
    if (i < 0) StartPrepared(pending);
  }
  Slot& s = slots_[i];
  s.request = r;
  s.done = 0;
  s.read_offset = read_offset;
  s.read_length = read_length;
  s.head = r.offset - s.read_offset;
  s.charge = charge;
  s.resubmits = 0;
  s.fd = -1;
  s.pinned = false;
  if (s.needed() == 0) {
    CompleteSlot(i, Status::OK());
    return Status::OK();
  }
  if (Status st = PinFile(i, pending); !st.ok()) {
    CompleteSlot(i, std::move(st));
    return Status::OK();
  }
  if (!TakeSlotBuffer(i)) return Status::OK();
  if (pending != nullptr) {
    pending->prepared->push_back(i);  // capacity queue_depth: one entry per slot at most
  } else {
    backend_->Start(i);
  }
  return Status::OK();
}

Status Fetcher::ReserveResultLocked() {
  if (done_.size() >= static_cast<size_t>(outstanding_) + 1) return Status::OK();
  try {
    AllocationFaults::Instance().Check();
    std::vector<FetchResult> bigger(done_.size() * 2);
    for (size_t k = 0; k < done_count_; ++k) bigger[k] = std::move(done_[(done_head_ + k) % done_.size()]);
    done_ = std::move(bigger);
    done_head_ = 0;
    return Status::OK();
  } catch (const std::bad_alloc&) {
    return OutOfMemoryError("growing the fetcher's result queue past " + std::to_string(done_.size()) + " entries");
  }
}

bool Fetcher::TakeSlotBuffer(int i) {
  Slot& s = slots_[i];
  try {
    AllocationFaults::Instance().Check();
    s.buffer = pool_.Take(s.buffered());  // cleared: Resize copies nothing when it has to grow
    if (huge_pages_ != nullptr && s.buffer.capacity() < s.buffered()) s.buffer = huge_pages_->Take(s.buffered());
    s.buffer.Resize(s.buffered());
    return true;
  } catch (const std::bad_alloc&) {
    CompleteSlot(i, OutOfMemoryError("a " + std::to_string(s.buffered()) + "-byte buffer for the read of " +
                                     path(s.request.file) + " at offset " + std::to_string(s.request.offset)),
                 /*out_of_memory=*/true);
    return false;
  }
}

Result<const RandomAccessFile*> Fetcher::OpenRemoteFile(uint32_t f) {
  File& file = files_[f];
  if (!file.open_tried) {
    file.open_tried = true;
    file.open_status = [&]() -> Status {
      STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(path(f)));
      std::unique_ptr<RandomAccessFile> opened;
      if (f < options_.file_sizes.size()) {
        STOKE_ASSIGN_OR_RETURN(opened, where.storage->OpenForReadWithSize(where.path, options_.file_sizes[f]));
      } else {
        STOKE_ASSIGN_OR_RETURN(opened, where.storage->OpenForRead(where.path));
      }
      if (options_.cache != nullptr) opened = options_.cache->Wrap(std::move(opened), CacheIdentity(f));
      file.remote = std::move(opened);
      return Status::OK();
    }();
  }
  if (!file.open_status.ok()) return file.open_status;
  return static_cast<const RandomAccessFile*>(file.remote.get());
}

Status Fetcher::PinFile(int i, PendingStarts* pending) {
  Slot& s = slots_[i];
  if (remote_) return Status::OK();  // opened by the read's Start (OpenRemoteFile)
  int fd = -1;
  STOKE_RETURN_IF_ERROR(PinDescriptor(s.request.file, pending, /*wait=*/true, &fd));
  s.fd = fd;
  s.pinned = true;
  return Status::OK();
}

Status Fetcher::PinDescriptor(uint32_t f, PendingStarts* pending, bool wait, int* pinned_fd) {
  *pinned_fd = -1;
  int victim = -1;
  for (bool reserved = false; !reserved;) {
    {
      MutexLock lock(&mu_);
      if (const int fd = descriptors_.PinOpen(f); fd >= 0) {
        *pinned_fd = fd;
        return Status::OK();
      }
      // Every open descriptor in use by a read in flight or pinned for reads at once: wait for one to
      // be given back (reads complete without the consumer's help, so this cannot hang once this
      // batch's reads are started; a caller of PinForReadNow must do or give up its reads at once
      // before it Submits reads that may wait here).
      if (!wait && !descriptors_.HasRoom()) return Status::OK();
      while (!descriptors_.HasRoom() && !HasPrepared(pending)) space_cv_.Wait(&mu_);
      if (descriptors_.HasRoom()) {
        victim = descriptors_.Reserve(f);
        reserved = true;
      }
    }
    if (!reserved) StartPrepared(pending);
  }
  // open and close outside the lock: completions need mu_, and these may be slow on network file systems.
  CloseDescriptor(victim);
  int err = 0;
  const int fd = OpenDescriptor(f, pending, wait, &err);
  MutexLock lock(&mu_);
  if (fd < 0) {
    descriptors_.OpenFailed(f);
    space_cv_.SignalAll();
    if (!wait && (err == EMFILE || err == ENFILE)) return Status::OK();  // none free now: not an error yet
    return OpenError(f, err);
  }
  descriptors_.Opened(f, fd);
  *pinned_fd = fd;
  return Status::OK();
}

int Fetcher::OpenDescriptor(uint32_t f, PendingStarts* pending, bool wait, int* err) {
  for (;;) {
    const int fd = OpenReadDescriptor(path(f), options_.direct, err);
    if (fd >= 0 || (*err != EMFILE && *err != ENFILE)) return fd;
    // The process ran out of descriptors (the rest of it holds more than max_open_files_ left it):
    // close an idle one of ours and try again, waiting for a read in flight to free one if need be
    // (more than one open: files other than this one are open, so reads hold them and will complete).
    int spare = -1;
    bool start_first = false;
    {
      MutexLock lock(&mu_);
      while (wait && !descriptors_.has_idle() && descriptors_.open() > 1 && !HasPrepared(pending)) {
        space_cv_.Wait(&mu_);
      }
      if (descriptors_.has_idle()) {
        spare = descriptors_.EvictIdle();
      } else if (wait && descriptors_.open() > 1) {
        start_first = true;
      }
    }
    if (start_first) {
      StartPrepared(pending);
      continue;
    }
    if (spare < 0) return fd;
    CloseDescriptor(spare);
  }
}

void Fetcher::UnpinFileLocked(const Slot& s) {
  if (s.pinned) descriptors_.Unpin(s.request.file);
}

Status Fetcher::ReadSlotWithPread(Slot& s) {
  const int fd = s.fd;
  while (s.done < s.needed()) {
    const int iovcnt = PrepareIovecs(s);
    ssize_t n = ::preadv(fd, s.iov, iovcnt, static_cast<off_t>(s.read_offset + s.done));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadError(s, errno);
    }
    if (n == 0) return EndOfFileError(s);
    s.done += static_cast<uint64_t>(n);
    if (ShortDirectReadHitEnd(s)) return EndOfFileError(s);
  }
  ChecksumTail(s);
  return Status::OK();
}

int Fetcher::PrepareIovecs(Slot& s) const {
  return RangeIovecs(s.buffer.data(), s.buffered(), s.request.tail, s.read_length, s.done, s.iov);
}

bool Fetcher::ShortDirectReadHitEnd(const Slot& s) const {
  // With O_DIRECT a read returns whole blocks except at the end of the file, and asking again from an
  // unaligned offset would fail with EINVAL instead of returning 0.
  return options_.direct && s.done < s.needed() && s.done % kDirectAlignment != 0;
}

Status Fetcher::EndOfFileError(const Slot& s) const { return EndOfFileError(s.request, s.read_offset + s.done); }

Status Fetcher::EndOfFileError(const FetchRequest& r, uint64_t file_end) const {
  return Status::IOError("read past end of file " + path(r.file) + ": offset " + std::to_string(r.offset) +
                         " length " + std::to_string(r.length) + ", file ends at " + std::to_string(file_end));
}

Status Fetcher::OpenError(uint32_t f, int err) const {
  const std::string& name = path(f);
  if (options_.direct && err == EINVAL) return Status::Unsupported("O_DIRECT refused for " + name);
  if (err == ENOENT) return Status::NotFound("cannot open " + name + ": " + std::strerror(err));
  if (err == EMFILE || err == ENFILE) {
    return Status::IOError("cannot open " + name + ": " + std::strerror(err) + " (the fetcher holds at most " +
                               std::to_string(max_open_files_) + " files open; the process limit is ulimit -n)",
                           /*retryable=*/true);
  }
  return Status::IOError("cannot open " + name + ": " + std::strerror(err));
}

Status Fetcher::ReadError(const Slot& s, int err) const { return ReadError(s.request, err); }

Status Fetcher::ReadError(const FetchRequest& r, int err) const {
  return Status::IOError("read of " + path(r.file) + " at offset " + std::to_string(r.offset) + " length " +
                             std::to_string(r.length) + " failed: " + std::strerror(err),
                         /*retryable=*/err == EINTR || err == EAGAIN);
}

void Fetcher::ChecksumTail(Slot& s) const {
  if (s.request.tail != nullptr && options_.checksum_tails) {
    s.tail_crc = Crc32(ByteView(s.request.tail, static_cast<size_t>(s.read_length - s.request.head_length)));
  }
}

bool Fetcher::ReadCachedSlot(Slot& s, Status* status) {
  while (s.done < s.needed()) {
    const int iovcnt = PrepareIovecs(s);
    ssize_t n = ::preadv2(s.fd, s.iov, iovcnt, static_cast<off_t>(s.read_offset + s.done), RWF_NOWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: not (all) in the page cache; EOPNOTSUPP: a file system that cannot tell.
      if (errno == EAGAIN || errno == EOPNOTSUPP) return false;
      *status = ReadError(s, errno);
      return true;
    }
    if (n == 0) {
      *status = EndOfFileError(s);
      return true;
    }
    s.done += static_cast<uint64_t>(n);
  }
  ChecksumTail(s);
  *status = Status::OK();
  return true;
}

std::string Fetcher::CacheIdentity(uint32_t f) const {
  std::string identity = path(f);
  if (f < options_.file_versions.size()) identity += " " + options_.file_versions[f];
  return identity;
}

bool Fetcher::read_now() const {
  return !remote_ && !options_.direct && options_.backend == FetcherOptions::Backend::kAuto;
}

Result<int> Fetcher::PinForReadNow(uint32_t f) {
  if (!read_now()) return Status::Unsupported("reads at once need kAuto over local files without O_DIRECT");
  if (f >= paths_->size()) return Status::InvalidArgument("file index " + std::to_string(f) + " out of range");
  int fd = -1;
  STOKE_RETURN_IF_ERROR(PinDescriptor(f, nullptr, /*wait=*/false, &fd));
  return fd;
}

void Fetcher::UnpinForReadNow(uint32_t f) {
  {
    MutexLock lock(&mu_);
    descriptors_.Unpin(f);
  }
  space_cv_.SignalAll();  // the file may be evictable now
}

Result<bool> Fetcher::ReadNow(int fd, const FetchRequest& r, uint8_t* head, bool wait) const {
  const uint64_t head_length = r.tail != nullptr ? std::min<uint64_t>(r.head_length, r.length) : r.length;
  uint64_t done = 0;
  while (done < r.length) {
    iovec iov[2];
    const int n = RangeIovecs(head, head_length, r.tail, r.length, done, iov);
    const ssize_t got = ::preadv2(fd, iov, n, static_cast<off_t>(r.offset + done), wait ? 0 : RWF_NOWAIT);
    if (got < 0) {
      if (errno == EINTR) continue;
      // EAGAIN: not (all) in the page cache; EOPNOTSUPP: a file system that cannot tell.
      if (!wait && (errno == EAGAIN || errno == EOPNOTSUPP)) return false;
      return ReadError(r, errno);
    }
    if (got == 0) return EndOfFileError(r, r.offset + done);
    done += static_cast<uint64_t>(got);
  }
  return true;
}

FetchResult Fetcher::TakeResult(int i, Status status, bool out_of_memory) {
  Slot& s = slots_[i];
  FetchResult result;
  result.tag = s.request.tag;
  if (status.ok()) {
    // With O_DIRECT the requested bytes stay where the aligned read put them (FetchResult::offset):
    // moving them to the front would cost a pass over the data on this (completion) thread.
    result.offset = static_cast<size_t>(s.head);
    result.length = static_cast<size_t>(s.request.tail != nullptr ? s.request.head_length : s.request.length);
    result.data = std::move(s.buffer);
  } else {
    pool_.Give(std::move(s.buffer));
  }
  s.buffer = AlignedBuffer();
  result.status = std::move(status);
  result.out_of_memory = out_of_memory;
  result.tail_crc = std::exchange(s.tail_crc, std::nullopt);
  return result;
}

void Fetcher::QueueResultLocked(int i, FetchResult result) {
  Slot& s = slots_[i];
  if (!result.status.ok()) bytes_charged_ -= s.charge;
  // Submit keeps done_ larger than the outstanding reads, so there is room without allocating.
  done_[(done_head_ + done_count_) % done_.size()] = std::move(result);
  ++done_count_;
  UnpinFileLocked(s);
  s.pinned = false;
  free_slots_.push_back(i);
  --in_flight_;
}

void Fetcher::CompleteSlot(int i, Status status, bool out_of_memory) {
  FetchResult result = TakeResult(i, std::move(status), out_of_memory);
  MutexLock lock(&mu_);
  QueueResultLocked(i, std::move(result));
  // Notified under the lock: once in_flight_ can read 0 the destructor may run, so nothing here may
  // touch the Fetcher after the unlock.
  SignalSpaceLocked();
  done_cv_.Signal();
}

void Fetcher::CompleteSlots(std::vector<Completion>* done) {
  CompleteSlots(std::span(*done));
  done->clear();
}

void Fetcher::CompleteSlots(std::span<Completion> done) {
  if (done.empty()) return;
  MutexLock lock(&mu_);
  for (Completion& c : done) QueueResultLocked(c.slot, TakeResult(c.slot, std::move(c.status), false));
  SignalSpaceLocked();  // under the lock, as in CompleteSlot
  done_cv_.Signal();
}

std::optional<FetchResult> Fetcher::Next() {
  MutexLock lock(&mu_);
  if (outstanding_ == 0) return std::nullopt;
  while (done_count_ == 0) done_cv_.Wait(&mu_);
  FetchResult r = std::move(done_[done_head_]);
  done_head_ = (done_head_ + 1) % done_.size();
  --done_count_;
  --outstanding_;
  return r;
}

size_t Fetcher::Next(FetchResult* out, size_t max) {
  MutexLock lock(&mu_);
  if (outstanding_ == 0 || max == 0) return 0;
  while (done_count_ == 0) done_cv_.Wait(&mu_);
  const size_t n = std::min(max, done_count_);
  for (size_t k = 0; k < n; ++k) {
    out[k] = std::move(done_[done_head_]);
    done_head_ = (done_head_ + 1) % done_.size();
  }
  done_count_ -= n;
  outstanding_ -= static_cast<int64_t>(n);
  return n;
}

void Fetcher::Release(AlignedBuffer buffer) {
  const int64_t size = static_cast<int64_t>(buffer.size());
  if (size > 0) {
    bool wake;
    {
      MutexLock lock(&mu_);
      bytes_charged_ = std::max<int64_t>(0, bytes_charged_ - size);
      // Only a Submit that has the slots it waits for and waits for the budget can go on; otherwise
      // the completion that frees them wakes it.
      wake = WaitedForSlotsFreeLocked();
    }
    if (wake) space_cv_.SignalAll();
  }
  try {
    pool_.Give(std::move(buffer));  // may grow the pool's list
  } catch (const std::bad_alloc&) {
    // The buffer is freed instead of kept: nothing lost but a reuse.
  }
}

const char* Fetcher::backend_name() const { return backend_->name(); }

size_t Fetcher::read_threads() const { return backend_->threads(); }

size_t Fetcher::open_files() const {
  MutexLock lock(&mu_);
  return descriptors_.open();
}

int64_t Fetcher::bytes_in_flight() const {
  MutexLock lock(&mu_);
  return bytes_charged_;
}

}  // namespace stoke
