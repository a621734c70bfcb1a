#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/parquet_nested.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

SchemaNode Leaf(std::string name, parquet::Type type, bool is_string = false) {
  SchemaNode n;
  n.name = std::move(name);
  n.type = type;
  n.is_string = is_string;
  return n;
}

SchemaNode Group(std::string name, SchemaNode::Kind kind, std::vector<SchemaNode> children) {
  SchemaNode n;
  n.name = std::move(name);
  n.kind = kind;
  n.children = std::move(children);
  return n;
}

// id INT64, s struct<a: long, b: string>, l list<string>, m map<string, string>.
std::string WriteNestedFile(const std::string& dir) {
  SchemaNode key = Leaf("key", parquet::Type::kByteArray, true);
  key.repetition = parquet::Repetition::kRequired;
  const SchemaNode root = Group(
      "schema", SchemaNode::Kind::kStruct,
      {Leaf("id", parquet::Type::kInt64),
       Group("s", SchemaNode::Kind::kStruct,
             {Leaf("a", parquet::Type::kInt64), Leaf("b", parquet::Type::kByteArray, true)}),
       Group("l", SchemaNode::Kind::kList, {Leaf("element", parquet::Type::kByteArray, true)}),
       Group("m", SchemaNode::Kind::kMap, {key, Leaf("value", parquet::Type::kByteArray, true)})});
  const std::vector<nlohmann::json> rows = {
      nlohmann::json::parse(R"({"id": 1, "s": {"a": 7, "b": "x"}, "l": ["p", "q"], "m": {"k": "v"}})"),
      nlohmann::json::parse(R"({"id": 2, "s": null, "l": [], "m": null})"),
  };
  const std::string path = dir + "/nested.parquet";
  EXPECT_TRUE(WriteNestedParquet(LocalStorage(), path, root, rows, {}).ok());
  return path;
}

// What `stoke cat` prints.
std::string Cat(const std::string& path, const CatOptions& options, RowFormat format) {
  auto rows = CatParquetRows(path, options);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  return rows.ok() ? RowsText(*rows, format) : std::string();
}

TEST(CatParquetRows, PrintsNestedTopLevelFieldsWholeAndLeavesByTheirPaths) {
  std::string tmpl = std::filesystem::temp_directory_path() / "stoke_cat_XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  const std::string path = WriteNestedFile(dir);
  EXPECT_EQ(Cat(path, {}, RowFormat::kJson),
            "{\"id\":1,\"s\":{\"a\":7,\"b\":\"x\"},\"l\":[\"p\",\"q\"],\"m\":{\"k\":\"v\"}}\n"
            "{\"id\":2,\"s\":null,\"l\":[],\"m\":null}\n");
  EXPECT_EQ(Cat(path, {.columns = {"m", "s.b"}, .limit = 1}, RowFormat::kJson),
            "{\"m\":{\"k\":\"v\"},\"s.b\":\"x\"}\n");
  const std::string csv = Cat(path, {.columns = {"s"}}, RowFormat::kCsv);
  EXPECT_NE(csv.find("{\"\"a\"\":7,\"\"b\"\":\"\"x\"\"}"), std::string::npos) << csv;  // quoted as CSV quotes
  EXPECT_EQ(CatParquetRows(path, {.columns = {"nope"}}).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoke
