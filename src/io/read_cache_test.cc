// The read cache against a local base file whose reads are counted: what it serves equals the
// base's bytes, later reads make no request, corrupt and torn entries are dropped and fetched again,
// eviction keeps the directory near its capacity, and processes sharing a directory read correct
// bytes while they evict each other's entries.
#include "io/read_cache.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "io/local_files.h"
#include "io/object_store_testing.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using testing::TestBytes;

// A RandomAccessFile over bytes in memory that counts its reads and can fail them. With a delay,
// ReadAtAsync answers from a thread of its own after that long, as an object store would.
class CountingFile final : public RandomAccessFile {
 public:
  explicit CountingFile(std::string data, std::string path = "mem://object", int delay_ms = 0)
      : data_(std::move(data)), path_(std::move(path)), delay_ms_(delay_ms) {}
  ~CountingFile() override {
    std::lock_guard<std::mutex> lock(threads_mu_);
    for (auto& t : threads_) t.join();
  }
  void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const override {
    if (delay_ms_ == 0) return done(ReadAt(offset, dst));
    std::lock_guard<std::mutex> lock(threads_mu_);
    threads_.emplace_back([this, offset, dst, done = std::move(done)] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      done(ReadAt(offset, dst));
    });
  }
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    reads_.fetch_add(1);
    bytes_.fetch_add(dst.size());
    if (fail_.load()) return Status::IOError("injected: read of " + path_ + " failed");
    if (offset > data_.size() || dst.size() > data_.size() - offset) return Status::IOError("past the end of " + path_);
    std::memcpy(dst.data(), data_.data() + offset, dst.size());
    return Status::OK();
  }
  uint64_t size() const override { return data_.size(); }
  const std::string& path() const override { return path_; }

  uint64_t reads() const { return reads_.load(); }
  uint64_t bytes() const { return bytes_.load(); }
  void set_fail(bool fail) { fail_ = fail; }

 private:
  std::string data_;
  std::string path_;
  int delay_ms_;
  mutable std::atomic<uint64_t> reads_{0}, bytes_{0};
  std::atomic<bool> fail_{false};
  mutable std::mutex threads_mu_;
  mutable std::vector<std::thread> threads_;
};

// Flips a bit of the byte at `at` of the file at `path` (damage on disk).
void FlipByte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  char c;
  f.read(&c, 1);
  c ^= 0x20;
  f.seekp(static_cast<std::streamoff>(at));
  f.write(&c, 1);
}

// Entries are written after the reads they serve are answered: waits for `n` of them.
void WaitForWrites(const ReadCache& cache, uint64_t n) {
  for (int i = 0; i < 5000 && cache.stats().entries_written < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(cache.stats().entries_written, n);
}

// Wraps a CountingFile the test keeps a pointer to.
struct Wrapped {
  CountingFile* base;
  std::unique_ptr<RandomAccessFile> file;
};

class ReadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "stoke_read_cache_XXXXXX").string();
    dir_ = ::mkdtemp(tmpl.data());
    data_ = TestBytes((5 << 20) + 12345, 3);  // 5 full blocks of 1 MiB and a short one
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<ReadCache> OpenCache(ReadCacheOptions o = {}) {
    o.dir = dir_;
    auto c = ReadCache::Open(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  }
  Wrapped Wrap(ReadCache& cache, const std::string& identity = "mem://object mtime=1", int delay_ms = 0) {
    auto base = std::make_unique<CountingFile>(data_, "mem://object", delay_ms);
    CountingFile* raw = base.get();
    return {raw, cache.Wrap(std::move(base), identity)};
  }
  // Reads [offset, offset + n) through `file` and checks the bytes.
  void ExpectRead(const RandomAccessFile& file, uint64_t offset, size_t n) {
    std::string got(n, '\0');
    Status st = file.ReadAt(offset, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), n));
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(got == data_.substr(offset, n)) << "bytes differ at " << offset << " + " << n;
  }
  // Reads blocks 0-2 of the object through `cache`, waits for their entries and returns their paths.
  std::vector<std::string> CacheThreeBlocks(ReadCache& cache) {
    Wrapped w = Wrap(cache);
    ExpectRead(*w.file, 0, 3 << 20);
    WaitForWrites(cache, 3);
    const std::string id = "mem://object mtime=1 size=" + std::to_string(data_.size());
    return {cache.EntryPath(id, 0), cache.EntryPath(id, 1), cache.EntryPath(id, 2)};
  }
  uint64_t DirectoryBytes() const {
    uint64_t total = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file()) total += e.file_size();
    }
    return total;
  }

  std::string dir_;
  std::string data_;
};

TEST_F(ReadCacheTest, ServesTheBaseBytesAndLaterReadsMakeNoRequest) {
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache);
  // Ranges inside a block, across blocks, the short last block, the whole object.
  const std::vector<std::pair<uint64_t, size_t>> ranges = {
      {0, 100}, {(1 << 20) - 10, 20}, {3 << 20, 2 << 20}, {(5 << 20) + 100, 12245}, {0, data_.size()}, {777, 1}};
  for (auto [off, n] : ranges) ExpectRead(*w.file, off, n);
  const uint64_t reads = w.base->reads();
  EXPECT_GT(reads, 0u);
  EXPECT_LE(w.base->bytes(), data_.size()) << "each block is fetched once";
  WaitForWrites(*cache, 6);
  // Again, and through a new file (a later epoch, another loader) and a new cache on the directory
  // (another process): no read of the base.
  for (auto [off, n] : ranges) ExpectRead(*w.file, off, n);
  EXPECT_EQ(w.base->reads(), reads);
  auto cache2 = OpenCache();
  Wrapped w2 = Wrap(*cache2);
  for (auto [off, n] : ranges) ExpectRead(*w2.file, off, n);
  EXPECT_EQ(w2.base->reads(), 0u);
  EXPECT_EQ(cache2->stats().misses, 0u);
  EXPECT_GT(cache2->stats().hits, 0u);
}

// MapBlock: a written entry the page cache holds is mapped, its bytes those of the block; a block not
// cached, past the object or of too long an identity is not.
TEST_F(ReadCacheTest, MapsWholeEntriesThatThePageCacheHolds) {
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache);
  ExpectRead(*w.file, 100, 2 << 20);  // blocks 0, 1 and 2
  WaitForWrites(*cache, 3);
  const uint64_t size = data_.size();
  for (uint64_t block : {0, 2}) {
    auto mapped = cache->MapBlock("mem://object mtime=1", size, block);
    ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
    ASSERT_TRUE(mapped->has_value()) << "block " << block;
    const MappedCacheBlock& m = **mapped;
    ASSERT_EQ(m.data_length, 1u << 20);
    std::string got(m.data_length, '\0');
    ASSERT_TRUE(m.map.Copy(m.data_offset, m.data_length, reinterpret_cast<uint8_t*>(got.data())));
    EXPECT_TRUE(got == data_.substr(block << 20, 1 << 20)) << "block " << block;
  }
  auto not_cached = cache->MapBlock("mem://object mtime=1", size, 5);
  ASSERT_TRUE(not_cached.ok());
  EXPECT_FALSE(not_cached->has_value());
  ExpectRead(*w.file, (5 << 20) + 7, 10);  // the short last block
  WaitForWrites(*cache, 4);
  auto last = cache->MapBlock("mem://object mtime=1", size, 5);
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->data_length, 12345u);
  EXPECT_FALSE(cache->MapBlock("mem://object mtime=1", size, 6)->has_value());    // past the object
  EXPECT_FALSE(cache->MapBlock("mem://object mtime=2", size, 0)->has_value());    // another object
  EXPECT_FALSE(cache->MapBlock(std::string(4096, 'x'), size, 0)->has_value());    // never cached
  EXPECT_EQ(cache->stats().blocks_mapped, 3u);
}

TEST_F(ReadCacheTest, AnEntryThePageCacheDoesNotHoldIsNotMapped) {
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache);
  ExpectRead(*w.file, 0, 10);
  WaitForWrites(*cache, 1);
  const std::string entry = cache->EntryPath("mem://object mtime=1 size=" + std::to_string(data_.size()), 0);
  if (!AdviseDropFromPageCache(entry) || ResidentPages(entry, 0, fs::file_size(entry)) != 0) {
    GTEST_SKIP() << "this file system keeps the entry in the page cache";
  }
  auto mapped = cache->MapBlock("mem://object mtime=1", data_.size(), 0);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_FALSE(mapped->has_value()) << "a page fault on it would wait for the disk";
}

// An entry that fails a check is not mapped: it is dropped as on a read, and fetched again.
TEST_F(ReadCacheTest, CorruptEntriesAreNotMappedButDropped) {
  auto cache = OpenCache();
  const std::vector<std::string> entries = CacheThreeBlocks(*cache);
  FlipByte(entries[0], 4096 + (15 << 16) + 3);  // data, the last chunk
  FlipByte(entries[1], 20);                     // block_offset in the header
  fs::resize_file(entries[2], 4096 + 1000);
  const std::vector<std::string> wants = {"CRC mismatch in chunk 15", "header CRC mismatch", "the header says"};
  for (uint64_t block = 0; block < 3; ++block) {
    auto mapped = cache->MapBlock("mem://object mtime=1", data_.size(), block);
    ASSERT_FALSE(mapped.ok()) << "block " << block;
    EXPECT_EQ(mapped.status().code(), StatusCode::kCorruption);
    EXPECT_NE(mapped.status().message().find(entries[block]), std::string::npos) << mapped.status().ToString();
    EXPECT_NE(mapped.status().message().find(wants[block]), std::string::npos) << mapped.status().ToString();
    EXPECT_FALSE(fs::exists(entries[block])) << "dropped";
  }
  EXPECT_EQ(cache->stats().corrupt_entries, 3u);
  EXPECT_EQ(cache->stats().blocks_mapped, 0u);
  Wrapped fresh = Wrap(*cache);
  ExpectRead(*fresh.file, 0, 3 << 20);
  EXPECT_EQ(fresh.base->bytes(), uint64_t{3} << 20) << "fetched again";
}

TEST_F(ReadCacheTest, AnotherIdentityIsAnotherObject) {
  auto cache = OpenCache();
  Wrapped a = Wrap(*cache, "mem://object mtime=1");
  ExpectRead(*a.file, 0, 4096);
  Wrapped b = Wrap(*cache, "mem://object mtime=2");  // rewritten under the same name
  ExpectRead(*b.file, 0, 4096);
  EXPECT_EQ(b.base->reads(), 1u);
}

TEST_F(ReadCacheTest, ConcurrentReadsOfOneBlockFetchItOnce) {
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache, "mem://object mtime=1", /*delay_ms=*/100);
  constexpr int kReads = 64;
  std::vector<std::string> bufs(kReads, std::string(1000, '\0'));
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  for (int i = 0; i < kReads; ++i) {
    w.file->ReadAtAsync(i * 1000, MutableByteView(reinterpret_cast<uint8_t*>(bufs[i].data()), 1000), [&](Status st) {
      if (!st.ok()) failed.fetch_add(1);
      done.fetch_add(1);
    });
  }
  while (done.load() < kReads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(failed.load(), 0);
  for (int i = 0; i < kReads; ++i) EXPECT_TRUE(bufs[i] == data_.substr(i * 1000, 1000)) << i;
  // All in block 0: fetched once, unless a read missed just while the fetch's entry was being written.
  EXPECT_LE(w.base->reads(), 2u);
}

TEST_F(ReadCacheTest, CorruptEntriesAreDroppedAndFetchedAgainNeverDelivered) {
  auto cache = OpenCache();
  const std::vector<std::string> entries = CacheThreeBlocks(*cache);
  // Damage three entries: a flipped data byte, a flipped header byte, a truncation.
  for (const auto& e : entries) ASSERT_TRUE(fs::exists(e)) << e;
  FlipByte(entries[0], 4096 + 70000);  // data, chunk 1
  FlipByte(entries[1], 20);            // block_offset in the header
  fs::resize_file(entries[2], 4096 + 1000);
  Wrapped fresh = Wrap(*cache);
  ExpectRead(*fresh.file, 0, 3 << 20);
  EXPECT_EQ(fresh.base->bytes(), uint64_t{3} << 20) << "the damaged blocks fetched again (one GET: they are consecutive)";
  EXPECT_EQ(cache->stats().corrupt_entries, 3u);
  WaitForWrites(*cache, 6);
  // The entries were rewritten whole: now they serve.
  Wrapped again = Wrap(*cache);
  ExpectRead(*again.file, 0, 3 << 20);
  EXPECT_EQ(again.base->reads(), 0u);
}

TEST_F(ReadCacheTest, AWriterKilledMidWriteLeavesNothingVisible) {
  auto cache = OpenCache();
  const std::string id = "mem://object mtime=1 size=" + std::to_string(data_.size());
  const std::string entry = cache->EntryPath(id, 0);
  // What a killed writer leaves: a temporary file, here holding a valid-looking prefix.
  const std::string header = EncodeReadCacheEntryHeader(id, 0, AsBytes(std::string_view(data_).substr(0, 1 << 20)));
  const std::string tmp = entry + ".tmp.99999.0";
  {
    std::ofstream f(tmp, std::ios::binary);
    f << header << data_.substr(0, 1000);
  }
  Wrapped w = Wrap(*cache);
  ExpectRead(*w.file, 0, 5000);
  EXPECT_EQ(w.base->reads(), 1u) << "the temporary file is not an entry";
  EXPECT_EQ(cache->stats().corrupt_entries, 0u);
  WaitForWrites(*cache, 1);  // the block's entry is written in the background
  // An hour later a scan deletes it.
  const auto old = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(tmp, old);
  auto cache2 = OpenCache();
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::exists(entry));
}

TEST_F(ReadCacheTest, EvictsTheLeastRecentlyUsedBeyondCapacity) {
  ReadCacheOptions o;
  o.capacity_bytes = 3 << 20;  // three blocks and change
  auto cache = OpenCache(o);
  Wrapped w = Wrap(*cache);
  const std::string id = "mem://object mtime=1 size=" + std::to_string(data_.size());
  // Blocks 0..5 one by one, with distinct modification times.
  for (uint64_t b = 0; b < 6; ++b) {
    ExpectRead(*w.file, b << 20, 100);
    WaitForWrites(*cache, b + 1);
    fs::last_write_time(cache->EntryPath(id, b), fs::file_time_type::clock::now() - std::chrono::minutes(60 - b));
  }
  // Let the writers finish, then a new cache's scan (or the last write's) has evicted down to 90 %.
  auto cache2 = OpenCache(o);
  EXPECT_LE(DirectoryBytes(), o.capacity_bytes);
  EXPECT_FALSE(fs::exists(cache->EntryPath(id, 0))) << "the oldest goes first";
  EXPECT_TRUE(fs::exists(cache->EntryPath(id, 5)) || fs::exists(cache->EntryPath(id, 4)));
  // Evicted blocks are simply fetched again.
  Wrapped w2 = Wrap(*cache2);
  ExpectRead(*w2.file, 0, data_.size());
}

TEST_F(ReadCacheTest, BaseErrorsReachTheReaderAndAreNotCached) {
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache);
  w.base->set_fail(true);
  std::string got(100, '\0');
  Status st = w.file->ReadAt(10, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), got.size()));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("injected: read of mem://object failed"), std::string::npos) << st.ToString();
  w.base->set_fail(false);
  ExpectRead(*w.file, 10, 100);
  // A range past the end is the base's error, not a cache matter.
  st = w.file->ReadAt(data_.size() - 5, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), got.size()));
  EXPECT_FALSE(st.ok());
}

TEST_F(ReadCacheTest, ABlockBudgetSmallerThanAReadStillReads) {
  ReadCacheOptions o;
  o.max_fetch_bytes = 1;  // one fetch at a time
  auto cache = OpenCache(o);
  Wrapped w = Wrap(*cache);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] { ExpectRead(*w.file, static_cast<uint64_t>(t) * 1000000, 2000000); });
  }
  for (auto& t : threads) t.join();
}

// Processes sharing one directory, with a capacity of a few blocks so that they evict each other's
// entries while reading them: every read must return the base's bytes.
TEST_F(ReadCacheTest, ProcessesSharingADirectoryReadCorrectBytesWhileEvicting) {
  constexpr int kProcesses = 4;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      {
        ReadCacheOptions o;
        o.dir = dir_;
        o.capacity_bytes = 2500000;  // about two blocks: constant eviction
        auto cache = ReadCache::Open(o);
        if (!cache.ok()) ::_exit(2);
        auto file = (*cache)->Wrap(std::make_unique<CountingFile>(data_), "mem://object mtime=1");
        std::mt19937_64 rng(static_cast<uint64_t>(p) + 1);
        std::string got;
        for (int i = 0; i < 300 && rc == 0; ++i) {
          const uint64_t off = rng() % data_.size();
          const size_t n = static_cast<size_t>(std::min<uint64_t>(1 + rng() % 1500000, data_.size() - off));
          got.assign(n, '\0');
          Status st = file->ReadAt(off, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), n));
          if (!st.ok() || got != data_.substr(off, n)) rc = 1;
        }
      }
      ::_exit(rc);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "a process read wrong bytes (1) or could not open the cache (2)";
  }
  // Nothing half-written is left under an entry's name: every entry verifies.
  auto cache = OpenCache();
  Wrapped w = Wrap(*cache);
  ExpectRead(*w.file, 0, data_.size());
  EXPECT_EQ(cache->stats().corrupt_entries, 0u);
}

TEST(ReadCacheOptionsTest, BadOptionsAndUnwritableDirectoriesAreErrors) {
  ReadCacheOptions o;
  EXPECT_EQ(ReadCache::Open(o).status().code(), StatusCode::kInvalidArgument);
  o.dir = "/proc/stoke-cache-here";
  auto c = ReadCache::Open(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/proc/stoke-cache-here"), std::string::npos) << c.status().ToString();
  o.dir = "/tmp";
  o.block_bytes = 100;
  EXPECT_EQ(ReadCache::Open(o).status().code(), StatusCode::kInvalidArgument);
}

// --- the entry format: bad input --------------------------------------------------------------------

TEST(ReadCacheEntryFormat, RoundTripsAndVerifiesChunks) {
  const std::string data = TestBytes(200000, 9);
  const std::string header = EncodeReadCacheEntryHeader("az://c/t/part-0 mtime=5 size=9", 1 << 20, AsBytes(data));
  ASSERT_EQ(header.size() % 4096, 0u);
  EXPECT_EQ(ReadCacheDeclaredHeaderSize(AsBytes(header)), header.size());
  auto h = ParseReadCacheEntryHeader(AsBytes(header), "entry");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->identity, "az://c/t/part-0 mtime=5 size=9");
  EXPECT_EQ(h->block_offset, uint64_t{1} << 20);
  EXPECT_EQ(h->data_length, data.size());
  EXPECT_EQ(h->chunk_crcs.size(), 4u);  // 200000 bytes in chunks of 64 KiB
  EXPECT_TRUE(VerifyReadCacheChunks(*h, 0, AsBytes(data), "entry").ok());
  EXPECT_TRUE(VerifyReadCacheChunks(*h, 3, AsBytes(data).subspan(3 * 65536), "entry").ok());
  std::string bad = data;
  bad[65536 + 5] ^= 1;
  Status st = VerifyReadCacheChunks(*h, 0, AsBytes(bad), "entry");
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("chunk 1"), std::string::npos) << st.ToString();
  st = VerifyReadCacheChunks(*h, 3, AsBytes(data).subspan(3 * 65536, 100), "entry");
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << "a short last chunk";
}

TEST(ReadCacheEntryFormat, RejectsBadHeadersNamingTheEntry) {
  const std::string data = TestBytes(5000, 1);
  const std::string good = EncodeReadCacheEntryHeader("id", 0, AsBytes(data));
  auto expect_bad = [](std::string bytes, const std::string& why) {
    auto h = ParseReadCacheEntryHeader(AsBytes(bytes), "/cache/x-0");
    ASSERT_FALSE(h.ok()) << why;
    EXPECT_EQ(h.status().code(), StatusCode::kCorruption) << why;
    EXPECT_NE(h.status().message().find("/cache/x-0"), std::string::npos) << why << ": " << h.status().ToString();
  };
  expect_bad("", "empty");
  expect_bad(good.substr(0, 39), "short");
  expect_bad(good.substr(0, 100), "truncated header");
  std::string s = good;
  s[0] = 'X';
  expect_bad(s, "magic");
  for (size_t at : {8u, 12u, 16u, 24u, 28u, 32u, 36u, 41u, 50u, 4000u}) {
    s = good;
    s[at] ^= 0x40;
    expect_bad(s, "flipped byte at " + std::to_string(at));
  }
  s = good;
  StoreLE<uint32_t>(reinterpret_cast<uint8_t*>(s.data()) + 8, 0xFFFFF000u);
  expect_bad(s, "huge header size");
  EXPECT_EQ(ReadCacheDeclaredHeaderSize(AsBytes(std::string("STKRCB0"))), 0u);
}

// The fuzz target's seeds were written from the format's description alone (by a short Python
// script with zlib's CRC-32): they must parse and verify here.
TEST(ReadCacheEntryFormat, TheFuzzSeedsAreValidEntries) {
  const std::string dir = std::string(STOKE_SOURCE_DIR) + "/tests/data/fuzz/read_cache_fuzz";
  int seen = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto bytes = ReadFileToString(LocalStorage(), e.path().string());
    ASSERT_TRUE(bytes.ok());
    auto h = ParseReadCacheEntryHeader(AsBytes(*bytes), e.path().string());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(bytes->size(), uint64_t{h->header_size} + h->data_length);
    EXPECT_TRUE(VerifyReadCacheChunks(*h, 0, AsBytes(*bytes).subspan(h->header_size), "seed").ok());
    ++seen;
  }
  EXPECT_GE(seen, 2);
}

}  // namespace
}  // namespace stoke
