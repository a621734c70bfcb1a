#include "loader/fetcher.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "core/thread_pool.h"

namespace stoke {

namespace {
// O_DIRECT needs the file offset, the length and the buffer address aligned to the logical block size;
// 4096 covers every common device and matches AlignedBuffer's default alignment.
constexpr uint64_t kDirectAlignment = 4096;
// user_data of the NOP that tells the io_uring completion thread to stop.
constexpr uint64_t kStopUserData = ~uint64_t{0};
// Resubmissions of one read after ECANCELED before its error is reported.
constexpr int kMaxResubmits = 16;
}  // namespace

struct Fetcher::File {
  std::string path;
  int fd = -1;
};

// A read in flight. Owned by the backend between Submit and CompleteSlot.
struct Fetcher::Slot {
  FetchRequest request;
  AlignedBuffer buffer;  // read_length bytes
  uint64_t read_offset = 0;  // request.offset, rounded down to kDirectAlignment when direct
  uint64_t read_length = 0;  // bytes asked of the kernel (widened when direct)
  uint64_t head = 0;         // request.offset - read_offset
  uint64_t done = 0;         // bytes read so far
  int64_t charge = 0;        // bytes charged to the budget for this read
  int resubmits = 0;         // io_uring: resubmissions after ECANCELED
  iovec iov[2] = {};         // destinations of the bytes not yet read (kept here for io_uring)
  uint64_t needed() const { return head + request.length; }
  // Bytes of the range that land in `buffer` (the rest goes to request.tail).
  uint64_t buffered() const { return request.tail != nullptr ? request.head_length : read_length; }
};

class Fetcher::Backend {
 public:
  virtual ~Backend() = default;
  // Starts the read of slot `i`; the backend calls CompleteSlot(i, ...) exactly once, later or now.
  virtual void Start(int i) = 0;
  virtual const char* name() const = 0;
};

class Fetcher::PreadBackend final : public Fetcher::Backend {
 public:
  PreadBackend(Fetcher* f, size_t threads) : f_(f), pool_(std::max<size_t>(threads, 1)) {}
  // The lambda captures two words, so std::function keeps it inline: no allocation per read.
  void Start(int i) override {
    pool_.Submit([f = f_, i] { f->CompleteSlot(i, f->ReadSlotWithPread(f->slots_[i])); });
  }
  const char* name() const override { return "pread"; }

 private:
  Fetcher* f_;
  ThreadPool pool_;  // its destructor runs the reads already queued, then joins
};

// One ring. The producer thread prepares and submits SQEs; a completion thread waits on the CQ and
// resubmits the remainder of short or interrupted reads. sq_mu_ serialises the two SQ users.
class Fetcher::UringBackend final : public Fetcher::Backend {
 public:
  static Result<std::unique_ptr<UringBackend>> Create(Fetcher* f, int queue_depth) {
    auto b = std::unique_ptr<UringBackend>(new UringBackend(f));
    // +1: room for the stop NOP next to a full queue of reads.
    int rc = io_uring_queue_init(static_cast<unsigned>(queue_depth + 1), &b->ring_, 0);
    if (rc < 0) return Status::Unsupported(std::string("io_uring_queue_init: ") + std::strerror(-rc));
    b->ring_ok_ = true;
    b->reaper_ = std::thread([p = b.get()] { p->ReapLoop(); });
    return b;
  }
  ~UringBackend() override {
    // The Fetcher waits for in-flight reads before destroying its backend, so only the NOP remains.
    if (reaper_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(sq_mu_);
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe != nullptr) {
          io_uring_prep_nop(sqe);
          io_uring_sqe_set_data64(sqe, kStopUserData);
          (void)SubmitLocked();  // on failure join() would hang; nothing better to do: it only fails on a dead ring
        }
      }
      reaper_.join();
    }
    if (ring_ok_) io_uring_queue_exit(&ring_);
  }
  void Start(int i) override {
    std::lock_guard<std::mutex> lock(sq_mu_);
    Status st = PrepLocked(i);
    if (st.ok()) st = SubmitLocked();
    if (!st.ok()) f_->CompleteSlot(i, std::move(st));
  }
  const char* name() const override { return "io_uring"; }

 private:
  explicit UringBackend(Fetcher* f) : f_(f) {}

  // REQUIRES: sq_mu_ held.
  Status PrepLocked(int i) {
    Slot& s = f_->slots_[i];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    // Cannot happen: every prepared SQE is submitted at once and reads in flight <= queue_depth.
    if (sqe == nullptr) return Status::Internal("io_uring submission queue full");
    const int n = f_->PrepareIovecs(s);
    io_uring_prep_readv(sqe, f_->files_[s.request.file].fd, s.iov, static_cast<unsigned>(n), s.read_offset + s.done);
    // Buffered reads of cached pages would otherwise be copied inline, on the submitting thread, one
    // at a time; the kernel's async workers copy them in parallel (measured: docs/benchmarks.md).
    if (!f_->options_.direct) io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(i));
    return Status::OK();
  }
  // REQUIRES: sq_mu_ held. Once liburing has published an SQE the kernel will take it, so only
  // transient refusals are retried here and other failures are reported.
  Status SubmitLocked() {
    for (;;) {
      int rc = io_uring_submit(&ring_);
      if (rc >= 0) return Status::OK();
      if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
        std::this_thread::yield();
        continue;
      }
      return Status::IOError(std::string("io_uring_submit: ") + std::strerror(-rc));
    }
  }

  void ReapLoop() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR || rc == -EAGAIN) continue;
      if (rc < 0) {  // the ring is broken; nothing sensible is left to do but stop
        return;
      }
      uint64_t data = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (data == kStopUserData) return;
      // The kernel orders the producer's writes to the slot before this CQE, but through ring memory
      // that ThreadSanitizer cannot see; taking sq_mu_ (which the producer held while submitting)
      // states the order in a way tools check, for one uncontended lock per completion.
      std::lock_guard<std::mutex> lock(sq_mu_);
      OnCompletion(static_cast<int>(data), res);
    }
  }

  // REQUIRES: sq_mu_ held.
  void OnCompletion(int i, int res) {
    Slot& s = f_->slots_[i];
    // ECANCELED: the thread that submitted the read exited while the read waited for the kernel's
    // async workers (io_uring cancels a task's queued work when the task exits). This thread is
    // alive, so it submits the read again; the cap only guards against a kernel that keeps refusing.
    if (res == -EINTR || res == -EAGAIN || (res == -ECANCELED && ++s.resubmits <= kMaxResubmits)) return Resubmit(i);
    if (res < 0) return f_->CompleteSlot(i, f_->ReadError(s, -res));
    if (res == 0) {  // end of file
      return f_->CompleteSlot(i, s.done >= s.needed() ? Status::OK() : f_->EndOfFileError(s));
    }
    s.done += static_cast<uint64_t>(res);
    if (s.done >= s.needed()) return f_->CompleteSlot(i, Status::OK());
    if (f_->ShortDirectReadHitEnd(s)) return f_->CompleteSlot(i, f_->EndOfFileError(s));
    Resubmit(i);  // short read: ask for the remainder
  }
  // REQUIRES: sq_mu_ held.
  void Resubmit(int i) {
    Status st = PrepLocked(i);
    if (st.ok()) st = SubmitLocked();
    if (!st.ok()) f_->CompleteSlot(i, std::move(st));
  }

  Fetcher* f_;
  std::mutex sq_mu_;  // guards the submission side of ring_
  io_uring ring_{};
  bool ring_ok_ = false;
  std::thread reaper_;
};

Result<std::unique_ptr<Fetcher>> Fetcher::Open(std::vector<std::string> paths, FetcherOptions o) {
  if (o.queue_depth < 1) return Status::InvalidArgument("FetcherOptions.queue_depth must be >= 1");
  if (o.max_bytes_in_flight < 1) return Status::InvalidArgument("FetcherOptions.max_bytes_in_flight must be >= 1");
  std::vector<File> files;
  files.reserve(paths.size());
  auto close_all = [&files] {
    for (File& f : files) ::close(f.fd);
  };
  for (std::string& p : paths) {
    int flags = O_RDONLY | O_CLOEXEC | (o.direct ? O_DIRECT : 0);
    int fd = ::open(p.c_str(), flags);
    if (fd < 0) {
      int err = errno;
      close_all();
      if (o.direct && err == EINVAL) return Status::Unsupported("O_DIRECT refused for " + p + " (file system without direct I/O?)");
      if (err == ENOENT) return Status::NotFound("cannot open " + p + ": " + std::strerror(err));
      return Status::IOError("cannot open " + p + ": " + std::strerror(err));
    }
    files.push_back(File{std::move(p), fd});
  }
  std::unique_ptr<Fetcher> f(new Fetcher(std::move(files), o));
  using B = FetcherOptions::Backend;
  if (o.backend == B::kIoUring || o.backend == B::kAuto) {
    auto uring = UringBackend::Create(f.get(), o.queue_depth);
    if (uring.ok()) {
      f->backend_ = std::move(uring).value();
    } else if (o.backend == B::kIoUring) {
      return uring.status();  // ~Fetcher closes the files
    }
  }
  if (f->backend_ == nullptr) f->backend_ = std::make_unique<PreadBackend>(f.get(), o.pread_threads);
  return f;
}

Fetcher::Fetcher(std::vector<File> files, FetcherOptions o)
    : files_(std::move(files)),
      options_(o),
      pool_(static_cast<size_t>(o.queue_depth) * 2),
      slots_(static_cast<size_t>(o.queue_depth)) {
  free_slots_.reserve(slots_.size());
  for (int i = o.queue_depth - 1; i >= 0; --i) free_slots_.push_back(i);
  done_.resize(static_cast<size_t>(o.queue_depth) * 2);
}

Fetcher::~Fetcher() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [this] { return in_flight_ == 0; });
  }
  backend_.reset();
  for (File& f : files_) ::close(f.fd);
}

Status Fetcher::Submit(FetchRequest r) {
  if (r.file >= files_.size()) {
    return Status::InvalidArgument("fetch request names file " + std::to_string(r.file) + " but the fetcher has " +
                                   std::to_string(files_.size()));
  }
  if (r.tail != nullptr && (options_.direct || r.head_length > r.length)) {
    return Status::InvalidArgument(options_.direct ? "split fetch requests cannot be used with O_DIRECT"
                                                   : "split fetch request: head_length exceeds length");
  }
  const int64_t charge = r.tail != nullptr ? r.head_length : r.length;
  int i;
  {
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [&] {
      return !free_slots_.empty() &&
             (bytes_charged_ == 0 || bytes_charged_ + charge <= options_.max_bytes_in_flight);
    });
    i = free_slots_.back();
    free_slots_.pop_back();
    ++in_flight_;
    ++outstanding_;
    bytes_charged_ += charge;
  }
  Slot& s = slots_[i];
  s.request = r;
  s.done = 0;
  if (options_.direct) {
    s.read_offset = r.offset / kDirectAlignment * kDirectAlignment;
    uint64_t end = (r.offset + r.length + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
    s.read_length = end - s.read_offset;
  } else {
    s.read_offset = r.offset;
    s.read_length = r.length;
  }
  s.head = r.offset - s.read_offset;
  s.charge = charge;
  s.resubmits = 0;
  s.buffer = pool_.Take();  // cleared: Resize copies nothing when it has to grow
  s.buffer.Resize(s.buffered());
  if (s.needed() == 0) {
    CompleteSlot(i, Status::OK());
  } else {
    backend_->Start(i);
  }
  return Status::OK();
}

Status Fetcher::ReadSlotWithPread(Slot& s) {
  const int fd = files_[s.request.file].fd;
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
  return Status::OK();
}

int Fetcher::PrepareIovecs(Slot& s) const {
  const uint64_t buffered = s.buffered();
  int n = 0;
  if (s.done < buffered) s.iov[n++] = iovec{s.buffer.data() + s.done, static_cast<size_t>(buffered - s.done)};
  if (s.request.tail != nullptr && s.done < s.read_length) {
    const uint64_t from = std::max(s.done, buffered) - buffered;  // within the tail
    s.iov[n++] = iovec{s.request.tail + from, static_cast<size_t>(s.read_length - buffered - from)};
  }
  return n;
}

bool Fetcher::ShortDirectReadHitEnd(const Slot& s) const {
  // With O_DIRECT a read returns whole blocks except at the end of the file, and asking again from an
  // unaligned offset would fail with EINVAL instead of returning 0.
  return options_.direct && s.done < s.needed() && s.done % kDirectAlignment != 0;
}

Status Fetcher::EndOfFileError(const Slot& s) const {
  return Status::IOError("read past end of file " + files_[s.request.file].path + ": offset " +
                         std::to_string(s.request.offset) + " length " + std::to_string(s.request.length) +
                         ", file ends at " + std::to_string(s.read_offset + s.done));
}

Status Fetcher::ReadError(const Slot& s, int err) const {
  return Status::IOError("read of " + files_[s.request.file].path + " at offset " + std::to_string(s.request.offset) +
                             " length " + std::to_string(s.request.length) + " failed: " + std::strerror(err),
                         /*retryable=*/err == EINTR || err == EAGAIN);
}

void Fetcher::CompleteSlot(int i, Status status) {
  Slot& s = slots_[i];
  FetchResult result;
  result.tag = s.request.tag;
  const bool ok = status.ok();
  if (ok) {
    if (s.head > 0) std::memmove(s.buffer.data(), s.buffer.data() + s.head, s.request.length);
    s.buffer.Resize(s.request.tail != nullptr ? s.request.head_length : s.request.length);
    result.data = std::move(s.buffer);
  } else {
    pool_.Give(std::move(s.buffer));
  }
  s.buffer = AlignedBuffer();
  result.status = std::move(status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_count_ == done_.size()) {  // grow the circular queue, keeping order
      std::vector<FetchResult> bigger(done_.size() * 2);
      for (size_t k = 0; k < done_count_; ++k) bigger[k] = std::move(done_[(done_head_ + k) % done_.size()]);
      done_ = std::move(bigger);
      done_head_ = 0;
    }
    done_[(done_head_ + done_count_) % done_.size()] = std::move(result);
    ++done_count_;
    free_slots_.push_back(i);
    --in_flight_;
    if (!ok) bytes_charged_ -= s.charge;
    // Notified under the lock: once in_flight_ can read 0 the destructor may run, so nothing here may
    // touch the Fetcher after the unlock.
    space_cv_.notify_all();
    done_cv_.notify_one();
  }
}

std::optional<FetchResult> Fetcher::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (outstanding_ == 0) return std::nullopt;
  done_cv_.wait(lock, [this] { return done_count_ > 0; });
  FetchResult r = std::move(done_[done_head_]);
  done_head_ = (done_head_ + 1) % done_.size();
  --done_count_;
  --outstanding_;
  return r;
}

void Fetcher::Release(AlignedBuffer buffer) {
  const int64_t size = static_cast<int64_t>(buffer.size());
  pool_.Give(std::move(buffer));
  if (size == 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_charged_ = std::max<int64_t>(0, bytes_charged_ - size);
  }
  space_cv_.notify_all();
}

const char* Fetcher::backend_name() const { return backend_->name(); }

int64_t Fetcher::bytes_in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_charged_;
}

}  // namespace stoke
