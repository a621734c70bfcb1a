#include "table/checkpoint_stats.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "format/parquet_nested.h"
#include "format/parquet_reader.h"
#include "io/local_files.h"
#include "table/checkpoint.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;

// A table of every kind of column, partitioned by `day` (a date) and `shard` (an int), with
// delta.checkpoint.writeStatsAsStruct, and two adds: one with full statistics, one with none.
Snapshot TypedTable() {
  Snapshot s;
  s.version = 3;
  s.metadata.id = "t";
  s.metadata.schema_string = R"j({"type":"struct","fields":[
    {"name":"id","type":"long","nullable":false,"metadata":{}},
    {"name":"score","type":"double","nullable":true,"metadata":{}},
    {"name":"name","type":"string","nullable":true,"metadata":{}},
    {"name":"at","type":"timestamp","nullable":true,"metadata":{}},
    {"name":"price","type":"decimal(10,2)","nullable":true,"metadata":{}},
    {"name":"ok","type":"boolean","nullable":true,"metadata":{}},
    {"name":"tags","type":{"type":"array","elementType":"string","containsNull":true},"nullable":true,"metadata":{}},
    {"name":"day","type":"date","nullable":true,"metadata":{}},
    {"name":"shard","type":"integer","nullable":true,"metadata":{}}]})j";
  s.metadata.partition_columns = {"day", "shard"};
  s.metadata.configuration["delta.checkpoint.writeStatsAsStruct"] = "true";
  AddFile full;
  full.path = "day=2024-01-31/shard=7/a.parquet";
  full.partition_values = {{"day", "2024-01-31"}, {"shard", "7"}};
  full.size = 10;
  full.stats = R"({"numRecords":4,"minValues":{"id":1,"score":-0.5,"name":"a","at":"2024-01-31T12:00:00.000Z","price":12.34},)"
               R"("maxValues":{"id":9,"score":2.5,"name":"z","at":"2024-02-01T00:00:00.500Z","price":99.99},)"
               R"("nullCount":{"id":0,"score":1,"name":2,"at":0,"price":0,"ok":1,"tags":3}})";
  AddFile bare;
  bare.path = "day=__HIVE_DEFAULT_PARTITION__/shard=8/b.parquet";
  bare.partition_values = {{"day", std::nullopt}, {"shard", "8"}};
  bare.size = 10;
  s.files = {full, bare};
  return s;
}

TEST(TypedStats, ValuesTakeTheirColumnsTypes) {
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt32, .logical = LogicalType::kDate}, "1970-01-02"), 1);
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64, .logical = LogicalType::kTimestamp},
                           "1970-01-01T00:00:01.000Z"),
            1000000);
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64, .logical = LogicalType::kDecimal, .precision = 10,
                                      .scale = 2},
                           json::parse("12.3")),
            1230);
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt32}, "42"), 42);  // a partition value's text
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kDouble}, "2.5"), 2.5);
  EXPECT_EQ(TypedStatValue(ColumnSpec{.type = parquet::Type::kBoolean}, "true"), true);
  // What does not convert is unknown.
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt32, .logical = LogicalType::kDate}, "yesterday").is_null());
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64}, "1.5").is_null());
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kDouble}, "nan-ish").is_null());
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kByteArray, .is_string = true}, 3).is_null());
  // Nor what its leaf cannot hold: a decimal beyond its precision, or one of more than 15 digits
  // given as a JSON number (read as a double, whose digits are not the writer's).
  const ColumnSpec wide{.type = parquet::Type::kInt64, .logical = LogicalType::kDecimal, .precision = 18, .scale = 2};
  EXPECT_TRUE(TypedStatValue(wide, json::parse("1234567890123456.78")).is_null());
  EXPECT_EQ(TypedStatValue(wide, "1234567890123456.78"), 123456789012345678);
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64, .logical = LogicalType::kDecimal, .precision = 3,
                                        .scale = 2},
                             json::parse("12.34"))
                  .is_null());
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt32}, int64_t{1} << 40).is_null());
  EXPECT_TRUE(TypedStatValue(ColumnSpec{.type = parquet::Type::kInt64}, json::parse("18446744073709551615")).is_null());
}

// Bounds that are not tight (a file with deleted rows) say so in stats_parsed too.
TEST(TypedStats, LooseBoundsStayLoose) {
  const Snapshot s = TypedTable();
  auto typed = TypedStats::For(s, "t");
  ASSERT_TRUE(typed.ok() && typed->has_value());
  AddFile add = s.files[0];
  add.stats = R"({"numRecords":4,"tightBounds":false,"minValues":{"id":1}})";
  json row = json::object();
  (*typed)->AddTo(add, &row);
  EXPECT_EQ(row["stats_parsed"]["tightBounds"], false);
  EXPECT_EQ(row["stats_parsed"]["minValues"]["id"], 1);
}

// partitionValues_parsed must hold every partition column: one whose type stoke does not write
// refuses the checkpoint, naming it.
TEST(TypedStats, APartitionColumnStokeCannotWriteRefusesTheCheckpoint) {
  Snapshot s = TypedTable();
  s.metadata.schema_string = R"j({"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},
    {"name":"big","type":"decimal(30,2)","nullable":true,"metadata":{}}]})j";
  s.metadata.partition_columns = {"big"};
  auto typed = TypedStats::For(s, "t");
  EXPECT_EQ(typed.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(typed.status().message().find("partition column 'big'"), std::string::npos) << typed.status().message();
}

TEST(TypedStats, OnlyWhereTheTableAsksForThem) {
  Snapshot s = TypedTable();
  s.metadata.configuration.erase("delta.checkpoint.writeStatsAsStruct");
  auto typed = TypedStats::For(s, "t");
  ASSERT_TRUE(typed.ok());
  EXPECT_FALSE(typed->has_value());
}

// The checkpoint's adds carry stats_parsed and partitionValues_parsed in the columns' own Parquet
// types, read back as the JSON statistics say; an add without statistics has no stats_parsed.
TEST(TypedStats, CheckpointsCarryThemInTheColumnsTypes) {
  TemporaryDirectory dir = TemporaryDirectory::Create("stoke_typed_stats_").value();
  const Snapshot s = TypedTable();
  ASSERT_TRUE(WriteCheckpoint(LocalStorage(), dir.path(), s).ok());
  auto reader = ParquetReader::Open(LocalStorage(), dir.path() + "/00000000000000000003.checkpoint.parquet");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto adds = ReadNestedField(**reader, 0, "add");
  ASSERT_TRUE(adds.ok()) << adds.status().ToString();
  std::vector<json> rows;
  for (const auto& a : *adds) {
    if (!a.is_null()) rows.push_back(json::parse(a.dump()));
  }
  ASSERT_EQ(rows.size(), 2u);
  const json& stats = rows[0]["stats_parsed"];
  EXPECT_EQ(stats["numRecords"], 4);
  EXPECT_EQ(stats["minValues"]["id"], 1);
  EXPECT_EQ(stats["maxValues"]["score"], 2.5);
  EXPECT_EQ(stats["minValues"]["name"], "a");
  EXPECT_EQ(stats["minValues"]["at"], "2024-01-31T12:00:00Z");  // read back through its annotation
  EXPECT_EQ(stats["maxValues"]["at"], "2024-02-01T00:00:00.500Z");
  EXPECT_EQ(stats["maxValues"]["price"], "99.99");
  EXPECT_FALSE(stats["minValues"].contains("ok"));    // booleans have no bounds
  EXPECT_FALSE(stats["minValues"].contains("tags"));  // nor nested columns
  EXPECT_FALSE(stats["nullCount"].contains("tags"));
  EXPECT_EQ(stats["nullCount"]["ok"], 1);
  EXPECT_FALSE(stats["minValues"].contains("day"));  // partition columns are not in the statistics
  EXPECT_EQ(rows[0]["partitionValues_parsed"], (json{{"day", "2024-01-31"}, {"shard", 7}}));
  EXPECT_EQ(rows[1]["partitionValues_parsed"], (json{{"day", nullptr}, {"shard", 8}}));
  EXPECT_TRUE(rows[1]["stats_parsed"].is_null());
  EXPECT_FALSE(stats.contains("tightBounds") && !stats["tightBounds"].is_null());  // absent: tight
  // The checkpoint reads back as the state it was written from.
  auto actions = ReadCheckpoint(LocalStorage(), dir.path(), 3);
  ASSERT_TRUE(actions.ok()) << actions.status().ToString();
  ASSERT_EQ(actions->adds.size(), 2u);
  EXPECT_EQ(actions->adds[0].stats, s.files[0].stats);
}

}  // namespace
}  // namespace stoke::delta
