// Parquet sources: a plain dataset or a Delta table re-laid out into stoke's layout, every column
// kept (scalars with their types, arrays and .npy cells as tensors, images as blobs), each value
// equal to the source's.
#include "ingest/parquet_source.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <optional>
#include <sstream>

#include "format/image.h"
#include "format/npy.h"
#include "format/parquet_nested.h"
#include "format/row_printer.h"
#include "io/local_files.h"
#include "stoke/ingest.h"
#include "stoke/table.h"
#include "table/delta_log.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;
using json = nlohmann::json;
using parquet::Repetition;

// The .npy bytes of float32 [2, 2] {id, id + 1, id + 2, id + 3}.
std::string NpyOf(int64_t id) {
  const float v[4] = {static_cast<float>(id), static_cast<float>(id + 1), static_cast<float>(id + 2),
                      static_cast<float>(id + 3)};
  return EncodeNpyHeader(DType::kFloat32, std::vector<int64_t>{2, 2}) + std::string(reinterpret_cast<const char*>(v), 16);
}

std::string PngOf(int64_t id) {
  std::vector<uint8_t> px(2 * 2 * 3, static_cast<uint8_t>(id));
  auto png = EncodePng(ByteView(px.data(), px.size()), 2, 2, 3);
  EXPECT_TRUE(png.ok());
  return *png;
}

class ParquetSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tmp = TemporaryDirectory::Create("stoke_parquet_source");
    ASSERT_TRUE(tmp.ok());
    tmp_.emplace(std::move(*tmp));
    src_ = tmp_->path() + "/src";
    table_ = tmp_->path() + "/table";
  }
  // A file of rows [first, first + n) under src_/<dir>: id, label, name (null every third row), vec
  // list<float> {id, -id, 0.5}, arr (.npy cells), img (PNG cells), in row groups of 2 rows.
  void WriteFile(const std::string& dir, const std::string& name, int64_t first, int64_t n) {
    SchemaNode root{.name = "schema", .repetition = Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
    root.children = {
        {.name = "id", .repetition = Repetition::kRequired, .type = parquet::Type::kInt64},
        {.name = "label", .type = parquet::Type::kInt32},
        {.name = "name", .type = parquet::Type::kByteArray, .is_string = true},
        {.name = "vec", .kind = SchemaNode::Kind::kList, .children = {{.name = "element", .type = parquet::Type::kFloat}}},
        {.name = "arr", .type = parquet::Type::kByteArray},
        {.name = "img", .type = parquet::Type::kByteArray}};
    std::vector<json> rows;
    for (int64_t id = first; id < first + n; ++id) {
      const float f = static_cast<float>(id);
      rows.push_back(json{{"id", id}, {"label", id % 2}, {"name", id % 3 == 0 ? json() : json("n" + std::to_string(id))},
                          {"vec", {f, -f, 0.5}}, {"arr", NpyOf(id)}, {"img", PngOf(id)}});
    }
    WriterOptions wo;
    wo.row_group_rows = 2;
    ASSERT_TRUE(LocalStorage().CreateDirectories(src_ + "/" + dir).ok());
    ASSERT_TRUE(WriteNestedParquet(LocalStorage(), src_ + "/" + dir + "/" + name, root, rows, wo).ok());
  }
  IngestOptions Options(const std::string& source) {
    IngestOptions o;
    o.source_dir = source;
    o.table_dir = table_;
    o.progress = false;
    return o;
  }
  std::string Query(const std::string& select, const std::string& where = "") {
    QueryOptions q{.table_dir = table_, .where = where, .select = {}};
    std::stringstream names(select);
    for (std::string c; std::getline(names, c, ',');) q.select.push_back(c);
    auto r = QueryTableRows(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? QueryRowsText(*r, RowFormat::kCsv) : std::string();
  }
  std::optional<TemporaryDirectory> tmp_;
  std::string src_, table_;
};

TEST_F(ParquetSourceTest, APartitionedDatasetIsReLaidOutWithEveryColumnKept) {
  WriteFile("split=train", "part-0.parquet", 0, 5);
  WriteFile("split=test", "part-0.parquet", 5, 2);
  auto r = IngestSources(Options(src_));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 7);
  delta::DeltaLog log(LocalStorage(), table_);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  const auto& config = snap->metadata.configuration;
  EXPECT_EQ(config.at("stoke.tensors"), R"({"vec":{"dtype":"float32","shape":[3]},"arr":{"dtype":"float32","shape":[2,2]}})");
  EXPECT_EQ(config.at("stoke.images"), R"({"img":{"formats":["png"]}})");
  // The dataset's `id` is kept as source_id; `file` and `index` say where each row was.
  EXPECT_EQ(Query("source_id,file,index,label,name,split", "source_id = 6"), "source_id,file,index,label,name,split\n6,split=test/part-0.parquet,1,0,,test\n");
  EXPECT_EQ(Query("name", "source_id = 4"), "name\nn4\n");

  // Each tensor cell is the source's value: vec's floats, arr's .npy data (after its header), img's PNG.
  for (int64_t id = 0; id < 7; ++id) {
    const float f = static_cast<float>(id);
    const float vec[3] = {f, -f, 0.5f};
    const std::string npy = NpyOf(id);
    const std::string want = fmt::format("vec,arr,img\n{},{},{}\n", BinaryCell(std::string_view(reinterpret_cast<const char*>(vec), 12)),
                                         BinaryCell(std::string_view(npy).substr(npy.size() - 16)), BinaryCell(PngOf(id)));
    EXPECT_EQ(Query("vec,arr,img", fmt::format("source_id = {}", id)), want);
  }
  // Again: every data file is in the table already.
  auto again = IngestSources(Options(src_));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->rows, 0);
}

TEST_F(ParquetSourceTest, AStokeTableIsCopiedTensorsAndAllAndAGlobNamesFiles) {
  WriteFile("data", "train-0.parquet", 0, 3);
  WriteFile("data", "test-0.parquet", 10, 2);
  ASSERT_TRUE(IngestSources(Options(src_ + "/data/train-*.parquet")).ok());
  EXPECT_EQ(Query("source_id"), "source_id\n0\n1\n2\n");
  // The table just written, as a source: its tensors and images copied, ids renamed once more.
  IngestOptions copy = Options(table_);
  copy.table_dir = tmp_->path() + "/copy";
  auto r = IngestSources(copy);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 3);
  delta::DeltaLog log(LocalStorage(), copy.table_dir);
  auto snap = log.ReadSnapshot();
  ASSERT_TRUE(snap.ok());
  EXPECT_NE(snap->metadata.configuration.at("stoke.tensors").find("\"arr\""), std::string::npos);
  EXPECT_EQ(snap->metadata.configuration.at("stoke.images"), R"({"img":{"formats":["png"]}})");
}

TEST_F(ParquetSourceTest, AParquetFileBesideNpyFilesIsNotASample) {
  ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  const std::string npy = NpyOf(1);
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/a.npy", AsBytes(npy)).ok());
  WriteFile("", "labels.parquet", 0, 1);
  auto r = IngestSources(Options(src_));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 1);
  EXPECT_EQ(Query("file"), "file\na.npy\n");
}

TEST_F(ParquetSourceTest, WhatCannotBeKeptIsRefusedNamingIt) {
  SchemaNode root{.name = "schema", .repetition = Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
  root.children = {{.name = "vec", .kind = SchemaNode::Kind::kList, .children = {{.name = "element", .type = parquet::Type::kInt32}}},
                   {.name = "meta", .kind = SchemaNode::Kind::kStruct, .children = {{.name = "a", .type = parquet::Type::kInt32}}}};
  ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), src_ + "/a.parquet", root, {json{{"vec", {1, 2}}, {"meta", {{"a", 1}}}}}, {}).ok());
  auto nested = IngestSources(Options(src_));
  ASSERT_EQ(nested.status().code(), StatusCode::kUnsupported) << nested.status().ToString();
  EXPECT_NE(nested.status().message().find("column 'meta' is a struct"), std::string::npos) << nested.status().ToString();
  EXPECT_FALSE(fsys::exists(table_ + "/_delta_log"));

  root.children.pop_back();  // rows whose arrays differ in shape: the second names its file and row
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), src_ + "/a.parquet", root, {json{{"vec", {1, 2}}}, json{{"vec", {3}}}}, {}).ok());
  auto ragged = IngestSources(Options(src_));
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.status().message().find("a.parquet: row 1 of column 'vec'"), std::string::npos) << ragged.status().ToString();

  IngestOptions labels = Options(src_);
  labels.labels_csv = src_ + "/labels.csv";
  EXPECT_EQ(IngestSources(labels).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke
