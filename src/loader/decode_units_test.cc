#include "loader/decode_units.h"

#include <gtest/gtest.h>

#include <vector>

#include "loader/array_cells.h"
#include "loader/array_table_testing.h"
#include "loader/slow_cells.h"
#include "table/sample_index.h"

namespace stoke {
namespace {

using testing_arrays::ArrayTable;
using testing_arrays::Rows;

// The decode units of `table`'s array columns `names`, with caches of `cache_bytes` each; the rows
// delivered at `row_bytes` each (0: the size is left to the footers).
Result<DecodeUnits> UnitsOf(const ArrayTable& table, const std::vector<std::string>& names, size_t cache_bytes,
                            size_t row_bytes = 0) {
  STOKE_ASSIGN_OR_RETURN(SampleIndex index, SampleIndex::Open(table.dir()));
  SlowCells slow(index, cache_bytes, /*verify_crc=*/true);
  ArrayCells arrays(index, slow, cache_bytes);
  std::vector<TensorColumn> tensors;
  for (const std::string& name : names) {
    TensorColumn t;
    t.name = t.file_name = name;
    t.array = true;
    t.in_bytes = row_bytes;
    tensors.push_back(t);
  }
  SampleDecoder::Cells cells;
  cells.slow = &slow;
  cells.array = &arrays;
  return FindDecodeUnits(index, cells, tensors, cache_bytes);
}

TEST(DecodeUnits, EveryRowGroupCutAtItsIndexedPagesInTableRows) {
  // File 0: row groups [0, 3) [3, 6) [6, 7), pages of 2 rows; file 1 (table rows 7..11): [0, 3) [3, 5).
  ArrayTable table({Rows(0, 7), Rows(7, 5)}, /*row_group_rows=*/3, /*page_rows=*/2);
  auto units = UnitsOf(table, {"v", "m"}, size_t{64} << 20);
  ASSERT_TRUE(units.ok()) << units.status().ToString();
  EXPECT_EQ(units->starts, (std::vector<int64_t>{0, 2, 3, 5, 6, 7, 9, 10}));
  auto one_column = UnitsOf(table, {"m"}, size_t{64} << 20);
  ASSERT_TRUE(one_column.ok());
  EXPECT_EQ(one_column->starts, units->starts);
}

TEST(DecodeUnits, AWindowFillsHalfTheCacheWithTheLargestUnitsAndIsNeverEmpty) {
  // Rows of 1,000 floats (4 KB), a page of 2 rows: units of about 8 KB of v.
  ArrayTable table({testing_arrays::LongRows(0, 40, 1000)}, /*row_group_rows=*/10, /*page_rows=*/2);
  auto small = UnitsOf(table, {"v"}, size_t{1} << 20);
  auto large = UnitsOf(table, {"v"}, size_t{4} << 20);
  ASSERT_TRUE(small.ok() && large.ok());
  EXPECT_EQ(small->starts.size(), 20u);  // 4 row groups of 5 pages
  // Half of 1 MiB over units of a little more than 8,000 bytes (their share of the chunk's
  // uncompressed bytes: the values, and the levels and headers): 65 units.
  EXPECT_GE(small->window, 60);
  EXPECT_LE(small->window, 65);
  // Four times the cache, four times the window (to the rounding of one division).
  EXPECT_GE(large->window, 4 * small->window);
  EXPECT_LE(large->window, 4 * small->window + 3);
  auto tiny = UnitsOf(table, {"v"}, 1024);
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->window, 1);
  // Rows delivered larger than stored (padded to 100,000 bytes each): units of 200,000 bytes.
  auto padded = UnitsOf(table, {"v"}, size_t{1} << 20, 100000);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded->window, (int64_t{1} << 19) / 200000);
  // Two columns share the array stage's cache: the window fits both units.
  auto both = UnitsOf(table, {"v", "m"}, size_t{1} << 20);
  ASSERT_TRUE(both.ok());
  EXPECT_LT(both->window, small->window);
  EXPECT_GE(both->window, 1);
}

}  // namespace
}  // namespace stoke
