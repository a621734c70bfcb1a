#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstring>
#include <set>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <span>

#include "core/huge_pages.h"
#include "core/log.h"
#include "core/random.h"
#include "io/storage.h"

namespace stoke {
namespace {

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  std::string m = fmt::format("{} '{}': {}", what, path, std::strerror(err));
  if (err == ENOENT) return Status::NotFound(std::move(m));
  if (err == EEXIST) return Status::AlreadyExists(std::move(m));
  bool retryable = err == EINTR || err == EAGAIN || err == EBUSY;
  return Status::IOError(std::move(m), retryable);
}

// "<path>.tmp-<16 hex digits>", unique per process and call.
std::string TemporaryNameFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return fmt::format("{}.tmp-{:016x}", path,
                     SplitMix64((static_cast<uint64_t>(::getpid()) << 32) ^ counter.fetch_add(1) ^
                                static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())));
}

class LocalRandomAccessFile final : public RandomAccessFile {
 public:
  LocalRandomAccessFile(std::string path, int fd, uint64_t size) : path_(std::move(path)), fd_(fd), size_(size) {}
  ~LocalRandomAccessFile() override { ::close(fd_); }

  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    if (offset > size_ || dst.size() > size_ - offset) {
      return Status::IOError(fmt::format("read of {} bytes at offset {} is past the end of '{}' ({} bytes)",
                                         dst.size(), offset, path_, size_));
    }
    size_t done = 0;
    while (done < dst.size()) {
      ssize_t n = ::pread(fd_, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(fmt::format("pread at offset {}", offset + done), path_, errno);
      }
      if (n == 0) {
        return Status::IOError(fmt::format("unexpected end of '{}' at offset {}", path_, offset + done));
      }
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

// Writes a large file with O_DIRECT where the file system allows it: appended bytes are gathered in
// an aligned staging buffer and written a whole buffer at a time, straight from it to the disk. A
// buffered write() copies every byte into the page cache (allocating its pages), which measured as
// half of the CPU time of `stoke ingest` on 2 cores; one memcpy into a reused buffer costs a
// fraction of that. O_DIRECT is turned on (fcntl) only when the first full buffer (4 MiB) is
// written: a smaller file goes out in one buffered write at Sync or Close, as a direct write of its
// first block would be one synchronous disk write per file (measured: most of the system time of
// ingesting 20,000 one-sample files). The tail that does not fill a 4 KiB block is written without
// O_DIRECT (the flag is cleared again) at Sync or Close, so the file has exactly the bytes appended.
// Where O_DIRECT is refused (tmpfs), writes are buffered and writeback is started every
// kWritebackBytes instead (RocksDB's bytes_per_sync), so that encoding and the disk's writing
// overlap.
class LocalWritableFile final : public WritableFile {
 public:
  LocalWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    // The staging buffer grows with the file up to kStagingBytes: a file of one small row group
    // (one sample per file) never maps and faults in 4 MiB.
    staging_.Reserve(kInitialStagingBytes);
  }
  ~LocalWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(ByteView data) override {
    if (fd_ < 0) return Status::Internal(fmt::format("append to closed file '{}'", path_));
    if (!staging_mode_) {
      STOKE_RETURN_IF_ERROR(WriteAll(data));
      if (bytes_written_ - writeback_started_ >= kWritebackBytes) {
        // Only a hint: an error here shows up again, and is reported, at Sync.
        (void)::sync_file_range(fd_, static_cast<off_t>(writeback_started_),
                                static_cast<off_t>(bytes_written_ - writeback_started_), SYNC_FILE_RANGE_WRITE);
        writeback_started_ = bytes_written_;
      }
      return Status::OK();
    }
    while (!data.empty()) {
      const size_t take = std::min(data.size(), kStagingBytes - staging_.size());
      if (huge_pages_ == nullptr && staging_.size() + take > kHugeStagingFrom) MoveStagingToHugePages();
      staging_.Append(data.data(), take);
      data = data.subspan(take);
      if (staging_.size() == kStagingBytes) STOKE_RETURN_IF_ERROR(FlushStaging(/*all=*/false));
      if (!staging_mode_) return Append(data);  // O_DIRECT refused: the rest goes out buffered
    }
    return Status::OK();
  }
  Status Sync() override {
    if (fd_ < 0) return Status::OK();
    if (staging_mode_) STOKE_RETURN_IF_ERROR(FlushStaging(/*all=*/true));
    if (::fdatasync(fd_) != 0) return ErrnoStatus("fdatasync", path_, errno);
    return Status::OK();
  }
  Status Close() override {
    if (fd_ < 0) return Status::OK();
    Status flushed = staging_mode_ ? FlushStaging(/*all=*/true) : Status::OK();
    int rc = ::close(fd_);
    fd_ = -1;
    STOKE_RETURN_IF_ERROR(flushed);
    if (rc != 0) return ErrnoStatus("close", path_, errno);
    return Status::OK();
  }
  uint64_t bytes_written() const override { return bytes_written_ + staging_.size(); }
  const std::string& path() const override { return path_; }

 private:
  static constexpr uint64_t kWritebackBytes = 8 << 20;  // 8 MiB: large for sequential writes, small next to the page cache
  static constexpr size_t kStagingBytes = 4 << 20;      // 4 MiB: a multiple of every block size
  static constexpr size_t kInitialStagingBytes = 64 << 10;  // doubled as appends need, up to kStagingBytes
  static constexpr size_t kBlock = 4096;                // O_DIRECT's alignment of offsets and lengths
  // Staging past this moves into huge pages (a file this large is likely to reach kStagingBytes and
  // be written with O_DIRECT).
  static constexpr size_t kHugeStagingFrom = size_t{2} << 20;

  // A direct write of 4 MiB from ordinary pages is about a thousand scatter-gather entries: a virtio
  // disk without indirect descriptors splits it into requests that each fill its ring, one after the
  // other. From huge pages it is one request of a few entries (src/core/huge_pages.h; fio's 4 MiB
  // direct writes here: 0.66-0.74 GB/s from ordinary pages, 1.6-1.8 GB/s from huge pages). Where
  // the memory cannot be mapped the staging stays on the heap.
  void MoveStagingToHugePages() {
    try {
      huge_pages_ = HugePageBlocks::Create();
      AlignedBuffer moved = huge_pages_->Take(kStagingBytes);
      moved.Resize(staging_.size());
      if (!staging_.empty()) std::memcpy(moved.data(), staging_.data(), staging_.size());
      staging_ = std::move(moved);
    } catch (const std::bad_alloc&) {
      // Not mapped: the heap staging goes on (huge_pages_ stays set, so this is not tried again).
    }
  }

  // Writes `data` at the end of the file (bytes_written_).
  Status WriteAll(ByteView data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(bytes_written_ + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        // A file system that took O_DIRECT at fcntl but refuses the write: write buffered.
        if (errno == EINVAL && direct_ && SetDirect(false).ok()) {
          direct_refused_ = true;
          continue;
        }
        return ErrnoStatus(fmt::format("write at offset {}", bytes_written_ + done), path_, errno);
      }
      done += static_cast<size_t>(n);
    }
    bytes_written_ += data.size();
    return Status::OK();
  }

  // Writes the staged whole blocks, with O_DIRECT where the file system takes it; with `all`, also
  // the partial block that remains, buffered, after which the file is in buffered mode for good (its
  // end is no longer block-aligned). Where O_DIRECT is refused, writes everything staged and leaves
  // staging mode.
  Status FlushStaging(bool all) {
    if (!all && !direct_ && (direct_refused_ || !SetDirect(true).ok())) all = true;  // no O_DIRECT here (tmpfs): buffered from now on
    const size_t whole = all && !direct_ ? 0 : staging_.size() / kBlock * kBlock;
    if (whole > 0) STOKE_RETURN_IF_ERROR(WriteAll(ByteView(staging_.data(), whole)));
    const size_t rest = staging_.size() - whole;
    if (rest > 0 && whole > 0) std::memmove(staging_.data(), staging_.data() + whole, rest);
    staging_.Resize(rest);
    if (!all) return Status::OK();
    if (direct_) STOKE_RETURN_IF_ERROR(SetDirect(false));
    if (rest > 0) STOKE_RETURN_IF_ERROR(WriteAll(staging_.view()));
    staging_ = AlignedBuffer();
    staging_mode_ = false;
    return Status::OK();
  }

  // Turns O_DIRECT on or off for the file descriptor.
  Status SetDirect(bool on) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, on ? (flags | O_DIRECT) : (flags & ~O_DIRECT)) != 0) {
      return ErrnoStatus(on ? "fcntl(O_DIRECT)" : "fcntl(~O_DIRECT)", path_, errno);
    }
    direct_ = on;
    return Status::OK();
  }

  std::string path_;
  int fd_;
  bool staging_mode_ = true;        // appends are staged (until the first Sync or Close, or O_DIRECT is refused)
  bool direct_ = false;             // O_DIRECT is set on fd_
  bool direct_refused_ = false;     // a direct write failed with EINVAL: never tried again
  std::shared_ptr<HugePageBlocks> huge_pages_;  // the staging buffer's memory once it passed kHugeStagingFrom
  AlignedBuffer staging_;           // staging_mode_: bytes appended but not yet written (< kStagingBytes)
  uint64_t bytes_written_ = 0;      // bytes written to the file
  uint64_t writeback_started_ = 0;  // !staging_mode_: bytes before this offset have had writeback started
};

DirEntry EntryFromStat(std::string name, const struct stat& st) {
  DirEntry e;
  e.name = std::move(name);
  e.is_directory = S_ISDIR(st.st_mode);
  e.size = static_cast<uint64_t>(st.st_size);
  e.modification_time_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  return e;
}

// Storage::ReadFileEnds on local disks: a thread's io_uring with kEndsBatch direct-descriptor slots.
// Each file is one linked chain: open into slot k, read its head, read its tail, close slot k. The
// reads are hard-linked, so the close runs even when a read fails; a failed open cancels the rest of
// its chain (nothing to close then). The whole batch goes in with one io_uring_enter, which runs
// what it can at once (cached opens and reads); the rest is waited for. Rings live as long as their
// threads (a few KiB each).
constexpr unsigned kEndsBatch = 64;
constexpr size_t kEndsAlignment = 64;  // the read buffers' alignment (a page would waste most of a small tail)
constexpr uint64_t kMaxEndBytes = uint64_t{1} << 30;
enum EndsOp : uint64_t { kEndsOpen = 0, kEndsHead = 1, kEndsTail = 2, kEndsClose = 3 };

// Set once io_uring or its direct opens (Linux 5.19 for the sparse file table) turn out to be
// unavailable: later batches answer Unsupported at once.
std::atomic<bool> g_ends_unsupported{false};

class EndsRing {
 public:
  EndsRing() = default;
  EndsRing(const EndsRing&) = delete;
  EndsRing& operator=(const EndsRing&) = delete;
  ~EndsRing() {
    if (ok_) io_uring_queue_exit(&ring_);
  }

  // This thread's ring, made at its first use; Unsupported when io_uring cannot be used here.
  static Result<EndsRing*> ForThisThread() {
    if (t_ring_) return t_ring_.get();
    if (g_ends_unsupported.load(std::memory_order_relaxed)) return Status::Unsupported("io_uring direct opens");
    auto r = std::make_unique<EndsRing>();
    STOKE_RETURN_IF_ERROR(r->Init());
    t_ring_ = std::move(r);
    return t_ring_.get();
  }
  // Whether rings can be made here: probed once per process with a ring of its own (made and
  // closed), so that an empty batch can say Unsupported without making a ring on the asking thread.
  static bool Available() {
    static std::once_flag probed;
    std::call_once(probed, [] { (void)std::make_unique<EndsRing>()->Init(); });
    return !g_ends_unsupported.load(std::memory_order_relaxed);
  }
  // Closes this thread's ring after a failure that left it unusable; the next batch makes another.
  static void DropForThisThread() { t_ring_.reset(); }

  // REQUIRES: files.size() <= kEndsBatch.
  Status Read(std::span<FileEnds> files) {
    for (size_t k = 0; k < files.size(); ++k) Prepare(files[k], static_cast<unsigned>(k));
    // Submits everything prepared; a partial submission is retried (the kernel keeps the rest).
    unsigned in_flight = 0;
    Status submit_error;
    while (io_uring_sq_ready(&ring_) > 0) {
      int r = io_uring_submit(&ring_);
      if (r == -EINTR) continue;
      if (r <= 0) {
        submit_error = Status::IOError(fmt::format("io_uring_submit: {}", std::strerror(r < 0 ? -r : EAGAIN)));
        break;
      }
      in_flight += static_cast<unsigned>(r);
    }
    // Every submitted operation completes once (a cancelled one with -ECANCELED); the buffers must
    // outlive them all.
    bool direct_opens_refused = false;
    for (unsigned seen = 0; seen < in_flight; ++seen) {
      io_uring_cqe* cqe = nullptr;
      int r = io_uring_wait_cqe(&ring_, &cqe);
      if (r == -EINTR) {
        --seen;
        continue;
      }
      if (r < 0) {
        // The ring no longer reports completions: the kernel may still write into the buffers, so
        // they are left to it (never freed) and this thread's ring is not used again.
        AbandonBuffers(files);
        broken_ = true;
        return Status::IOError(fmt::format("io_uring_wait_cqe: {}", std::strerror(-r)));
      }
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      FileEnds& f = files[data >> 2];
      Complete(f, static_cast<EndsOp>(data & 3), res);
      if ((data & 3) == kEndsOpen && res == -EINVAL) direct_opens_refused = true;
    }
    if (!submit_error.ok()) {
      // What was never submitted must not be: a fresh ring for the next batch.
      broken_ = true;
      for (FileEnds& f : files) {
        if (f.status.ok()) f.status = submit_error;
      }
    }
    if (direct_opens_refused) {  // a kernel that refuses direct opens: the caller reads each file itself
      g_ends_unsupported = true;
      return Status::Unsupported("io_uring direct opens");
    }
    return Status::OK();
  }

  bool broken() const { return broken_; }

 private:
  Status Init() {
    int rc = io_uring_queue_init(kEndsBatch * 4, &ring_, 0);
    if (rc < 0) return Unavailable("io_uring_queue_init", rc);
    ok_ = true;
    rc = io_uring_register_files_sparse(&ring_, kEndsBatch);
    if (rc < 0) return Unavailable("io_uring_register_files_sparse", rc);
    return Status::OK();
  }

  static Status Unavailable(const char* what, int rc) {
    g_ends_unsupported = true;
    return Status::Unsupported(fmt::format("{}: {}", what, std::strerror(-rc)));
  }

  void Prepare(FileEnds& f, unsigned slot) {
    f.status = Status::OK();
    if (f.tail_bytes > f.size || f.head_bytes > f.size || f.tail_bytes > kMaxEndBytes || f.head_bytes > kMaxEndBytes) {
      f.status = Status::InvalidArgument(fmt::format("'{}': ends of {} and {} bytes do not fit a file of {} bytes (or "
                                                     "exceed 1 GiB)", f.path, f.head_bytes, f.tail_bytes, f.size));
      return;
    }
    f.head = AlignedBuffer(f.head_bytes, kEndsAlignment);
    f.tail = AlignedBuffer(f.tail_bytes, kEndsAlignment);
    const uint64_t tag = uint64_t{slot} << 2;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);  // room for 4 per slot
    io_uring_prep_openat_direct(sqe, AT_FDCWD, f.path.c_str(), O_RDONLY, 0, slot);
    sqe->flags |= IOSQE_IO_LINK;
    io_uring_sqe_set_data64(sqe, tag | kEndsOpen);
    if (f.head_bytes > 0) {
      sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read(sqe, static_cast<int>(slot), f.head.data(), static_cast<unsigned>(f.head_bytes), 0);
      sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
      io_uring_sqe_set_data64(sqe, tag | kEndsHead);
    }
    if (f.tail_bytes > 0) {
      sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_read(sqe, static_cast<int>(slot), f.tail.data(), static_cast<unsigned>(f.tail_bytes),
                         f.size - f.tail_bytes);
      sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
      io_uring_sqe_set_data64(sqe, tag | kEndsTail);
    }
    sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_close_direct(sqe, slot);
    io_uring_sqe_set_data64(sqe, tag | kEndsClose);
  }

  // Records the first failure of a file's chain. A failed open cancels the chain's reads, whose
  // completions may come first: the open's error replaces theirs.
  static void Complete(FileEnds& f, EndsOp op, int res) {
    if (op == kEndsClose) return;  // a failed close of a file only read loses nothing
    if (op == kEndsOpen && res < 0) {
      f.status = ErrnoStatus("open", f.path, -res);
      return;
    }
    if (!f.status.ok()) return;
    if (res < 0) {
      f.status = res == -ECANCELED ? Status::IOError(fmt::format("read of '{}' cancelled", f.path))
                                   : ErrnoStatus("read", f.path, -res);
      return;
    }
    const uint64_t want = op == kEndsHead ? f.head_bytes : op == kEndsTail ? f.tail_bytes : 0;
    if (op != kEndsOpen && static_cast<uint64_t>(res) != want) {
      const uint64_t offset = op == kEndsHead ? 0 : f.size - f.tail_bytes;
      f.status = Status::IOError(fmt::format("unexpected end of '{}' at offset {} (read {} of {} bytes: the file is "
                                             "shorter than the {} bytes expected)", f.path, offset + res, res, want,
                                             f.size));
    }
  }

  static void AbandonBuffers(std::span<FileEnds> files) {
    for (FileEnds& f : files) {
      new AlignedBuffer(std::move(f.head));  // NOLINT: deliberately leaked, see the caller
      new AlignedBuffer(std::move(f.tail));  // NOLINT
      f.status = Status::IOError(fmt::format("'{}': io_uring stopped reporting completions", f.path));
    }
  }

  static thread_local std::unique_ptr<EndsRing> t_ring_;
  io_uring ring_{};
  bool ok_ = false;
  bool broken_ = false;
};
thread_local std::unique_ptr<EndsRing> EndsRing::t_ring_;

class LocalFileSystem final : public Storage {
 public:
  bool local_files() const override { return true; }
  Status ReadFileEnds(std::span<FileEnds> files) override {
    if (files.empty() && !EndsRing::Available()) return Status::Unsupported("io_uring direct opens");
    while (!files.empty()) {
      STOKE_ASSIGN_OR_RETURN(EndsRing * ring, EndsRing::ForThisThread());
      const size_t n = std::min<size_t>(files.size(), kEndsBatch);
      STOKE_RETURN_IF_ERROR(ring->Read(files.first(n)));
      if (ring->broken()) EndsRing::DropForThisThread();
      files = files.subspan(n);
    }
    return Status::OK();
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus("fstat", path, err);
    }
    if (S_ISDIR(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(fmt::format("'{}' is a directory, not a file", path));
    }
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<LocalRandomAccessFile>(path, fd, static_cast<uint64_t>(st.st_size)));
  }

  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive) override {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return ErrnoStatus("create", path, errno);
    return std::unique_ptr<WritableFile>(std::make_unique<LocalWritableFile>(path, fd));
  }

  Result<std::vector<DirEntry>> List(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("list directory", dir, errno);
    std::vector<DirEntry> out;
    while (struct dirent* ent = ::readdir(d)) {
      std::string name = ent->d_name;
      if (name == "." || name == "..") continue;
      struct stat st;
      if (::fstatat(::dirfd(d), ent->d_name, &st, 0) != 0) continue;  // vanished meanwhile
      out.push_back(EntryFromStat(std::move(name), st));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    return out;
  }

  Result<std::vector<std::string>> ListNames(const std::string& dir) override { return ListNamesWithPrefix(dir, ""); }

  // Names that do not match are skipped before they are copied (a Delta log's block of 100 versions
  // among 10,000s of names).
  Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("list directory", dir, errno);
    std::vector<std::string> out;
    while (struct dirent* ent = ::readdir(d)) {
      if (!std::string_view(ent->d_name).starts_with(prefix)) continue;
      std::string name = ent->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = ent->d_type == DT_DIR;
      if (ent->d_type == DT_UNKNOWN) {  // file systems without d_type: ask
        struct stat st;
        is_dir = ::fstatat(::dirfd(d), ent->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
      }
      if (!is_dir) out.push_back(std::move(name));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }

  Result<DirEntry> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return EntryFromStat(std::filesystem::path(path).filename().string(), st);
  }

  Status CreateDirectories(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return ErrnoStatus("create directory", path, ec.value());
    return Status::OK();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename to '" + to + "'", from, errno);
    return Status::OK();
  }

  Status Delete(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("delete", path, errno);
    return Status::OK();
  }

  Status PutIfAbsent(const std::string& path, ByteView data) override {
    std::string tmp = TemporaryNameFor(path);
    {
      STOKE_ASSIGN_OR_RETURN(auto f, Create(tmp, /*exclusive=*/true));
      Status s = f->Append(data);
      if (s.ok()) s = f->Sync();
      if (s.ok()) s = f->Close();
      if (!s.ok()) {
        ::unlink(tmp.c_str());
        return s;
      }
    }
    int rc = ::link(tmp.c_str(), path.c_str());
    int err = errno;
    ::unlink(tmp.c_str());
    if (rc != 0) return ErrnoStatus("create", path, err);  // EEXIST: AlreadyExists
    // The new entry is visible now; make it durable. A failure here leaves it visible but perhaps
    // not durable, which the caller must learn.
    Status synced = SyncDirectory(ParentPath(path));
    if (!synced.ok()) return synced.WithContext(fmt::format("created '{}' but its directory is not synced", path));
    return Status::OK();
  }

  Status PublishIfAbsent(const std::string& tmp, const std::string& path) override {
    if (::link(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("create", path, errno);  // EEXIST: AlreadyExists
    ::unlink(tmp.c_str());
    Status synced = SyncDirectory(ParentPath(path));
    if (!synced.ok()) return synced.WithContext(fmt::format("created '{}' but its directory is not synced", path));
    return Status::OK();
  }

  Status SyncFiles(const std::vector<std::string>& paths) override {
    // Below this many files, one fdatasync each; from it on, one syncfs per file system: measured
    // on ext4 here, 650,000 fdatasyncs of one-row files were a third of an ingest's time.
    constexpr size_t kSyncfsFrom = 256;
    auto sync_one = [](const std::string& path, bool whole_fs) -> Status {
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return ErrnoStatus("open for sync", path, errno);
      int rc = whole_fs ? ::syncfs(fd) : ::fdatasync(fd);
      int err = errno;
      ::close(fd);
      if (rc != 0) return ErrnoStatus(whole_fs ? "syncfs" : "fdatasync", path, err);
      return Status::OK();
    };
    if (paths.size() < kSyncfsFrom) {
      for (const auto& p : paths) STOKE_RETURN_IF_ERROR(sync_one(p, /*whole_fs=*/false));
      return Status::OK();
    }
    // One syncfs per file system holding a directory of the files.
    std::set<std::string> dirs;
    for (const auto& p : paths) dirs.insert(ParentPath(p));
    std::set<dev_t> synced;
    for (const auto& d : dirs) {
      const std::string dir = d.empty() ? "." : d;
      struct stat st;
      if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus("stat", dir, errno);
      if (!synced.insert(st.st_dev).second) continue;
      STOKE_RETURN_IF_ERROR(sync_one(dir, /*whole_fs=*/true));
    }
    return Status::OK();
  }

  Status SyncDirectory(const std::string& dir) override {
    const std::string d = dir.empty() ? "." : dir;
    int dfd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return ErrnoStatus("open directory", d, errno);
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    if (rc != 0) return ErrnoStatus("fsync directory", d, err);
    return Status::OK();
  }
};

}  // namespace

Storage& LocalStorage() {
  static LocalFileSystem fs;
  return fs;
}

Status Storage::PublishIfAbsent(const std::string& tmp, const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(*this, tmp));
  STOKE_RETURN_IF_ERROR(PutIfAbsent(path, AsBytes(bytes)));
  (void)Delete(tmp);
  return Status::OK();
}

Result<std::vector<std::string>> Storage::ListNamesWithPrefix(const std::string& dir, const std::string& prefix) {
  STOKE_ASSIGN_OR_RETURN(std::vector<std::string> names, ListNames(dir));
  std::erase_if(names, [&](const std::string& name) { return !name.starts_with(prefix); });
  return names;
}

Result<std::string> Storage::ReadFile(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(auto file, OpenForRead(path));
  std::string out(file->size(), '\0');
  STOKE_RETURN_IF_ERROR(file->ReadAt(0, MutableByteView(reinterpret_cast<uint8_t*>(out.data()), out.size())));
  return out;
}

namespace {

class OpenOnFirstReadFile final : public RandomAccessFile {
 public:
  OpenOnFirstReadFile(std::shared_ptr<Storage> storage, std::string path, uint64_t size, bool remote)
      : storage_(std::move(storage)), path_(std::move(path)), size_(size), remote_(remote) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    STOKE_ASSIGN_OR_RETURN(const RandomAccessFile* file, File());
    return file->ReadAt(offset, dst);
  }
  void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const override {
    auto file = File();
    if (!file.ok()) return done(file.status());
    (*file)->ReadAtAsync(offset, dst, std::move(done));
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool remote() const override { return remote_; }

 private:
  Result<const RandomAccessFile*> File() const {
    std::call_once(opened_, [this] {
      auto f = storage_->OpenForReadWithSize(path_, size_);
      if (f.ok()) {
        file_ = std::move(*f);
      } else {
        open_status_ = f.status();
      }
    });
    if (!open_status_.ok()) return open_status_;
    return file_.get();
  }

  std::shared_ptr<Storage> storage_;
  std::string path_;
  uint64_t size_;
  bool remote_;
  mutable std::once_flag opened_;
  mutable std::unique_ptr<RandomAccessFile> file_;  // set once, inside opened_
  mutable Status open_status_;                      // likewise
};

}  // namespace

std::unique_ptr<RandomAccessFile> OpenOnFirstRead(std::shared_ptr<Storage> storage, std::string path, uint64_t size,
                                                  bool remote) {
  return std::make_unique<OpenOnFirstReadFile>(std::move(storage), std::move(path), size, remote);
}

Result<std::string> ReadFileToString(Storage& storage, const std::string& path) { return storage.ReadFile(path); }

std::string InProgressPath(const Storage& storage, const std::string& path) {
  return storage.CreateIsAtomic() ? path : path + ".inprogress";
}

Status WriteFileAtomically(Storage& storage, const std::string& path, ByteView data) {
  if (storage.CreateIsAtomic()) {  // one upload that replaces the object whole
    STOKE_ASSIGN_OR_RETURN(auto f, storage.Create(path));
    STOKE_RETURN_IF_ERROR(f->Append(data));
    return f->Close();
  }
  std::string tmp = TemporaryNameFor(path);
  {
    STOKE_ASSIGN_OR_RETURN(auto f, storage.Create(tmp, /*exclusive=*/true));
    Status s = f->Append(data);
    if (s.ok()) s = f->Sync();
    if (s.ok()) s = f->Close();
    if (!s.ok()) {
      (void)storage.Delete(tmp);
      return s;
    }
  }
  Status s = storage.Rename(tmp, path);
  if (!s.ok()) {
    (void)storage.Delete(tmp);
    return s;
  }
  // Without this a power loss can undo the rename although the data was synced.
  return storage.SyncDirectory(ParentPath(path));
}

std::string ParentPath(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string PathUnder(const std::string& path, const std::string& dir) {
  std::string_view d = dir;
  while (d.size() > 1 && d.back() == '/') d.remove_suffix(1);
  if (d.empty() || path.size() <= d.size() + 1 || path.compare(0, d.size(), d) != 0) return path;
  if (d == "/") return path.substr(1);
  return path[d.size()] == '/' ? path.substr(d.size() + 1) : path;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  bool a_slash = a.back() == '/';
  bool b_slash = b.front() == '/';
  if (a_slash && b_slash) return a + b.substr(1);
  if (a_slash || b_slash) return a + b;
  return a + "/" + b;
}

size_t DeleteLeftovers(Storage& fs, const std::vector<std::string>& paths, std::string_view what) {
  for (size_t i = 0; i < paths.size(); ++i) {
    Status s = fs.Delete(paths[i]);
    if (s.ok() || s.code() == StatusCode::kNotFound) continue;
    const size_t left = paths.size() - i;
    STOKE_LOG(kWarn, "storage.leftovers", "what=\"{}\" left={} first=\"{}\" error=\"{}\" note=\"files no commit "
              "refers to; vacuum removes them\"", what, left, paths[i], s.message());
    return left;
  }
  return 0;
}

}  // namespace stoke
