#include "loader/array_cells.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/parquet_nested.h"
#include "io/storage.h"
#include "loader/array_table_testing.h"
#include "stoke/loader.h"
#include "table/delta_log.h"

namespace stoke {
namespace testing_arrays {

using parquet::Repetition;

// A Delta table of one data file per element of `files` (rows as JSON: {"id": .., "v": [..], "m":
// [[..], ..]}), v a list<float> and m a list<list<int>>, in row groups of `row_group_rows` rows and
// pages of `page_rows` rows (an OffsetIndex for each chunk).
ArrayTable::ArrayTable(const std::vector<std::vector<json>>& files, int64_t row_group_rows, int64_t page_rows) {
  std::string tmpl = std::filesystem::temp_directory_path() / "stoke_arrays_XXXXXX";
  dir_ = mkdtemp(tmpl.data());
  SchemaNode root{.name = "spark_schema", .repetition = Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
  root.children.push_back({.name = "id", .repetition = Repetition::kRequired, .type = parquet::Type::kInt64});
  SchemaNode v{.name = "v", .kind = SchemaNode::Kind::kList};
  v.children.push_back({.name = "element", .type = parquet::Type::kFloat});
  root.children.push_back(v);
  SchemaNode inner{.name = "element", .kind = SchemaNode::Kind::kList};
  inner.children.push_back({.name = "element", .type = parquet::Type::kInt32});
  SchemaNode m{.name = "m", .kind = SchemaNode::Kind::kList};
  m.children.push_back(inner);
  root.children.push_back(m);
  std::vector<delta::Action> actions;
  actions.push_back(delta::Protocol{});
  delta::Metadata meta;
  meta.id = "00000000-0000-4000-8000-000000000001";
  meta.schema_string = json{{"type", "struct"},
                            {"fields",
                             {{{"name", "id"}, {"type", "long"}, {"nullable", false}, {"metadata", json::object()}},
                              {{"name", "v"},
                               {"type", {{"type", "array"}, {"elementType", "float"}, {"containsNull", true}}},
                               {"nullable", true},
                               {"metadata", json::object()}},
                              {{"name", "m"},
                               {"type",
                                {{"type", "array"},
                                 {"elementType", {{"type", "array"}, {"elementType", "integer"}, {"containsNull", true}}},
                                 {"containsNull", true}}},
                               {"nullable", true},
                               {"metadata", json::object()}}}}}
                           .dump();
  actions.push_back(meta);
  WriterOptions wo;
  wo.row_group_rows = row_group_rows;
  wo.scalar_page_rows = page_rows;  // by default two pages a row group: rows are read a page at a time
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string name = "part-" + std::to_string(f) + ".parquet";
    EXPECT_TRUE(WriteNestedParquet(LocalStorage(), dir_ + "/" + name, root, files[f], wo).ok());
    delta::AddFile add;
    add.path = name;
    add.size = static_cast<int64_t>(std::filesystem::file_size(dir_ + "/" + name));
    add.modification_time = 1700000000000;
    actions.push_back(add);
  }
  delta::DeltaLog log(LocalStorage(), dir_);
  auto v0 = log.Commit(-1, actions, delta::CommitKind::kExclusive, "WRITE", json::object());
  EXPECT_TRUE(v0.ok()) << v0.status().ToString();
}

json Row(int64_t id) {
  const float f = static_cast<float>(id);
  const int32_t i = static_cast<int32_t>(id);
  return json{{"id", id}, {"v", {f, f + 0.5f, -f}}, {"m", {{i, i + 1}, {i + 2, i + 3}}}};
}

std::vector<json> Rows(int64_t first, int64_t n) {
  std::vector<json> rows;
  for (int64_t id = first; id < first + n; ++id) rows.push_back(Row(id));
  return rows;
}

// Rows as Row() makes them, but with `values` floats in v: id, id + 1, ...
std::vector<json> LongRows(int64_t first, int64_t n, int values) {
  std::vector<json> rows = Rows(first, n);
  for (json& row : rows) {
    json v = json::array();
    for (int k = 0; k < values; ++k) v.push_back(static_cast<float>(row["id"].get<int64_t>() + k));
    row["v"] = std::move(v);
  }
  return rows;
}

ArrayTable::~ArrayTable() { std::filesystem::remove_all(dir_); }

}  // namespace testing_arrays

namespace {

using json = nlohmann::json;
using parquet::Repetition;
using testing_arrays::ArrayTable;
using testing_arrays::Row;
using testing_arrays::LongRows;
using testing_arrays::Rows;

// ---- The loader over a table another engine could have written ----

template <typename T>
T At(const BatchColumn& c, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(c.data()) + i * sizeof(T), sizeof(T));
  return v;
}

// Loads `location` (a table of Row()s) in full and checks every row's arrays.
void ExpectEveryRow(const std::string& location, int64_t rows,
                    LoaderOptions::Shuffle shuffle = LoaderOptions::Shuffle::kGlobal) {
  LoaderOptions o;
  o.columns = {"id", "v", "m"};
  o.batch_size = 4;
  o.shuffle = shuffle;
  auto loader = Loader::Open(location, o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  int64_t seen = 0;
  for (;;) {
    auto next = (*loader)->Next();
    ASSERT_TRUE(next.ok()) << next.status().ToString();
    if (!next->has_value()) break;
    const Batch& b = **next;
    const BatchColumn* id = b.column("id");
    const BatchColumn* v = b.column("v");
    const BatchColumn* m = b.column("m");
    ASSERT_TRUE(id && v && m);
    EXPECT_EQ(v->dtype, DType::kFloat32);
    EXPECT_EQ(v->shape, (std::vector<int64_t>{b.size(), 3}));
    EXPECT_EQ(m->dtype, DType::kInt32);
    EXPECT_EQ(m->shape, (std::vector<int64_t>{b.size(), 2, 2}));
    for (int64_t r = 0; r < b.size(); ++r) {
      const int64_t row_id = At<int64_t>(*id, static_cast<size_t>(r));
      const json want = Row(row_id);
      for (size_t k = 0; k < 3; ++k) EXPECT_EQ(At<float>(*v, static_cast<size_t>(r) * 3 + k), want["v"][k].get<float>());
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(At<int32_t>(*m, static_cast<size_t>(r) * 4 + k), want["m"][k / 2][k % 2].get<int32_t>());
      }
    }
    seen += b.size();
  }
  EXPECT_EQ(seen, rows);
}

TEST(ArrayColumns, NestedListsLoadAsTensorsWithEveryRowsValues) {
  ArrayTable table({Rows(0, 7), Rows(7, 5)});
  ExpectEveryRow(table.dir(), 12);
  ExpectEveryRow(table.dir(), 12, LoaderOptions::Shuffle::kBlock);
}

// One epoch of `dir` (LongRows of 1,000 values) with a cache of a few pages: every row once, with its
// values; returns the pages decoded.
int64_t PagesDecodedInAnEpoch(const std::string& dir, int64_t rows, LoaderOptions::Shuffle shuffle) {
  LoaderOptions o;
  o.columns = {"id", "v"};
  o.batch_size = 8;
  o.shuffle = shuffle;
  o.prefetch_bytes = 1 << 20;  // the array cells' cache: 128 KiB, about 16 pages of 8 KB
  auto loader = Loader::Open(dir, o);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  if (!loader.ok()) return -1;
  std::vector<int> seen(static_cast<size_t>(rows), 0);
  for (;;) {
    auto next = (*loader)->Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    const BatchColumn* id = (**next).column("id");
    const BatchColumn* v = (**next).column("v");
    for (int64_t r = 0; r < (**next).size(); ++r) {
      const int64_t row_id = At<int64_t>(*id, static_cast<size_t>(r));
      ++seen[static_cast<size_t>(row_id)];
      EXPECT_EQ(At<float>(*v, static_cast<size_t>(r) * 1000 + 999), static_cast<float>(row_id + 999));
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), rows);
  return (*loader)->stats().pages_decoded;
}

TEST(ArrayColumns, ABlockShuffleDecodesEachPageOnceWhereAGlobalShuffleDecodesAgain) {
  ArrayTable table({LongRows(0, 60, 1000), LongRows(60, 60, 1000), LongRows(120, 60, 1000)});
  // Row groups of 3 rows, a page of 2 rows and one of 1: 20 row groups, 40 pages of v a file.
  const int64_t pages = 3 * 40;
  const int64_t block = PagesDecodedInAnEpoch(table.dir(), 180, LoaderOptions::Shuffle::kBlock);
  const int64_t global = PagesDecodedInAnEpoch(table.dir(), 180, LoaderOptions::Shuffle::kGlobal);
  std::printf("[ pages    ] %lld pages; decoded in an epoch: %lld (block shuffle), %lld (global)\n",
              static_cast<long long>(pages), static_cast<long long>(block), static_cast<long long>(global));
  // Each page once, but for a few where a worker fell behind the others by more than a window (a
  // thread descheduled on a busy machine) and the cache let its page go.
  EXPECT_GE(block, pages);
  EXPECT_LE(block, pages + pages / 20);
  // A global shuffle draws rows from all pages, more than the cache holds: a page again for about
  // every second row of two.
  EXPECT_GT(global, pages + pages / 4);
}

TEST(ArrayColumns, ThePlainParquetDatasetOfTheSameFilesLoadsTheSame) {
  ArrayTable table({Rows(0, 7), Rows(7, 5)});
  std::filesystem::remove_all(table.dir() + "/_delta_log");
  std::filesystem::remove_all(table.dir() + "/_stoke");
  ExpectEveryRow(table.dir(), 12);
  ExpectEveryRow(table.dir() + "/part-*.parquet", 12);
  ExpectEveryRow(table.dir() + "/part-1.parquet", 5);
  // Nothing was written into the dataset's directory (no sample index cache, no log).
  EXPECT_FALSE(std::filesystem::exists(table.dir() + "/_stoke"));
  EXPECT_FALSE(std::filesystem::exists(table.dir() + "/_delta_log"));
}

TEST(ArrayColumns, ARaggedOrNullRowIsAnErrorNamingFileAndRowOrIsSkipped) {
  std::vector<json> rows = Rows(0, 5);
  rows[3]["m"] = json{{3, 4, 5}, {6}};  // 4 values, but not 2 x 2
  rows[4]["v"] = nullptr;
  ArrayTable table({rows});
  LoaderOptions o;
  o.columns = {"v", "m"};
  o.batch_size = 5;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  auto loader = Loader::Open(table.dir(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto next = (*loader)->Next();
  ASSERT_FALSE(next.ok());
  const std::string message = next.status().ToString();
  EXPECT_NE(message.find("part-0.parquet"), std::string::npos) << message;
  EXPECT_TRUE(message.find("row 3") != std::string::npos || message.find("row 4") != std::string::npos) << message;
  EXPECT_TRUE(message.find("a list of more than 2 elements at depth 2") != std::string::npos ||
              message.find("a null") != std::string::npos)
      << message;
  o.on_error = LoaderOptions::OnError::kSkip;
  auto skipping = Loader::Open(table.dir(), o);
  ASSERT_TRUE(skipping.ok()) << skipping.status().ToString();
  auto batch = (*skipping)->Next();
  ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status().ToString();
  EXPECT_EQ((**batch).size(), 3);
}

// The first batch of `dir` in table order under `o`.
Result<Batch> FirstBatch(const std::string& dir, LoaderOptions o) {
  o.shuffle = LoaderOptions::Shuffle::kNone;
  STOKE_ASSIGN_OR_RETURN(auto loader, Loader::Open(dir, o));
  STOKE_ASSIGN_OR_RETURN(auto next, loader->Next());
  if (!next) return Status::NotFound("no batch");
  return std::move(*next);
}

TEST(ArrayColumns, RaggedRowsArePaddedAndNullElementsFilledWhenAsked) {
  std::vector<json> rows = Rows(0, 4);
  rows[1]["v"] = json{7.0};
  rows[2]["v"] = nullptr;
  rows[3]["v"] = json{1.0, nullptr, 2.0};
  rows[1]["m"] = json{{1}, {2, 3}};
  ArrayTable table({rows});
  LoaderOptions o;
  o.columns = {"id", "v", "m"};
  o.batch_size = 4;
  o.pad = {{"v", {4}}, {"m", {2, 2}}};
  o.fill = {{"v", -1.0}};
  auto batch = FirstBatch(table.dir(), o);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  const BatchColumn* v = batch->column("v");
  const BatchColumn* m = batch->column("m");
  EXPECT_EQ(v->shape, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(m->shape, (std::vector<int64_t>{4, 2, 2}));
  const std::vector<float> want_v{0, 0.5f, 0, -1, 7, -1, -1, -1, -1, -1, -1, -1, 1, -1, 2, -1};
  for (size_t k = 0; k < want_v.size(); ++k) EXPECT_EQ(At<float>(*v, k), want_v[k]) << k;
  const std::vector<int32_t> want_m1{1, 0, 2, 3};  // padded with 0: m has no fill
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(At<int32_t>(*m, 4 + k), want_m1[k]) << k;
  // The padded shape reshaped.
  o.shapes = {{"v", {2, 2}}};
  auto reshaped = FirstBatch(table.dir(), o);
  ASSERT_TRUE(reshaped.ok()) << reshaped.status().ToString();
  EXPECT_EQ(reshaped->column("v")->shape, (std::vector<int64_t>{4, 2, 2}));
  // Without a fill, v's null element is an error saying where it is.
  o.fill.clear();
  auto unfilled = FirstBatch(table.dir(), o);
  EXPECT_NE(unfilled.status().message().find("a null element at [1]"), std::string::npos) << unfilled.status().ToString();
}

TEST(ArrayColumns, PaddingAndFillThatDoNotFitTheColumnFailOpen) {
  ArrayTable table({Rows(0, 4)});
  LoaderOptions o;
  o.columns = {"id", "v", "m"};
  o.pad = {{"m", {4}}};  // m nests two lists
  EXPECT_NE(Loader::Open(table.dir(), o).status().message().find("pad['m']"), std::string::npos);
  o.pad = {{"id", {4}}};
  EXPECT_NE(Loader::Open(table.dir(), o).status().message().find("pad: 'id' is not an array column"), std::string::npos);
  o.pad.clear();
  o.fill = {{"m", 0.5}};  // an int32 column
  const Status fraction = Loader::Open(table.dir(), o).status();
  EXPECT_EQ(fraction.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fraction.message().find("fill['m']"), std::string::npos) << fraction.ToString();
  o.fill = {{"m", -3}};
  EXPECT_TRUE(Loader::Open(table.dir(), o).ok());
}

TEST(ArrayColumns, AGivenShapeReshapesEachRowsValues) {
  ArrayTable table({Rows(0, 4)});
  LoaderOptions o;
  o.columns = {"id", "m"};
  o.shapes = {{"m", {4, 1}}};
  o.batch_size = 4;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  auto loader = Loader::Open(table.dir(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto next = (*loader)->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
  const BatchColumn* m = (**next).column("m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->shape, (std::vector<int64_t>{4, 4, 1}));
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(At<int32_t>(*m, 4 + k), Row(1)["m"][k / 2][k % 2].get<int32_t>());
  // A shape of another value count, or for a column that is not a selected array column, fails Open.
  o.shapes = {{"m", {3}}};
  auto wrong = Loader::Open(table.dir(), o);
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("shapes['m']"), std::string::npos) << wrong.status().ToString();
  o.shapes = {{"id", {1}}};
  EXPECT_EQ(Loader::Open(table.dir(), o).status().code(), StatusCode::kInvalidArgument);
}

TEST(ArrayColumns, TheShapeIsTheFirstServedRowsNotTheFileFirstRows) {
  std::vector<json> rows = Rows(0, 4);
  rows[0]["v"] = json{1.0, 2.0};  // row 0 alone has two values; `where` leaves it out
  ArrayTable table({rows});
  LoaderOptions o;
  o.columns = {"v"};
  o.where = "id >= 1";
  o.batch_size = 3;
  auto loader = Loader::Open(table.dir(), o);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  auto next = (*loader)->Next();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
  EXPECT_EQ((**next).column("v")->shape, (std::vector<int64_t>{3, 3}));
}

TEST(ArrayColumns, ListsOfStringsAreRefusedNamingTheColumn) {
  std::string tmpl = std::filesystem::temp_directory_path() / "stoke_arrays_XXXXXX";
  const std::string dir = mkdtemp(tmpl.data());
  SchemaNode root{.name = "schema", .repetition = Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
  SchemaNode s{.name = "s", .kind = SchemaNode::Kind::kList};
  s.children.push_back({.name = "element", .type = parquet::Type::kByteArray, .is_string = true});
  root.children.push_back(s);
  ASSERT_TRUE(WriteNestedParquet(LocalStorage(), dir + "/part-0.parquet", root, {json{{"s", {"a", "b"}}}}, {}).ok());
  auto reader = ParquetReader::Open(LocalStorage(), dir + "/part-0.parquet");
  ASSERT_TRUE(reader.ok());
  auto leaf = FindArrayLeaf(**reader, "s");
  EXPECT_EQ(leaf.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(leaf.status().message().find("'s'"), std::string::npos) << leaf.status().ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoke
