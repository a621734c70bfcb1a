#include "loader/mapped_reads.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "format/codec.h"
#include "io/crc32_copy.h"
#include "io/local_files.h"
#include "io/memory_file.h"
#include "io/read_cache.h"
#include "io/storage.h"
#include "loader/batch_slots.h"
#include "loader/fetcher.h"
#include "stoke/loader.h"
#include "table/sample_index.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestTable;

// Flips a byte of the file at `path`, at `offset`.
void FlipByte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 0x5A;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

std::shared_ptr<const std::vector<std::string>> Paths(std::vector<std::string> paths) {
  return std::make_shared<const std::vector<std::string>>(std::move(paths));
}

TEST(MappedReadsTest, FindsCachedRangesInsideTheFileAndNothingElse) {
  auto dir = TemporaryDirectory::Create("stoke_mapped_reads_");
  ASSERT_TRUE(dir.ok());
  const std::string file = JoinPath(dir->path(), "f.bin"), empty = JoinPath(dir->path(), "empty.bin");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), file, AsBytes(std::string(3 * 4096, 'x'))).ok());
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), empty, ByteView()).ok());
  ASSERT_TRUE(LocalStorage().ReadFile(file).ok());  // in the page cache
  MappedReads mapped(Paths({file, empty, JoinPath(dir->path(), "missing.bin")}));
  mapped.BeginBatch();
  const MappedRange m = mapped.Find(0, 4000, 200);  // across a page boundary
  ASSERT_NE(m.map, nullptr);
  EXPECT_EQ(m.map->size(), 3u * 4096);
  EXPECT_EQ(m.offset, 4000u);
  EXPECT_EQ(mapped.Find(0, 0, 3 * 4096).map, m.map);
  EXPECT_EQ(mapped.Find(0, 3 * 4096 - 10, 11).map, nullptr);  // past the end
  EXPECT_EQ(mapped.Find(0, 0, 0).map, nullptr);
  EXPECT_EQ(mapped.Find(1, 0, 1).map, nullptr);  // empty: not mapped
  EXPECT_EQ(mapped.Find(2, 0, 1).map, nullptr);  // missing: the read reports it the other way
  EXPECT_EQ(mapped.mapped_files(), 1u);
}

// An object of bytes in memory read through a read cache of 64 KiB blocks (in a temporary directory),
// and the loader's MappedReads over the cache's entries of it.
class MappedCacheTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kBlock = 64 << 10;

  void Open(std::string data) {
    data_ = std::move(data);
    auto dir = TemporaryDirectory::Create("stoke_mapped_cache_");
    ASSERT_TRUE(dir.ok());
    dir_.emplace(std::move(*dir));
    ReadCacheOptions co;
    co.dir = dir_->path();
    co.block_bytes = kBlock;
    auto cache = ReadCache::Open(co);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    cache_ = *cache;
    file_ = cache_->Wrap(
        std::make_unique<MemoryFile>(reinterpret_cast<const uint8_t*>(data_.data()), data_.size(), "mem://o"),
        "mem://o v1");
    mapped_.emplace(Paths({"mem://o"}), cache_, std::vector<std::string>{"mem://o v1"},
                    std::vector<uint64_t>{data_.size()});
  }
  // Reads bytes [offset, offset + n) through the cache, then waits until it has written `writes`
  // entries in all (they are written just after the reads they served).
  void ReadAndWait(uint64_t offset, size_t n, uint64_t writes) {
    std::string got(n, '\0');
    ASSERT_TRUE(file_->ReadAt(offset, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), n)).ok());
    for (int i = 0; i < 5000 && cache_->stats().entries_written < writes; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(cache_->stats().entries_written, writes);
  }
  // Finds bytes [offset, offset + length) in the entries and checks them against the object's.
  void ExpectMapped(uint64_t offset, uint32_t length) {
    mapped_->BeginBatch();
    const MappedRange m = mapped_->Find(0, offset, length);
    ASSERT_NE(m.map, nullptr) << offset;
    EXPECT_GE(m.offset, 4096u) << "after the entry's header";
    std::string bytes(length, '\0');
    uint8_t* out = reinterpret_cast<uint8_t*>(bytes.data());
    ASSERT_TRUE(m.Copy(length, out, 0, out + length));  // from one entry or two
    EXPECT_TRUE(bytes == data_.substr(offset, length)) << offset;
  }
  bool Found(uint64_t offset, uint32_t length) {
    mapped_->BeginBatch();
    return mapped_->Find(0, offset, length).map != nullptr;
  }

  std::string data_;
  std::optional<TemporaryDirectory> dir_;
  std::shared_ptr<ReadCache> cache_;
  std::unique_ptr<RandomAccessFile> file_;
  std::optional<MappedReads> mapped_;
};

// A block's entry is mapped once the cache holds it (looked for again a second after a miss), a range
// lies in the entry after its header, and a range across two blocks is copied out of both entries.
TEST_F(MappedCacheTest, FindsRangesInTheEntriesOnceTheyAreWritten) {
  std::string data(3 * kBlock + 100, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 251);
  Open(std::move(data));
  const auto first_look = std::chrono::steady_clock::now();
  EXPECT_FALSE(Found(10, 100)) << "nothing is cached yet";
  ReadAndWait(0, 2 * kBlock, 2);
  if (std::chrono::steady_clock::now() - first_look < std::chrono::milliseconds(900)) {
    EXPECT_FALSE(Found(10, 100)) << "a block missed is looked for again after a second";
  }
  ExpectMapped(kBlock + 5, 1000);  // block 1, not looked for before: mapped at once
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ExpectMapped(10, 100);
  ExpectMapped(0, kBlock);
  // Across blocks 0 and 1: both entries, the head and the tail split anywhere; the tail's CRC taken
  // in the copy continues from one entry into the other (parts of 4 KiB and more fold it in the copy).
  const MappedRange across = mapped_->Find(0, kBlock - 5000, 10000);
  ASSERT_NE(across.next, nullptr);
  EXPECT_EQ(across.first_length, 5000u);
  for (size_t head_n : {0, 100, 700, 5000, 9000, 10000}) {
    std::string head(head_n, '\0'), tail(10000 - head_n, '\0');
    uint32_t crc = 77;
    ASSERT_TRUE(across.Copy(head_n, reinterpret_cast<uint8_t*>(head.data()), tail.size(),
                            reinterpret_cast<uint8_t*>(tail.data()), &crc));
    EXPECT_TRUE(head + tail == data_.substr(kBlock - 5000, 10000)) << head_n;
    EXPECT_EQ(crc, Crc32(AsBytes(tail), 77)) << head_n;
  }
  EXPECT_FALSE(Found(2 * kBlock - 10, 20));      // across blocks 1 and 2: 2 is not cached
  EXPECT_FALSE(Found(3 * kBlock + 90, 10));      // block 3 is not cached
  EXPECT_FALSE(Found(kBlock - 10, 2 * kBlock));  // across three blocks
  EXPECT_EQ(mapped_->mapped_files(), 2u);
  EXPECT_EQ(cache_->stats().blocks_mapped, 2u);

  // The rest, up to the short last block (100 bytes), once cached and looked for again.
  ReadAndWait(2 * kBlock, kBlock + 100, 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // block 3's second look
  ExpectMapped(3 * kBlock + 90, 10);
  ExpectMapped(3 * kBlock - 10, 110);  // across blocks 2 and 3
  EXPECT_FALSE(Found(3 * kBlock + 90, 11));  // past the end
  EXPECT_EQ(mapped_->mapped_files(), 4u);
}

// An entry damaged on disk is not mapped: the cache deletes it, and once the block is fetched and
// written again, it is mapped at the next look.
TEST_F(MappedCacheTest, ADamagedEntryIsMappedAgainOnceFetchedAgain) {
  Open(std::string(kBlock, 'd'));
  ReadAndWait(0, kBlock, 1);
  const std::string entry = cache_->EntryPath("mem://o v1 size=" + std::to_string(kBlock), 0);
  ASSERT_EQ(::truncate(entry.c_str(), 4096 + 100), 0);
  EXPECT_FALSE(Found(0, 100));
  EXPECT_EQ(cache_->stats().corrupt_entries, 1u);
  ReadAndWait(0, kBlock, 2);  // fetched and written again
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ExpectMapped(0, 100);
}

// Checks each sample of `batch` (column "t", `bytes` each) against TensorOf its row, adding the
// rows to `seen`; false at the first that differs.
bool CheckBatch(const Batch& batch, size_t bytes, std::set<int64_t>* seen) {
  for (int64_t i = 0; i < batch.size(); ++i) {
    const int64_t row = batch.row_ids()[static_cast<size_t>(i)];
    const std::string want = TensorOf(row, bytes);
    const auto* got = static_cast<const uint8_t*>(batch.column("t")->data()) + bytes * static_cast<size_t>(i);
    if (std::memcmp(got, want.data(), bytes) != 0) {
      ADD_FAILURE() << "row " << row << " (" << bytes << " bytes)";
      return false;
    }
    seen->insert(row);
  }
  return true;
}

// Every batch of `loader` checked by CheckBatch: the rows seen.
std::set<int64_t> ReadCheckingEverySample(Loader& loader, size_t bytes) {
  std::set<int64_t> seen;
  for (;;) {
    auto next = loader.Next();
    if (!next.ok()) ADD_FAILURE() << next.status().ToString();
    if (!next.ok() || !next->has_value() || !CheckBatch(**next, bytes, &seen)) return seen;
  }
}

// The loader copies small cached samples out of the mapped data files, and a data file truncated
// under it ends the run with an error that names the file, not with a crash (SIGBUS).
TEST(MappedReadsTest, TheLoaderReadsCachedSamplesOutOfMappingsAndSurvivesATruncatedFile) {
  TestTable t(16, parquet::Codec::kUncompressed);
  t.AppendFile(0, 1000, 100);
  LoaderOptions o;
  o.batch_size = 10;
  o.columns = {"t"};
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.prefetch_bytes = 4096;  // a few batches read ahead: most are read after the truncation
  auto l = Loader::Open(t.dir(), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  std::set<int64_t> seen;
  for (int b = 0; b < 5; ++b) {
    auto next = (*l)->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    ASSERT_TRUE(CheckBatch(**next, 16, &seen));
  }
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_GT((*l)->stats().reads_mapped, 0);

  ASSERT_EQ(::truncate(JoinPath(t.dir(), "part-0.parquet").c_str(), 4096), 0);
  Status error;
  for (int b = 0; b < 100 && error.ok(); ++b) {
    auto next = (*l)->Next();
    if (!next.ok()) error = next.status();
    else if (!next->has_value()) break;
  }
  ASSERT_FALSE(error.ok()) << "the rows past 4 KiB are gone";
  EXPECT_NE(error.ToString().find("part-0.parquet"), std::string::npos) << error.ToString();
  EXPECT_NE(error.ToString().find("shrank"), std::string::npos) << error.ToString();  // out of the mapping
}

// A cached sample larger than the fetcher's reading threads take (kParallelReadBytes) is copied out
// of the mapping too: every read of a warm table, with each sample's bytes where they belong.
TEST(MappedReadsTest, LargeCachedSamplesAreCopiedOutOfMappingsToo) {
  constexpr size_t kBytes = 100'000;
  static_assert(kBytes > kParallelReadBytes);
  TestTable t(kBytes, parquet::Codec::kUncompressed);
  t.AppendFile(0, 24, 8);
  LoaderOptions o;
  o.batch_size = 6;
  o.columns = {"t"};
  auto l = Loader::Open(t.dir(), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const std::set<int64_t> seen = ReadCheckingEverySample(**l, kBytes);
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_GT((*l)->stats().reads_mapped, 0);  // all 24 where the page cache kept the file
}

// Reads the whole file at `path`, so that the page cache holds it.
void ReadIntoPageCache(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
  }
}

// A batch too large for the caches (kStreamBatchBytes) has its checked samples copied around them:
// every sample's bytes where they belong, and a flipped byte fails its CRC.
TEST(MappedReadsTest, ABatchLargerThanTheCachesIsCopiedAroundThemAndChecked) {
  constexpr size_t kBytes = 100'000;
  constexpr int64_t kBatch = 96;
  static_assert(kBytes * kBatch >= kStreamBatchBytes);
  TestTable t(kBytes, parquet::Codec::kUncompressed);
  t.AppendFile(0, 2 * kBatch, kBatch);
  ReadIntoPageCache(JoinPath(t.dir(), "part-0.parquet"));  // a file this large was dropped once written
  LoaderOptions o;
  o.batch_size = kBatch;
  o.columns = {"t"};
  auto l = Loader::Open(t.dir(), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const std::set<int64_t> seen = ReadCheckingEverySample(**l, kBytes);
  EXPECT_EQ(seen.size(), static_cast<size_t>(2 * kBatch));
  EXPECT_EQ((*l)->stats().reads_mapped, 2 * kBatch);

  auto index = SampleIndex::Open(t.dir());
  ASSERT_TRUE(index.ok());
  const auto loc = index->Find(150, 0);
  FlipByte(index->FilePath(loc.file), loc.offset + loc.length - 1000);
  auto flipped = Loader::Open(t.dir(), o);
  ASSERT_TRUE(flipped.ok());
  Status error;
  for (;;) {
    auto next = (*flipped)->Next();
    if (!next.ok()) error = next.status();
    if (!next.ok() || !next->has_value()) break;
  }
  EXPECT_NE(error.message().find("CRC mismatch"), std::string::npos) << error.ToString();
  EXPECT_NE(error.message().find("row 150"), std::string::npos) << error.ToString();
}

// A flipped byte in a sample copied out of a mapping fails the page's CRC, and the error names the
// file and row: for short samples, whose CRC is taken over the row after the copy, and for samples of
// kCrc32CopyFoldBytes and more, whose CRC the copy takes (Crc32Copy: 4096 bytes leave its folding
// kernel no rest, 100,000 a rest of 32). With verify_crc off the flipped byte is delivered as it is.
TEST(MappedReadsTest, AFlippedByteInAMappedSampleFailsItsCrc) {
  for (size_t bytes : {size_t{300}, kCrc32CopyFoldBytes - 1, kCrc32CopyFoldBytes, size_t{100'000}}) {
    TestTable t(bytes, parquet::Codec::kUncompressed);
    t.AppendFile(0, 24, 24);
    auto index = SampleIndex::Open(t.dir());
    ASSERT_TRUE(index.ok());
    const auto loc = index->Find(17, 0);
    ASSERT_EQ(loc.rows_in_page, 1u);
    FlipByte(index->FilePath(loc.file), loc.offset + loc.length - bytes / 2);
    LoaderOptions o;
    o.batch_size = 4;
    o.columns = {"t"};
    o.shuffle = LoaderOptions::Shuffle::kNone;
    auto l = Loader::Open(t.dir(), o);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    Status error;
    for (;;) {
      auto next = (*l)->Next();
      if (!next.ok()) error = next.status();
      if (!next.ok() || !next->has_value()) break;
    }
    EXPECT_EQ(error.code(), StatusCode::kCorruption) << bytes << ": " << error.ToString();
    EXPECT_NE(error.message().find("CRC mismatch"), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("part-0.parquet row 17"), std::string::npos) << error.message();
    EXPECT_GT((*l)->stats().reads_mapped, 0) << bytes;
    o.verify_crc = false;
    auto unchecked = Loader::Open(t.dir(), o);
    ASSERT_TRUE(unchecked.ok());
    size_t rows = 0;
    for (;;) {
      auto next = (*unchecked)->Next();
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      if (!next->has_value()) break;
      rows += static_cast<size_t>((**next).size());
    }
    EXPECT_EQ(rows, 24u);
  }
}

}  // namespace
}  // namespace stoke
