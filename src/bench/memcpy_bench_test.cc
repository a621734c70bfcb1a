#include "stoke/bench.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "table/sample_index.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TestTable;

MemcpyBenchOptions Quick(const std::string& dir) {
  return {.table_dir = dir, .batch_size = 8, .threads = 2, .seconds = 0.05};
}

TEST(MemcpyBench, CopiesEachRowsValueInWholeBatches) {
  TestTable t(512, parquet::Codec::kUncompressed);
  t.AppendFile(0, 100);
  t.AppendFile(100, 37);
  auto r = RunMemcpyBench(Quick(t.dir()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->column, "t");
  EXPECT_EQ(r->table_rows, 137);
  EXPECT_EQ(r->threads, 2);
  EXPECT_EQ(r->copies, "values");
  EXPECT_DOUBLE_EQ(r->sample_bytes_mean, 512);
  EXPECT_GT(r->samples, r->table_rows);  // the order repeats: batches cross its end
  EXPECT_EQ(r->bytes, r->samples * 512);  // each copy is one value, its length prefix and header left out
  EXPECT_GE(r->wall_seconds, 0.05);
  EXPECT_GE(r->resident_share, 0);
  EXPECT_LE(r->resident_share, 1);

  const auto j = nlohmann::json::parse(MemcpyReportJson(*r));
  EXPECT_EQ(j["tool"], "memcpy");
  EXPECT_EQ(j["samples"], r->samples);
  EXPECT_EQ(j["column"], "t");
  EXPECT_EQ(j["copies"], "values");
  EXPECT_NEAR(j["samples_per_s"].get<double>(), r->samples_per_second(), 1);
}

TEST(MemcpyBench, CopiesTheStoredPageWhereItIsCompressed) {
  TestTable t(4096);  // TensorOf's pattern shrinks under zstd, so the chunk stays compressed
  t.AppendFile(0, 20);
  auto r = RunMemcpyBench(Quick(t.dir()));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->copies, "pages");
  EXPECT_LT(r->sample_bytes_mean, 4096);
  // Compressed pages differ a little in size: the bytes copied are about the mean page per sample.
  EXPECT_NEAR(static_cast<double>(r->bytes), r->sample_bytes_mean * static_cast<double>(r->samples),
              0.2 * r->sample_bytes_mean * static_cast<double>(r->samples));
}

TEST(MemcpyBench, ChecksEveryPageBeforeTheClockStarts) {
  TestTable t(512, parquet::Codec::kUncompressed);
  t.AppendFile(0, 10);
  auto index = SampleIndex::Open(t.dir());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  const auto loc = index->Find(3, 0);
  // One flipped byte at the end of row 3's value: the page's CRC no longer matches.
  FILE* f = std::fopen(index->FilePath(loc.file).c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fseek(f, static_cast<long>(loc.offset + loc.length - 1), SEEK_SET), 0);
  const int c = std::fgetc(f);
  ASSERT_EQ(std::fseek(f, static_cast<long>(loc.offset + loc.length - 1), SEEK_SET), 0);
  std::fputc(c ^ 0xff, f);
  std::fclose(f);
  auto r = RunMemcpyBench(Quick(t.dir()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("CRC"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("part-0.parquet"), std::string::npos) << r.status().ToString();
}

TEST(MemcpyBench, RefusesBadOptionsAndUnknownColumnsSayingWhy) {
  TestTable t(512, parquet::Codec::kUncompressed);
  t.AppendFile(0, 10);
  for (auto bad : {MemcpyBenchOptions{.table_dir = t.dir(), .batch_size = 0},
                   MemcpyBenchOptions{.table_dir = t.dir(), .threads = -1},
                   MemcpyBenchOptions{.table_dir = t.dir(), .seconds = 0},
                   MemcpyBenchOptions{.table_dir = t.dir(), .seconds = 1e300}, MemcpyBenchOptions{}}) {
    auto r = RunMemcpyBench(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  }
  auto r = RunMemcpyBench({.table_dir = t.dir(), .column = "image", .seconds = 0.01});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no tensor or blob column 'image' (the table has: t)"), std::string::npos)
      << r.status().ToString();
}

}  // namespace
}  // namespace stoke
