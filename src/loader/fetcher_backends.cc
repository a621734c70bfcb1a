// The fetcher's backends (fetcher.h): a pool of pread threads, io_uring with a completion thread,
// the hybrid of io_uring and reading threads that kAuto picks, and object-store reads through the
// file's ReadAtAsync. Each starts the reads of the slots it is given and completes each exactly once.
#include <liburing.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <thread>
#include <utility>

#include "core/cpus.h"
#include "core/mutex.h"
#include "core/thread_pool.h"
#include "loader/fetcher_internal.h"

namespace stoke {
namespace {

// user_data of the NOP that tells the io_uring completion thread to stop.
constexpr uint64_t kStopUserData = ~uint64_t{0};
// Buffered reads at least this large go to the kernel's async workers (IOSQE_ASYNC), which copy cached
// pages in parallel; smaller ones are copied inline by io_uring_enter, on the producer thread, which
// costs less than waking a worker (docs/benchmarks.md, "Small samples: hand-offs per batch").
constexpr uint64_t kAsyncReadBytes = uint64_t{1} << 20;
// Resubmissions of one read after ECANCELED before its error is reported.
constexpr int kMaxResubmits = 16;
size_t ParallelReadThreads(const FetcherOptions& o) {
  if (o.parallel_read_threads > 0) return o.parallel_read_threads;
  const size_t cores = AvailableCpus();
  return std::clamp<size_t>(cores + 1, 1, static_cast<size_t>(std::max(o.queue_depth, 1)));
}

}  // namespace

class Fetcher::PreadBackend final : public Fetcher::Backend {
 public:
  PreadBackend(Fetcher* f, size_t threads) : f_(f), pool_(std::max<size_t>(threads, 1)) {}
  // The lambda captures two words, so std::function keeps it inline: no allocation per read.
  void Start(int i) override {
    pool_.Submit([f = f_, i] { f->CompleteSlot(i, f->ReadSlotWithPread(f->slots_[i])); });
  }
  const char* name() const override { return "pread"; }
  size_t threads() const override { return pool_.size(); }

 private:
  Fetcher* f_;
  ThreadPool pool_;  // its destructor runs the reads already queued, then joins
};

// Object-store reads: each read is one ReadAtAsync of the file (a ranged GET run by the HTTP client's
// event loop, or an answer from the read cache's threads), so queue_depth requests are in flight
// without a thread each. Completions arrive on those threads. A file whose storage reads only
// synchronously (the default ReadAtAsync) is read on the producer thread.
class Fetcher::StorageBackend final : public Fetcher::Backend {
 public:
  explicit StorageBackend(Fetcher* f) : f_(f) {}
  void Start(int i) override {
    Slot& s = f_->slots_[i];
    Result<const RandomAccessFile*> file = f_->OpenRemoteFile(s.request.file);
    if (!file.ok()) return f_->CompleteSlot(i, file.status());
    (*file)->ReadAtAsync(s.read_offset, MutableByteView(s.buffer.data(), s.read_length), [f = f_, i](Status st) {
      if (st.ok()) f->slots_[i].done = f->slots_[i].read_length;
      f->CompleteSlot(i, std::move(st));
    });
  }
  const char* name() const override { return "storage"; }

 private:
  Fetcher* f_;
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
        MutexLock lock(&sq_mu_);
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
  void Start(int i) override EXCLUDES(sq_mu_) {
    MutexLock lock(&sq_mu_);
    Status st = PrepLocked(i);
    if (st.ok()) st = SubmitLocked();
    if (!st.ok()) f_->CompleteSlot(i, std::move(st));
  }
  void Start(const std::vector<int>& slots) override EXCLUDES(sq_mu_) {
    MutexLock lock(&sq_mu_);
    size_t prepared = 0;
    for (; prepared < slots.size(); ++prepared) {
      if (Status st = PrepLocked(slots[prepared]); !st.ok()) {
        for (size_t k = prepared; k < slots.size(); ++k) f_->CompleteSlot(slots[k], st);
        break;
      }
    }
    if (prepared == 0) return;
    if (Status st = SubmitLocked(); !st.ok()) {
      // The ring is broken (only transient refusals are retried); the reads the kernel did not take
      // are the last ones prepared.
      const size_t untaken = std::min<size_t>(io_uring_sq_ready(&ring_), prepared);
      for (size_t k = prepared - untaken; k < prepared; ++k) f_->CompleteSlot(slots[k], st);
    }
  }
  const char* name() const override { return "io_uring"; }

 private:
  explicit UringBackend(Fetcher* f) : f_(f) {}

  Status PrepLocked(int i) REQUIRES(sq_mu_) {
    Slot& s = f_->slots_[i];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    // Cannot happen: every prepared SQE is submitted at once and reads in flight <= queue_depth.
    if (sqe == nullptr) return Status::Internal("io_uring submission queue full");
    const int n = f_->PrepareIovecs(s);
    io_uring_prep_readv(sqe, s.fd, s.iov, static_cast<unsigned>(n), s.read_offset + s.done);
    if (!f_->options_.direct && s.read_length - s.done >= kAsyncReadBytes) io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
    io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(i));
    return Status::OK();
  }
  // Once liburing has published an SQE the kernel will take it, so only transient refusals are retried
  // here and other failures are reported.
  Status SubmitLocked() REQUIRES(sq_mu_) {
    for (;;) {
      int rc = io_uring_submit(&ring_);
      if (rc >= 0) {
        if (io_uring_sq_ready(&ring_) == 0) return Status::OK();
        continue;  // the kernel stopped part-way (e.g. short of memory for requests): the rest again
      }
      if (rc == -EINTR || rc == -EAGAIN || rc == -EBUSY) {
        std::this_thread::yield();
        continue;
      }
      return Status::IOError(std::string("io_uring_submit: ") + std::strerror(-rc));
    }
  }

  // Drains every completion the kernel has posted per wake-up and hands them to the Fetcher in one
  // go (one lock and one signal for many reads: with small cached reads the hand-offs, not the
  // copies, were the cost).
  void ReapLoop() EXCLUDES(sq_mu_) {
    std::vector<Completion> done;
    done.reserve(static_cast<size_t>(f_->options_.queue_depth) + 1);  // never grows: one per slot at most
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR || rc == -EAGAIN) continue;
      if (rc < 0) {  // the ring is broken; nothing sensible is left to do but stop
        return;
      }
      bool stop = false;
      {
        // The kernel orders the producer's writes to a slot before its CQE, but through ring memory
        // that ThreadSanitizer cannot see; taking sq_mu_ (which the producer held while submitting)
        // states the order in a way tools check, for one lock per wake-up.
        MutexLock lock(&sq_mu_);
        unsigned head = 0, seen = 0;
        io_uring_for_each_cqe(&ring_, head, cqe) {
          ++seen;
          const uint64_t data = io_uring_cqe_get_data64(cqe);
          if (data == kStopUserData) {
            stop = true;
            continue;
          }
          OnCompletion(static_cast<int>(data), cqe->res, &done);
        }
        io_uring_cq_advance(&ring_, seen);
      }
      f_->CompleteSlots(&done);
      if (stop) return;
    }
  }

  void OnCompletion(int i, int res, std::vector<Completion>* done) REQUIRES(sq_mu_) {
    Slot& s = f_->slots_[i];
    auto complete = [&](Status st) { done->push_back(Completion{i, std::move(st)}); };
    // ECANCELED: the thread that submitted the read exited while the read waited for the kernel's
    // async workers (io_uring cancels a task's queued work when the task exits). This thread is
    // alive, so it submits the read again; the cap only guards against a kernel that keeps refusing.
    if (res == -EINTR || res == -EAGAIN || (res == -ECANCELED && ++s.resubmits <= kMaxResubmits)) {
      return Resubmit(i, done);
    }
    if (res < 0) return complete(f_->ReadError(s, -res));
    if (res == 0) {  // end of file
      return complete(s.done >= s.needed() ? Status::OK() : f_->EndOfFileError(s));
    }
    s.done += static_cast<uint64_t>(res);
    if (s.done >= s.needed()) return complete(Status::OK());
    if (f_->ShortDirectReadHitEnd(s)) return complete(f_->EndOfFileError(s));
    Resubmit(i, done);  // short read: ask for the remainder
  }
  void Resubmit(int i, std::vector<Completion>* done) REQUIRES(sq_mu_) {
    Status st = PrepLocked(i);
    if (st.ok()) st = SubmitLocked();
    if (!st.ok()) done->push_back(Completion{i, std::move(st)});
  }

  Fetcher* f_;
  // Serialises the submission side of ring_ (the producer's Start and the completion thread's
  // resubmissions); the completion side is the reaper's alone. Taken before Fetcher::mu_.
  Mutex sq_mu_;
  io_uring ring_{};
  bool ring_ok_ = false;
  std::thread reaper_;
};

// kAuto over a working ring: buffered reads of kParallelReadBytes up to kAsyncReadBytes go to reading
// threads, which copy what the page cache holds on every core and take a split read's tail CRC while
// it is in their cache; what is not cached goes on to the ring, whose workers wait for the disk with
// the whole queue depth in flight (a reading thread never waits for the disk). The other reads go to
// the ring as before: smaller ones copied inline, larger ones by the kernel's workers. Not used with
// O_DIRECT, where the ring keeps every read in flight at the device. The reading threads take reads
// from one queue and hand completions over in groups: with a task and a wake-up per read, 28-30 % of
// the loader's CPU samples at 115 KB went to the switches and wake-ups of its threads on a virtual
// machine (docs/benchmarks.md, "Fewer wake-ups per read").
class Fetcher::HybridBackend final : public Fetcher::Backend {
 public:
  HybridBackend(Fetcher* f, std::unique_ptr<Backend> uring, size_t threads)
      : f_(f),
        uring_(std::move(uring)),
        completions_at_once_(std::clamp<size_t>(f->slots_.size() / 2, 1, kMaxCompletionsAtOnce)),
        queue_(f->slots_.size()),
        pool_(std::max<size_t>(threads, 1)) {
    rest_.reserve(f->slots_.size());  // a Start splits at most queue_depth slots: no allocation later
    parallel_.reserve(f->slots_.size());
  }
  void Start(int i) override {
    if (Parallel(i)) {
      StartOnThreads(std::span(&i, 1));
    } else {
      uring_->Start(i);
    }
  }
  void Start(const std::vector<int>& slots) override {
    rest_.clear();
    parallel_.clear();
    for (int i : slots) (Parallel(i) ? parallel_ : rest_).push_back(i);
    if (!parallel_.empty()) StartOnThreads(parallel_);
    if (!rest_.empty()) uring_->Start(rest_);
  }
  const char* name() const override { return "io_uring+pread"; }
  size_t threads() const override { return pool_.size(); }

 private:
  // Completions a runner hands over at once: one lock, and one wake-up of the consumer at most, for
  // them all. Half the queue depth, up to kMaxCompletionsAtOnce: held completions hold their slots,
  // so the rest of the depth keeps the other runners and the ring busy. At depth 64, from the page
  // cache, each step from groups of 4 to 8, 16 and 32 gave 1.05-1.14x the samples/s at 115 KB and
  // 360 KB; 64 was no better than 32 (docs/benchmarks.md, "Fewer wake-ups per read").
  static constexpr size_t kMaxCompletionsAtOnce = 32;

  bool Parallel(int i) const {
    const Slot& s = f_->slots_[i];
    return s.read_length >= kParallelReadBytes && s.read_length < kAsyncReadBytes;
  }
  // Queues the reads for the reading threads, and starts runners (up to one per thread and one per
  // read queued) to take them: a few wake-ups per batch rather than one task and one wake-up per read.
  void StartOnThreads(std::span<const int> slots) EXCLUDES(mu_) {
    size_t more = 0;
    {
      MutexLock l(&mu_);
      for (int i : slots) {
        // A slot is queued at most once at a time and there are as many entries as slots: never full.
        queue_[(head_ + count_) % queue_.size()] = i;
        ++count_;
      }
      const size_t wanted = std::min(pool_.size(), count_);
      if (runners_ < wanted) {
        more = wanted - runners_;
        runners_ = wanted;
      }
    }
    // The lambda captures one word, so std::function keeps it inline: no allocation per runner.
    for (size_t k = 0; k < more; ++k) pool_.Submit([this] { Run(); });
  }
  // A reading thread's runner: takes queued reads until none is left. What the page cache holds is
  // copied here; the uncached rest of a read goes on to the ring, whose workers wait for the disk.
  void Run() EXCLUDES(mu_) {
    std::array<Completion, kMaxCompletionsAtOnce> done;
    size_t n = 0;
    for (;;) {
      int i = -1;
      {
        MutexLock l(&mu_);
        if (count_ > 0) {
          i = queue_[head_];
          head_ = (head_ + 1) % queue_.size();
          --count_;
        } else {
          --runners_;
        }
      }
      // Hand over what is done before waiting for nothing, and every completions_at_once_ reads.
      if (n > 0 && (i < 0 || n == completions_at_once_)) {
        f_->CompleteSlots(std::span(done.data(), n));
        n = 0;
      }
      if (i < 0) return;
      if (f_->ReadCachedSlot(f_->slots_[i], &done[n].status)) {
        done[n++].slot = i;
      } else {
        uring_->Start(i);  // the uncached rest, from slot.done on (the ring serialises its submitters)
      }
    }
  }

  Fetcher* f_;
  std::unique_ptr<Backend> uring_;
  const size_t completions_at_once_;
  std::vector<int> rest_;      // the ring's share of a Start; producer thread only
  std::vector<int> parallel_;  // the reading threads' share of a Start; producer thread only
  Mutex mu_;
  std::vector<int> queue_ GUARDED_BY(mu_);  // reads for the runners: a circular queue, one entry per slot
  size_t head_ GUARDED_BY(mu_) = 0;
  size_t count_ GUARDED_BY(mu_) = 0;
  size_t runners_ GUARDED_BY(mu_) = 0;  // runners submitted to pool_ and not yet done
  ThreadPool pool_;  // declared last: its destructor runs the runners queued (they may use uring_), then joins
};

Result<std::unique_ptr<Fetcher::Backend>> Fetcher::CreateBackend(Fetcher* f, const FetcherOptions& o, bool remote) {
  if (remote) return std::unique_ptr<Backend>(std::make_unique<StorageBackend>(f));
  std::unique_ptr<Backend> backend;
  using B = FetcherOptions::Backend;
  if (o.backend == B::kIoUring || o.backend == B::kAuto) {
    auto uring = UringBackend::Create(f, o.queue_depth);
    if (uring.ok()) {
      backend = std::move(uring).value();
      if (o.backend == B::kAuto && !o.direct) {
        backend = std::make_unique<HybridBackend>(f, std::move(backend), ParallelReadThreads(o));
      }
    } else if (o.backend == B::kIoUring) {
      return uring.status();
    }
  }
  if (backend == nullptr) backend = std::make_unique<PreadBackend>(f, o.pread_threads);
  return backend;
}

}  // namespace stoke
