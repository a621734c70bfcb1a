// Delta schemas (Spark's JSON) and add statistics from Parquet footers.
#include "table/delta_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "format/logical_value.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "io/local_files.h"
#include "table/delta_testing.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using namespace testing_support;  // NOLINT: the Delta test helpers

TEST(DeltaSchema, SparkJsonRoundTrips) {
  std::vector<ColumnSpec> cols = TestColumns();
  ColumnSpec s;
  s.name = "caption";
  s.type = parquet::Type::kByteArray;
  s.is_string = true;
  s.optional = true;
  cols.push_back(s);
  for (auto [name, type] : {std::pair{"flag", parquet::Type::kBoolean}, std::pair{"f", parquet::Type::kFloat},
                            std::pair{"d", parquet::Type::kDouble}}) {
    ColumnSpec c;
    c.name = name;
    c.type = type;
    cols.push_back(c);
  }
  ColumnSpec raw;
  raw.name = "raw";
  raw.type = parquet::Type::kByteArray;
  cols.push_back(raw);

  std::string text = SchemaToSparkJson(cols);
  EXPECT_EQ(text.rfind(R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":{}},)", 0),
            0u)
      << text;
  std::map<std::string, TensorSpec> tensors{{"volume", TensorSpec{DType::kFloat32, {2, 3}}}};
  auto back = SchemaFromSparkJson(text, tensors);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), cols.size());
  for (size_t i = 0; i < cols.size(); ++i) {
    EXPECT_EQ((*back)[i].name, cols[i].name);
    EXPECT_EQ((*back)[i].type, cols[i].type) << cols[i].name;
    EXPECT_EQ((*back)[i].optional, cols[i].optional) << cols[i].name;
    EXPECT_EQ((*back)[i].is_string, cols[i].is_string) << cols[i].name;
    EXPECT_EQ((*back)[i].tensor, cols[i].tensor) << cols[i].name;
  }
}

TEST(DeltaSchema, RejectsUnsupportedTypesAndMalformedJson) {
  auto field = [](const std::string& type_json) {
    return R"({"type":"struct","fields":[{"name":"x","type":)" + type_json + R"(,"nullable":true,"metadata":{}}]})";
  };
  for (const char* t : {R"("variant")", "\"decimal(39,2)\"", "\"decimal(5,6)\"", "\"decimal(10,2\"", R"("interval")",
                        R"({"type":"struct","fields":[{"name":"v","type":"variant","nullable":true}]})",
                        R"({"type":"array","elementType":{"type":"map","keyType":"string","valueType":"variant"}})"}) {
    auto r = SchemaFromSparkJson(field(t), {});
    ASSERT_FALSE(r.ok()) << t;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << t;
    EXPECT_NE(r.status().message().find("'x'"), std::string::npos) << r.status().message();
  }
  for (const std::string& bad : {std::string("{"), std::string("[]"), std::string(R"({"type":"map"})"),
                                std::string(R"({"type":"struct"})"), field("7"),
                                std::string(R"({"type":"struct","fields":[{"type":"long"}]})"),
                                std::string(R"({"type":"struct","fields":[{"name":"a","type":"long"},{"name":"a","type":"long"}]})")}) {
    auto r = SchemaFromSparkJson(bad, {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
  }
  // A tensor must be a binary column that exists.
  std::map<std::string, TensorSpec> tensors{{"x", TensorSpec{DType::kUInt8, {4}}}};
  EXPECT_EQ(SchemaFromSparkJson(field(R"("long")"), tensors).status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(SchemaFromSparkJson(field(R"("binary")"), tensors).ok());
  std::map<std::string, TensorSpec> missing{{"y", TensorSpec{DType::kUInt8, {4}}}};
  EXPECT_EQ(SchemaFromSparkJson(field(R"("binary")"), missing).status().code(), StatusCode::kCorruption);
}

TEST(DeltaSchema, ReadsEveryPrimitiveTypeInItsCanonicalForm) {
  struct Case {
    const char* type;
    parquet::Type physical;
    LogicalType logical;
    int32_t precision, scale;
  };
  for (const Case& c : {Case{"byte", parquet::Type::kInt32, LogicalType::kByte, 0, 0},
                        Case{"short", parquet::Type::kInt32, LogicalType::kShort, 0, 0},
                        Case{"date", parquet::Type::kInt32, LogicalType::kDate, 0, 0},
                        Case{"timestamp", parquet::Type::kInt64, LogicalType::kTimestamp, 0, 0},
                        Case{"timestamp_ntz", parquet::Type::kInt64, LogicalType::kTimestampNtz, 0, 0},
                        Case{"decimal(10,2)", parquet::Type::kInt64, LogicalType::kDecimal, 10, 2},
                        Case{"decimal(18, 0)", parquet::Type::kInt64, LogicalType::kDecimal, 18, 0},
                        Case{"decimal(38,38)", parquet::Type::kFixedLenByteArray, LogicalType::kDecimal, 38, 38}}) {
    const std::string json = std::string(R"({"type":"struct","fields":[{"name":"x","type":")") + c.type +
                             R"(","nullable":true,"metadata":{}}]})";
    auto r = SchemaFromSparkJson(json, {});
    ASSERT_TRUE(r.ok()) << c.type << ": " << r.status().ToString();
    const ColumnSpec& col = (*r)[0];
    EXPECT_EQ(col.type, c.physical) << c.type;
    EXPECT_EQ(col.logical, c.logical) << c.type;
    EXPECT_EQ(col.precision, c.precision) << c.type;
    EXPECT_EQ(col.scale, c.scale) << c.type;
    // Written back under the same name (Spark's spelling: no space after the comma).
    auto again = SchemaFromSparkJson(SchemaToSparkJson(*r), {});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0].logical, c.logical);
    EXPECT_EQ((*again)[0].scale, c.scale);
  }
}

TEST(DeltaSchema, NestedColumnsKeepTheirTypeAndColumnMappingItsPhysicalNames) {
  Metadata m;
  m.schema_string =
      R"({"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"long",)"
      R"("nullable":true,"metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-a"}}]},)"
      R"("nullable":false,"metadata":{"delta.columnMapping.id":1,"delta.columnMapping.physicalName":"col-s"}}]})";
  auto plain = ColumnsFromMetadata(m, "t");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_TRUE((*plain)[0].nested());
  EXPECT_FALSE((*plain)[0].optional);
  EXPECT_EQ((*plain)[0].file_name(), "s");  // mode none: the mapping metadata is ignored
  EXPECT_EQ(SparkTypeName((*plain)[0]), "struct");
  // The schema written back holds the nested type.
  EXPECT_NE(SchemaToSparkJson(*plain).find(R"("type":{"fields":[)"), std::string::npos) << SchemaToSparkJson(*plain);
  for (const char* mode : {"name", "id"}) {
    m.configuration["delta.columnMapping.mode"] = mode;
    auto mapped = ColumnsFromMetadata(m, "t");
    ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
    EXPECT_EQ((*mapped)[0].file_name(), "col-s");
    EXPECT_EQ((*mapped)[0].field_id, 1);
  }
  m.configuration["delta.columnMapping.mode"] = "name";
  m.schema_string = R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,"metadata":{}}]})";
  auto missing = ColumnsFromMetadata(m, "t");
  EXPECT_EQ(missing.status().code(), StatusCode::kCorruption);
  EXPECT_NE(missing.status().message().find("column 'x' has no delta.columnMapping.physicalName"), std::string::npos);
  m.configuration["delta.columnMapping.mode"] = "other";
  EXPECT_EQ(ColumnsFromMetadata(m, "t").status().code(), StatusCode::kUnsupported);
}

TEST(DeltaSchema, ColumnsFromMetadataMarksTensorAndBlobColumns) {
  std::vector<ColumnSpec> cols = TestColumns();
  cols.push_back({.name = "image", .type = parquet::Type::kByteArray, .blob = true});
  Metadata m;
  m.schema_string = SchemaToSparkJson(cols);
  m.configuration[kTensorsMetadataKey] = TensorSpecsToJson(cols);
  m.configuration[kBlobsMetadataKey] = BlobColumnsToJson(cols);
  EXPECT_EQ(m.configuration[kBlobsMetadataKey], R"(["image"])");
  auto back = ColumnsFromMetadata(m, "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 4u);
  EXPECT_TRUE((*back)[2].tensor.has_value());
  EXPECT_FALSE((*back)[2].blob);
  EXPECT_TRUE((*back)[3].blob);
  EXPECT_TRUE((*back)[3].paged());
  EXPECT_FALSE((*back)[3].is_string);
  // stoke.blobs must name binary columns of the schema, as a JSON array.
  for (const char* bad : {R"(["label"])", R"(["nope"])", R"({"image": {}})", R"([1])", "not json"}) {
    Metadata b = m;
    b.configuration[kBlobsMetadataKey] = bad;
    auto r = ColumnsFromMetadata(b, "t");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << bad;
    EXPECT_NE(r.status().message().find("t:"), std::string::npos) << r.status().message();
  }
}

template <typename T>
std::string Plain(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

parquet::ColumnChunk Chunk(const std::string& name, parquet::Type type, std::optional<std::string> min,
                           std::optional<std::string> max, std::optional<int64_t> nulls) {
  parquet::ColumnChunk c;
  c.meta_data.emplace();
  c.meta_data->type = type;
  c.meta_data->path_in_schema = {name};
  parquet::Statistics st;
  st.min_value = std::move(min);
  st.max_value = std::move(max);
  st.null_count = nulls;
  c.meta_data->statistics = st;
  return c;
}

TEST(DeltaStats, CombinesRowGroupStatistics) {
  using parquet::Type;
  std::vector<ColumnSpec> cols = TestColumns();  // id INT64, label INT32 optional, volume tensor
  auto add = [&](const std::string& name, Type t, bool optional, bool is_string = false) {
    ColumnSpec c;
    c.name = name;
    c.type = t;
    c.optional = optional;
    c.is_string = is_string;
    cols.push_back(c);
  };
  add("score", Type::kFloat, false);
  add("weight", Type::kDouble, true);
  add("caption", Type::kByteArray, true, true);
  add("flag", Type::kBoolean, false);
  add("partial", Type::kInt32, false);  // min/max missing in one row group: omitted
  add("nan", Type::kDouble, false);     // a NaN bound: omitted
  add("allnull", Type::kInt64, true);   // every value null: no bounds, nullCount only
  add("bad_utf8", Type::kByteArray, false, true);

  parquet::FileMetaData footer;
  footer.num_rows = 5;
  parquet::RowGroup rg1, rg2;
  rg1.num_rows = 3;
  rg2.num_rows = 2;
  rg1.columns = {Chunk("id", Type::kInt64, Plain<int64_t>(10), Plain<int64_t>(12), 0),
                 Chunk("label", Type::kInt32, Plain<int32_t>(-3), Plain<int32_t>(4), 1),
                 Chunk("volume", Type::kByteArray, std::nullopt, std::nullopt, 0),
                 Chunk("score", Type::kFloat, Plain<float>(0.1f), Plain<float>(2.5f), 0),
                 Chunk("weight", Type::kDouble, Plain<double>(-1.25), Plain<double>(1e300), 0),
                 Chunk("caption", Type::kByteArray, std::string("b"), std::string("zeta"), 2),
                 Chunk("flag", Type::kBoolean, std::string(1, '\0'), std::string(1, '\0'), 0),
                 Chunk("partial", Type::kInt32, Plain<int32_t>(1), Plain<int32_t>(2), 0),
                 Chunk("nan", Type::kDouble, Plain<double>(NAN), Plain<double>(1.0), 0),
                 Chunk("allnull", Type::kInt64, std::nullopt, std::nullopt, 3),
                 Chunk("bad_utf8", Type::kByteArray, std::string("\xff"), std::string("\xff"), 0)};
  rg2.columns = {Chunk("id", Type::kInt64, Plain<int64_t>(13), Plain<int64_t>(14), 0),
                 Chunk("label", Type::kInt32, Plain<int32_t>(-7), Plain<int32_t>(2), 0),
                 Chunk("volume", Type::kByteArray, std::nullopt, std::nullopt, 0),
                 Chunk("score", Type::kFloat, Plain<float>(-0.5f), Plain<float>(1.0f), 0),
                 Chunk("weight", Type::kDouble, Plain<double>(3.0), Plain<double>(4.0), 1),
                 Chunk("caption", Type::kByteArray, std::string("a\xc3\xa9"), std::string("c"), 0),
                 Chunk("flag", Type::kBoolean, std::string(1, '\0'), std::string(1, '\1'), 0),
                 Chunk("partial", Type::kInt32, std::nullopt, std::nullopt, 0),
                 Chunk("nan", Type::kDouble, Plain<double>(0.0), Plain<double>(1.0), 0),
                 Chunk("allnull", Type::kInt64, std::nullopt, std::nullopt, 2),
                 Chunk("bad_utf8", Type::kByteArray, std::string("a"), std::string("b"), 0)};
  footer.row_groups = {rg1, rg2};

  std::string text = StatsJsonFromFooter(footer, cols);
  EXPECT_EQ(text.rfind("{\"numRecords\":5,\"minValues\":{\"id\":10,", 0), 0u) << text;
  json s = json::parse(text);
  EXPECT_EQ(s["numRecords"], 5);
  const json& mn = s["minValues"];
  const json& mx = s["maxValues"];
  const json& nc = s["nullCount"];
  EXPECT_EQ(mn["id"], 10);
  EXPECT_EQ(mx["id"], 14);
  EXPECT_EQ(mn["label"], -7);
  EXPECT_EQ(mx["label"], 4);
  EXPECT_FALSE(mn.contains("volume"));
  EXPECT_FALSE(mx.contains("volume"));
  EXPECT_EQ(static_cast<float>(mn["score"].get<double>()), -0.5f);
  EXPECT_EQ(static_cast<float>(mx["score"].get<double>()), 2.5f);
  EXPECT_EQ(mn["weight"], -1.25);
  EXPECT_EQ(mx["weight"], 1e300);
  EXPECT_EQ(mn["caption"], "a\xc3\xa9");
  EXPECT_EQ(mx["caption"], "zeta");
  EXPECT_EQ(mn["flag"], false);
  EXPECT_EQ(mx["flag"], true);
  EXPECT_FALSE(mn.contains("partial"));
  EXPECT_FALSE(mx.contains("partial"));
  EXPECT_FALSE(mn.contains("nan"));
  EXPECT_FALSE(mn.contains("allnull"));
  EXPECT_FALSE(mn.contains("bad_utf8"));
  EXPECT_EQ(nc["id"], 0);
  EXPECT_EQ(nc["label"], 1);
  EXPECT_EQ(nc["volume"], 0);
  EXPECT_EQ(nc["weight"], 1);
  EXPECT_EQ(nc["caption"], 2);
  EXPECT_EQ(nc["allnull"], 5);

  // A float bound reads back as exactly the same float.
  footer.row_groups = {rg1};
  json one = json::parse(StatsJsonFromFooter(footer, cols));
  EXPECT_EQ(static_cast<float>(one["minValues"]["score"].get<double>()), 0.1f);
}

TEST(DeltaStats, EmptyFileHasZeroNullCountsAndNoBounds) {
  parquet::FileMetaData footer;
  json s = json::parse(StatsJsonFromFooter(footer, TestColumns()));
  EXPECT_EQ(s["numRecords"], 0);
  EXPECT_TRUE(s["minValues"].empty());
  EXPECT_EQ(s["nullCount"]["label"], 0);
}

// A schema written again keeps what other writers recorded of its columns.
TEST(DeltaSchema, ASchemaWrittenAgainKeepsItsFieldsMetadata) {
  std::vector<ColumnSpec> cols(2);
  cols[0].name = "id";
  cols[0].type = parquet::Type::kInt64;
  cols[1].name = "added";
  cols[1].type = parquet::Type::kInt32;
  cols[1].optional = true;
  const std::string previous =
      R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":)"
      R"({"delta.invariants":"{\"expression\":{\"expression\":\"id >= 0\"}}","comment":"row id"}}]})";
  const std::string out = SchemaToSparkJson(cols, previous);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["fields"][0]["metadata"]["comment"], "row id");
  EXPECT_TRUE(j["fields"][0]["metadata"].contains("delta.invariants"));
  EXPECT_TRUE(j["fields"][1]["metadata"].empty());
  EXPECT_EQ(SchemaToSparkJson(cols, ""), SchemaToSparkJson(cols));
  EXPECT_EQ(SchemaToSparkJson(cols, "not json"), SchemaToSparkJson(cols));
  // An identity declaration stays with its type: a column of another type under its name loses it.
  const std::string identity =
      R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":false,"metadata":)"
      R"({"delta.identity.start":1,"delta.identity.step":1,"comment":"row id"}},)"
      R"({"name":"added","type":"long","nullable":true,"metadata":{"delta.identity.start":5,"comment":"kept"}}]})";
  j = nlohmann::json::parse(SchemaToSparkJson(cols, identity));
  EXPECT_EQ(j["fields"][0]["metadata"]["delta.identity.start"], 1);
  EXPECT_FALSE(j["fields"][1]["metadata"].contains("delta.identity.start"));
  EXPECT_EQ(j["fields"][1]["metadata"]["comment"], "kept");
}

// Under column mapping a column is written under its physical name with its field id, and the add's
// statistics are keyed by the physical name (PROTOCOL.md, "Writer Requirements for Column Mapping").
TEST(DeltaSchema, MappedColumnsAreWrittenAndCountedUnderTheirPhysicalNames) {
  auto dir = TemporaryDirectory::Create("stoke_mapped_");
  ASSERT_TRUE(dir.ok());
  const std::string path = dir->path() + "/mapped.parquet";
  std::vector<ColumnSpec> cols(2);
  cols[0].name = "id";
  cols[0].type = parquet::Type::kInt64;
  cols[0].physical_name = "col-1a2b";
  cols[0].field_id = 1;
  cols[1].name = "plain";
  cols[1].type = parquet::Type::kInt32;
  auto writer = ParquetFileWriter::Create(LocalStorage(), path, cols);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  RowGroupEncoder enc((*writer)->columns(), (*writer)->options());
  ASSERT_TRUE(enc.SetScalars(0, ColumnValues{std::vector<int64_t>{5, 9}, {}}).ok());
  ASSERT_TRUE(enc.SetScalars(1, ColumnValues{std::vector<int32_t>{1, 2}, {}}).ok());
  auto rg = enc.Finish();
  ASSERT_TRUE(rg.ok());
  ASSERT_TRUE((*writer)->WriteRowGroup(std::move(*rg)).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  const auto& schema = (*reader)->metadata().schema;
  EXPECT_EQ(schema[1].name, "col-1a2b");
  EXPECT_EQ(schema[1].field_id, 1);
  EXPECT_EQ(schema[2].name, "plain");
  EXPECT_FALSE(schema[2].field_id.has_value());
  auto stats = nlohmann::json::parse(StatsJsonFromFooter((*reader)->metadata(), cols));
  EXPECT_EQ(stats["minValues"]["col-1a2b"], 5);
  EXPECT_EQ(stats["maxValues"]["col-1a2b"], 9);
  EXPECT_FALSE(stats["minValues"].contains("id"));
  EXPECT_EQ(stats["maxValues"]["plain"], 2);
}

}  // namespace
}  // namespace stoke::delta
