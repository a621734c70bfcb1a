#include "loader/mapped_reads.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/local_files.h"
#include "io/storage.h"
#include "loader/fetcher.h"
#include "stoke/loader.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestTable;

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
  const MappedFile* m = mapped.Find(0, 4000, 200);  // across a page boundary
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->size(), 3u * 4096);
  EXPECT_EQ(mapped.Find(0, 0, 3 * 4096), m);
  EXPECT_EQ(mapped.Find(0, 3 * 4096 - 10, 11), nullptr);  // past the end
  EXPECT_EQ(mapped.Find(0, 0, 0), nullptr);
  EXPECT_EQ(mapped.Find(1, 0, 1), nullptr);  // empty: not mapped
  EXPECT_EQ(mapped.Find(2, 0, 1), nullptr);  // missing: the read reports it the other way
  EXPECT_EQ(mapped.mapped_files(), 1u);
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
    const Batch& batch = **next;
    for (int64_t i = 0; i < batch.size(); ++i) {
      const int64_t row = batch.row_ids()[static_cast<size_t>(i)];
      const std::string want = TensorOf(row, 16);
      EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(batch.column("t")->data()) + 16 * i, want.data(), 16));
      seen.insert(row);
    }
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
  std::set<int64_t> seen;
  for (;;) {
    auto next = (*l)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!next->has_value()) break;
    const Batch& batch = **next;
    for (int64_t i = 0; i < batch.size(); ++i) {
      const int64_t row = batch.row_ids()[static_cast<size_t>(i)];
      const std::string want = TensorOf(row, kBytes);
      EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(batch.column("t")->data()) + kBytes * i, want.data(), kBytes))
          << "row " << row;
      seen.insert(row);
    }
  }
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_GT((*l)->stats().reads_mapped, 0);  // all 24 where the page cache kept the file
}

}  // namespace
}  // namespace stoke
