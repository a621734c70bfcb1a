#include "stoke/bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/random.h"
#include "format/npy.h"
#include "io/object_storage.h"
#include "io/uri.h"
#include "io/storage.h"

namespace stoke {
namespace {

// O_DIRECT needs the buffer address, the file offset and the length aligned to the logical block
// size; 4096 covers every common device and is AlignedBuffer's default alignment (as in the fetcher).
constexpr uint64_t kDirectAlignment = 4096;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// Which samples make up batch b: batches never span epochs, and an epoch's last batch may be short.
struct BatchPlan {
  int64_t files = 0;
  int64_t batch_size = 0;
  int64_t batches_per_epoch = 0;
  int64_t total_batches = 0;

  int64_t Epoch(int64_t b) const { return b / batches_per_epoch; }
  int64_t Start(int64_t b) const { return (b % batches_per_epoch) * batch_size; }
  int64_t Count(int64_t b) const { return std::min(batch_size, files - Start(b)); }
};

// Epoch `epoch`'s order: the sorted file indices, Fisher-Yates shuffled by a generator seeded by
// (seed, epoch), so the order does not depend on the thread count.
void FillEpochOrder(uint64_t seed, int64_t epoch, std::vector<int64_t>* order) {
  std::iota(order->begin(), order->end(), int64_t{0});
  Rng rng(SplitMix64(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch)));
  for (size_t i = order->size(); i > 1; --i) std::swap((*order)[i - 1], (*order)[rng.Below(i)]);
}

// Reads a whole file the way a naive loader does: open, fstat, read to the end, close. `buf` keeps
// its allocation from call to call; its size becomes the file's. Returns the file size.
//
// The baseline calls the system directly rather than through Storage: what it measures is exactly
// these calls per sample, and Storage has no O_DIRECT. With O_DIRECT the read asks for the size
// rounded up to kDirectAlignment; the file system returns the bytes up to the end of the file.
Result<size_t> ReadWholeFile(const std::string& path, bool direct, AlignedBuffer* buf) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) {
    int err = errno;
    if (direct && err == EINVAL) return Status::Unsupported("O_DIRECT refused for " + path + " (file system without direct I/O?)");
    if (err == ENOENT) return Status::NotFound("cannot open " + path + ": " + std::strerror(err));
    return Status::IOError("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::IOError("cannot stat " + path + ": " + std::strerror(err));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t capacity = direct ? RoundUp(size, kDirectAlignment) : size;
  buf->Resize(capacity);
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, buf->data() + got, capacity - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return Status::IOError(fmt::format("cannot read {} at offset {}: {}", path, got, std::strerror(err)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
    // A short O_DIRECT read ends at the end of the file; asking again from an unaligned offset
    // would fail with EINVAL rather than return 0.
    if (direct && got % kDirectAlignment != 0) break;
  }
  ::close(fd);
  if (got != size) {
    return Status::IOError(fmt::format("{}: read {} bytes, but the file has {} (changed while read?)", path, got, size));
  }
  buf->Resize(size);
  return size;
}

// The payload of a .npy image: Corruption naming the file when the header is malformed or promises
// more data than the file holds.
Result<ByteView> NpyPayload(ByteView file, const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(NpyHeader header, ParseNpyHeader(file, path));
  if (header.data_offset + header.data_size > file.size()) {
    return Status::Corruption(fmt::format("{}: {} bytes, but the header says {} bytes of data at offset {}", path,
                                          file.size(), header.data_size, header.data_offset));
  }
  return file.subspan(header.data_offset, header.data_size);
}

// One sample: the whole file read, its payload checked against the size every sample must have.
struct SampleRead {
  size_t file_bytes = 0;
  ByteView payload;  // points into the reader's buffer
};

// The .npy files of the benchmark: local paths, or objects of an object store (the published case:
// one blob per sample), each read whole with one GET as a naive loader's SDK call does (the sizes
// come from the listing, so no HEAD precedes it).
struct FileSet {
  std::vector<std::string> paths;  // local paths or object keys
  ObjectStorage* objects = nullptr;
  std::vector<uint64_t> sizes;     // objects: from the listing
};

Result<size_t> ReadWholeFile(const FileSet& files, size_t i, bool direct, AlignedBuffer* buf) {
  if (files.objects == nullptr) return ReadWholeFile(files.paths[i], direct, buf);
  buf->Resize(files.sizes[i]);
  Status st = files.objects->ReadRanges(files.paths[i], {ByteRangeRead{0, buf->mutable_view()}})[0];
  if (!st.ok()) return st;
  return files.sizes[i];
}

Result<SampleRead> ReadSample(const FileSet& files, size_t i, bool direct, size_t payload_bytes, AlignedBuffer* buf) {
  const std::string& path = files.paths[i];
  STOKE_ASSIGN_OR_RETURN(size_t size, ReadWholeFile(files, i, direct, buf));
  STOKE_ASSIGN_OR_RETURN(ByteView payload, NpyPayload(buf->view(), path));
  if (payload.size() != payload_bytes) {
    return Status::InvalidArgument(fmt::format("{}: payload of {} bytes, the first file's has {}; batches stack "
                                               "samples of one size",
                                               path, payload.size(), payload_bytes));
  }
  return SampleRead{size, payload};
}

// The consumer's side of a batch: the emulated compute (measured, as sleeps overshoot) and the
// caller's hook. Returns the seconds spent computing.
double ConsumeBatch(const PerFileBenchOptions& o, const PerFileBatch& batch) {
  double seconds = 0;
  if (o.compute_ms > 0) {
    Stopwatch compute;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.compute_ms));
    seconds = compute.Seconds();
  }
  if (o.on_batch) o.on_batch(batch);
  return seconds;
}

// threads == 1: one loop reads a batch (all of it is waiting), then computes on it.
Status RunLoop(const PerFileBenchOptions& o, const FileSet& paths, const BatchPlan& plan,
               size_t payload_bytes, PerFileBenchReport* report) {
  AlignedBuffer file_buf;
  AlignedBuffer batch_buf(static_cast<size_t>(plan.batch_size) * payload_bytes);
  std::vector<int64_t> batch_files(static_cast<size_t>(plan.batch_size));
  std::vector<int64_t> order(static_cast<size_t>(plan.files));
  int64_t order_epoch = -1;
  int64_t wait_ns = 0;
  Stopwatch wall;
  for (int64_t b = 0; b < plan.total_batches; ++b) {
    const int64_t epoch = plan.Epoch(b), start = plan.Start(b), count = plan.Count(b);
    if (epoch != order_epoch) {
      FillEpochOrder(o.seed, epoch, &order);
      order_epoch = epoch;
    }
    const int64_t t0 = NowNanos();
    for (int64_t j = 0; j < count; ++j) {
      const int64_t file = order[static_cast<size_t>(start + j)];
      STOKE_ASSIGN_OR_RETURN(SampleRead s, ReadSample(paths, static_cast<size_t>(file), o.cold, payload_bytes, &file_buf));
      std::memcpy(batch_buf.data() + static_cast<size_t>(j) * payload_bytes, s.payload.data(), payload_bytes);
      batch_files[static_cast<size_t>(j)] = file;
      report->file_bytes += static_cast<int64_t>(s.file_bytes);
    }
    wait_ns += NowNanos() - t0;
    PerFileBatch batch{b, epoch, std::span<const int64_t>(batch_files.data(), static_cast<size_t>(count)),
                       ByteView(batch_buf.data(), static_cast<size_t>(count) * payload_bytes)};
    report->compute_seconds += ConsumeBatch(o, batch);
    report->samples += count;
    report->batches += 1;
  }
  report->wall_seconds = wall.Seconds();
  report->wait_seconds = wait_ns * 1e-9;
  return Status::OK();
}

// threads > 1: readers claim samples in order (batch by batch), read them without a lock, and copy
// each payload into the slot of its batch once the consumer has handed that slot back. Batch b fills
// slot b % slots.size(); the consumer takes batches in order, so a slow sample delays its batch only.
class ThreadedRun {
 public:
  ThreadedRun(const PerFileBenchOptions& o, const FileSet& paths, const BatchPlan& plan,
              size_t payload_bytes)
      : o_(o), paths_(paths), plan_(plan), payload_bytes_(payload_bytes), order_(static_cast<size_t>(plan.files)) {
    // Two slots per reader: each reader can be a batch ahead while the consumer holds one.
    slots_.resize(static_cast<size_t>(2 * o.threads));
    turns_.resize(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].data = AlignedBuffer(static_cast<size_t>(plan.batch_size) * payload_bytes);
      slots_[i].files.resize(static_cast<size_t>(plan.batch_size));
      turns_[i].batch = static_cast<int64_t>(i);
    }
  }

  Status Run(PerFileBenchReport* report) EXCLUDES(mu_) {
    Stopwatch wall;
    std::vector<std::thread> readers;
    for (int t = 0; t < o_.threads; ++t) readers.emplace_back([this] { ReaderLoop(); });
    Status status = ConsumerLoop(report);
    {
      MutexLock lock(&mu_);
      stop_ = true;
    }
    slot_freed_.SignalAll();
    for (auto& r : readers) r.join();
    report->wall_seconds = wall.Seconds();
    MutexLock lock(&mu_);
    report->file_bytes = file_bytes_;
    return status;
  }

 private:
  // Slot i's buffers; turns_[i] says which batch may write them.
  struct Slot {
    AlignedBuffer data;          // batch_size payloads; written by readers of the slot's batch (disjoint parts)
    std::vector<int64_t> files;  // per sample, the file index; as `data`
  };
  struct SlotTurn {
    int64_t batch = 0;   // the batch the slot is for
    int64_t filled = 0;  // samples of `batch` copied in
  };

  void Fail(Status s) EXCLUDES(mu_) {
    {
      MutexLock lock(&mu_);
      if (error_.ok()) error_ = std::move(s);
      stop_ = true;
    }
    slot_freed_.SignalAll();
    batch_ready_.SignalAll();
  }

  void ReaderLoop() EXCLUDES(mu_) {
    AlignedBuffer buf;
    for (;;) {
      int64_t b = 0, j = 0, file = 0;
      {
        MutexLock lock(&mu_);
        if (stop_ || next_batch_ >= plan_.total_batches) return;
        b = next_batch_;
        j = next_in_batch_;
        if (plan_.Epoch(b) != order_epoch_) {
          order_epoch_ = plan_.Epoch(b);
          FillEpochOrder(o_.seed, order_epoch_, &order_);
        }
        file = order_[static_cast<size_t>(plan_.Start(b) + j)];
        if (++next_in_batch_ == plan_.Count(b)) {
          ++next_batch_;
          next_in_batch_ = 0;
        }
      }
      auto s = ReadSample(paths_, static_cast<size_t>(file), o_.cold, payload_bytes_, &buf);
      if (!s.ok()) {
        Fail(s.status());
        return;
      }
      const size_t k = static_cast<size_t>(b) % slots_.size();
      Slot& slot = slots_[k];
      {
        MutexLock lock(&mu_);
        while (!stop_ && turns_[k].batch != b) slot_freed_.Wait(&mu_);
        if (stop_) return;
      }
      // The slot is this batch's until the consumer has taken the whole batch; readers of the batch
      // write disjoint parts, and the mutex below orders the copies before the consumer reads.
      std::memcpy(slot.data.data() + static_cast<size_t>(j) * payload_bytes_, s->payload.data(), payload_bytes_);
      slot.files[static_cast<size_t>(j)] = file;
      bool complete = false;
      {
        MutexLock lock(&mu_);
        file_bytes_ += static_cast<int64_t>(s->file_bytes);
        complete = ++turns_[k].filled == plan_.Count(b);
      }
      if (complete) batch_ready_.Signal();
    }
  }

  Status ConsumerLoop(PerFileBenchReport* report) EXCLUDES(mu_) {
    int64_t wait_ns = 0;
    for (int64_t b = 0; b < plan_.total_batches; ++b) {
      const size_t k = static_cast<size_t>(b) % slots_.size();
      Slot& slot = slots_[k];
      const int64_t count = plan_.Count(b);
      const int64_t t0 = NowNanos();
      {
        MutexLock lock(&mu_);
        while (error_.ok() && !(turns_[k].batch == b && turns_[k].filled == count)) batch_ready_.Wait(&mu_);
        if (!error_.ok()) return error_;
      }
      wait_ns += NowNanos() - t0;
      PerFileBatch batch{b, plan_.Epoch(b), std::span<const int64_t>(slot.files.data(), static_cast<size_t>(count)),
                         ByteView(slot.data.data(), static_cast<size_t>(count) * payload_bytes_)};
      report->compute_seconds += ConsumeBatch(o_, batch);
      report->samples += count;
      report->batches += 1;
      {
        MutexLock lock(&mu_);
        turns_[k].batch = b + static_cast<int64_t>(slots_.size());
        turns_[k].filled = 0;
      }
      slot_freed_.SignalAll();
    }
    report->wait_seconds = wait_ns * 1e-9;
    return Status::OK();
  }

  const PerFileBenchOptions& o_;
  const FileSet& paths_;
  const BatchPlan plan_;
  const size_t payload_bytes_;
  std::vector<Slot> slots_;

  Mutex mu_;
  CondVar slot_freed_;   // a slot was handed to a later batch, or stop_
  CondVar batch_ready_;  // a batch is complete, or error_
  std::vector<SlotTurn> turns_ GUARDED_BY(mu_);  // per slot
  int64_t next_batch_ GUARDED_BY(mu_) = 0;       // the next sample to claim
  int64_t next_in_batch_ GUARDED_BY(mu_) = 0;
  int64_t order_epoch_ GUARDED_BY(mu_) = -1;     // the epoch order_ holds
  std::vector<int64_t> order_ GUARDED_BY(mu_);
  int64_t file_bytes_ GUARDED_BY(mu_) = 0;
  Status error_ GUARDED_BY(mu_);                 // the first reader error
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace

Result<PerFileBenchReport> RunPerFileBench(const PerFileBenchOptions& o) {
  if (o.dir.empty()) return Status::InvalidArgument("bench files: no directory given");
  if (o.batch_size < 1) return Status::InvalidArgument(fmt::format("bench files: batch size {} < 1", o.batch_size));
  if (o.epochs < 1) return Status::InvalidArgument(fmt::format("bench files: epochs {} < 1", o.epochs));
  if (o.batches < 0) return Status::InvalidArgument(fmt::format("bench files: batches {} < 0", o.batches));
  if (o.threads < 1) return Status::InvalidArgument(fmt::format("bench files: threads {} < 1", o.threads));
  if (!(o.compute_ms >= 0)) return Status::InvalidArgument(fmt::format("bench files: compute ms {} < 0", o.compute_ms));

  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.dir));
  FileSet paths;
  paths.objects = where.storage->objects();
  if (paths.objects != nullptr && o.cold) return Status::InvalidArgument("bench files: `cold` applies to local files only");
  auto is_npy = [](const std::string& n) { return n.size() > 4 && n.compare(n.size() - 4, 4, ".npy") == 0; };
  if (paths.objects == nullptr) {
    STOKE_ASSIGN_OR_RETURN(std::vector<std::string> names, LocalStorage().ListNames(where.path));
    for (const std::string& n : names) {
      if (is_npy(n)) paths.paths.push_back(JoinPath(where.path, n));
    }
  } else {
    STOKE_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, where.storage->List(where.path));
    for (const DirEntry& e : entries) {
      if (e.is_directory || !is_npy(e.name)) continue;
      paths.paths.push_back(JoinPath(where.path, e.name));
      paths.sizes.push_back(e.size);
    }
  }
  if (paths.paths.empty()) return Status::InvalidArgument("bench files: no .npy files in " + o.dir);

  // The first file fixes the payload size (batches stack equal samples, as torch's default collate
  // does). Read outside the timing, with the same flags, so a cold run stays cold.
  size_t payload_bytes = 0;
  {
    AlignedBuffer probe;
    STOKE_RETURN_IF_ERROR(ReadWholeFile(paths, 0, o.cold, &probe));
    STOKE_ASSIGN_OR_RETURN(ByteView payload, NpyPayload(probe.view(), paths.paths[0]));
    payload_bytes = payload.size();
  }

  BatchPlan plan;
  plan.files = static_cast<int64_t>(paths.paths.size());
  plan.batch_size = o.batch_size;
  plan.batches_per_epoch = (plan.files + o.batch_size - 1) / o.batch_size;
  plan.total_batches = o.batches > 0 ? o.batches : o.epochs * plan.batches_per_epoch;

  PerFileBenchReport report;
  report.files = plan.files;
  report.payload_bytes = static_cast<int64_t>(payload_bytes);
  report.threads = o.threads;
  report.cold = o.cold;
  report.compute_ms = o.compute_ms;
  if (o.threads == 1) {
    STOKE_RETURN_IF_ERROR(RunLoop(o, paths, plan, payload_bytes, &report));
  } else {
    ThreadedRun run(o, paths, plan, payload_bytes);
    STOKE_RETURN_IF_ERROR(run.Run(&report));
  }
  return report;
}

std::string PerFileReportJson(const PerFileBenchReport& r) {
  return fmt::format(
      "{{\"tool\":\"files\",\"samples\":{},\"batches\":{},\"wall_s\":{:.6f},\"samples_per_s\":{:.1f},"
      "\"mb_per_s\":{:.1f},\"wait_share\":{:.4f},\"utilisation\":{:.4f},\"compute_ms\":{},\"threads\":{},"
      "\"cold\":{}}}",
      r.samples, r.batches, r.wall_seconds, r.samples_per_second(), r.mb_per_second(), r.wait_share(), r.utilisation(), r.compute_ms,
      r.threads, r.cold ? "true" : "false");
}

}  // namespace stoke
