#include "io/read_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <isa-l/crc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <new>

#include "core/log.h"
#include "io/crypto.h"

namespace stoke {
namespace {

constexpr char kEntryMagic[8] = {'S', 'T', 'K', 'R', 'C', 'B', '0', '1'};
constexpr uint32_t kFixedHeaderBytes = 40;
constexpr uint32_t kHeaderAlignment = 4096;
// The header's first read; every header with an identity up to kMaxIdentityBytes and a block of up
// to 256 chunks fits in it.
constexpr uint32_t kFirstHeaderRead = 4096;
// Headers beyond this are corrupt (a block of 16 MiB in 4 KiB chunks needs 16 KiB).
constexpr uint32_t kMaxHeaderBytes = 1 << 20;
constexpr uint32_t kMaxIdentityBytes = 2048;
// Chunks of data with a CRC each: a read verifies the chunks it touches, not the whole block.
constexpr uint32_t kChunkBytes = 64 << 10;
// A hit refreshes the entry's modification time (its recency) when older than this.
constexpr auto kTouchInterval = std::chrono::seconds(60);
// Temporary files older than this belong to writers that died: scans delete them.
constexpr auto kStaleTempAge = std::chrono::hours(1);
// Eviction goes down to this share of the capacity, so that it runs once per tenth of it written.
constexpr double kEvictTarget = 0.9;
// Rescan after writing this share of the capacity, to see other processes' entries.
constexpr uint64_t kRescanDivisor = 8;
constexpr const char* kLayoutDir = "blocks-v1";

uint32_t Crc32(uint32_t crc, ByteView data) {
  return crc32_gzip_refl(crc, const_cast<uint8_t*>(data.data()), data.size());
}

uint32_t HeaderCrc(ByteView header) {
  return Crc32(Crc32(0, header.subspan(0, 36)), header.subspan(kFixedHeaderBytes));
}

// Reads exactly dst.size() bytes at `offset`, or fewer at the end of the file. Returns the count.
Result<size_t> PreadFull(int fd, uint8_t* dst, size_t n, uint64_t offset) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(fmt::format("read: {}", std::strerror(errno)));
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return done;
}

Status WriteFull(int fd, const uint8_t* src, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, src, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(std::strerror(errno));
    }
    src += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// The entry of block `block` of the object whose identity hashes to `hash` (40 hex digits).
std::string EntryPathFor(const std::string& root, const std::string& hash, uint64_t block) {
  return fmt::format("{}/{}/{}-{}", root, hash.substr(0, 2), hash, block);
}

std::string IdentityHash(const std::string& identity) { return HexEncode(Sha256(identity)).substr(0, 40); }

// The identity of an object's blocks: the caller's name for its bytes, and its size.
std::string CompleteIdentity(std::string identity, uint64_t size) {
  identity += fmt::format(" size={}", size);
  return identity;
}

// Whether entry `h` at `path`, a file of `file_size` bytes, holds the block wanted.
Status CheckEntryFits(const ReadCacheEntryHeader& h, const std::string& path, const std::string& identity,
                      uint64_t block_offset, uint32_t block_length, uint64_t file_size) {
  if (h.identity != identity || h.block_offset != block_offset || h.data_length != block_length) {
    // Another object whose name hashes alike (or a damaged header that passed its CRC): a miss.
    return Status::Corruption(fmt::format("{}: holds block {} ({} bytes) of '{}', wanted block {} ({} bytes) of '{}'",
                                          path, h.block_offset, h.data_length, h.identity, block_offset, block_length,
                                          identity));
  }
  if (file_size != uint64_t{h.header_size} + h.data_length) {
    return Status::Corruption(
        fmt::format("{}: {} bytes, the header says {}", path, file_size, uint64_t{h.header_size} + h.data_length));
  }
  return Status::OK();
}

// Whether every page of a file of `bytes` bytes is set in `pages` (MappedFile::Resident).
bool AllResident(const std::vector<uint64_t>& pages, uint64_t bytes) {
  const uint64_t n = (bytes + MappedFile::page_size() - 1) / MappedFile::page_size();
  if ((n + 63) / 64 > pages.size()) return false;
  for (uint64_t p = 0; p < n; ++p) {
    if ((pages[p / 64] >> (p % 64) & 1) == 0) return false;
  }
  return true;
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// --- entry format ----------------------------------------------------------------------------------

std::string EncodeReadCacheEntryHeader(std::string_view identity, uint64_t block_offset, ByteView data) {
  const uint32_t chunks = static_cast<uint32_t>((data.size() + kChunkBytes - 1) / kChunkBytes);
  const size_t used = kFixedHeaderBytes + identity.size() + 4 * size_t{chunks};
  const size_t header_size = (used + kHeaderAlignment - 1) / kHeaderAlignment * kHeaderAlignment;
  std::string h(header_size, '\0');
  auto* p = reinterpret_cast<uint8_t*>(h.data());
  std::memcpy(p, kEntryMagic, 8);
  StoreLE<uint32_t>(p + 8, static_cast<uint32_t>(header_size));
  StoreLE<uint32_t>(p + 12, kChunkBytes);
  StoreLE<uint64_t>(p + 16, block_offset);
  StoreLE<uint32_t>(p + 24, static_cast<uint32_t>(data.size()));
  StoreLE<uint32_t>(p + 28, static_cast<uint32_t>(identity.size()));
  StoreLE<uint32_t>(p + 32, chunks);
  std::memcpy(p + kFixedHeaderBytes, identity.data(), identity.size());
  uint8_t* crcs = p + kFixedHeaderBytes + identity.size();
  for (uint32_t c = 0; c < chunks; ++c) {
    const size_t from = size_t{c} * kChunkBytes;
    StoreLE<uint32_t>(crcs + 4 * c, Crc32(0, data.subspan(from, std::min<size_t>(kChunkBytes, data.size() - from))));
  }
  StoreLE<uint32_t>(p + 36, HeaderCrc(AsBytes(h)));
  return h;
}

uint32_t ReadCacheDeclaredHeaderSize(ByteView first) {
  if (first.size() < 12 || std::memcmp(first.data(), kEntryMagic, 8) != 0) return 0;
  return LoadLE<uint32_t>(first.data() + 8);
}

Result<ReadCacheEntryHeader> ParseReadCacheEntryHeader(ByteView bytes, std::string_view what) {
  auto bad = [&](std::string_view why) { return Status::Corruption(fmt::format("{}: {}", what, why)); };
  if (bytes.size() < kFixedHeaderBytes) return bad(fmt::format("{} bytes is too short for a header", bytes.size()));
  if (std::memcmp(bytes.data(), kEntryMagic, 8) != 0) return bad("offset 0: no STKRCB01 magic");
  const uint8_t* p = bytes.data();
  ReadCacheEntryHeader h;
  h.header_size = LoadLE<uint32_t>(p + 8);
  h.chunk_bytes = LoadLE<uint32_t>(p + 12);
  h.block_offset = LoadLE<uint64_t>(p + 16);
  h.data_length = LoadLE<uint32_t>(p + 24);
  const uint32_t identity_length = LoadLE<uint32_t>(p + 28);
  const uint32_t chunks = LoadLE<uint32_t>(p + 32);
  if (h.header_size < kFixedHeaderBytes || h.header_size % kHeaderAlignment != 0 || h.header_size > kMaxHeaderBytes) {
    return bad(fmt::format("offset 8: header size {} is not a multiple of {} up to {}", h.header_size,
                           kHeaderAlignment, kMaxHeaderBytes));
  }
  if (h.header_size > bytes.size()) {
    return bad(fmt::format("offset 8: header of {} bytes, only {} present", h.header_size, bytes.size()));
  }
  if (h.chunk_bytes == 0 || h.data_length == 0) return bad("offset 12: empty chunks or data");
  if (chunks != (uint64_t{h.data_length} + h.chunk_bytes - 1) / h.chunk_bytes) {
    return bad(fmt::format("offset 32: {} chunks for {} bytes in chunks of {}", chunks, h.data_length, h.chunk_bytes));
  }
  if (uint64_t{kFixedHeaderBytes} + identity_length + 4 * uint64_t{chunks} > h.header_size) {
    return bad(fmt::format("offset 28: identity of {} bytes and {} chunk CRCs exceed the {}-byte header",
                           identity_length, chunks, h.header_size));
  }
  const uint32_t crc = LoadLE<uint32_t>(p + 36);
  if (HeaderCrc(bytes.subspan(0, h.header_size)) != crc) return bad("offset 36: header CRC mismatch");
  h.identity.assign(reinterpret_cast<const char*>(p + kFixedHeaderBytes), identity_length);
  h.chunk_crcs.resize(chunks);
  for (uint32_t c = 0; c < chunks; ++c) {
    h.chunk_crcs[c] = LoadLE<uint32_t>(p + kFixedHeaderBytes + identity_length + 4 * c);
  }
  return h;
}

Status VerifyReadCacheChunks(const ReadCacheEntryHeader& h, uint32_t first_chunk, ByteView chunks,
                             std::string_view what) {
  uint64_t at = uint64_t{first_chunk} * h.chunk_bytes;
  for (uint32_t c = first_chunk; !chunks.empty(); ++c) {
    if (c >= h.chunk_crcs.size()) return Status::Corruption(fmt::format("{}: data past the last chunk", what));
    const size_t n = static_cast<size_t>(std::min<uint64_t>(h.chunk_bytes, h.data_length - at));
    if (chunks.size() < n) {
      return Status::Corruption(fmt::format("{}: chunk {} has {} of its {} bytes", what, c, chunks.size(), n));
    }
    if (Crc32(0, chunks.subspan(0, n)) != h.chunk_crcs[c]) {
      return Status::Corruption(fmt::format("{}: CRC mismatch in chunk {} (data offset {})", what, c, at));
    }
    chunks = chunks.subspan(n);
    at += n;
  }
  return Status::OK();
}

// --- the cache -------------------------------------------------------------------------------------

// One ReadAtAsync through the cache: done when each of its blocks (and the planning) has reported.
struct ReadCache::Read {
  uint8_t* dst = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
  ReadCallback done;
  std::atomic<uint64_t> remaining{0};
  Mutex mu;
  Status status GUARDED_BY(mu);  // the first failure
};

// A read's part in one block: bytes [from, from + length) of the block go to `out`.
struct ReadCache::Waiter {
  Read* read = nullptr;
  uint32_t from = 0;
  uint32_t length = 0;
  uint8_t* out = nullptr;
};

// Consecutive blocks of one object fetched with one read of its base. Shared by the completion, the
// writer tasks and nothing else: it holds what they need, so that the file may close as soon as its
// reads are done.
struct ReadCache::Fetch {
  std::string identity;
  uint64_t offset = 0;  // of the first block in the object
  std::vector<std::string> paths;  // entry per block
  AlignedBuffer data;   // the blocks' bytes, back to back
  uint64_t BlockOffset(size_t k, uint32_t block_bytes) const { return offset + uint64_t{block_bytes} * k; }
  uint32_t BlockLength(size_t k, uint32_t block_bytes) const {
    return static_cast<uint32_t>(std::min<uint64_t>(block_bytes, data.size() - uint64_t{block_bytes} * k));
  }
};

class ReadCache::CachedFile final : public RandomAccessFile {
 public:
  CachedFile(std::shared_ptr<ReadCache> cache, std::unique_ptr<RandomAccessFile> base, std::string identity)
      : cache_(std::move(cache)), base_(std::move(base)), identity_(std::move(identity)) {
    hash_ = IdentityHash(identity_);
  }

  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    Mutex mu;
    CondVar cv;
    bool finished = false;
    Status result;
    ReadAtAsync(offset, dst, [&](Status st) {
      MutexLock lock(&mu);
      result = std::move(st);
      finished = true;
      cv.Signal();
    });
    MutexLock lock(&mu);
    while (!finished) cv.Wait(&mu);
    return result;
  }

  void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const override {
    const uint64_t size = base_->size();
    if (dst.empty() || offset > size || dst.size() > size - offset) {
      base_->ReadAtAsync(offset, dst, std::move(done));  // nothing to cache: the base's answer (or error)
      return;
    }
    Read* read = nullptr;
    try {
      read = new Read();
    } catch (const std::bad_alloc&) {
      done(Status::IOError("out of memory: a read through the cache of " + base_->path()));
      return;
    }
    read->dst = dst.data();
    read->offset = offset;
    read->length = dst.size();
    read->done = std::move(done);
    const uint64_t b = cache_->options_.block_bytes;
    read->remaining = (offset + dst.size() - 1) / b - offset / b + 2;  // the blocks, and the planning
    try {
      cache_->readers_->Submit([this, read] { cache_->Process(*this, read); });
    } catch (const std::bad_alloc&) {
      read->remaining = 1;
      Finish(read, Status::IOError("out of memory: queueing a read through the cache of " + base_->path()));
    }
  }

  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  bool remote() const override { return base_->remote(); }

  const RandomAccessFile& base() const { return *base_; }
  const std::string& identity() const { return identity_; }
  std::string EntryPath(uint64_t block) const { return EntryPathFor(cache_->root_, hash_, block); }

 private:
  std::shared_ptr<ReadCache> cache_;
  std::unique_ptr<RandomAccessFile> base_;
  std::string identity_;  // with the size appended
  std::string hash_;      // 40 hex digits of its SHA-256
};

Result<std::shared_ptr<ReadCache>> ReadCache::Open(ReadCacheOptions options) {
  if (options.dir.empty()) return Status::InvalidArgument("read cache: no directory");
  if (options.capacity_bytes == 0) return Status::InvalidArgument("read cache: capacity_bytes must be > 0");
  if (options.block_bytes < 4096) {
    return Status::InvalidArgument(fmt::format("read cache: block_bytes must be >= 4096, got {}", options.block_bytes));
  }
  if (options.max_fetch_bytes == 0) return Status::InvalidArgument("read cache: max_fetch_bytes must be > 0");
  options.threads = std::max<size_t>(options.threads, 1);
  std::shared_ptr<ReadCache> cache(new ReadCache(std::move(options)));
  std::error_code ec;
  for (int i = 0; i < 256; ++i) {
    std::filesystem::create_directories(fmt::format("{}/{:02x}", cache->root_, i), ec);
    if (ec) {
      return Status::IOError(fmt::format("read cache: cannot create {}/{:02x}: {}", cache->root_, i, ec.message()));
    }
  }
  // Writable? (A cache that cannot keep anything would silently fetch everything every epoch.)
  const std::string probe = fmt::format("{}/00/.probe.{}", cache->root_, ::getpid());
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError(fmt::format("read cache: cannot write in {}: {}", cache->options_.dir, std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  cache->Scan(/*evict=*/true);
  return cache;
}

ReadCache::ReadCache(ReadCacheOptions options)
    : options_(std::move(options)), root_(options_.dir + "/" + kLayoutDir) {
  readers_ = std::make_unique<ThreadPool>(options_.threads);
  writers_ = std::make_unique<ThreadPool>(std::max<size_t>(1, options_.threads / 2));
}

ReadCache::~ReadCache() {
  // Writers first (they may still be publishing fetched blocks), then readers (idle by contract).
  writers_.reset();
  readers_.reset();
}

std::unique_ptr<RandomAccessFile> ReadCache::Wrap(std::unique_ptr<RandomAccessFile> base, std::string identity) {
  if (identity.size() > kMaxIdentityBytes) return base;
  identity = CompleteIdentity(std::move(identity), base->size());
  return std::make_unique<CachedFile>(shared_from_this(), std::move(base), std::move(identity));
}

std::string ReadCache::EntryPath(const std::string& identity, uint64_t block) const {
  return EntryPathFor(root_, IdentityHash(identity), block);
}

ReadCacheStats ReadCache::stats() const {
  ReadCacheStats s;
  s.hits = hits_;
  s.misses = misses_;
  s.bytes_fetched = bytes_fetched_;
  s.corrupt_entries = corrupt_;
  s.blocks_mapped = mapped_;
  s.entries_written = written_;
  s.entries_evicted = evicted_;
  s.write_errors = write_errors_;
  return s;
}

void ReadCache::Finish(Read* read, const Status& status) {
  if (!status.ok()) {
    MutexLock lock(&read->mu);
    if (read->status.ok()) read->status = status;
  }
  if (read->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Status result;
  {
    MutexLock lock(&read->mu);
    result = std::move(read->status);
  }
  ReadCallback done = std::move(read->done);
  delete read;
  done(std::move(result));
}

void ReadCache::Process(const CachedFile& file, Read* read) {
  const uint64_t b = options_.block_bytes;
  const uint64_t size = file.size();
  const uint64_t end = read->offset + read->length;
  uint64_t run_first = 0, run_last = 0;
  bool run = false;
  auto flush_run = [&] {
    if (run) StartFetch(file, run_first, run_last);
    run = false;
  };
  for (uint64_t block = read->offset / b; block * b < end; ++block) {
    const uint64_t block_offset = block * b;
    const uint32_t block_length = static_cast<uint32_t>(std::min(b, size - block_offset));
    Waiter w;
    w.read = read;
    w.from = static_cast<uint32_t>(std::max(read->offset, block_offset) - block_offset);
    w.length = static_cast<uint32_t>(std::min(end, block_offset + block_length) - block_offset - w.from);
    w.out = read->dst + (block_offset + w.from - read->offset);
    const std::string path = file.EntryPath(block);
    const BlockRoute route = ServeOrClaim(file, path, block_offset, block_length, w);
    if (route == BlockRoute::kWaiting) continue;
    if (route == BlockRoute::kServed) {
      flush_run();
      Finish(read, Status::OK());
      continue;
    }
    if (run && block == run_last + 1) {
      run_last = block;
    } else {
      flush_run();
      run = true;
      run_first = run_last = block;
    }
  }
  flush_run();
  Finish(read, Status::OK());  // the planning's part
}

ReadCache::BlockRoute ReadCache::ServeOrClaim(const CachedFile& file, const std::string& path, uint64_t block_offset,
                                              uint32_t block_length, const Waiter& w) {
  constexpr int kMaxLooks = 4;  // then fetch anyway: entries keep being published, this one may never be
  for (int look = 1;; ++look) {
    std::shared_ptr<const Fetch> fetched;
    size_t index = 0;
    uint64_t seen = 0;
    {
      MutexLock lock(&mu_);
      if (auto it = pending_.find(path); it != pending_.end()) {
        if (it->second.fetched == nullptr) {
          it->second.waiters.push_back(w);  // being fetched: served when it arrives
          return BlockRoute::kWaiting;
        }
        fetched = it->second.fetched;  // fetched, being written: from memory
        index = it->second.index;
      }
      seen = published_;
    }
    if (fetched == nullptr &&
        !ServeFromEntry(path, file.identity(), block_offset, block_length, w.from, w.length, w.out).ok()) {
      MutexLock lock(&mu_);
      auto [it, inserted] = pending_.try_emplace(path);
      if (inserted && published_ != seen && look < kMaxLooks) {
        pending_.erase(it);  // an entry was published meanwhile, perhaps this one: look again
        continue;
      }
      if (inserted || it->second.fetched == nullptr) {
        it->second.waiters.push_back(w);
        return inserted ? BlockRoute::kClaimed : BlockRoute::kWaiting;
      }
      fetched = it->second.fetched;  // another read fetched it meanwhile
      index = it->second.index;
    }
    hits_.fetch_add(1, std::memory_order_relaxed);
    if (fetched != nullptr) CopyOut(*fetched, index, w);
    return BlockRoute::kServed;
  }
}

void ReadCache::StartFetch(const CachedFile& file, uint64_t first, uint64_t last) {
  const uint64_t b = options_.block_bytes;
  const uint64_t offset = first * b;
  const uint64_t length = std::min((last + 1) * b, file.size()) - offset;
  AcquireFetchBudget(length);
  std::shared_ptr<Fetch> fetch;
  try {
    fetch = std::make_shared<Fetch>();
    fetch->identity = file.identity();
    fetch->offset = offset;
    for (uint64_t block = first; block <= last; ++block) fetch->paths.push_back(file.EntryPath(block));
    fetch->data.Resize(length);
  } catch (const std::bad_alloc&) {
    ReleaseFetchBudget(length);
    // The waiters are registered under these paths: fail them.
    auto failed = std::make_shared<Fetch>();
    for (uint64_t block = first; block <= last; ++block) failed->paths.push_back(file.EntryPath(block));
    OnFetched(failed, Status::IOError(fmt::format("out of memory: a {}-byte buffer for blocks of {}", length,
                                                  file.path())));
    return;
  }
  misses_.fetch_add(last - first + 1, std::memory_order_relaxed);
  bytes_fetched_.fetch_add(length, std::memory_order_relaxed);
  file.base().ReadAtAsync(offset, fetch->data.mutable_view(),
                          [this, fetch](Status st) { OnFetched(fetch, std::move(st)); });
}

void ReadCache::OnFetched(const std::shared_ptr<Fetch>& fetch, Status status) {
  // First the pending entries: their waiters are taken, and the fetched blocks stay readable from
  // memory until written (later reads of them copy from there instead of fetching again).
  std::vector<std::vector<Waiter>> waiters(fetch->paths.size());
  {
    MutexLock lock(&mu_);
    for (size_t k = 0; k < fetch->paths.size(); ++k) {
      auto it = pending_.find(fetch->paths[k]);
      if (it == pending_.end()) continue;
      waiters[k] = std::move(it->second.waiters);
      it->second.waiters.clear();
      if (status.ok()) {
        it->second.fetched = fetch;
        it->second.index = k;
      } else {
        pending_.erase(it);
      }
    }
  }
  // Then the writes, queued before any waiter learns its read is done: once the last one does, the
  // file, and then the cache, may go away, and the writer pool is what the destructor waits for.
  if (status.ok()) {
    try {
      writers_->Submit([this, fetch] {
        for (size_t k = 0; k < fetch->paths.size(); ++k) Publish(fetch, k);
        ReleaseFetchBudget(fetch->data.size());
      });
    } catch (const std::bad_alloc&) {
      ForgetPending(fetch);
      ReleaseFetchBudget(fetch->data.size());
    }
  } else {
    ReleaseFetchBudget(fetch->data.size());
  }
  for (size_t k = 0; k < fetch->paths.size(); ++k) {
    for (const Waiter& w : waiters[k]) {
      if (status.ok()) CopyOut(*fetch, k, w);
      Finish(w.read, status);
    }
  }
}

void ReadCache::CopyOut(const Fetch& fetch, size_t k, const Waiter& w) const {
  std::memcpy(w.out, fetch.data.data() + uint64_t{options_.block_bytes} * k + w.from, w.length);
}

void ReadCache::ForgetPending(const std::shared_ptr<const Fetch>& fetch) {
  MutexLock lock(&mu_);
  for (const std::string& path : fetch->paths) {
    auto it = pending_.find(path);
    if (it != pending_.end() && it->second.fetched == fetch) pending_.erase(it);
  }
}

void ReadCache::Publish(const std::shared_ptr<const Fetch>& fetch_ptr, size_t k) {
  const Fetch& fetch = *fetch_ptr;
  const uint32_t b = options_.block_bytes;
  const ByteView data(fetch.data.data() + uint64_t{b} * k, fetch.BlockLength(k, b));
  const std::string& path = fetch.paths[k];
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), temp_counter_.fetch_add(1));
  const std::string header = EncodeReadCacheEntryHeader(fetch.identity, fetch.BlockOffset(k, b), data);
  Status st;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    st = Status::IOError(fmt::format("create {}: {}", tmp, std::strerror(errno)));
  } else {
    st = WriteFull(fd, reinterpret_cast<const uint8_t*>(header.data()), header.size());
    if (st.ok()) st = WriteFull(fd, data.data(), data.size());
    if (::close(fd) != 0 && st.ok()) st = Status::IOError(std::strerror(errno));
    // No fsync: a torn entry after a power loss fails its CRCs and is fetched again.
    if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = Status::IOError(std::strerror(errno));
    if (!st.ok()) ::unlink(tmp.c_str());
  }
  {  // written (or not to be): later reads go to the entry (or fetch again)
    MutexLock lock(&mu_);
    auto it = pending_.find(path);
    if (it != pending_.end() && it->second.fetched == fetch_ptr) {
      pending_.erase(it);
      ++published_;
    }
  }
  if (!st.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    if (!logged_write_error_.exchange(true)) {
      STOKE_LOG(kWarn, "read_cache.write_failed", "path={} error=\"{}\" (reads go on; blocks not kept)", path,
                st.ToString());
    }
    return;
  }
  written_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t bytes = header.size() + data.size();
  const uint64_t usage = usage_.fetch_add(bytes) + bytes;
  const uint64_t since = written_since_scan_.fetch_add(bytes) + bytes;
  if (usage > options_.capacity_bytes || since > options_.capacity_bytes / kRescanDivisor) Scan(/*evict=*/true);
}

Status ReadCache::ServeFromEntry(const std::string& path, const std::string& identity, uint64_t block_offset,
                                 uint32_t block_length, uint32_t from, uint32_t length, uint8_t* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(path);
    return Status::IOError(fmt::format("open {}: {}", path, std::strerror(errno)));
  }
  FdCloser closer{fd};
  thread_local AlignedBuffer scratch;
  auto corrupt = [&](Status why) { return DropCorrupt(path, std::move(why)); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::IOError(fmt::format("stat {}: {}", path, std::strerror(errno)));
  scratch.Resize(kFirstHeaderRead);
  STOKE_ASSIGN_OR_RETURN(size_t got, PreadFull(fd, scratch.data(), kFirstHeaderRead, 0));
  const uint32_t declared = ReadCacheDeclaredHeaderSize(ByteView(scratch.data(), got));
  if (declared > got && declared <= kMaxHeaderBytes) {
    scratch.Resize(declared);
    STOKE_ASSIGN_OR_RETURN(got, PreadFull(fd, scratch.data(), declared, 0));
  }
  auto header = ParseReadCacheEntryHeader(ByteView(scratch.data(), got), path);
  if (!header.ok()) return corrupt(header.status());
  const ReadCacheEntryHeader& h = *header;
  if (Status fits = CheckEntryFits(h, path, identity, block_offset, block_length, static_cast<uint64_t>(st.st_size));
      !fits.ok()) {
    return corrupt(std::move(fits));
  }
  const uint32_t first_chunk = from / h.chunk_bytes;
  const uint64_t chunks_from = uint64_t{first_chunk} * h.chunk_bytes;
  const uint64_t chunks_to =
      std::min<uint64_t>((uint64_t{from} + length + h.chunk_bytes - 1) / h.chunk_bytes * h.chunk_bytes, h.data_length);
  const size_t n = static_cast<size_t>(chunks_to - chunks_from);
  scratch.Resize(n);
  STOKE_ASSIGN_OR_RETURN(got, PreadFull(fd, scratch.data(), n, h.header_size + chunks_from));
  if (got != n) return corrupt(Status::Corruption(fmt::format("{}: short read of its data", path)));
  if (Status v = VerifyReadCacheChunks(h, first_chunk, ByteView(scratch.data(), n), path); !v.ok()) return corrupt(v);
  std::memcpy(out, scratch.data() + (from - chunks_from), length);
  if (NowSeconds() - st.st_mtim.tv_sec > std::chrono::duration_cast<std::chrono::seconds>(kTouchInterval).count()) {
    (void)::futimens(fd, nullptr);  // recency, for eviction; best effort
  }
  return Status::OK();
}

Status ReadCache::DropCorrupt(const std::string& path, Status why) {
  corrupt_.fetch_add(1, std::memory_order_relaxed);
  STOKE_LOG(kWarn, "read_cache.corrupt_entry", "path={} error=\"{}\" (deleted; the block is fetched again)", path,
            why.ToString());
  ::unlink(path.c_str());  // may delete another process's fresh copy instead: then it is fetched again
  return why;
}

Result<std::optional<MappedCacheBlock>> ReadCache::MapBlock(std::string identity, uint64_t size, uint64_t block) {
  const uint64_t b = options_.block_bytes;
  if (identity.size() > kMaxIdentityBytes || size == 0 || block > (size - 1) / b) return std::nullopt;
  identity = CompleteIdentity(std::move(identity), size);
  const uint64_t block_offset = block * b;
  const uint32_t block_length = static_cast<uint32_t>(std::min(b, size - block_offset));
  const std::string path = EntryPath(identity, block);
  Result<MappedFile> map = MappedFile::Open(path);
  if (!map.ok()) {
    if (map.status().code() == StatusCode::kNotFound) return std::nullopt;
    return map.status();
  }
  std::vector<uint64_t> pages;
  if (!map->residency_known() || !map->Resident(&pages) || !AllResident(pages, map->size())) return std::nullopt;
  MappedCacheBlock mapped{.map = std::move(*map), .data_offset = 0, .data_length = block_length};
  if (Status v = VerifyMapped(mapped.map, path, identity, block_offset, block_length, &mapped.data_offset); !v.ok()) {
    return DropCorrupt(path, std::move(v));
  }
  Touch(path);
  mapped.path = path;
  mapped_.fetch_add(1, std::memory_order_relaxed);
  return std::optional<MappedCacheBlock>(std::move(mapped));
}

void ReadCache::Touch(const std::string& entry_path) {
  (void)::utimensat(AT_FDCWD, entry_path.c_str(), nullptr, 0);  // recency, for eviction; best effort
}

std::chrono::seconds ReadCache::touch_interval() { return kTouchInterval; }

Status ReadCache::VerifyMapped(const MappedFile& map, const std::string& path, const std::string& identity,
                               uint64_t block_offset, uint32_t block_length, uint32_t* data_offset) {
  auto shrank = [&] { return Status::Corruption(fmt::format("{}: the entry shrank while it was being mapped", path)); };
  uint8_t first[12];
  if (!map.Copy(0, sizeof first, first)) return Status::Corruption(fmt::format("{}: shorter than a header", path));
  const uint32_t declared = ReadCacheDeclaredHeaderSize(ByteView(first, sizeof first));
  if (declared == 0 || declared > kMaxHeaderBytes || declared > map.size()) {
    return Status::Corruption(fmt::format("{}: offset 0: no header of an entry", path));
  }
  thread_local AlignedBuffer scratch;
  scratch.Resize(std::max(declared, kChunkBytes));
  if (!map.Copy(0, declared, scratch.data())) return shrank();
  STOKE_ASSIGN_OR_RETURN(ReadCacheEntryHeader h, ParseReadCacheEntryHeader(ByteView(scratch.data(), declared), path));
  STOKE_RETURN_IF_ERROR(CheckEntryFits(h, path, identity, block_offset, block_length, map.size()));
  scratch.Resize(std::max(declared, h.chunk_bytes));
  for (uint32_t c = 0; uint64_t{c} * h.chunk_bytes < h.data_length; ++c) {
    const uint64_t from = uint64_t{c} * h.chunk_bytes;
    const size_t n = static_cast<size_t>(std::min<uint64_t>(h.chunk_bytes, h.data_length - from));
    if (!map.Copy(h.header_size + from, n, scratch.data())) return shrank();
    STOKE_RETURN_IF_ERROR(VerifyReadCacheChunks(h, c, ByteView(scratch.data(), n), path));
  }
  *data_offset = h.header_size;
  return Status::OK();
}

void ReadCache::Scan(bool evict) {
  if (scanning_.exchange(true)) return;  // one scan at a time; the running one will do
  struct Entry {
    int64_t mtime_ns;
    uint64_t bytes;
    std::string path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  const int64_t now = NowSeconds();
  const int64_t stale = std::chrono::duration_cast<std::chrono::seconds>(kStaleTempAge).count();
  written_since_scan_ = 0;
  for (int i = 0; i < 256; ++i) {
    const std::string sub = fmt::format("{}/{:02x}", root_, i);
    DIR* d = ::opendir(sub.c_str());
    if (d == nullptr) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::string path = sub + "/" + e->d_name;
      struct stat st;
      if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // gone meanwhile
      if (std::strstr(e->d_name, ".tmp.") != nullptr) {
        if (now - st.st_mtim.tv_sec > stale) ::unlink(path.c_str());  // its writer died
        continue;
      }
      const uint64_t bytes = static_cast<uint64_t>(st.st_size);
      total += bytes;
      if (evict) entries.push_back({st.st_mtim.tv_sec * int64_t{1000000000} + st.st_mtim.tv_nsec, bytes, std::move(path)});
    }
    ::closedir(d);
  }
  if (evict && total > options_.capacity_bytes) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime_ns < b.mtime_ns; });
    const uint64_t target = static_cast<uint64_t>(static_cast<double>(options_.capacity_bytes) * kEvictTarget);
    for (const Entry& e : entries) {
      if (total <= target) break;
      // Readers holding it open still read it whole; later reads miss and fetch it again.
      if (::unlink(e.path.c_str()) == 0) evicted_.fetch_add(1, std::memory_order_relaxed);
      total -= e.bytes;  // gone either way (another process may have evicted it first)
    }
  }
  usage_ = total;
  scanning_ = false;
}

void ReadCache::AcquireFetchBudget(uint64_t bytes) {
  MutexLock lock(&mu_);
  while (fetch_charged_ != 0 && fetch_charged_ + bytes > options_.max_fetch_bytes) budget_cv_.Wait(&mu_);
  fetch_charged_ += bytes;
}

void ReadCache::ReleaseFetchBudget(uint64_t bytes) {
  {
    MutexLock lock(&mu_);
    fetch_charged_ -= std::min(fetch_charged_, bytes);
  }
  budget_cv_.SignalAll();
}

}  // namespace stoke
