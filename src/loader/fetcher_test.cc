#include "loader/fetcher.h"

#include <gtest/gtest.h>
#include <liburing.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "io/read_cache.h"
#include "io/storage.h"
#include "format/codec.h"
#include "io/uri.h"
#include "loader/out_of_memory.h"
#include "stoke/status.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using Backend = FetcherOptions::Backend;
using testing_support::DropFromPageCache;

// A file of random bytes, removed when the test ends.
class RandomFile {
 public:
  RandomFile(const std::string& dir, size_t size, uint32_t seed) : path_(dir + "/fetcher_test_" + std::to_string(::getpid()) + "_" + std::to_string(seed)) {
    std::mt19937 rng(seed);
    bytes_.resize(size);
    for (auto& b : bytes_) b = static_cast<uint8_t>(rng());
    std::ofstream out(path_, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes_.data()), static_cast<std::streamsize>(bytes_.size()));
    ok_ = static_cast<bool>(out);
  }
  ~RandomFile() { std::remove(path_.c_str()); }
  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  bool ok_ = false;
};

const char* backend_label(Backend b) {
  return b == Backend::kAuto ? "auto" : b == Backend::kPread ? "pread" : "io_uring";
}

bool UringAvailable() {
  io_uring ring;
  if (io_uring_queue_init(4, &ring, 0) < 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

std::unique_ptr<Fetcher> OpenOrDie(std::vector<std::string> files, FetcherOptions o) {
  auto f = Fetcher::Open(std::move(files), o);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : nullptr;
}

// Takes one result per split read of `requests` from `fetcher` (yielding while none is ready): each
// must have succeeded, with the file's bytes of its range in its head (the result) and its tail
// (tails[tag]); `also` checks more of each (request, result), then the buffer is released. Tags must
// be the requests' indices.
template <typename Also>
void ReceiveSplitReads(Fetcher& fetcher, const std::vector<FetchRequest>& requests,
                       const std::vector<std::vector<uint8_t>>& tails, const std::vector<uint8_t>& file, Also&& also) {
  for (size_t received = 0; received < requests.size();) {
    auto r = fetcher.Next();
    if (!r) {
      std::this_thread::yield();
      continue;
    }
    ++received;
    const FetchRequest& q = requests[r->tag];
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    ASSERT_EQ(r->data.size(), q.head_length);
    EXPECT_EQ(0, std::memcmp(r->data.data(), file.data() + q.offset, q.head_length)) << r->tag;
    EXPECT_EQ(0, std::memcmp(tails[r->tag].data(), file.data() + q.offset + q.head_length, q.length - q.head_length))
        << r->tag;
    also(q, *r);
    fetcher.Release(std::move(r->data));
  }
}

// Submits `requests` from this thread while a consumer thread checks every result with `good` and
// releases it; returns the number of bad results. Tags must be the requests' indices. Batched: the
// requests go in groups of 32 through the batch Submit, and the consumer takes only reads that
// on_started reported, several per Next, as the loader does (so a batch Submit that blocked on the
// budget without reporting what it started would hang here).
int SubmitAndConsume(Fetcher& fetcher, const std::vector<FetchRequest>& requests, bool batched,
                     const std::function<bool(const FetchRequest&, const FetchResult&)>& good) {
  const size_t n = requests.size();
  std::atomic<int> bad{0};
  std::atomic<size_t> started{0};
  std::vector<int> seen(n, 0);
  std::thread consumer([&] {
    std::vector<FetchResult> results(16);
    size_t received = 0;
    auto take = [&](FetchResult& r) {
      ++received;
      if (r.tag >= n || seen[r.tag]++ != 0) {
        ++bad;
        return;
      }
      if (!good(requests[r.tag], r)) ++bad;
      if (r.status.ok()) fetcher.Release(std::move(r.data));
    };
    while (received < n) {
      if (batched) {
        const size_t ready = started.load() - received;
        const size_t k = ready == 0 ? 0 : fetcher.Next(results.data(), std::min(ready, results.size()));
        for (size_t j = 0; j < k; ++j) take(results[j]);
        if (k == 0) std::this_thread::yield();
        continue;
      }
      std::optional<FetchResult> r = fetcher.Next();
      if (!r) {  // the producer has not submitted the next read yet
        std::this_thread::yield();
        continue;
      }
      take(*r);
    }
  });
  if (batched) {
    const std::function<void(size_t)> on_started = [&](size_t k) { started += k; };
    for (size_t i = 0; i < n; i += 32) {
      const auto group = std::span(requests).subspan(i, std::min<size_t>(32, n - i));
      size_t queued = 0;
      Status st = fetcher.Submit(group, &queued, on_started);
      EXPECT_TRUE(st.ok()) << st.ToString();
      EXPECT_EQ(queued, group.size());
    }
  } else {
    for (const FetchRequest& q : requests) EXPECT_TRUE(fetcher.Submit(q).ok());
  }
  consumer.join();
  EXPECT_EQ(started.load(), batched ? n : 0);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(seen[i], 1) << "tag " << i;
  EXPECT_FALSE(fetcher.Next().has_value());
  EXPECT_EQ(fetcher.bytes_in_flight(), 0);
  return bad.load();
}

// Submits `n` random ranges (1 B .. 400 KB) of `file` and checks every result against the file's bytes.
void ReadRandomRangesAndCheck(Fetcher& fetcher, const RandomFile& file, int n, uint32_t seed, bool batched = false) {
  const auto& bytes = file.bytes();
  std::mt19937_64 rng(seed);
  std::vector<FetchRequest> requests;
  for (int i = 0; i < n; ++i) {
    uint32_t length = 1 + static_cast<uint32_t>(rng() % (400 * 1000));
    uint64_t offset = rng() % (bytes.size() - length + 1);
    requests.push_back(FetchRequest{0, offset, length, static_cast<uint64_t>(i)});
  }
  const int bad = SubmitAndConsume(fetcher, requests, batched, [&](const FetchRequest& q, const FetchResult& r) {
    if (!r.status.ok()) {
      ADD_FAILURE() << r.status.ToString();
      return false;
    }
    return r.bytes().size() == q.length && std::memcmp(r.bytes().data(), bytes.data() + q.offset, q.length) == 0;
  });
  EXPECT_EQ(bad, 0);
}

TEST(FetcherTest, PreadBackendReadsRandomRangesExactly) {
  RandomFile file(::testing::TempDir(), 4 << 20, 1);
  ASSERT_TRUE(file.ok());
  FetcherOptions o;
  o.backend = Backend::kPread;
  o.max_bytes_in_flight = 2 << 20;  // small, so back-pressure is exercised too
  auto f = OpenOrDie({file.path()}, o);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->backend_name(), "pread");
  ReadRandomRangesAndCheck(*f, file, 1000, 11);
}

TEST(FetcherTest, IoUringBackendReadsRandomRangesExactly) {
  if (!UringAvailable()) GTEST_SKIP() << "io_uring_queue_init fails in this sandbox";
  RandomFile file(::testing::TempDir(), 4 << 20, 2);
  ASSERT_TRUE(file.ok());
  FetcherOptions o;
  o.backend = Backend::kIoUring;
  o.max_bytes_in_flight = 2 << 20;
  auto f = OpenOrDie({file.path()}, o);
  ASSERT_NE(f, nullptr);
  EXPECT_STREQ(f->backend_name(), "io_uring");
  ReadRandomRangesAndCheck(*f, file, 1000, 12);
}

// The batch Submit, on both backends, with a budget that holds a few reads only: groups block part-way
// and must start (and report) what they prepared first.
TEST(FetcherTest, BatchSubmitReadsRandomRangesExactlyUnderASmallBudget) {
  RandomFile file(::testing::TempDir(), 4 << 20, 13);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    FetcherOptions o;
    o.backend = backend;
    o.queue_depth = 64;
    o.max_bytes_in_flight = 1 << 20;
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    ReadRandomRangesAndCheck(*f, file, 1000, 14, /*batched=*/true);
  }
}

// Small reads, many per group: every one of them lands where its request said.
TEST(FetcherTest, BatchSubmitOfSmallReadsDeliversEveryOneOnce) {
  RandomFile file(::testing::TempDir(), 1 << 20, 15);
  ASSERT_TRUE(file.ok());
  std::mt19937_64 rng(16);
  std::vector<FetchRequest> requests;
  for (uint64_t i = 0; i < 5000; ++i) requests.push_back(FetchRequest{0, rng() % ((1 << 20) - 600), 1 + uint32_t(rng() % 600), i});
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    FetcherOptions o;
    o.backend = backend;
    o.queue_depth = 8;  // smaller than a group: groups wait for slots
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(0, SubmitAndConsume(*f, requests, true, [&](const FetchRequest& q, const FetchResult& r) {
                return r.status.ok() && r.bytes().size() == q.length &&
                       std::memcmp(r.bytes().data(), file.bytes().data() + q.offset, q.length) == 0;
              }));
  }
}

// A batch stops at the first request it refuses, and says how many it queued before it.
TEST(FetcherTest, BatchSubmitStopsAtARefusedRequest) {
  RandomFile file(::testing::TempDir(), 4096, 17);
  ASSERT_TRUE(file.ok());
  auto f = OpenOrDie({file.path()}, FetcherOptions{});
  ASSERT_NE(f, nullptr);
  const std::vector<FetchRequest> requests = {{0, 0, 10, 0}, {0, 100, 10, 1}, {5, 0, 10, 2}, {0, 200, 10, 3}};
  size_t started = 0, queued = 0;
  Status st = f->Submit(requests, &queued, [&](size_t k) { started += k; });
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_EQ(queued, 2u);
  EXPECT_EQ(started, 2u);
  std::vector<FetchResult> results(4);
  size_t got = 0;
  while (got < 2) got += f->Next(results.data() + got, 4 - got);
  EXPECT_EQ(got, 2u);
  for (size_t k = 0; k < got; ++k) {
    ASSERT_TRUE(results[k].status.ok()) << results[k].status.ToString();
    EXPECT_EQ(0, std::memcmp(results[k].bytes().data(), file.bytes().data() + requests[results[k].tag].offset, 10));
    f->Release(std::move(results[k].data));
  }
  EXPECT_EQ(f->Next(results.data(), 4), 0u) << "nothing outstanding";
  EXPECT_EQ(f->bytes_in_flight(), 0);
}

// Files named by URI are read through Storage (ReadAtAsync), here a registered local storage (the
// object stores are tested against servers in loader_object_store_test.cc), with sizes given (no
// stat) and through the read cache: exact bytes, and a second fetcher on the cache reads from it.
TEST(FetcherTest, StorageFilesReadExactlyThroughTheReadCache) {
  RandomFile file(::testing::TempDir(), 4 << 20, 21);
  ASSERT_TRUE(file.ok());
  ScopedStorageRegistration reg("fetcher-test", LocalStorage());
  const std::string cache_dir = ::testing::TempDir() + "/fetcher_cache_" + std::to_string(::getpid());
  ReadCacheOptions co;
  co.dir = cache_dir;
  auto cache = ReadCache::Open(co);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  FetcherOptions o;
  o.queue_depth = 64;
  o.max_bytes_in_flight = 2 << 20;
  o.file_sizes = {file.bytes().size()};
  o.file_versions = {"mtime=1"};
  o.cache = *cache;
  for (int pass = 0; pass < 2; ++pass) {
    auto f = OpenOrDie({reg.Uri(file.path())}, o);
    ASSERT_NE(f, nullptr);
    EXPECT_STREQ(f->backend_name(), "storage");
    ReadRandomRangesAndCheck(*f, file, 300, 30 + pass, /*batched=*/true);
    if (pass == 0) {  // blocks are written after the reads they served
      for (int i = 0; i < 5000 && (*cache)->stats().entries_written < 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  EXPECT_EQ((*cache)->stats().misses, 4u) << "4 MiB: each 1 MiB block fetched once";
  EXPECT_GT((*cache)->stats().hits, 0u);
  std::filesystem::remove_all(cache_dir);

  o.file_sizes = {1, 2};
  EXPECT_EQ(Fetcher::Open({reg.Uri(file.path())}, o).status().code(), StatusCode::kInvalidArgument);
}

TEST(FetcherTest, AutoBackendPicksIoUringWhenAvailable) {
  RandomFile file(::testing::TempDir(), 1 << 16, 3);
  ASSERT_TRUE(file.ok());
  auto f = OpenOrDie({file.path()}, FetcherOptions{});
  ASSERT_NE(f, nullptr);
  // Buffered: the ring, and reading threads for cached pages of 64 KiB up to 1 MiB.
  EXPECT_STREQ(f->backend_name(), UringAvailable() ? "io_uring+pread" : "pread");
}

// Groups larger than the queue depth, of reads for kAuto's reading threads (64 KiB up to 1 MiB) and
// for the ring: a group that finds no slot free waits for a refill of several (an eighth of the depth,
// at most what it has left to queue), and every read still comes back once and exact, with a budget
// that blocks some groups on bytes as well. It checks the reads, not how often the producer woke.
TEST(FetcherTest, BatchSubmitWaitingForARefillOfSlotsDeliversEveryRead) {
  RandomFile file(::testing::TempDir(), 8 << 20, 17);
  ASSERT_TRUE(file.ok());
  std::mt19937_64 rng(18);
  std::vector<FetchRequest> requests;
  for (uint64_t i = 0; i < 1500; ++i) {
    const uint32_t length = i % 3 == 0 ? 1 + uint32_t(rng() % 4000) : 65536 + uint32_t(rng() % 200000);
    requests.push_back(FetchRequest{0, rng() % (file.bytes().size() - length + 1), length, i});
  }
  for (int64_t budget : {int64_t{64} << 20, int64_t{1} << 20}) {
    FetcherOptions o;
    o.queue_depth = 16;
    o.max_bytes_in_flight = budget;
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(0, SubmitAndConsume(*f, requests, true, [&](const FetchRequest& q, const FetchResult& r) {
                return r.status.ok() && r.bytes().size() == q.length &&
                       std::memcmp(r.bytes().data(), file.bytes().data() + q.offset, q.length) == 0;
              }))
        << f->backend_name() << " budget " << budget;
  }
}

// A storage whose files' asynchronous reads wait, in the order they were started, until the test
// finishes them one at a time (synchronous ReadAt and everything else go straight to `base`).
class GatedStorage final : public Storage {
 public:
  explicit GatedStorage(Storage& base) : base_(base) {}
  // Reads waiting to be finished.
  size_t waiting() const {
    std::lock_guard lock(mu_);
    return held_.size();
  }
  // Finishes the oldest waiting read: its bytes from the base file, then its callback (on this thread).
  void FinishOne() {
    Held h;
    {
      std::lock_guard lock(mu_);
      ASSERT_FALSE(held_.empty());
      h = std::move(held_.front());
      held_.erase(held_.begin());
    }
    h.done(h.file->ReadAt(h.offset, h.dst));
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override {
    STOKE_ASSIGN_OR_RETURN(auto file, base_.OpenForRead(path));
    return std::unique_ptr<RandomAccessFile>(new File(std::move(file), this));
  }
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive) override {
    return base_.Create(path, exclusive);
  }
  Result<std::vector<DirEntry>> List(const std::string& dir) override { return base_.List(dir); }
  Result<std::vector<std::string>> ListNames(const std::string& dir) override { return base_.ListNames(dir); }
  Result<DirEntry> Stat(const std::string& path) override { return base_.Stat(path); }
  Status CreateDirectories(const std::string& path) override { return base_.CreateDirectories(path); }
  Status Rename(const std::string& from, const std::string& to) override { return base_.Rename(from, to); }
  Status Delete(const std::string& path) override { return base_.Delete(path); }
  Status PutIfAbsent(const std::string& path, ByteView data) override { return base_.PutIfAbsent(path, data); }

 private:
  struct Held {
    const RandomAccessFile* file = nullptr;
    uint64_t offset = 0;
    MutableByteView dst;
    ReadCallback done;
  };
  class File final : public RandomAccessFile {
   public:
    File(std::unique_ptr<RandomAccessFile> base, GatedStorage* gate) : base_(std::move(base)), gate_(gate) {}
    Status ReadAt(uint64_t offset, MutableByteView dst) const override { return base_->ReadAt(offset, dst); }
    void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const override {
      std::lock_guard lock(gate_->mu_);
      gate_->held_.push_back(Held{base_.get(), offset, dst, std::move(done)});
    }
    uint64_t size() const override { return base_->size(); }
    const std::string& path() const override { return base_->path(); }
    bool remote() const override { return true; }

   private:
    std::unique_ptr<RandomAccessFile> base_;
    GatedStorage* gate_;
  };

  Storage& base_;
  mutable std::mutex mu_;
  std::vector<Held> held_;  // guarded by mu_
};

// Waits up to 10 s for `done()`; returns it.
template <typename Done>
bool WaitUntil(Done done) {
  for (int i = 0; i < 10000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return done();
}

// The refill itself: a batch Submit that found every slot taken is not woken by the first completion,
// only once an eighth of the queue depth is free (2 of 16), and then starts both reads at once. Every
// read still comes back exact.
TEST(FetcherTest, BatchSubmitWaitsForARefillNotForEachCompletion) {
  RandomFile file(::testing::TempDir(), 1 << 20, 23);
  ASSERT_TRUE(file.ok());
  GatedStorage gate(LocalStorage());
  ScopedStorageRegistration reg("fetcher-gated", gate);
  FetcherOptions o;
  o.queue_depth = 16;
  o.max_bytes_in_flight = 64 << 20;  // never the limit: 40 reads of 4 KiB
  o.file_sizes = {file.bytes().size()};
  auto f = OpenOrDie({reg.Uri(file.path())}, o);
  ASSERT_NE(f, nullptr);
  ASSERT_STREQ(f->backend_name(), "storage");
  std::vector<FetchRequest> requests;
  for (uint64_t i = 0; i < 40; ++i) requests.push_back(FetchRequest{0, i * 20000, 4096, i});
  std::atomic<size_t> started{0};
  std::mutex mu;
  std::vector<size_t> groups;  // each on_started(n), in order
  const std::function<void(size_t)> on_started = [&](size_t n) {
    std::lock_guard lock(mu);
    groups.push_back(n);
    started += n;
  };
  Status submitted;
  size_t queued = 0;
  std::thread producer([&] { submitted = f->Submit(requests, &queued, on_started); });

  ASSERT_TRUE(WaitUntil([&] { return gate.waiting() == 16 && started.load() == 16; }));
  gate.FinishOne();  // one slot free: not yet what the Submit waits for
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(started.load(), 16u) << "the producer was woken by one completion";
  gate.FinishOne();  // two free: the refill
  ASSERT_TRUE(WaitUntil([&] { return started.load() == 18; })) << started.load();
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(groups, (std::vector<size_t>{16, 2}));
  }
  // The rest, finished as they come; then every result is the file's bytes.
  while (started.load() < requests.size() || gate.waiting() > 0) {
    if (gate.waiting() > 0) {
      gate.FinishOne();
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  ASSERT_TRUE(submitted.ok()) << submitted.ToString();
  EXPECT_EQ(queued, requests.size());
  std::vector<int> seen(requests.size(), 0);
  for (size_t k = 0; k < requests.size(); ++k) {
    auto r = f->Next();
    ASSERT_TRUE(r.has_value());
    ASSERT_TRUE(r->status.ok()) << r->status.ToString();
    const FetchRequest& q = requests[r->tag];
    ++seen[r->tag];
    EXPECT_EQ(0, std::memcmp(r->bytes().data(), file.bytes().data() + q.offset, q.length)) << r->tag;
    f->Release(std::move(r->data));
  }
  EXPECT_EQ(seen, std::vector<int>(requests.size(), 1));
  EXPECT_FALSE(f->Next().has_value());
}

// The reads kAuto hands to its reading threads (64 KiB up to 1 MiB), and every split read of kPread,
// come back with the CRC-32 of their tail when checksum_tails is set; the ring's reads, and every read
// without checksum_tails, without one. The bytes are exact either way.
TEST(FetcherTest, ReadingThreadsChecksumTheTailsTheyRead) {
  RandomFile file(::testing::TempDir(), 3 << 20, 9);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kAuto, Backend::kPread, Backend::kIoUring}) {
    if (backend == Backend::kIoUring && !UringAvailable()) continue;
    for (bool checksum : {true, false}) {
      FetcherOptions o;
      o.backend = backend;
      o.queue_depth = 8;
      o.checksum_tails = checksum;
      auto f = OpenOrDie({file.path()}, o);
      ASSERT_NE(f, nullptr);
      const std::string name = f->backend_name();
      std::mt19937_64 rng(5);
      // Around the thresholds: below 64 KiB, from 64 KiB, up to and from 1 MiB.
      const std::vector<uint32_t> lengths = {1000, 65535, 65536, 70000, 360030, (1u << 20) - 1, 1u << 20, 2u << 20};
      std::vector<std::vector<uint8_t>> tails(lengths.size());
      std::vector<FetchRequest> requests;
      for (size_t i = 0; i < lengths.size(); ++i) {
        const uint32_t head = 30;
        const uint64_t offset = rng() % (file.bytes().size() - lengths[i] + 1);
        tails[i].assign(lengths[i] - head, 0);
        requests.push_back(FetchRequest{.file = 0, .offset = offset, .length = lengths[i], .tag = i,
                                        .tail = tails[i].data(), .head_length = head});
      }
      for (const auto& q : requests) ASSERT_TRUE(f->Submit(q).ok());
      ReceiveSplitReads(*f, requests, tails, file.bytes(), [&](const FetchRequest& q, const FetchResult& r) {
        const ByteView want(file.bytes().data() + q.offset + q.head_length, q.length - q.head_length);
        // kPread's threads read everything; kAuto's (where the ring works) the cached reads of 64 KiB
        // up to 1 MiB (the file was just written: cached).
        const bool by_thread =
            name == "pread" || (name == "io_uring+pread" && q.length >= 65536 && q.length < (1u << 20));
        if (checksum && by_thread) {
          ASSERT_TRUE(r.tail_crc.has_value()) << backend_label(backend) << " " << q.length;
          EXPECT_EQ(*r.tail_crc, Crc32(want)) << q.length;
        } else {
          EXPECT_FALSE(r.tail_crc.has_value()) << backend_label(backend) << " " << q.length;
        }
      });
    }
  }
}

// kAuto's reading threads copy only what the page cache holds (preadv2 with RWF_NOWAIT): reads of
// pages not cached go on to the ring, whose workers wait for the disk, and still come back exact
// (without a tail CRC: nobody read them on a thread of their own). Skipped where the pages cannot be
// dropped from the cache (tmpfs) or the ring is unavailable.
TEST(FetcherTest, ReadingThreadsHandUncachedPagesToTheRing) {
  if (!UringAvailable()) GTEST_SKIP() << "io_uring unavailable";
  constexpr size_t kSize = 32 << 20;
  RandomFile file(::testing::TempDir(), kSize, 11);
  ASSERT_TRUE(file.ok());
  if (!DropFromPageCache(file.path(), kSize)) GTEST_SKIP() << "the file's pages stay in the page cache here (tmpfs?)";
  FetcherOptions o;
  o.queue_depth = 8;
  o.checksum_tails = true;
  auto f = OpenOrDie({file.path()}, o);
  ASSERT_NE(f, nullptr);
  ASSERT_STREQ(f->backend_name(), "io_uring+pread");
  constexpr int kReads = 8;  // 4 MiB apart: no read-ahead of one reaches another
  std::vector<std::vector<uint8_t>> tails(kReads);
  std::vector<FetchRequest> requests;
  for (int i = 0; i < kReads; ++i) {
    const uint32_t length = 100000, head = 30;
    tails[i].assign(length - head, 0);
    requests.push_back(FetchRequest{.file = 0, .offset = uint64_t{4} * (1 << 20) * i + 4097, .length = length,
                                    .tag = static_cast<uint64_t>(i), .tail = tails[i].data(), .head_length = head});
  }
  for (const auto& q : requests) ASSERT_TRUE(f->Submit(q).ok());
  int without_crc = 0;
  ReceiveSplitReads(*f, requests, tails, file.bytes(), [&](const FetchRequest&, const FetchResult& r) {
    if (!r.tail_crc.has_value()) ++without_crc;
  });
  EXPECT_GT(without_crc, 0) << "every read was served from the page cache";
}

// O_DIRECT reads through each backend, into huge-page buffers and ordinary ones; skipped where no
// candidate directory supports O_DIRECT.
TEST(FetcherTest, DirectReadsAreWidenedAndTrimmedBack) {
  int backends_run = 0;
  for (auto [backend, huge] : {std::pair{Backend::kPread, true}, std::pair{Backend::kIoUring, true},
                               std::pair{Backend::kIoUring, false}}) {
    if (backend == Backend::kIoUring && !UringAvailable()) continue;
    SCOPED_TRACE(huge ? "huge-page buffers" : "heap buffers");
    bool ran = false;
    for (std::string dir : {::testing::TempDir(), std::string(".")}) {
      // An odd size, so the last block is partial and widened reads run into the end of the file.
      RandomFile file(dir, (3 << 20) + 1234, 4);
      if (!file.ok()) continue;
      FetcherOptions o;
      o.backend = backend;
      o.direct = true;
      o.huge_page_buffers = huge;
      o.max_bytes_in_flight = 4 << 20;
      auto f = Fetcher::Open({file.path()}, o);
      if (!f.ok()) {
        ASSERT_EQ(f.status().code(), StatusCode::kUnsupported) << f.status().ToString();
        continue;
      }
      ReadRandomRangesAndCheck(**f, file, 300, 13);
      // The very last byte, through a widened read that the end of the file cuts short.
      ASSERT_TRUE((*f)->Submit(FetchRequest{0, file.bytes().size() - 1, 1, 7}).ok());
      auto r = (*f)->Next();
      ASSERT_TRUE(r.has_value());
      ASSERT_TRUE(r->status.ok()) << r->status.ToString();
      ASSERT_EQ(r->bytes().size(), 1u);
      EXPECT_EQ(r->bytes()[0], file.bytes().back());
      (*f)->Release(std::move(r->data));
      EXPECT_EQ((*f)->bytes_in_flight(), 0) << "the widened buffer is charged and refunded whole";
      ran = true;
      break;
    }
    if (ran) ++backends_run;
  }
  if (backends_run == 0) GTEST_SKIP() << "O_DIRECT unsupported in every candidate directory";
}

TEST(FetcherTest, SubmitBlocksUntilReleaseFreesBudget) {
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    RandomFile file(::testing::TempDir(), 1 << 20, 5);
    ASSERT_TRUE(file.ok());
    FetcherOptions o;
    o.backend = backend;
    o.max_bytes_in_flight = 64 << 10;  // four reads of 16 KiB
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    std::atomic<int> submitted{0};
    std::thread producer([&] {
      for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(f->Submit(FetchRequest{0, uint64_t(i) << 14, 16 << 10, uint64_t(i)}).ok());
        ++submitted;
      }
    });
    // The fifth read must wait for budget: nothing has been released.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (submitted.load() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(submitted.load(), 4) << f->backend_name();
    EXPECT_EQ(f->bytes_in_flight(), 64 << 10);

    auto first = f->Next();
    ASSERT_TRUE(first.has_value());
    ASSERT_TRUE(first->status.ok()) << first->status.ToString();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(submitted.load(), 4) << "taking a result without releasing it frees no budget";
    f->Release(std::move(first->data));
    producer.join();
    EXPECT_EQ(submitted.load(), 5);
    int rest = 0;
    while (auto r = f->Next()) {
      ASSERT_TRUE(r->status.ok()) << r->status.ToString();
      f->Release(std::move(r->data));
      ++rest;
    }
    EXPECT_EQ(rest, 4);
    EXPECT_EQ(f->bytes_in_flight(), 0);
  }
}

TEST(FetcherTest, ReadPastEndOfFileIsAnErrorNamingTheFile) {
  RandomFile file(::testing::TempDir(), 10000, 6);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    FetcherOptions o;
    o.backend = backend;
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    ASSERT_TRUE(f->Submit(FetchRequest{0, 9000, 2000, 1}).ok());   // straddles the end
    ASSERT_TRUE(f->Submit(FetchRequest{0, 50000, 10, 2}).ok());    // wholly beyond it
    ASSERT_TRUE(f->Submit(FetchRequest{0, 0, 10000, 3}).ok());     // exactly the file
    int errors = 0;
    while (auto r = f->Next()) {
      if (r->tag == 3) {
        EXPECT_TRUE(r->status.ok()) << r->status.ToString();
        EXPECT_EQ(r->data.size(), 10000u);
        f->Release(std::move(r->data));
        continue;
      }
      ++errors;
      EXPECT_EQ(r->status.code(), StatusCode::kIOError);
      EXPECT_TRUE(r->data.empty());
      const std::string& m = r->status.message();
      EXPECT_NE(m.find(file.path()), std::string::npos) << m;
      EXPECT_NE(m.find(r->tag == 1 ? "9000" : "50000"), std::string::npos) << m;
      EXPECT_NE(m.find(r->tag == 1 ? "2000" : "length 10"), std::string::npos) << m;
    }
    EXPECT_EQ(errors, 2) << f->backend_name();
    EXPECT_EQ(f->bytes_in_flight(), 0) << "failed reads refund their budget";
  }
}

TEST(FetcherTest, RejectsUnknownFileIndexAndReportsAMissingFileInItsReads) {
  RandomFile file(::testing::TempDir(), 4096, 7);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    FetcherOptions o;
    o.backend = backend;
    auto f = OpenOrDie({file.path(), file.path() + ".missing"}, o);
    ASSERT_NE(f, nullptr);
    Status s = f->Submit(FetchRequest{2, 0, 10, 0});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(f->Next().has_value());
    EXPECT_EQ(f->open_files(), 0u) << "files are opened by their first read";

    // Files open lazily: the missing one fails its reads, naming it, and the other still reads.
    ASSERT_TRUE(f->Submit(FetchRequest{1, 0, 10, 1}).ok());
    ASSERT_TRUE(f->Submit(FetchRequest{0, 0, 10, 2}).ok());
    int seen = 0;
    while (auto r = f->Next()) {
      ++seen;
      if (r->tag == 1) {
        EXPECT_EQ(r->status.code(), StatusCode::kNotFound) << r->status.ToString();
        EXPECT_NE(r->status.message().find(".missing"), std::string::npos) << r->status.ToString();
      } else {
        ASSERT_TRUE(r->status.ok()) << r->status.ToString();
        EXPECT_EQ(0, std::memcmp(r->bytes().data(), file.bytes().data(), 10));
        f->Release(std::move(r->data));
      }
    }
    EXPECT_EQ(seen, 2);
    EXPECT_EQ(f->open_files(), 1u);
    EXPECT_EQ(f->bytes_in_flight(), 0);
  }
}

// Many files through a cache of two descriptors: reads in random order from a producer thread while a
// consumer thread checks every byte; files are evicted and reopened all the time, never while a read
// of them is in flight.
TEST(FetcherTest, ManyFilesThroughTwoDescriptorsReadExactly) {
  constexpr int kFiles = 40;
  constexpr int kReads = 2000;
  std::vector<std::unique_ptr<RandomFile>> files;
  std::vector<std::string> paths;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back(std::make_unique<RandomFile>(::testing::TempDir(), 20000 + 1000 * i, 100 + i));
    ASSERT_TRUE(files.back()->ok());
    paths.push_back(files.back()->path());
  }
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    FetcherOptions o;
    o.backend = backend;
    o.queue_depth = 16;
    o.max_open_files = 2;
    auto f = OpenOrDie(paths, o);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->max_open_files(), 2u);
    std::mt19937_64 rng(backend == Backend::kPread ? 5 : 6);
    std::vector<FetchRequest> requests;
    for (int i = 0; i < kReads; ++i) {
      const uint32_t file = static_cast<uint32_t>(rng() % kFiles);
      const auto& bytes = files[file]->bytes();
      const uint32_t length = 1 + static_cast<uint32_t>(rng() % 8000);
      const uint64_t offset = rng() % (bytes.size() - length + 1);
      requests.push_back(FetchRequest{file, offset, length, static_cast<uint64_t>(i)});
    }
    for (bool batched : {false, true}) {
      std::atomic<size_t> most_open{0};
      const int bad = SubmitAndConsume(*f, requests, batched, [&](const FetchRequest& q, const FetchResult& r) {
        most_open = std::max(most_open.load(), f->open_files());
        const auto& bytes = files[q.file]->bytes();
        return r.status.ok() && r.bytes().size() == q.length &&
               std::memcmp(r.bytes().data(), bytes.data() + q.offset, q.length) == 0;
      });
      EXPECT_EQ(bad, 0) << f->backend_name() << (batched ? " batched" : "");
      EXPECT_LE(most_open.load(), 2u);
    }
    EXPECT_LE(f->open_files(), 2u);
    EXPECT_EQ(f->bytes_in_flight(), 0);
  }
}

// In a child process: RLIMIT_NOFILE lowered to 32 under a cache sized for 1000 files. Opens fail
// with EMFILE once the process is full; the fetcher then closes idle descriptors of its own and
// retries, so every read of 100 files still succeeds. Returns an exit code (0: all bytes right).
int ReadManyFilesUnderTightLimit(const std::vector<std::unique_ptr<RandomFile>>& files) {
  rlimit rl{32, 32};
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return 2;
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f->path());
  FetcherOptions o;
  o.backend = Backend::kPread;
  o.queue_depth = 8;
  o.max_open_files = 1000;
  auto f = Fetcher::Open(paths, o);
  if (!f.ok()) return 3;
  std::mt19937_64 rng(1);
  int bad = 0;
  for (int round = 0; round < 3; ++round) {
    for (uint32_t i = 0; i < files.size(); ++i) {
      const uint32_t k = static_cast<uint32_t>(rng() % files.size());
      if (!(*f)->Submit(FetchRequest{k, 10, 100, k}).ok()) return 4;
      while (auto r = (*f)->Next()) {
        if (!r->status.ok() || std::memcmp(r->bytes().data(), files[r->tag]->bytes().data() + 10, 100) != 0) ++bad;
        (*f)->Release(std::move(r->data));
      }
    }
  }
  return bad == 0 ? 0 : 5;
}

TEST(FetcherTest, CacheLargerThanTheProcessLimitGivesBackIdleDescriptors) {
  std::vector<std::unique_ptr<RandomFile>> files;
  for (int i = 0; i < 100; ++i) {
    files.push_back(std::make_unique<RandomFile>(::testing::TempDir(), 1000, 300 + i));
    ASSERT_TRUE(files.back()->ok());
  }
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process (see loader_test.cc's open-file-limit test)
  // The child runs this test again and writes files of its own; its destructors do not run.
  EXPECT_EXIT(
      {
        const int code = ReadManyFilesUnderTightLimit(files);
        files.clear();
        std::_Exit(code);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(FetcherTest, DerivedOpenFileLimitLeavesRoomForTheProcess) {
  RandomFile file(::testing::TempDir(), 4096, 8);
  ASSERT_TRUE(file.ok());
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  FetcherOptions o;
  o.queue_depth = 8;
  auto f = OpenOrDie({file.path()}, o);
  ASSERT_NE(f, nullptr);
  EXPECT_GE(f->max_open_files(), 1u);
  if (rl.rlim_cur != RLIM_INFINITY) {
    EXPECT_LE(f->max_open_files(), std::max<uint64_t>(rl.rlim_cur / 2, 12));
    if (rl.rlim_cur >= 64) {
      EXPECT_GE(f->max_open_files(), 12u);  // queue_depth + 4
    }
  }
}

// An injected allocation failure for a read's buffer fails that read (out of memory), not the process.
TEST(FetcherTest, BufferAllocationFailureIsTheReadsError) {
  RandomFile file(::testing::TempDir(), 4096, 9);
  ASSERT_TRUE(file.ok());
  FetcherOptions o;
  o.backend = Backend::kPread;
  auto f = OpenOrDie({file.path()}, o);
  ASSERT_NE(f, nullptr);
  AllocationFaults::Instance().FailNth(1);
  ASSERT_TRUE(f->Submit(FetchRequest{0, 0, 100, 1}).ok());
  AllocationFaults::Instance().FailNth(0);
  ASSERT_TRUE(f->Submit(FetchRequest{0, 0, 100, 2}).ok());
  int seen = 0;
  while (auto r = f->Next()) {
    ++seen;
    if (r->tag == 1) {
      EXPECT_TRUE(r->out_of_memory);
      EXPECT_NE(r->status.message().find("out of memory"), std::string::npos) << r->status.ToString();
      EXPECT_NE(r->status.message().find(file.path()), std::string::npos) << r->status.ToString();
    } else {
      EXPECT_TRUE(r->status.ok()) << r->status.ToString();
      f->Release(std::move(r->data));
    }
  }
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(f->bytes_in_flight(), 0);
}

TEST(FetcherTest, ZeroLengthReadCompletesEmpty) {
  RandomFile file(::testing::TempDir(), 4096, 8);
  ASSERT_TRUE(file.ok());
  auto f = OpenOrDie({file.path()}, FetcherOptions{});
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->Submit(FetchRequest{0, 100, 0, 42}).ok());
  auto r = f->Next();
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->status.ok());
  EXPECT_EQ(r->tag, 42u);
  EXPECT_TRUE(r->data.empty());
}

TEST(FetcherTest, DestroyingWithReadsInFlightIsClean) {
  RandomFile file(::testing::TempDir(), 8 << 20, 9);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kPread, Backend::kAuto}) {
    for (int round = 0; round < 20; ++round) {
      FetcherOptions o;
      o.backend = backend;
      o.queue_depth = 16;
      auto f = OpenOrDie({file.path()}, o);
      ASSERT_NE(f, nullptr);
      for (int i = 0; i < 16; ++i) {
        ASSERT_TRUE(f->Submit(FetchRequest{0, uint64_t(i) * (400 << 10), 400 << 10, uint64_t(i)}).ok());
      }
      if (round % 2 == 1) {  // take one result and keep its buffer past the Fetcher's life
        auto r = f->Next();
        ASSERT_TRUE(r.has_value());
        f.reset();
        EXPECT_EQ(r->data.size(), 400u << 10);
      }
      // f destroyed here with reads in flight and results not taken.
    }
  }
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// Split reads: the head in the result, the tail written straight to caller memory; both backends.
TEST(FetcherTest, SplitReadsPutTheTailInCallerMemory) {
  RandomFile file(::testing::TempDir(), 1 << 20, 7);
  ASSERT_TRUE(file.ok());
  for (Backend backend : {Backend::kPread, Backend::kIoUring}) {
    if (backend == Backend::kIoUring && !UringAvailable()) continue;
    FetcherOptions o;
    o.backend = backend;
    o.queue_depth = 8;
    o.max_bytes_in_flight = 1000;  // only heads are charged: 64 reads of up to 300 KB still flow
    auto f = OpenOrDie({file.path()}, o);
    ASSERT_NE(f, nullptr);
    std::mt19937_64 rng(3);
    constexpr int kReads = 64;
    std::vector<std::vector<uint8_t>> tails(kReads);
    std::vector<FetchRequest> requests;
    for (int i = 0; i < kReads; ++i) {
      const uint32_t length = 1 + static_cast<uint32_t>(rng() % 300000);
      const uint32_t head = i % 8 == 0 ? 0 : i % 8 == 1 ? length : static_cast<uint32_t>(rng() % std::min<uint32_t>(length, 900));
      const uint64_t offset = rng() % (file.bytes().size() - length + 1);
      tails[i].assign(length - head, 0xEE);
      requests.push_back(FetchRequest{.file = 0, .offset = offset, .length = length, .tag = static_cast<uint64_t>(i),
                                      .tail = tails[i].data(), .head_length = head});
    }
    std::thread consumer(
        [&] { ReceiveSplitReads(*f, requests, tails, file.bytes(), [](const FetchRequest&, const FetchResult&) {}); });
    for (const auto& q : requests) ASSERT_TRUE(f->Submit(q).ok());
    consumer.join();
    EXPECT_EQ(f->bytes_in_flight(), 0);
  }
  // Not with O_DIRECT, and the head must fit the range.
  FetcherOptions o;
  o.backend = Backend::kPread;
  auto f = OpenOrDie({file.path()}, o);
  uint8_t tail[16];
  EXPECT_EQ(f->Submit(FetchRequest{.file = 0, .offset = 0, .length = 8, .tail = tail, .head_length = 9}).code(),
            StatusCode::kInvalidArgument);
  o.direct = true;
  auto d = Fetcher::Open({file.path()}, o);
  if (d.ok()) {
    EXPECT_EQ((*d)->Submit(FetchRequest{.file = 0, .offset = 0, .length = 8, .tail = tail, .head_length = 4}).code(),
              StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// Reads at once (Fetcher::ReadNow) from a pinned descriptor, on a thread other than the one that
// pinned it: exact bytes, split between head and tail or all in the head; a read past the end is an
// error naming the file; once the pages are dropped from the page cache a read that may not wait
// reports them missing, and one that may wait reads them.
TEST(FetcherTest, ReadNowReadsCachedPagesOnAnyThreadAndReportsUncachedOnes) {
  constexpr size_t kSize = 4 << 20;
  RandomFile file(::testing::TempDir(), kSize, 21);
  ASSERT_TRUE(file.ok());
  auto f = OpenOrDie({file.path()}, FetcherOptions{});
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->read_now());
  Result<int> fd = f->PinForReadNow(0);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_GE(*fd, 0);
  EXPECT_EQ(f->open_files(), 1u);
  const std::vector<uint8_t>& want = file.bytes();
  std::mt19937 rng(5);
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) {
      const uint32_t length = 1 + rng() % 70000;
      const uint64_t offset = rng() % (kSize - length);
      const uint32_t head_length = i % 3 == 0 ? length : rng() % std::min<uint32_t>(length, 256);
      std::vector<uint8_t> head(head_length), tail(length - head_length);
      FetchRequest q{.file = 0, .offset = offset, .length = length};
      if (i % 3 != 0) {
        q.tail = tail.data();
        q.head_length = head_length;
      }
      Result<bool> read = f->ReadNow(*fd, q, head.data(), /*wait=*/false);
      ASSERT_TRUE(read.ok()) << read.status().ToString();
      if (!*read) {
        // RWF_NOWAIT may find a page gone under memory pressure: then waiting reads it.
        read = f->ReadNow(*fd, q, head.data(), /*wait=*/true);
        ASSERT_TRUE(read.ok() && *read);
      }
      EXPECT_EQ(0, std::memcmp(head.data(), want.data() + offset, head_length)) << "read " << i;
      EXPECT_EQ(0, std::memcmp(tail.data(), want.data() + offset + head_length, tail.size())) << "read " << i;
    }
  });
  other.join();
  std::vector<uint8_t> buffer(100);
  Result<bool> past = f->ReadNow(*fd, FetchRequest{.file = 0, .offset = kSize - 50, .length = 100}, buffer.data(), true);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find(file.path()), std::string::npos) << past.status().ToString();
  EXPECT_NE(past.status().message().find("end of file"), std::string::npos) << past.status().ToString();
  // A page found dropped may be back by the time of the read (readahead finishing, on a loaded
  // machine): only a read that never once reports a dropped page as missing fails.
  bool checked = false, reported_missing = false;
  for (int attempt = 0; attempt < 5 && !reported_missing; ++attempt) {
    if (!DropFromPageCache(file.path(), kSize) || ResidentPages(file.path(), 3 << 20, 4096) != 0) continue;
    checked = true;
    std::vector<uint8_t> page(4096);
    const FetchRequest q{.file = 0, .offset = 3 << 20, .length = 4096};
    Result<bool> nowait = f->ReadNow(*fd, q, page.data(), /*wait=*/false);
    ASSERT_TRUE(nowait.ok()) << nowait.status().ToString();
    reported_missing = !*nowait;
    Result<bool> waited = f->ReadNow(*fd, q, page.data(), /*wait=*/true);
    ASSERT_TRUE(waited.ok() && *waited);
    EXPECT_EQ(0, std::memcmp(page.data(), want.data() + (3 << 20), 4096));
  }
  EXPECT_TRUE(!checked || reported_missing) << "a page dropped from the page cache was read without waiting, 5 times";
  f->UnpinForReadNow(0);
}

// Reads at once are the default backend's alone (not io_uring's, pread's or O_DIRECT's), and a pin
// never waits: with one descriptor allowed and pinned, pinning another file gives -1; unpinned, the
// first file is evicted for the second. A missing file is an error naming it.
TEST(FetcherTest, PinForReadNowNeverWaitsForADescriptor) {
  RandomFile a(::testing::TempDir(), 8192, 31), b(::testing::TempDir(), 8192, 32);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string missing = ::testing::TempDir() + "/fetcher_test_no_such_file";
  for (Backend backend : {Backend::kPread, Backend::kIoUring}) {
    if (backend == Backend::kIoUring && !UringAvailable()) continue;
    FetcherOptions o;
    o.backend = backend;
    auto f = OpenOrDie({a.path()}, o);
    ASSERT_NE(f, nullptr);
    EXPECT_FALSE(f->read_now()) << backend_label(backend);
    EXPECT_EQ(f->PinForReadNow(0).status().code(), StatusCode::kUnsupported) << backend_label(backend);
  }
  FetcherOptions o;
  o.max_open_files = 1;
  auto f = OpenOrDie({a.path(), b.path(), missing}, o);
  ASSERT_NE(f, nullptr);
  Result<int> fa = f->PinForReadNow(0);
  ASSERT_TRUE(fa.ok() && *fa >= 0);
  Result<int> fb = f->PinForReadNow(1);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  EXPECT_EQ(*fb, -1) << "the only descriptor is pinned";
  Result<int> fa2 = f->PinForReadNow(0);  // a second pin of an open file
  ASSERT_TRUE(fa2.ok());
  EXPECT_EQ(*fa2, *fa);
  f->UnpinForReadNow(0);
  EXPECT_EQ(*f->PinForReadNow(1), -1) << "file 0 is still pinned once";
  f->UnpinForReadNow(0);
  fb = f->PinForReadNow(1);
  ASSERT_TRUE(fb.ok() && *fb >= 0);
  EXPECT_EQ(f->open_files(), 1u);
  std::vector<uint8_t> bytes(8192);
  Result<bool> read = f->ReadNow(*fb, FetchRequest{.file = 1, .offset = 0, .length = 8192}, bytes.data(), true);
  ASSERT_TRUE(read.ok() && *read);
  EXPECT_EQ(bytes, b.bytes());
  f->UnpinForReadNow(1);
  Result<int> gone = f->PinForReadNow(2);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound) << gone.status().ToString();
  EXPECT_NE(gone.status().message().find(missing), std::string::npos) << gone.status().ToString();
  // Submit still works after pins come and go: file 0 is opened again in the one descriptor.
  ASSERT_TRUE(f->Submit(FetchRequest{.file = 0, .offset = 100, .length = 1000, .tag = 7}).ok());
  auto r = f->Next();
  ASSERT_TRUE(r.has_value() && r->status.ok());
  EXPECT_EQ(0, std::memcmp(r->bytes().data(), a.bytes().data() + 100, 1000));
  f->Release(std::move(r->data));
}

}  // namespace
}  // namespace stoke
