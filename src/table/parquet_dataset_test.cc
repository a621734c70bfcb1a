#include "table/parquet_dataset.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <sstream>

#include "format/logical_value.h"
#include "format/parquet_nested.h"
#include "io/local_files.h"
#include "stoke/table.h"
#include "table/scan.h"
#include "table/test_table.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;
using testing_support::WriteDataFile;

TEST(ParquetDataset, GlobsMatchWithinComponentsAndDoubleStarSpansDirectories) {
  EXPECT_TRUE(MatchesGlob("data/train-*.parquet", "data/train-00000-of-00002.parquet"));
  EXPECT_FALSE(MatchesGlob("data/train-*.parquet", "data/test-00000.parquet"));
  EXPECT_FALSE(MatchesGlob("*.parquet", "a/b.parquet"));  // '*' stays within one component
  EXPECT_TRUE(MatchesGlob("**/*.parquet", "b.parquet"));
  EXPECT_TRUE(MatchesGlob("**/*.parquet", "x=1/y=2/b.parquet"));
  EXPECT_TRUE(MatchesGlob("x=[12]/?.parquet", "x=2/b.parquet"));
  EXPECT_FALSE(MatchesGlob("*", ".hidden"));  // a leading dot is matched only by a dot
  EXPECT_TRUE(IsGlobLocation("/d/*.parquet"));
  EXPECT_TRUE(IsGlobLocation("s3://bucket/d/part-?.parquet"));
  EXPECT_FALSE(IsGlobLocation("/d/plain"));
}

class ParquetDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmp = TemporaryDirectory::Create("stoke_dataset");
    ASSERT_TRUE(tmp.ok()) << tmp.status().ToString();
    tmp_.emplace(std::move(*tmp));
    dir_ = tmp_->path() + "/ds";
  }
  // A data file of testing_support::TestColumns (id, label, name, t) with rows [first, first + n).
  void Write(const std::string& rel, int64_t first, int64_t n) {
    const fsys::path p = fsys::path(dir_) / rel;
    fsys::create_directories(p.parent_path());
    WriteDataFile(p.parent_path().string(), p.filename().string(), first, n, n);
  }
  std::string Query(const std::string& location, const std::string& where = "") {
    auto r = QueryTableRows({.table_dir = location, .where = where, .select = {"id"}});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? QueryRowsText(*r, RowFormat::kCsv) : std::string();
  }
  std::optional<TemporaryDirectory> tmp_;
  std::string dir_;
};

TEST_F(ParquetDatasetTest, DirectoryWithHivePartitionsOpensAsAnUnversionedTable) {
  Write("g=1/day=2024-01-02/part-0.parquet", 0, 3);
  Write("g=1/day=2024-01-03/part-0.parquet", 3, 2);
  Write("g=20/day=__HIVE_DEFAULT_PARTITION__/part-0.parquet", 5, 1);
  // What Spark leaves beside its files, and hidden files, are not data.
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir_ + "/_SUCCESS", ByteView()).ok());
  Write("g=1/day=2024-01-02/.part-1.parquet", 100, 1);
  Write("_temporary/g=1/day=2024-01-02/part-9.parquet", 200, 1);

  auto view = OpenDatasetView(dir_);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_TRUE(view->plain);
  EXPECT_EQ(view->location, dir_);
  EXPECT_EQ(view->snapshot.files.size(), 3u);
  EXPECT_EQ(view->snapshot.metadata.partition_columns, (std::vector<std::string>{"g", "day"}));
  std::vector<std::string> names, types;
  for (const ColumnSpec& c : view->columns) {
    names.push_back(c.name);
    types.push_back(SparkTypeName(c));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"id", "label", "name", "t", "g", "day"}));
  EXPECT_EQ(types, (std::vector<std::string>{"long", "integer", "string", "binary", "long", "date"}));
  EXPECT_FALSE(view->snapshot.files[2].partition_values.at("day").has_value());  // Hive's null

  EXPECT_EQ(Query(dir_), "id\n0\n1\n2\n3\n4\n5\n");
  EXPECT_EQ(Query(dir_, "day = DATE '2024-01-03'"), "id\n3\n4\n");
  EXPECT_EQ(Query(dir_, "g = 20 AND day IS NULL"), "id\n5\n");
  // Writers never take a dataset for a table.
  EXPECT_EQ(OpenTableView(dir_).status().code(), StatusCode::kNotFound);
  // A dataset has no versions.
  EXPECT_EQ(OpenDatasetView(dir_, 0).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ParquetDatasetTest, GlobsAndSingleFilesOpenTheFilesTheyName) {
  Write("data/train-00000-of-00002.parquet", 0, 2);
  Write("data/train-00001-of-00002.parquet", 2, 2);
  Write("data/test-00000-of-00001.parquet", 10, 1);
  EXPECT_EQ(Query(dir_ + "/data/train-*.parquet"), "id\n0\n1\n2\n3\n");
  EXPECT_EQ(Query(dir_ + "/**/test-*.parquet"), "id\n10\n");
  EXPECT_EQ(Query(dir_ + "/data/test-00000-of-00001.parquet"), "id\n10\n");
  auto none = OpenDatasetView(dir_ + "/data/valid-*.parquet");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no Parquet files"), std::string::npos) << none.status().ToString();
}

TEST_F(ParquetDatasetTest, ANameHoldingGlobCharactersIsThatNameWhereItExists) {
  Write("run[2]/part-0.parquet", 0, 2);
  Write("run2/part-0.parquet", 5, 1);
  EXPECT_FALSE(IsGlobLocation(dir_ + "/run[2]"));
  EXPECT_EQ(Query(dir_ + "/run[2]"), "id\n0\n1\n");  // the directory itself
  EXPECT_TRUE(IsGlobLocation(dir_ + "/run[2]/*.parquet"));
  EXPECT_EQ(Query(dir_ + "/run[0-9]/*.parquet"), "id\n5\n");  // a pattern where no such name exists
}

TEST_F(ParquetDatasetTest, RootDirectoriesOfTheFormKeyValueArePartitionsToo) {
  Write("g=1/day=2024-01-02/part-0.parquet", 0, 3);
  auto view = OpenDatasetView(dir_ + "/g=1/*/*.parquet");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->snapshot.metadata.partition_columns, (std::vector<std::string>{"g", "day"}));
  EXPECT_EQ(view->location, dir_ + "/g=1");
}

TEST_F(ParquetDatasetTest, NestedColumnsGetDeltaTypes) {
  SchemaNode root{.name = "schema", .repetition = parquet::Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
  SchemaNode element{.name = "element", .type = parquet::Type::kFloat};
  SchemaNode vec{.name = "vec", .kind = SchemaNode::Kind::kList, .children = {element}};
  SchemaNode text{.name = "path", .type = parquet::Type::kByteArray, .is_string = true};
  SchemaNode bytes{.name = "bytes", .type = parquet::Type::kByteArray};
  SchemaNode image{.name = "image", .kind = SchemaNode::Kind::kStruct, .children = {bytes, text}};
  root.children = {vec, image};
  fsys::create_directories(dir_);
  const std::vector<nlohmann::json> rows = {{{"vec", {1.5, 2.5}}, {"image", {{"bytes", "ab"}, {"path", "a.png"}}}}};
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), dir_ + "/f.parquet", root, rows, {}).ok());
  auto view = OpenDatasetView(dir_);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->columns.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(view->columns[0].nested_type),
            nlohmann::json::parse(R"({"type":"array","elementType":"float","containsNull":true})"));
  EXPECT_EQ(nlohmann::json::parse(view->columns[1].nested_type)["fields"][0]["type"], "binary");
  EXPECT_EQ(nlohmann::json::parse(view->columns[1].nested_type)["fields"][1]["type"], "string");
}

TEST_F(ParquetDatasetTest, BadDatasetsSayWhatIsWrongAndWhere) {
  fsys::create_directories(dir_);
  auto empty = OpenDatasetView(dir_);
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("no Delta log and no Parquet files"), std::string::npos);

  Write("g=1/a.parquet", 0, 1);
  Write("b.parquet", 1, 1);
  auto mixed = OpenDatasetView(dir_);
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mixed.status().message().find("different partition directories"), std::string::npos);
  fsys::remove_all(dir_);

  Write("id=1/a.parquet", 0, 1);  // a partition that is also a file column
  EXPECT_EQ(OpenDatasetView(dir_).status().code(), StatusCode::kInvalidArgument);
  fsys::remove_all(dir_);

  fsys::create_directories(dir_ + "/a");
  fsys::create_directory_symlink("..", dir_ + "/a/loop");  // a/loop/a/loop/...: never ends
  auto loop = OpenDatasetView(dir_);
  EXPECT_EQ(loop.status().code(), StatusCode::kInvalidArgument) << loop.status().ToString();
  EXPECT_NE(loop.status().message().find("symbolic link"), std::string::npos) << loop.status().ToString();
  fsys::remove_all(dir_);

  fsys::create_directories(dir_);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir_ + "/bad.parquet", AsBytes(std::string("not parquet"))).ok());
  auto bad = OpenDatasetView(dir_);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.parquet"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST(HuggingFaceMetadata, ClassLabelNamesAndFixedArrayShapes) {
  const std::string metadata = R"({"info": {"features": {
      "image": {"_type": "Image"},
      "label": {"_type": "ClassLabel", "names": ["cat", "dog"]},
      "volume": {"_type": "Array3D", "shape": [30, 30, 10], "dtype": "float32"},
      "frames": {"_type": "Array2D", "shape": [null, 3], "dtype": "float32"},
      "window": {"_type": "Sequence", "feature": {"_type": "Value", "dtype": "float32"}, "length": 16},
      "grid": {"_type": "Sequence", "length": 2,
               "feature": {"_type": "Sequence", "length": 3, "feature": {"_type": "Value", "dtype": "int32"}}},
      "tokens": {"_type": "Sequence", "feature": {"_type": "Value", "dtype": "int64"}, "length": -1}}}})";
  EXPECT_EQ(HuggingFaceClassNames(metadata), std::optional<std::string>(R"({"label":["cat","dog"]})"));
  const auto shapes = HuggingFaceArrayShapes(metadata);
  EXPECT_EQ(shapes, (std::map<std::string, std::vector<int64_t>>{
                        {"volume", {30, 30, 10}}, {"window", {16}}, {"grid", {2, 3}}}));
  // The older layout keeps the features at the top; anything else has none.
  EXPECT_TRUE(HuggingFaceClassNames(R"({"features": {"y": {"_type": "ClassLabel", "names": ["a"]}}})").has_value());
  EXPECT_FALSE(HuggingFaceClassNames("not json").has_value());
  EXPECT_FALSE(HuggingFaceClassNames(R"({"info": {"features": {"x": {"_type": "Value"}}}})").has_value());
  EXPECT_TRUE(HuggingFaceArrayShapes("[1, 2]").empty());
}

}  // namespace
}  // namespace stoke
