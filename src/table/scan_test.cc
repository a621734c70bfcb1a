#include "table/scan.h"

#include <gtest/gtest.h>

#include "format/logical_value.h"
#include "table/test_table.h"

namespace stoke {
namespace {

TEST(Scan, ShardDirectoryNamesReadBackAndNothingElseIsOne) {
  EXPECT_EQ(ShardDirectoryName(3, 16), "shard-3-of-16");
  EXPECT_TRUE(IsShardDirectoryName(ShardDirectoryName(0, 4)));
  EXPECT_TRUE(IsShardDirectoryName("shard-12-of-128"));
  for (std::string_view other : {"", "shard-", "shard-1", "shard-1-of-", "shard--of-4", "shard-a-of-4", "shard-1-of-4x",
                                 "xshard-1-of-4", "label=1", "shard-1-of-4/", "Shard-1-of-4"}) {
    EXPECT_FALSE(IsShardDirectoryName(other)) << other;
  }
}

TEST(Scan, FileStatsReadDeltaStatisticsByColumnType) {
  auto cols = testing_support::TestColumns();
  delta::AddFile add;
  add.stats = R"({"numRecords":7,"minValues":{"id":3,"label":0,"name":"a"},"maxValues":{"id":9,"label":2,"name":"zz"},
                  "nullCount":{"id":0,"name":2,"t":0}})";
  int64_t records = 0;
  auto st = FileStats(add, cols, &records);
  EXPECT_EQ(records, 7);
  EXPECT_EQ(st["id"].min, Value{int64_t{3}});
  EXPECT_EQ(st["id"].max, Value{int64_t{9}});
  EXPECT_EQ(st["name"].max, Value{std::string("zz")});
  EXPECT_EQ(st["name"].null_count, 2);
  EXPECT_FALSE(st["t"].min.has_value());  // tensors have no bounds
}

TEST(Scan, PartitionValuesOfEveryTypeTakeTheColumnsCanonicalForm) {
  auto column = [](parquet::Type type, LogicalType logical, int32_t precision = 0, int32_t scale = 0) {
    return ColumnSpec{.name = "p", .type = type, .logical = logical, .precision = precision, .scale = scale, .optional = true};
  };
  const ColumnSpec date = column(parquet::Type::kInt32, LogicalType::kDate);
  EXPECT_EQ(PartitionValue(date, "2024-01-31"), Value{int64_t{19753}});
  EXPECT_FALSE(PartitionValue(date, "2024-02-30").has_value());
  // Delta writes timestamp partitions as "yyyy-mm-dd hh:mm:ss[.ffffff]" or ISO-8601 with a zone.
  const ColumnSpec ts = column(parquet::Type::kInt64, LogicalType::kTimestamp);
  EXPECT_EQ(PartitionValue(ts, "2024-01-31 12:00:00"), Value{int64_t{1706702400000000}});
  EXPECT_EQ(PartitionValue(ts, "2024-01-31T12:00:00.000000Z"), Value{int64_t{1706702400000000}});
  const ColumnSpec small = column(parquet::Type::kInt64, LogicalType::kDecimal, 10, 2);
  EXPECT_EQ(PartitionValue(small, "12.5"), Value{int64_t{1250}});
  EXPECT_FALSE(PartitionValue(small, "12.505").has_value());  // not a value of scale 2
  EXPECT_FALSE(PartitionValue(small, "123456789.00").has_value());  // more than 10 digits
  const ColumnSpec wide = column(parquet::Type::kFixedLenByteArray, LogicalType::kDecimal, 30, 2);
  ColumnValues v = PartitionColumnValues(wide, std::optional<std::string>("-0.05"), 2);
  const auto& bytes = std::get<std::vector<std::string>>(v.values);
  ASSERT_EQ(bytes.size(), 2u);
  EXPECT_EQ(DecimalAt(v.values, 1), -5);
  EXPECT_EQ(bytes[0].size(), 16u);
  EXPECT_EQ(PartitionColumnValues(wide, std::nullopt, 3).defined, (std::vector<uint8_t>{0, 0, 0}));
}

TEST(Scan, TruncatedStringMaximaAreNotTrusted) {
  auto cols = testing_support::TestColumns();
  delta::AddFile add;
  // A writer that truncated "bbbb...bz" to 32 characters: the stored max is below the real one.
  std::string truncated(32, 'b');
  add.stats = R"({"numRecords":1,"minValues":{"name":")" + truncated + R"("},"maxValues":{"name":")" + truncated + R"("}})";
  int64_t records = 0;
  auto st = FileStats(add, cols, &records);
  EXPECT_TRUE(st["name"].min.has_value());
  EXPECT_FALSE(st["name"].max.has_value());
  auto p = Predicate::Parse("name > '" + truncated + "'");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Bind(cols).ok());
  EXPECT_TRUE(p->MayMatch(st, records));  // must not skip the file
}

TEST(Scan, MalformedStatsSkipNothing) {
  auto cols = testing_support::TestColumns();
  delta::AddFile add;
  add.stats = "{not json";
  int64_t records = 5;
  for (const auto& [name, s] : FileStats(add, cols, &records)) {
    EXPECT_FALSE(s.min || s.max || s.null_count) << name;  // no bounds: nothing can be skipped
  }
  EXPECT_EQ(records, -1);
}

TEST(Scan, FileStatsEdgeCasesMatchTheParsedDocument) {
  auto cols = testing_support::TestColumns();
  auto stats_of = [&](const std::string& text, int64_t* records) {
    delta::AddFile add;
    add.stats = text;
    return FileStats(add, cols, records);
  };
  int64_t records = 0;
  // The last of duplicate keys wins; unknown sections and columns are ignored; a nested value is unknown.
  auto st = stats_of(R"({"tightBounds":{"id":1},"minValues":{"id":5,"zz":1,"id":4,"label":{"a":1}},)"
                     R"("maxValues":{"id":[1,2],"label":3},"nullCount":{"name":1.5,"id":0},"numRecords":10})",
                     &records);
  EXPECT_EQ(records, 10);
  EXPECT_EQ(st["id"].min, Value{int64_t{4}});
  EXPECT_FALSE(st["id"].max.has_value());
  EXPECT_FALSE(st["label"].min.has_value());
  EXPECT_EQ(st["label"].max, Value{int64_t{3}});
  EXPECT_EQ(st["id"].null_count, 0);
  EXPECT_FALSE(st["name"].null_count.has_value());  // not an integer
  // Wrong types for the column are unknown; numRecords that is not an integer is unknown.
  st = stats_of(R"({"numRecords":"7","minValues":{"id":"3","name":4},"maxValues":{"label":2.5}})", &records);
  EXPECT_EQ(records, -1);
  EXPECT_FALSE(st["id"].min.has_value());
  EXPECT_FALSE(st["name"].min.has_value());
  EXPECT_FALSE(st["label"].max.has_value());
  // Not an object, or trailing garbage: nothing known.
  for (const char* bad : {"[1,2]", "5", R"({"numRecords":3} x)", R"({"numRecords":3)", "", "null"}) {
    records = 0;
    st = stats_of(bad, &records);
    EXPECT_EQ(records, -1) << bad;
    for (const auto& [name, s] : st) EXPECT_FALSE(s.min || s.max || s.null_count) << bad << " " << name;
  }
  // A huge unsigned count is not a count.
  stats_of(R"({"numRecords":18446744073709551615})", &records);
  EXPECT_EQ(records, -1);
}

}  // namespace
}  // namespace stoke
