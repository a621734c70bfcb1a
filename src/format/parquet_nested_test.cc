// Nested Parquet: Delta checkpoint rows written and read back, files written by DuckDB, the legacy
// list and map shapes of other writers, and hostile levels.
#include "format/parquet_nested.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/random.h"
#include "format/codec.h"
#include "format/parquet_encoding.h"

namespace stoke {
namespace {

using json = nlohmann::json;
using parquet::Codec;
using parquet::ConvertedType;
using parquet::Repetition;
using parquet::Type;
using Kind = SchemaNode::Kind;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_nested_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string DataDir() {
  // src/format/parquet_nested_test.cc -> <repo>/tests/data/duckdb
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "tests" / "data" / "duckdb")
      .string();
}

// Schema builders.
SchemaNode Leaf(std::string name, Type type, Repetition rep = Repetition::kOptional) {
  return SchemaNode{.name = std::move(name), .repetition = rep, .type = type};
}
SchemaNode Str(std::string name, Repetition rep = Repetition::kOptional) {
  return SchemaNode{.name = std::move(name), .repetition = rep, .type = Type::kByteArray, .is_string = true};
}
SchemaNode Struct(std::string name, std::vector<SchemaNode> fields, Repetition rep = Repetition::kOptional) {
  return SchemaNode{.name = std::move(name), .repetition = rep, .kind = Kind::kStruct, .children = std::move(fields)};
}
SchemaNode StringMap(std::string name) {
  return SchemaNode{.name = std::move(name),
                    .kind = Kind::kMap,
                    .children = {Str("key", Repetition::kRequired), Str("value")}};
}
SchemaNode StringList(std::string name) {
  return SchemaNode{.name = std::move(name), .kind = Kind::kList, .children = {Str("element")}};
}

// delta-io/delta PROTOCOL.md, "Checkpoint Schema".
SchemaNode CheckpointSchema() {
  return Struct("schema",
                {Struct("txn", {Str("appId"), Leaf("version", Type::kInt64), Leaf("lastUpdated", Type::kInt64)}),
                 Struct("add", {Str("path"), StringMap("partitionValues"), Leaf("size", Type::kInt64),
                                Leaf("modificationTime", Type::kInt64), Leaf("dataChange", Type::kBoolean),
                                Str("stats"), StringMap("tags")}),
                 Struct("remove", {Str("path"), Leaf("deletionTimestamp", Type::kInt64),
                                   Leaf("dataChange", Type::kBoolean), Leaf("extendedFileMetadata", Type::kBoolean),
                                   StringMap("partitionValues"), Leaf("size", Type::kInt64), StringMap("tags")}),
                 Struct("metaData", {Str("id"), Str("name"), Str("description"),
                                     Struct("format", {Str("provider"), StringMap("options")}), Str("schemaString"),
                                     StringList("partitionColumns"), StringMap("configuration"),
                                     Leaf("createdTime", Type::kInt64)}),
                 Struct("protocol", {Leaf("minReaderVersion", Type::kInt32), Leaf("minWriterVersion", Type::kInt32),
                                     StringList("readerFeatures"), StringList("writerFeatures")})},
                Repetition::kRequired);
}

// `v` with every struct field the schema has and `v` lacks set to null (what the reader returns).
json Normalize(const json& v, const SchemaNode& n) {
  if (v.is_null()) return v;
  switch (n.kind) {
    case Kind::kStruct: {
      json out = json::object();
      for (const auto& c : n.children) out[c.name] = v.contains(c.name) ? Normalize(v[c.name], c) : json(nullptr);
      return out;
    }
    case Kind::kList: {
      json out = json::array();
      for (const auto& e : v) out.push_back(Normalize(e, n.children[0]));
      return out;
    }
    case Kind::kMap: {
      json out = json::object();
      for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = Normalize(it.value(), n.children[1]);
      return out;
    }
    default: return v;
  }
}

std::string Describe(const SchemaNode& n) {
  static const char* kKinds[] = {"leaf", "struct", "list", "map"};
  std::string s = n.name + ":" + kKinds[static_cast<int>(n.kind)] + ":" + std::string(parquet::RepetitionName(n.repetition));
  if (n.type) s += ":" + std::string(parquet::TypeName(*n.type)) + (n.is_string ? "(string)" : "");
  if (!n.children.empty()) {
    s += "{";
    for (const auto& c : n.children) s += Describe(c) + ",";
    s += "}";
  }
  return s;
}

std::vector<json> CheckpointRows() {
  return {
      json::parse(R"({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": null,
                                   "writerFeatures": []}})"),
      json::parse(R"({"metaData": {"id": "0f6b-4c", "format": {"provider": "parquet", "options": {}},
                      "schemaString": "{\"type\":\"struct\",\"fields\":[]}", "partitionColumns": ["split"],
                      "configuration": {"stoke.tensors": "{\"volume\":{\"dtype\":\"float32\",\"shape\":[2]}}",
                                        "delta.appendOnly": "true", "nullable": null},
                      "createdTime": 1700000000000}})"),
      json::parse(R"({"add": {"path": "split=train/part-00000.parquet", "partitionValues": {"split": "train"},
                      "size": 4096, "modificationTime": 1700000000001, "dataChange": true,
                      "stats": "{\"numRecords\":10,\"minValues\":{\"id\":0}}", "tags": {"k": "v", "n": null}}})"),
      json::parse(R"({"add": {"path": "part-00001.parquet", "partitionValues": {}, "size": 1, "dataChange": false,
                      "tags": null}})"),
      json::parse(R"({"remove": {"path": "old.parquet", "deletionTimestamp": 1700000000002, "dataChange": true,
                      "extendedFileMetadata": true, "partitionValues": {"split": ""}, "size": 7}})"),
      json::parse(R"({"txn": {"appId": "trainer", "version": 42, "lastUpdated": -1}})"),
      json::parse(R"({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                      "readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors", "appendOnly"]}})"),
  };
}

Result<std::vector<json>> ReadBack(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(LocalStorage(), path));
  return ReadNestedParquet(*reader);
}

std::vector<json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<json> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

TEST(ParquetNestedTest, RoundTripsDeltaCheckpointActions) {
  TempDir dir;
  const std::string path = dir.File("00000000000000000010.checkpoint.parquet");
  const SchemaNode schema = CheckpointSchema();
  const auto rows = CheckpointRows();
  for (Codec codec : {Codec::kZstd, Codec::kUncompressed, Codec::kSnappy}) {
    WriterOptions opts;
    opts.codec = codec;
    ASSERT_TRUE(WriteNestedParquet(LocalStorage(), path, schema, rows, opts).ok());
    auto reader = ParquetReader::Open(LocalStorage(), path);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto back = ReadNestedParquet(**reader);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    ASSERT_EQ(back->size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ((*back)[i], Normalize(rows[i], schema)) << "row " << i;
    }
    // Empty vs null maps and lists, and null map values, survive.
    EXPECT_TRUE((*back)[0]["protocol"]["readerFeatures"].is_null());
    EXPECT_EQ((*back)[0]["protocol"]["writerFeatures"], json::array());
    EXPECT_EQ((*back)[1]["metaData"]["format"]["options"], json::object());
    EXPECT_TRUE((*back)[1]["metaData"]["configuration"]["nullable"].is_null());
    EXPECT_EQ((*back)[3]["add"]["partitionValues"], json::object());
    EXPECT_TRUE((*back)[3]["add"]["tags"].is_null());

    auto tree = SchemaTree(**reader);
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    EXPECT_EQ(Describe(*tree), Describe(schema));
  }
}

TEST(ParquetNestedTest, WritesStandardThreeLevelListAndMapSchema) {
  TempDir dir;
  const std::string path = dir.File("c.parquet");
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), path, CheckpointSchema(), CheckpointRows(), {}).ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  const auto& schema = (*reader)->metadata().schema;
  auto find = [&](const std::string& name, size_t from) {
    for (size_t i = from; i < schema.size(); ++i) {
      if (schema[i].name == name) return i;
    }
    return schema.size();
  };
  size_t pv = find("partitionValues", 0);
  ASSERT_LT(pv + 3, schema.size());
  EXPECT_EQ(schema[pv].converted_type, ConvertedType::kMap);
  EXPECT_EQ(schema[pv].num_children, 1);
  EXPECT_EQ(schema[pv + 1].name, "key_value");
  EXPECT_EQ(schema[pv + 1].repetition, Repetition::kRepeated);
  EXPECT_EQ(schema[pv + 2].name, "key");
  EXPECT_EQ(schema[pv + 2].repetition, Repetition::kRequired);
  EXPECT_EQ(schema[pv + 3].name, "value");
  EXPECT_EQ(schema[pv + 3].repetition, Repetition::kOptional);
  size_t pc = find("partitionColumns", 0);
  ASSERT_LT(pc + 2, schema.size());
  EXPECT_EQ(schema[pc].converted_type, ConvertedType::kList);
  ASSERT_TRUE(schema[pc].logical_type.has_value());
  EXPECT_EQ(schema[pc].logical_type->id, parquet::LogicalTypeId::kList);
  EXPECT_EQ(schema[pc + 1].name, "list");
  EXPECT_EQ(schema[pc + 2].name, "element");

  // Leaf levels: add.tags.key_value.value is optional(add) > optional(tags) > repeated > optional.
  auto col = (*reader)->FindColumn("add.tags.key_value.value");
  ASSERT_TRUE(col.ok());
  const LeafColumn& leaf = (*reader)->columns()[*col];
  EXPECT_EQ(leaf.max_definition_level, 4);
  EXPECT_EQ(leaf.max_repetition_level, 1);
  EXPECT_EQ((*reader)->metadata().row_groups[0].columns[*col].meta_data->path_in_schema,
            (std::vector<std::string>{"add", "tags", "key_value", "value"}));
  // A repeated column is refused by the flat API and read with its levels by the leveled one.
  EXPECT_EQ((*reader)->ReadColumnChunk(0, *col).status().code(), StatusCode::kUnsupported);
  auto levels = (*reader)->ReadColumnChunkLevels(0, *col);
  ASSERT_TRUE(levels.ok()) << levels.status().ToString();
  // 7 rows; add #1 has two tags (one with a null value), the others one entry each.
  EXPECT_EQ(levels->num_levels, 8u);
  EXPECT_EQ(std::get<std::vector<std::string>>(levels->values), std::vector<std::string>{"v"});
  EXPECT_EQ(levels->rep_levels, (std::vector<uint32_t>{0, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(levels->def_levels, (std::vector<uint32_t>{0, 0, 4, 3, 1, 0, 0, 0}));
  // Column chunk num_values counts levels.
  EXPECT_EQ((*reader)->metadata().row_groups[0].columns[*col].meta_data->num_values, 8);
  // A flat leaf under an optional struct reads through both APIs.
  auto version = (*reader)->FindColumn("txn.version");
  ASSERT_TRUE(version.ok());
  auto flat = (*reader)->ReadColumnChunk(0, *version);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(std::get<std::vector<int64_t>>(flat->values), std::vector<int64_t>{42});
  EXPECT_EQ(flat->defined, (std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0}));
}

// Random checkpoint-like rows: lists and maps of random sizes, with nulls at every level.
json RandomAction(Rng& rng, int64_t i) {
  auto maybe = [&](int percent) { return static_cast<int>(rng.Next() % 100) < percent; };
  auto random_map = [&]() -> json {
    if (maybe(20)) return nullptr;
    json m = json::object();
    int n = static_cast<int>(rng.Next() % 4);
    for (int k = 0; k < n; ++k) m["k" + std::to_string(rng.Next() % 10)] = maybe(20) ? json(nullptr) : json("v" + std::to_string(k));
    return m;
  };
  auto random_list = [&]() -> json {
    if (maybe(20)) return nullptr;
    json l = json::array();
    int n = static_cast<int>(rng.Next() % 4);
    for (int k = 0; k < n; ++k) l.push_back(maybe(10) ? json(nullptr) : json("f" + std::to_string(rng.Next() % 100)));
    return l;
  };
  switch (rng.Next() % 4) {
    case 0:
      return {{"add",
               {{"path", "part-" + std::to_string(i) + ".parquet"},
                {"partitionValues", random_map()},
                {"size", static_cast<int64_t>(rng.Next() % 1000000)},
                {"dataChange", maybe(50)},
                {"stats", maybe(50) ? json(nullptr) : json(R"({"numRecords":)" + std::to_string(i) + "}")},
                {"tags", random_map()}}}};
    case 1: return {{"remove", {{"path", "p" + std::to_string(i)}, {"deletionTimestamp", i}, {"partitionValues", random_map()}}}};
    case 2:
      return {{"protocol",
               {{"minReaderVersion", 3}, {"minWriterVersion", 7}, {"readerFeatures", random_list()},
                {"writerFeatures", random_list()}}}};
    default:
      return {{"metaData",
               {{"id", std::to_string(i)},
                {"format", maybe(10) ? json(nullptr) : json{{"provider", "parquet"}, {"options", random_map()}}},
                {"partitionColumns", random_list()},
                {"configuration", random_map()}}}};
  }
}

TEST(ParquetNestedTest, ManyRowsAcrossPagesAndRowGroups) {
  TempDir dir;
  const std::string path = dir.File("many.parquet");
  const SchemaNode schema = CheckpointSchema();
  Rng rng(7);
  std::vector<json> rows;
  for (int64_t i = 0; i < 5000; ++i) rows.push_back(RandomAction(rng, i));
  WriterOptions opts;
  opts.scalar_page_rows = 97;
  opts.row_group_rows = 1300;
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), path, schema, rows, opts).ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->num_rows(), 5000);
  EXPECT_EQ((*reader)->num_row_groups(), 4);
  // Every page starts a record; the OffsetIndex counts records.
  auto col = (*reader)->FindColumn("add.partitionValues.key_value.key");
  ASSERT_TRUE(col.ok());
  for (int g = 0; g < (*reader)->num_row_groups(); ++g) {
    auto oi = (*reader)->ReadOffsetIndex(g, *col);
    ASSERT_TRUE(oi.ok()) << oi.status().ToString();
    ASSERT_TRUE(oi->has_value());
    const auto& locs = (*oi)->page_locations;
    ASSERT_GT(locs.size(), 10u);
    for (size_t p = 0; p < locs.size(); ++p) EXPECT_EQ(locs[p].first_row_index, static_cast<int64_t>(p) * 97);
    auto pages = (*reader)->ListPages(g, *col);
    ASSERT_TRUE(pages.ok());
    int64_t levels = 0;
    for (const auto& p : *pages) levels += p.header.data_page_header->num_values;
    EXPECT_EQ(levels, (*reader)->metadata().row_groups[g].columns[*col].meta_data->num_values);
    EXPECT_GT(levels, (*reader)->metadata().row_groups[g].num_rows);  // maps with several entries
  }
  auto back = ReadNestedParquet(**reader);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ((*back)[i], Normalize(rows[i], schema)) << "row " << i;
  // One page alone: the levels of its rows are those of the chunk's same rows.
  auto chunk = (*reader)->ReadColumnChunkLevels(1, *col);
  ASSERT_TRUE(chunk.ok());
  int64_t first = -1;
  auto page = (*reader)->ReadPageLevels(1, *col, 200, &first);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_EQ(first, 194);  // the third page: rows [194, 291)
  size_t begin = 0, end = 0;
  int64_t row = -1;
  for (size_t k = 0; k < chunk->num_levels; ++k) {
    if (chunk->rep_levels[k] == 0) ++row;
    if (row == 194 && chunk->rep_levels[k] == 0) begin = k;
    if (row == 291 && chunk->rep_levels[k] == 0) end = k;
  }
  ASSERT_EQ(page->num_levels, end - begin);
  EXPECT_TRUE(std::equal(page->rep_levels.begin(), page->rep_levels.end(), chunk->rep_levels.begin() + begin));
  EXPECT_TRUE(std::equal(page->def_levels.begin(), page->def_levels.end(), chunk->def_levels.begin() + begin));
}

TEST(ParquetNestedTest, EmptyRowsWriteAReadableFile) {
  TempDir dir;
  const std::string path = dir.File("empty.parquet");
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), path, CheckpointSchema(), {}, {}).ok());
  auto back = ReadBack(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->empty());
}

TEST(ParquetNestedTest, WriterRejectsRowsThatDoNotFitTheSchema) {
  TempDir dir;
  const std::string path = dir.File("bad.parquet");
  SchemaNode schema = Struct("schema", {Leaf("id", Type::kInt64, Repetition::kRequired), StringList("l"),
                                        StringMap("m"), Leaf("i", Type::kInt32)},
                             Repetition::kRequired);
  auto write = [&](const char* row) {
    return WriteNestedParquet(LocalStorage(), path, schema, {json::parse(row)}, {}).code();
  };
  EXPECT_EQ(write(R"({"id": 1})"), StatusCode::kOk);
  EXPECT_EQ(write(R"({"l": []})"), StatusCode::kInvalidArgument);           // REQUIRED id missing
  EXPECT_EQ(write(R"({"id": "1"})"), StatusCode::kInvalidArgument);         // wrong type
  EXPECT_EQ(write(R"({"id": 1, "l": "x"})"), StatusCode::kInvalidArgument); // not a list
  EXPECT_EQ(write(R"({"id": 1, "m": [1]})"), StatusCode::kInvalidArgument); // not a map
  EXPECT_EQ(write(R"({"id": 1, "i": 4294967296})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(write(R"({"id": 1, "m": {"a": 1}})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteNestedParquet(LocalStorage(), path, schema, {json::array()}, {}).code(), StatusCode::kInvalidArgument);
  SchemaNode repeated = Struct("schema", {Leaf("r", Type::kInt64, Repetition::kRepeated)}, Repetition::kRequired);
  EXPECT_EQ(WriteNestedParquet(LocalStorage(), path, repeated, {}, {}).code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Files written by DuckDB (tests/data/duckdb, made by generate.mjs there).

TEST(ParquetNestedTest, ReadsDuckDbCheckpoint) {
  auto back = ReadBack(DataDir() + "/checkpoint.parquet");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto expected = ReadJsonLines(DataDir() + "/checkpoint.expected.jsonl");
  ASSERT_EQ(expected.size(), 6u);
  ASSERT_EQ(back->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ((*back)[i], expected[i]) << "row " << i;
  auto reader = ParquetReader::Open(LocalStorage(), DataDir() + "/checkpoint.parquet");
  ASSERT_TRUE(reader.ok());
  auto tree = SchemaTree(**reader);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  ASSERT_EQ(tree->children.size(), 5u);
  const SchemaNode& add = tree->children[1];
  EXPECT_EQ(add.name, "add");
  EXPECT_EQ(add.children[1].kind, Kind::kMap);
  EXPECT_EQ(tree->children[3].children[5].kind, Kind::kList);  // metaData.partitionColumns
}

TEST(ParquetNestedTest, ReadsDuckDbLists) {
  auto back = ReadBack(DataDir() + "/lists.parquet");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto expected = ReadJsonLines(DataDir() + "/lists.expected.jsonl");
  ASSERT_EQ(expected.size(), 4u);
  ASSERT_EQ(back->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ((*back)[i], expected[i]) << "row " << i;
}

// ---------------------------------------------------------------------------------------------
// Legacy shapes (LogicalTypes.md, backward-compatibility rules), written with hand-made schemas and
// levels through the writer's leveled API.

parquet::SchemaElement Group(std::string name, Repetition rep, int children,
                             std::optional<ConvertedType> ct = std::nullopt) {
  parquet::SchemaElement e;
  e.name = std::move(name);
  e.repetition = rep;
  e.num_children = children;
  e.converted_type = ct;
  return e;
}
parquet::SchemaElement Prim(std::string name, Repetition rep, Type type, bool utf8 = false) {
  parquet::SchemaElement e;
  e.name = std::move(name);
  e.repetition = rep;
  e.type = type;
  if (utf8) e.converted_type = ConvertedType::kUtf8;
  return e;
}

struct HandLeaf {
  ColumnSpec spec;
  LeveledValues levels;
};

Status WriteHandMade(const std::string& path, std::vector<parquet::SchemaElement> schema, std::vector<HandLeaf> leaves,
                     Codec codec = Codec::kZstd) {
  std::vector<ColumnSpec> specs;
  for (const auto& l : leaves) specs.push_back(l.spec);
  WriterOptions opts;
  opts.codec = codec;
  STOKE_ASSIGN_OR_RETURN(auto w, ParquetFileWriter::CreateNested(LocalStorage(), path, specs, std::move(schema), opts));
  RowGroupEncoder enc(w->columns(), w->options());
  for (size_t i = 0; i < leaves.size(); ++i) STOKE_RETURN_IF_ERROR(enc.SetLeveledColumn(i, std::move(leaves[i].levels)));
  STOKE_ASSIGN_OR_RETURN(auto rg, enc.Finish());
  STOKE_RETURN_IF_ERROR(w->WriteRowGroup(std::move(rg)));
  return w->Close();
}

TEST(ParquetNestedTest, ReadsLegacyListAndMapShapes) {
  TempDir dir;
  const std::string path = dir.File("legacy.parquet");
  std::vector<parquet::SchemaElement> schema = {
      Group("spark_schema", Repetition::kRequired, 6),
      // Two-level list: the repeated primitive is the element.
      Group("a", Repetition::kOptional, 1, ConvertedType::kList),
      Prim("array", Repetition::kRepeated, Type::kInt32),
      // Two-level list of one-field structs named "<list>_tuple".
      Group("t", Repetition::kOptional, 1, ConvertedType::kList),
      Group("t_tuple", Repetition::kRepeated, 1),
      Prim("s", Repetition::kRequired, Type::kByteArray, true),
      // Three-level list with the element named "item" (older Arrow).
      Group("i", Repetition::kOptional, 1, ConvertedType::kList),
      Group("list", Repetition::kRepeated, 1),
      Prim("item", Repetition::kOptional, Type::kInt64),
      // A map whose repeated group carries MAP_KEY_VALUE and is named "map" (older parquet-mr).
      Group("m", Repetition::kOptional, 1, ConvertedType::kMap),
      Group("map", Repetition::kRepeated, 2, ConvertedType::kMapKeyValue),
      Prim("key", Repetition::kRequired, Type::kByteArray, true),
      Prim("value", Repetition::kOptional, Type::kByteArray, true),
      // A MAP_KEY_VALUE-annotated outer group (older writers).
      Group("k", Repetition::kOptional, 1, ConvertedType::kMapKeyValue),
      Group("map", Repetition::kRepeated, 2),
      Prim("key", Repetition::kRequired, Type::kByteArray, true),
      Prim("value", Repetition::kRequired, Type::kInt32),
      // A bare repeated field (protobuf style): a required list of required elements.
      Prim("r", Repetition::kRepeated, Type::kByteArray, true),
  };
  auto str = [](std::vector<std::string> v) { return ValueVector(std::move(v)); };
  // Two rows: row 0 has values everywhere; row 1 is null / empty everywhere.
  std::vector<HandLeaf> leaves = {
      {{.name = "a.array", .type = Type::kInt32, .optional = true},
       {std::vector<int32_t>{1, 2}, {2, 2, 0}, {0, 1, 0}, 2, 1, {"a", "array"}}},
      {{.name = "t.t_tuple.s", .type = Type::kByteArray, .optional = true, .is_string = true},
       {str({"x"}), {2, 1}, {0, 0}, 2, 1, {"t", "t_tuple", "s"}}},
      {{.name = "i.list.item", .type = Type::kInt64, .optional = true},
       {std::vector<int64_t>{5}, {3, 2, 0}, {0, 1, 0}, 3, 1, {"i", "list", "item"}}},
      {{.name = "m.map.key", .type = Type::kByteArray, .optional = true, .is_string = true},
       {str({"p", "q"}), {2, 2, 0}, {0, 1, 0}, 2, 1, {"m", "map", "key"}}},
      {{.name = "m.map.value", .type = Type::kByteArray, .optional = true, .is_string = true},
       {str({"P"}), {3, 2, 0}, {0, 1, 0}, 3, 1, {"m", "map", "value"}}},
      {{.name = "k.map.key", .type = Type::kByteArray, .optional = true, .is_string = true},
       {str({"z"}), {2, 1}, {0, 0}, 2, 1, {"k", "map", "key"}}},
      {{.name = "k.map.value", .type = Type::kInt32, .optional = true},
       {std::vector<int32_t>{26}, {2, 1}, {0, 0}, 2, 1, {"k", "map", "value"}}},
      {{.name = "r", .type = Type::kByteArray, .optional = true, .is_string = true},
       {str({"u", "w"}), {1, 1, 0}, {0, 1, 0}, 1, 1, {"r"}}},
  };
  ASSERT_TRUE(WriteHandMade(path, schema, leaves).ok());
  auto back = ReadBack(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], json::parse(R"({"a": [1, 2], "t": [{"s": "x"}], "i": [5, null], "m": {"p": "P", "q": null},
                                         "k": {"z": 26}, "r": ["u", "w"]})"));
  EXPECT_EQ((*back)[1], json::parse(R"({"a": null, "t": [], "i": null, "m": null, "k": {}, "r": []})"));

  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  auto tree = SchemaTree(**reader);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(Describe(*tree),
            "spark_schema:struct:REQUIRED{"
            "a:list:OPTIONAL{array:leaf:REQUIRED:INT32,},"
            "t:list:OPTIONAL{t_tuple:struct:REQUIRED{s:leaf:REQUIRED:BYTE_ARRAY(string),},},"
            "i:list:OPTIONAL{item:leaf:OPTIONAL:INT64,},"
            "m:map:OPTIONAL{key:leaf:REQUIRED:BYTE_ARRAY(string),value:leaf:OPTIONAL:BYTE_ARRAY(string),},"
            "k:map:OPTIONAL{key:leaf:REQUIRED:BYTE_ARRAY(string),value:leaf:REQUIRED:INT32,},"
            "r:list:REQUIRED{r:leaf:REQUIRED:BYTE_ARRAY(string),},}");
}

TEST(ParquetNestedTest, ReadsParquetMrTwoLevelListOfLists) {
  // parquet-mr's old list structure for list<list<int>>: the repeated group named "array" is the
  // outer list's element and is itself a LIST, whose repeated primitive "array" is the element.
  TempDir dir;
  const std::string path = dir.File("old_lists.parquet");
  std::vector<parquet::SchemaElement> schema = {
      Group("my_record", Repetition::kRequired, 1),
      Group("a", Repetition::kRequired, 1, ConvertedType::kList),
      Group("array", Repetition::kRepeated, 1, ConvertedType::kList),
      Prim("array", Repetition::kRepeated, Type::kInt32),
  };
  // Rows: [[1, 2], [3, 4]], [], [[]].
  std::vector<HandLeaf> leaves = {
      {{.name = "a.array.array", .type = Type::kInt32, .optional = true},
       {std::vector<int32_t>{1, 2, 3, 4}, {2, 2, 2, 2, 0, 1}, {0, 2, 1, 2, 0, 0}, 2, 2, {"a", "array", "array"}}},
  };
  ASSERT_TRUE(WriteHandMade(path, schema, leaves).ok());
  auto back = ReadBack(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0], json::parse(R"({"a": [[1, 2], [3, 4]]})"));
  EXPECT_EQ((*back)[1], json::parse(R"({"a": []})"));
  EXPECT_EQ((*back)[2], json::parse(R"({"a": [[]]})"));
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  auto tree = SchemaTree(**reader);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(Describe(*tree), "my_record:struct:REQUIRED{a:list:REQUIRED{array:list:REQUIRED{array:leaf:REQUIRED:INT32,},},}");
}

TEST(ParquetNestedTest, RefusesUnknownNestedShapes) {
  TempDir dir;
  const std::string path = dir.File("odd.parquet");
  // A LIST group with two children is neither a standard nor a legacy list.
  std::vector<parquet::SchemaElement> schema = {
      Group("schema", Repetition::kRequired, 1),
      Group("l", Repetition::kOptional, 2, ConvertedType::kList),
      Prim("x", Repetition::kRepeated, Type::kInt32),
      Prim("y", Repetition::kRepeated, Type::kInt32),
  };
  std::vector<HandLeaf> leaves = {
      {{.name = "l.x", .type = Type::kInt32, .optional = true}, {std::vector<int32_t>{}, {0}, {0}, 2, 1, {"l", "x"}}},
      {{.name = "l.y", .type = Type::kInt32, .optional = true}, {std::vector<int32_t>{}, {0}, {0}, 2, 1, {"l", "y"}}},
  };
  ASSERT_TRUE(WriteHandMade(path, schema, leaves).ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto back = ReadNestedParquet(**reader);
  EXPECT_EQ(back.status().code(), StatusCode::kUnsupported) << back.status().ToString();
  EXPECT_NE(back.status().message().find("'l'"), std::string::npos) << back.status().ToString();
  EXPECT_EQ(SchemaTree(**reader).status().code(), StatusCode::kUnsupported);
}

TEST(ParquetNestedTest, ReadsFlatFilesAsRows) {
  TempDir dir;
  const std::string path = dir.File("flat.parquet");
  std::vector<ColumnSpec> cols = {{.name = "id", .type = Type::kInt64},
                                  {.name = "name", .type = Type::kByteArray, .optional = true, .is_string = true},
                                  {.name = "x", .type = Type::kDouble}};
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols);
  ASSERT_TRUE(w.ok());
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  ASSERT_TRUE(enc.SetScalars(0, {std::vector<int64_t>{1, 2}, {}}).ok());
  ASSERT_TRUE(enc.SetScalars(1, {std::vector<std::string>{"a"}, {0, 1}}).ok());
  ASSERT_TRUE(enc.SetScalars(2, {std::vector<double>{0.5, -1}, {}}).ok());
  auto rg = enc.Finish();
  ASSERT_TRUE(rg.ok());
  ASSERT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  ASSERT_TRUE((*w)->Close().ok());
  auto back = ReadBack(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], json::parse(R"({"id": 1, "name": null, "x": 0.5})"));
  EXPECT_EQ((*back)[1], json::parse(R"({"id": 2, "name": "a", "x": -1.0})"));
}

TEST(ParquetNestedTest, BinaryThatIsNotUtf8IsAnErrorNamingTheColumn) {
  TempDir dir;
  const std::string path = dir.File("bin.parquet");
  std::vector<ColumnSpec> cols = {{.name = "blob", .type = Type::kByteArray}};
  auto w = ParquetFileWriter::Create(LocalStorage(), path, cols);
  ASSERT_TRUE(w.ok());
  RowGroupEncoder enc((*w)->columns(), (*w)->options());
  ASSERT_TRUE(enc.SetScalars(0, {std::vector<std::string>{"ok", std::string("\xff\xfe", 2)}, {}}).ok());
  auto rg = enc.Finish();
  ASSERT_TRUE(rg.ok());
  ASSERT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
  ASSERT_TRUE((*w)->Close().ok());
  auto back = ReadBack(path);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("'blob'"), std::string::npos) << back.status().ToString();
  EXPECT_NE(back.status().message().find("UTF-8"), std::string::npos) << back.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Hostile levels. The leaf is l: list<list<int64>> (max definition 5, max repetition 2), so levels
// are 3 and 2 bits wide. Pages are built by hand and spliced into a chunk the writer encoded.

std::vector<parquet::SchemaElement> ListOfListsSchema() {
  return {Group("schema", Repetition::kRequired, 1),
          Group("l", Repetition::kOptional, 1, ConvertedType::kList),
          Group("list", Repetition::kRepeated, 1),
          Group("element", Repetition::kOptional, 1, ConvertedType::kList),
          Group("list", Repetition::kRepeated, 1),
          Prim("element", Repetition::kOptional, Type::kInt64)};
}

// Writes one row group of `rows` records whose only page has the body `body` (uncompressed) and
// `num_values` level entries.
Status WriteWithPageBody(const std::string& path, std::string body, int32_t num_values, int64_t rows) {
  std::vector<ColumnSpec> specs = {{.name = "l.list.element.list.element", .type = Type::kInt64, .optional = true}};
  WriterOptions opts;
  opts.codec = Codec::kUncompressed;
  STOKE_ASSIGN_OR_RETURN(auto w, ParquetFileWriter::CreateNested(LocalStorage(), path, specs, ListOfListsSchema(), opts));
  RowGroupEncoder enc(w->columns(), w->options());
  LeveledValues lv{std::vector<int64_t>{}, std::vector<uint32_t>(static_cast<size_t>(rows), 0),
                   std::vector<uint32_t>(static_cast<size_t>(rows), 0), 5, 2,
                   {"l", "list", "element", "list", "element"}};
  STOKE_RETURN_IF_ERROR(enc.SetLeveledColumn(0, std::move(lv)));
  STOKE_ASSIGN_OR_RETURN(auto rg, enc.Finish());
  EncodedColumnChunk& chunk = rg.columns[0];
  parquet::PageHeader h;
  h.type = parquet::PageType::kDataPage;
  h.uncompressed_page_size = h.compressed_page_size = static_cast<int32_t>(body.size());
  h.crc = static_cast<int32_t>(Crc32(AsBytes(body)));
  h.data_page_header = parquet::DataPageHeader{.num_values = num_values};
  std::string page;
  parquet::SerializePageHeader(h, &page);
  page += body;
  chunk.bytes.Clear();
  chunk.bytes.Append(AsBytes(page));
  chunk.pages = {{0, static_cast<int32_t>(page.size()), 0}};
  chunk.meta.total_compressed_size = chunk.meta.total_uncompressed_size = static_cast<int64_t>(page.size());
  chunk.meta.num_values = num_values;
  STOKE_RETURN_IF_ERROR(w->WriteRowGroup(std::move(rg)));
  return w->Close();
}

std::string Levels(std::vector<uint32_t> v, int width) {
  std::string out;
  parquet::EncodeLengthPrefixedRleBitPackedHybrid(v, width, &out);
  return out;
}

Status ReadHostile(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(LocalStorage(), path));
  Status levels = reader->ReadColumnChunkLevels(0, 0).status();
  Status rows = ReadNestedParquet(*reader).status();
  // The levels alone may be well-formed when only their structure across leaves is wrong.
  EXPECT_TRUE(levels.ok() || levels.code() == StatusCode::kCorruption) << levels.ToString();
  return rows;
}

TEST(ParquetNestedTest, HostileLevelsAreCorruption) {
  TempDir dir;
  const std::string path = dir.File("hostile.parquet");
  // Sanity: a well-formed page reads. Row 0: [[7]], row 1: null.
  std::string good = Levels({0, 0}, 2) + Levels({5, 0}, 3);
  parquet::EncodePlain(std::vector<int64_t>{7}, &good);
  ASSERT_TRUE(WriteWithPageBody(path, good, 2, 2).ok());
  auto ok = ReadBack(path);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::vector<json>{json::parse(R"({"l": [[7]]})"), json::parse(R"({"l": null})")}));

  struct Case {
    const char* what;
    std::string body;
    int32_t num_values;
    int64_t rows;
  };
  std::string truncated = Levels({0, 0}, 2);
  truncated += std::string("\x40\x00\x00\x00\x03", 5);  // definition levels claim 64 bytes, 1 present
  std::string rep_too_high = Levels({0, 3}, 2) + Levels({5, 5}, 3);
  parquet::EncodePlain(std::vector<int64_t>{1, 2}, &rep_too_high);
  std::string first_not_zero = Levels({1, 0}, 2) + Levels({5, 5}, 3);
  parquet::EncodePlain(std::vector<int64_t>{1, 2}, &first_not_zero);
  std::string def_too_high = Levels({0, 0}, 2) + Levels({6, 5}, 3);
  parquet::EncodePlain(std::vector<int64_t>{1, 2}, &def_too_high);
  std::string too_few_values = Levels({0, 0}, 2) + Levels({5, 5}, 3);
  parquet::EncodePlain(std::vector<int64_t>{1}, &too_few_values);
  std::string more_records = Levels({0, 0, 0}, 2) + Levels({0, 0, 0}, 3);
  std::string no_levels;  // num_values 2 but an empty body
  // Row 0 claims a second element of the outer list (rep 1) after a null inner list whose
  // definition level says the outer list is absent: the structure is inconsistent.
  std::string inconsistent = Levels({0, 1}, 2) + Levels({0, 5}, 3);
  parquet::EncodePlain(std::vector<int64_t>{1}, &inconsistent);
  for (const Case& c : std::vector<Case>{{"truncated levels", truncated, 2, 2},
                                         {"repetition level above the maximum", rep_too_high, 2, 1},
                                         {"first repetition level not 0", first_not_zero, 2, 1},
                                         {"definition level above the maximum", def_too_high, 2, 2},
                                         {"fewer values than present levels", too_few_values, 2, 2},
                                         {"more records than the row group", more_records, 3, 2},
                                         {"empty body", no_levels, 2, 2},
                                         {"inconsistent structure", inconsistent, 2, 1}}) {
    ASSERT_TRUE(WriteWithPageBody(path, c.body, c.num_values, c.rows).ok()) << c.what;
    Status s = ReadHostile(path);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << c.what << ": " << s.ToString();
  }
}

TEST(ParquetNestedTest, LeavesThatDisagreeAreCorruption) {
  TempDir dir;
  const std::string path = dir.File("disagree.parquet");
  // l: list<struct<a int64, b int64>>; a says row 0 has two elements, b says one.
  std::vector<parquet::SchemaElement> schema = {
      Group("schema", Repetition::kRequired, 1),
      Group("l", Repetition::kOptional, 1, ConvertedType::kList),
      Group("list", Repetition::kRepeated, 1),
      Group("element", Repetition::kOptional, 2),
      Prim("a", Repetition::kOptional, Type::kInt64),
      Prim("b", Repetition::kOptional, Type::kInt64),
  };
  std::vector<HandLeaf> leaves = {
      {{.name = "l.list.element.a", .type = Type::kInt64, .optional = true},
       {std::vector<int64_t>{1, 2, 3}, {4, 4, 4}, {0, 1, 0}, 4, 1, {"l", "list", "element", "a"}}},
      {{.name = "l.list.element.b", .type = Type::kInt64, .optional = true},
       {std::vector<int64_t>{1, 3, 4}, {4, 4, 4}, {0, 0, 1}, 4, 1, {"l", "list", "element", "b"}}},
  };
  ASSERT_TRUE(WriteHandMade(path, schema, leaves).ok());
  auto back = ReadBack(path);
  EXPECT_EQ(back.status().code(), StatusCode::kCorruption) << back.status().ToString();
}

TEST(ParquetNestedTest, LeveledColumnRejectsBadLevels) {
  std::vector<ColumnSpec> specs = {{.name = "l.list.element", .type = Type::kInt64, .optional = true}};
  WriterOptions opts;
  RowGroupEncoder enc(specs, opts);
  auto set = [&](std::vector<int64_t> values, std::vector<uint32_t> defs, std::vector<uint32_t> reps) {
    return enc.SetLeveledColumn(0, LeveledValues{std::move(values), std::move(defs), std::move(reps), 3, 1, {}}).code();
  };
  EXPECT_EQ(set({1}, {3, 0}, {0, 0}), StatusCode::kOk);
  EXPECT_EQ(set({1}, {3, 0}, {1, 0}), StatusCode::kInvalidArgument);  // first level not 0
  EXPECT_EQ(set({1}, {3, 0}, {0, 2}), StatusCode::kInvalidArgument);  // above max repetition
  EXPECT_EQ(set({1}, {4, 0}, {0, 0}), StatusCode::kInvalidArgument);  // above max definition
  EXPECT_EQ(set({1, 2}, {3, 0}, {0, 0}), StatusCode::kInvalidArgument);  // values vs levels
  EXPECT_EQ(set({1}, {3, 0}, {0}), StatusCode::kInvalidArgument);     // level counts differ
}

TEST(ParquetNestedTest, ReadsOneFieldAsQueryPrintsIt) {
  TempDir dir;
  const std::string path = dir.File("field.parquet");
  parquet::SchemaElement date = Prim("d", Repetition::kOptional, Type::kInt32);
  date.converted_type = ConvertedType::kDate;
  parquet::SchemaElement price = Prim("p", Repetition::kOptional, Type::kInt64);
  price.converted_type = ConvertedType::kDecimal;
  price.scale = 2;
  price.precision = 10;
  std::vector<parquet::SchemaElement> schema = {
      Group("spark_schema", Repetition::kRequired, 3),
      Group("s", Repetition::kOptional, 3), date, price, Prim("b", Repetition::kOptional, Type::kByteArray),
      Group("xs", Repetition::kOptional, 1, ConvertedType::kList), Group("list", Repetition::kRepeated, 1),
      Prim("element", Repetition::kOptional, Type::kDouble),
      Prim("n", Repetition::kRequired, Type::kInt64),
  };
  // Rows: s = {d: 2024-01-31, p: 12.50, b: "\xff"}, xs = [1.5, NaN]; s = null, xs = null; s = {d: null,
  // p: -0.05, b: null}, xs = [].
  std::vector<HandLeaf> leaves = {
      {{.name = "s.d", .type = Type::kInt32, .optional = true}, {std::vector<int32_t>{19753}, {2, 0, 1}, {}, 2, 0, {"s", "d"}}},
      {{.name = "s.p", .type = Type::kInt64, .optional = true},
       {std::vector<int64_t>{1250, -5}, {2, 0, 2}, {}, 2, 0, {"s", "p"}}},
      {{.name = "s.b", .type = Type::kByteArray, .optional = true},
       {std::vector<std::string>{"\xff"}, {2, 0, 1}, {}, 2, 0, {"s", "b"}}},
      {{.name = "xs.list.element", .type = Type::kDouble, .optional = true},
       {std::vector<double>{1.5, std::nan("")}, {3, 3, 0, 1}, {0, 1, 0, 0}, 3, 1, {"xs", "list", "element"}}},
      {{.name = "n", .type = Type::kInt64}, {std::vector<int64_t>{1, 2, 3}, {}, {}, 0, 0, {"n"}}},
  };
  ASSERT_TRUE(WriteHandMade(path, schema, std::move(leaves)).ok());
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto s = ReadNestedField(**reader, 0, "s");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0].dump(), R"({"d":"2024-01-31","p":"12.50","b":"md5:00594fd4f42ba43fc1ca0427a0576295 len:1"})");
  EXPECT_TRUE((*s)[1].is_null());
  EXPECT_EQ((*s)[2].dump(), R"({"d":null,"p":"-0.05","b":null})");
  auto xs = ReadNestedField(**reader, 0, "xs");
  ASSERT_TRUE(xs.ok()) << xs.status().ToString();
  EXPECT_EQ((*xs)[0].dump(), R"([1.5,"nan"])");
  EXPECT_TRUE((*xs)[1].is_null());
  EXPECT_EQ((*xs)[2].dump(), "[]");
  auto n = ReadNestedField(**reader, 0, "n");  // a flat column reads the same way
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[2].dump(), "3");
  EXPECT_EQ(ReadNestedField(**reader, 0, "missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoke
