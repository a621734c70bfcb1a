#include "table/column_mapping.h"

#include <gtest/gtest.h>

namespace stoke::delta {
namespace {

// A table in mode `mode` (on protocol 2/5) whose column "a" is stored as "col-a" (id 3) and "t", a
// tensor column, as "col-t" (id 7), renamed since; maxColumnId 9 (ids of dropped columns are not
// reused).
Snapshot MappedTable(const std::string& mode) {
  Snapshot s;
  s.protocol = Protocol{2, 5, {}, {}};
  Metadata& m = s.metadata;
  m.schema_string = R"({"type":"struct","fields":[
    {"name":"a","type":"long","nullable":false,"metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-a"}},
    {"name":"renamed","type":"binary","nullable":false,"metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-t"}}]})";
  m.configuration["delta.columnMapping.mode"] = mode;
  m.configuration["delta.columnMapping.maxColumnId"] = "9";
  m.configuration["stoke.tensors"] = R"({"col-t":{"dtype":"float32","shape":[2]}})";
  return s;
}

TEST(ColumnMapping, ModeIsNoneWithoutThePropertyOrItsProtocol) {
  EXPECT_EQ(ColumnMappingMode(Snapshot{}), "none");
  EXPECT_EQ(ColumnMappingMode(MappedTable("id")), "id");
  Snapshot v3 = MappedTable("name");
  v3.protocol = Protocol{3, 7, {"columnMapping"}, {"columnMapping"}};
  EXPECT_EQ(ColumnMappingMode(v3), "name");
}

// A protocol that does not support column mapping ignores the property (PROTOCOL.md, "Column
// Mapping"): columns keep their names in data files, and writes map nothing.
TEST(ColumnMapping, APropertyItsProtocolDoesNotSupportIsIgnored) {
  Snapshot s = MappedTable("name");
  s.protocol = Protocol{1, 2, {}, {}};
  s.metadata.configuration.erase("stoke.tensors");  // named by physical name, unknown here
  EXPECT_EQ(ColumnMappingMode(s), "none");
  auto columns = ColumnsFromSnapshot(s, "t");
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  EXPECT_TRUE((*columns)[0].physical_name.empty());
  EXPECT_EQ((*columns)[0].file_name(), "a");
  std::vector<ColumnSpec> written = {{.name = "a"}, {.name = "new"}};
  ASSERT_TRUE(MapColumns(s, &written, "ingest").ok());
  EXPECT_TRUE(written[1].physical_name.empty());
  EXPECT_FALSE(written[1].field_id.has_value());
}

TEST(ColumnMapping, TheTablesColumnsKeepTheirNamesAndNewOnesGetFreshOnes) {
  const Snapshot s = MappedTable("name");
  const Metadata& m = s.metadata;
  std::vector<ColumnSpec> columns = {{.name = "a"}, {.name = "b", .type = parquet::Type::kDouble}, {.name = "c"}};
  ASSERT_TRUE(MapColumns(s, &columns, "ingest").ok());
  EXPECT_EQ(columns[0].physical_name, "col-a");
  EXPECT_EQ(columns[0].field_id, 3);
  EXPECT_EQ(columns[1].physical_name.rfind("col-", 0), 0u);
  EXPECT_NE(columns[1].physical_name, columns[2].physical_name);
  EXPECT_EQ(columns[1].field_id, 10);  // above maxColumnId, not above the live columns' ids
  EXPECT_EQ(columns[2].field_id, 11);
  Metadata written = m;
  RaiseMaxColumnId(columns, &written);
  EXPECT_EQ(written.configuration["delta.columnMapping.maxColumnId"], "11");
  EXPECT_EQ(FileColumnName(columns, "a"), "col-a");
  EXPECT_EQ(FileColumnName(columns, "missing"), "missing");
  // The schema written declares them (the tensor column is not among them here).
  written.schema_string = SchemaToSparkJson(columns, m.schema_string);
  written.configuration.erase("stoke.tensors");
  auto back = ColumnsFromMetadata(written, "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[1].physical_name, columns[1].physical_name);
  EXPECT_EQ((*back)[1].field_id, 10);
}

// Nested fields have ids too: a new column's id is above every one of them, whatever maxColumnId
// says.
TEST(ColumnMapping, NewIdsAreAboveNestedFieldsIds) {
  Snapshot table = MappedTable("id");
  Metadata& m = table.metadata;
  m.configuration.erase("delta.columnMapping.maxColumnId");
  m.configuration.erase("stoke.tensors");
  m.schema_string = R"({"type":"struct","fields":[
    {"name":"s","type":{"type":"struct","fields":[{"name":"inner","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":12,"delta.columnMapping.physicalName":"col-i"}}]},
     "nullable":true,"metadata":{"delta.columnMapping.id":4,"delta.columnMapping.physicalName":"col-s"}}]})";
  std::vector<ColumnSpec> columns = {{.name = "n"}};
  ASSERT_TRUE(MapColumns(table, &columns, "ingest").ok());
  EXPECT_EQ(columns[0].field_id, 13);
}

TEST(ColumnMapping, NothingChangesWithoutMapping) {
  Metadata m;
  std::vector<ColumnSpec> columns = {{.name = "a"}};
  ASSERT_TRUE(MapColumns(Snapshot{}, &columns, "ingest").ok());
  EXPECT_TRUE(columns[0].physical_name.empty());
  EXPECT_FALSE(columns[0].field_id.has_value());
  RaiseMaxColumnId(columns, &m);
  EXPECT_FALSE(m.configuration.count("delta.columnMapping.maxColumnId"));
}

TEST(ColumnMapping, NestedColumnsAreRefusedByName) {
  std::vector<ColumnSpec> columns = {{.name = "a"}, {.name = "s", .nested_type = R"({"type":"struct","fields":[]})"}};
  Status s = MapColumns(MappedTable("id"), &columns, "ingest into 't'");
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("ingest into 't': column 's' is nested"), std::string::npos) << s.message();
}

// stoke.tensors names a column as data files do: another writer's rename keeps the tensor.
TEST(ColumnMapping, TensorsAreFoundByPhysicalNameAfterARename) {
  auto columns = ColumnsFromSnapshot(MappedTable("name"), "t");
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  ASSERT_TRUE((*columns)[1].tensor.has_value());
  EXPECT_EQ((*columns)[1].name, "renamed");
  EXPECT_EQ((*columns)[1].tensor->shape, std::vector<int64_t>{2});
  EXPECT_EQ(TensorSpecsToJson(*columns), R"({"col-t":{"dtype":"float32","shape":[2]}})");
}

}  // namespace
}  // namespace stoke::delta
