#include "table/add_stats.h"

#include <gtest/gtest.h>

#include <string>

namespace stoke {
namespace {

std::vector<ColumnSpec> Columns() {
  std::vector<ColumnSpec> cols(5);
  cols[0].name = "id";
  cols[1].name = "label";
  cols[1].type = parquet::Type::kInt32;
  cols[2].name = "name";
  cols[2].type = parquet::Type::kByteArray;
  cols[2].is_string = true;
  cols[3].name = "x";
  cols[3].type = parquet::Type::kDouble;
  cols[4].name = "ok";
  cols[4].type = parquet::Type::kBoolean;
  return cols;
}

TEST(AddStatsReader, ReadsBoundsByColumnTypeAndIgnoresOtherColumns) {
  const auto cols = Columns();
  AddStatsReader reader(cols);
  std::vector<Predicate::ColumnStats> st;
  int64_t records = 0;
  ASSERT_TRUE(reader.Read(R"({"numRecords":4,"minValues":{"id":-3,"label":1,"name":"a\u00e9","x":2,"ok":false,"zz":1},)"
                          R"("maxValues":{"id":9,"label":7,"name":"b","x":2.5,"ok":true},"nullCount":{"id":0,"name":1}})",
                          &st, &records));
  EXPECT_EQ(records, 4);
  ASSERT_EQ(st.size(), cols.size());
  EXPECT_EQ(st[0].min, Value{int64_t{-3}});
  EXPECT_EQ(st[0].max, Value{int64_t{9}});
  EXPECT_EQ(st[1].max, Value{int64_t{7}});
  EXPECT_EQ(st[2].min, Value{std::string("a\xc3\xa9")});
  EXPECT_EQ(st[3].min, Value{2.0});  // an integer in a DOUBLE column is its value
  EXPECT_EQ(st[3].max, Value{2.5});
  EXPECT_EQ(st[4].min, Value{false});
  EXPECT_EQ(st[4].max, Value{true});
  EXPECT_EQ(st[0].null_count, 0);
  EXPECT_EQ(st[2].null_count, 1);
  EXPECT_FALSE(st[1].null_count.has_value());
}

TEST(AddStatsReader, ASubsetOfColumnsReadsOnlyThose) {
  std::vector<ColumnSpec> only_label = {Columns()[1]};
  AddStatsReader reader(only_label);
  std::vector<Predicate::ColumnStats> st;
  int64_t records = 0;
  ASSERT_TRUE(reader.Read(R"({"numRecords":1,"minValues":{"id":3,"label":5},"maxValues":{"label":5}})", &st, &records));
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].min, Value{int64_t{5}});
  EXPECT_EQ(st[0].max, Value{int64_t{5}});
}

TEST(AddStatsReader, NumRecordsIsANonNegativeInt64OrUnknown) {
  AddStatsReader reader({});
  EXPECT_EQ(reader.NumRecords(R"({"numRecords":7})"), 7);
  EXPECT_EQ(reader.NumRecords(R"({"numRecords":1,"numRecords":3})"), 3);  // the last duplicate wins
  EXPECT_EQ(reader.NumRecords(R"({"minValues":{"numRecords":9},"numRecords":7})"), 7);
  EXPECT_EQ(reader.NumRecords(R"({"numRecords":9223372036854775807})"), INT64_MAX);
  for (const char* bad : {R"({})", R"({"numRecords":-1})", R"({"numRecords":"5"})", R"({"numRecords":1.5})",
                          R"({"numRecords":1e2})", R"({"numRecords":null})", R"({"numRecords":{"numRecords":5}})",
                          R"([{"numRecords":5}])", R"({"numRecords":5)", R"({"numRecords":5} x)",
                          R"({"numRecords":18446744073709551615})", R"({"numRecords":99999999999999999999999})", "5", "",
                          "null", "{\"numRecords\":5,\"s\":\"\xff\"}"}) {
    EXPECT_EQ(reader.NumRecords(bad), -1) << bad;
  }
}

TEST(AddStatsReader, MalformedTextLeavesEverythingUnknown) {
  const auto cols = Columns();
  AddStatsReader reader(cols);
  std::vector<Predicate::ColumnStats> st;
  int64_t records = 0;
  for (const char* bad : {"{not json", R"({"numRecords":3,"minValues":{"id":1}} trailing)", "[1]",
                          "{\"minValues\":{\"name\":\"\xc3\"}}"}) {
    EXPECT_FALSE(reader.Read(bad, &st, &records)) << bad;
    EXPECT_EQ(records, -1);
    ASSERT_EQ(st.size(), cols.size());
    for (const auto& s : st) EXPECT_FALSE(s.min || s.max || s.null_count) << bad;
  }
  // A valid text after a malformed one reads normally (the parser and its buffer are reused).
  ASSERT_TRUE(reader.Read(R"({"numRecords":2,"minValues":{"id":1}})", &st, &records));
  EXPECT_EQ(records, 2);
  EXPECT_EQ(st[0].min, Value{int64_t{1}});
}

TEST(AddStatsReader, LongTextsAndReuseAcrossSizes) {
  // The padded copy grows and shrinks with the texts; every one reads on its own.
  const auto cols = Columns();
  AddStatsReader reader(cols);
  std::vector<Predicate::ColumnStats> st;
  int64_t records = 0;
  std::string long_name(100000, 'q');
  ASSERT_TRUE(reader.Read(R"({"numRecords":1,"minValues":{"name":")" + long_name + R"("},"maxValues":{"name":")" +
                              long_name + R"("}})",
                          &st, &records));
  EXPECT_EQ(st[2].min, Value{long_name});
  EXPECT_FALSE(st[2].max.has_value());  // 32 bytes or more: possibly truncated, not an upper bound
  ASSERT_TRUE(reader.Read(R"({"numRecords":1})", &st, &records));
  EXPECT_FALSE(st[2].min.has_value());
  EXPECT_EQ(records, 1);
}

TEST(AddStatsReader, TensorColumnsGetOnlyTheirNullCount) {
  std::vector<ColumnSpec> cols(1);
  cols[0].name = "t";
  cols[0].type = parquet::Type::kByteArray;
  cols[0].tensor = TensorSpec{DType::kFloat32, {2}};
  AddStatsReader reader(cols);
  std::vector<Predicate::ColumnStats> st;
  int64_t records = 0;
  ASSERT_TRUE(reader.Read(R"({"numRecords":1,"minValues":{"t":"x"},"maxValues":{"t":"y"},"nullCount":{"t":0}})", &st,
                          &records));
  EXPECT_FALSE(st[0].min.has_value());
  EXPECT_FALSE(st[0].max.has_value());
  EXPECT_EQ(st[0].null_count, 0);
}

}  // namespace
}  // namespace stoke
