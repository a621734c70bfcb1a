#include "loader/scalar_rows.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "loader/scalar_columns.h"

namespace stoke {
namespace {

ScalarColumn Int64s(std::vector<int64_t> v) {
  ScalarColumn c;
  c.dtype = DType::kInt64;
  c.values.resize(v.size() * 8);
  std::memcpy(c.values.data(), v.data(), c.values.size());
  return c;
}

ScalarColumn Int32s(std::vector<int32_t> v, std::vector<uint8_t> valid = {}) {
  ScalarColumn c;
  c.dtype = DType::kInt32;
  c.values.resize(v.size() * 4);
  std::memcpy(c.values.data(), v.data(), c.values.size());
  c.valid = std::move(valid);
  return c;
}

ScalarColumn Strings(std::vector<std::string> v, std::vector<uint8_t> valid = {}) {
  ScalarColumn c;
  c.dtype = DType::kUInt8;
  c.is_string = true;
  c.strings = std::move(v);
  c.valid = std::move(valid);
  return c;
}

// A batch's destination for `columns`, sized as ScalarColumns::PrepareBatch sizes it.
struct Dest {
  std::vector<std::vector<uint8_t>> values, valid;
  std::vector<std::vector<std::string>> strings;
  Dest(const std::vector<ScalarColumn>& columns, const ScalarRows& rows, size_t n)
      : values(columns.size()), valid(columns.size()), strings(columns.size()) {
    for (size_t k = 0; k < columns.size(); ++k) {
      if (columns[k].is_string) strings[k].resize(n);
      else values[k].resize(n * DTypeSize(columns[k].dtype));
      if (rows.nullable(k)) valid[k].resize(n);
    }
  }
  ScalarBatch batch() { return {&values, &strings, &valid}; }
};

template <typename T>
T ValueAt(const std::vector<uint8_t>& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

TEST(ScalarRows, GathersEveryColumnOfRowsAppendedFromSeveralParts) {
  // Two parts: the first without a null in column 1, the second with one; strings of every length.
  const std::vector<ScalarColumn> part1 = {Int64s({10, 11, 12}), Int32s({1, 2, 3}), Strings({"a", "", "ccc"})};
  const std::vector<ScalarColumn> part2 = {Int64s({13, 14}), Int32s({0, 5}, {0, 1}),
                                           Strings({std::string(300, 'x'), "e"}, {1, 1})};
  ScalarRows rows;
  rows.SetLayout(part1, {false, true, false}, 5, 305);
  rows.Append(part1, 3);
  rows.Append(part2, 2);
  ASSERT_EQ(rows.num_rows(), 5u);
  EXPECT_FALSE(rows.nullable(0));
  EXPECT_TRUE(rows.nullable(1));

  const std::vector<int64_t> table_rows = {4, 0, 3, 1, 2, 3};
  Dest d(part1, rows, table_rows.size());
  rows.Gather(table_rows, 0, 2, d.batch());  // two ranges, as two threads would take them
  rows.Gather(table_rows, 2, table_rows.size(), d.batch());
  const std::vector<int64_t> ids = {14, 10, 13, 11, 12, 13};
  const std::vector<int32_t> labels = {5, 1, 0, 2, 3, 0};
  const std::vector<uint8_t> valid = {1, 1, 0, 1, 1, 0};
  const std::vector<std::string> names = {"e", "a", std::string(300, 'x'), "", "ccc", std::string(300, 'x')};
  for (size_t i = 0; i < table_rows.size(); ++i) {
    EXPECT_EQ(ValueAt<int64_t>(d.values[0], i), ids[i]) << i;
    EXPECT_EQ(ValueAt<int32_t>(d.values[1], i), labels[i]) << i;
    EXPECT_EQ(d.valid[1][i], valid[i]) << i;
    EXPECT_EQ(d.strings[2][i], names[i]) << i;
  }
  EXPECT_TRUE(d.valid[0].empty());
  EXPECT_TRUE(d.valid[2].empty());
}

TEST(ScalarRows, FixedSizeRecordsWithoutStrings) {
  const std::vector<ScalarColumn> cols = {Int32s({7, 8, 9, 10}), Int64s({-1, -2, -3, -4})};
  ScalarRows rows;
  rows.SetLayout(cols, {false, false}, 4, 0);
  rows.Append(cols, 4);
  const std::vector<int64_t> table_rows = {3, 3, 0};
  Dest d(cols, rows, 3);
  rows.Gather(table_rows, 0, 3, d.batch());
  EXPECT_EQ(ValueAt<int32_t>(d.values[0], 0), 10);
  EXPECT_EQ(ValueAt<int32_t>(d.values[0], 2), 7);
  EXPECT_EQ(ValueAt<int64_t>(d.values[1], 1), -4);
  EXPECT_EQ(ValueAt<int64_t>(d.values[1], 2), -1);
}

TEST(ScalarRows, GatherReusesTheBatchStringsAndOverwritesLongerOnes) {
  const std::vector<ScalarColumn> cols = {Strings({"short", std::string(100, 'y')})};
  ScalarRows rows;
  rows.SetLayout(cols, {false}, 2, 105);
  rows.Append(cols, 2);
  Dest d(cols, rows, 2);
  rows.Gather(std::vector<int64_t>{1, 0}, 0, 2, d.batch());
  EXPECT_EQ(d.strings[0][0], std::string(100, 'y'));
  rows.Gather(std::vector<int64_t>{0, 0}, 0, 2, d.batch());  // the slot's next batch
  EXPECT_EQ(d.strings[0][0], "short");
  EXPECT_EQ(d.strings[0][1], "short");
}

TEST(ScalarRows, NoColumns) {
  ScalarRows rows;
  rows.SetLayout({}, {}, 3, 0);
  rows.Append({}, 3);
  EXPECT_EQ(rows.num_rows(), 3u);
  Dest d({}, rows, 3);
  rows.Gather(std::vector<int64_t>{0, 1, 2}, 0, 3, d.batch());  // nothing to copy, nothing read
}

}  // namespace
}  // namespace stoke
