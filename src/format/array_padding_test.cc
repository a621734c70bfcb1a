#include "format/array_padding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/parquet_nested.h"
#include "io/storage.h"

namespace stoke {
namespace {

using json = nlohmann::json;

// tests/data/duckdb/lists.parquet, written by DuckDB (generate.mjs there). Its rows:
//   ints   [1, 2, 3]   []   null   [null]
//   nested [[1], [], null, [2, 3]]   []   null   [[null]]
const std::string kLists = std::string(STOKE_SOURCE_DIR) + "/tests/data/duckdb/lists.parquet";

struct Padded {
  std::vector<int64_t> shape;
  std::vector<std::vector<int32_t>> rows;  // empty for a row that does not fit
  std::vector<std::string> problems;       // ArrayRowProblem of each row
};

// Column `name` of `path` (INTEGER lists) laid out under `padding`.
Padded Pad(const std::string& path, const std::string& name, const ArrayPadding& padding) {
  Padded out;
  auto reader = ParquetReader::Open(LocalStorage(), path);
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  if (!reader.ok()) return out;
  auto leaf = FindArrayLeaf(**reader, name);
  EXPECT_TRUE(leaf.ok()) << leaf.status().ToString();
  auto levels = (*reader)->ReadColumnChunkLevels(0, leaf->leaf);
  EXPECT_TRUE(levels.ok()) << levels.status().ToString();
  AlignedBuffer values, body;
  ColumnLevels copy = *levels;
  EXPECT_TRUE(AppendArrayValues(**reader, *leaf, std::move(copy.values), &values).ok());
  auto fill = ArrayFillBytes(padding.fill.value_or(0), leaf->dtype);
  EXPECT_TRUE(fill.ok());
  ArrayRows rows;
  const Status st = PadArrayRows(*levels, *leaf, values.view(), padding, *fill, &out.shape, &body, &rows);
  EXPECT_TRUE(st.ok()) << st.ToString();
  for (size_t r = 0; r < rows.offsets.size(); ++r) {
    std::vector<int32_t> row;
    if (rows.offsets[r] != ArrayRows::kNull) {
      row.resize(rows.value_size / 4);
      std::memcpy(row.data(), body.data() + rows.offsets[r], rows.value_size);
    }
    out.rows.push_back(row);
    out.problems.push_back(ArrayRowProblem(*levels, *leaf, static_cast<int64_t>(r), out.shape, padding));
  }
  return out;
}

TEST(ArrayPadding, RaggedEmptyAndNullListsArePaddedWithTheFill) {
  const Padded p = Pad(kLists, "ints", ArrayPadding{{4}, -1.0});
  EXPECT_EQ(p.shape, (std::vector<int64_t>{4}));
  ASSERT_EQ(p.rows.size(), 4u);
  EXPECT_EQ(p.rows[0], (std::vector<int32_t>{1, 2, 3, -1}));
  EXPECT_EQ(p.rows[1], (std::vector<int32_t>{-1, -1, -1, -1}));  // []
  EXPECT_EQ(p.rows[2], (std::vector<int32_t>{-1, -1, -1, -1}));  // null
  EXPECT_EQ(p.rows[3], (std::vector<int32_t>{-1, -1, -1, -1}));  // [null]
  for (const std::string& problem : p.problems) EXPECT_EQ(problem, "");
}

TEST(ArrayPadding, WithoutAFillANullElementIsAnErrorNamingWhereAndPaddingIsZero) {
  const Padded p = Pad(kLists, "ints", ArrayPadding{{3}, std::nullopt});
  EXPECT_EQ(p.rows[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(p.rows[1], (std::vector<int32_t>{0, 0, 0}));
  EXPECT_TRUE(p.rows[3].empty());
  EXPECT_EQ(p.problems[3], "a null element at [0]");
}

TEST(ArrayPadding, AListLongerThanThePaddingIsAnError) {
  const Padded p = Pad(kLists, "ints", ArrayPadding{{2}, 0.0});
  EXPECT_TRUE(p.rows[0].empty());
  EXPECT_EQ(p.problems[0], "a list of more than 2 elements at depth 1");
  EXPECT_EQ(p.rows[1], (std::vector<int32_t>{0, 0}));
}

TEST(ArrayPadding, NestedListsArePaddedAtEveryDepth) {
  const Padded p = Pad(kLists, "nested", ArrayPadding{{4, 2}, 9.0});
  EXPECT_EQ(p.shape, (std::vector<int64_t>{4, 2}));
  // [[1], [], null, [2, 3]]
  EXPECT_EQ(p.rows[0], (std::vector<int32_t>{1, 9, 9, 9, 9, 9, 2, 3}));
  EXPECT_EQ(p.rows[1], std::vector<int32_t>(8, 9));
  EXPECT_EQ(p.rows[2], std::vector<int32_t>(8, 9));
  EXPECT_EQ(p.rows[3], std::vector<int32_t>(8, 9));  // [[null]]
  const Padded narrow = Pad(kLists, "nested", ArrayPadding{{4, 1}, 9.0});
  EXPECT_EQ(narrow.problems[0], "a list of more than 1 elements at depth 2");
  const Padded short_outer = Pad(kLists, "nested", ArrayPadding{{3, 2}, 9.0});
  EXPECT_EQ(short_outer.problems[0], "a list of more than 3 elements at depth 1");
}

TEST(ArrayPadding, WithoutPaddingRowsMustHaveOneShapeAndAFillOnlyFillsNulls) {
  // Without padding the first row sets the shape; the others are errors saying why.
  const Padded exact = Pad(kLists, "ints", ArrayPadding{{}, 5.0});
  EXPECT_EQ(exact.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(exact.rows[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(exact.problems[1], "an empty list");
  EXPECT_EQ(exact.problems[2], "a null row");
  EXPECT_EQ(exact.problems[3], "a ragged list, or another shape than [3]");
  // [[null]] is the first row that has a shape once its null counts: [1, 1], the null filled.
  const Padded nested = Pad(kLists, "nested", ArrayPadding{{}, 5.0});
  EXPECT_EQ(nested.shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(nested.rows[3], (std::vector<int32_t>{5}));
  EXPECT_TRUE(nested.rows[0].empty());
  EXPECT_EQ(nested.problems[0], "a list of more than 1 elements at depth 1");
}

// A file of one list<list<float>> column `m` holding `rows`.
std::string WriteNested(const std::string& dir, const std::vector<json>& rows) {
  SchemaNode root{.name = "schema", .repetition = parquet::Repetition::kRequired, .kind = SchemaNode::Kind::kStruct};
  SchemaNode inner{.name = "element", .kind = SchemaNode::Kind::kList};
  inner.children.push_back({.name = "element", .type = parquet::Type::kFloat});
  SchemaNode m{.name = "m", .kind = SchemaNode::Kind::kList};
  m.children.push_back(inner);
  root.children.push_back(m);
  const std::string path = dir + "/m.parquet";
  EXPECT_TRUE(WriteNestedParquet(LocalStorage(), path, root, rows, {}).ok());
  return path;
}

TEST(ArrayPadding, AFillLetsNullElementsIntoARectangularRow) {
  const std::string dir = std::filesystem::temp_directory_path() / "stoke_array_padding_test";
  std::filesystem::create_directories(dir);
  const std::string path =
      WriteNested(dir, {json{{"m", {{1.0, nullptr}, {3.0, 4.0}}}}, json{{"m", {{5.0, 6.0}, {7.0}}}}});
  auto reader = ParquetReader::Open(LocalStorage(), path);
  ASSERT_TRUE(reader.ok());
  auto leaf = FindArrayLeaf(**reader, "m");
  ASSERT_TRUE(leaf.ok());
  auto levels = (*reader)->ReadColumnChunkLevels(0, leaf->leaf);
  ASSERT_TRUE(levels.ok());
  EXPECT_EQ(ArrayRowShape(*levels, *leaf, 0), std::nullopt);
  EXPECT_EQ(ArrayRowShape(*levels, *leaf, 0, true), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ArrayRowShape(*levels, *leaf, 1, true), std::nullopt);
  AlignedBuffer values, body;
  ColumnLevels copy = *levels;
  ASSERT_TRUE(AppendArrayValues(**reader, *leaf, std::move(copy.values), &values).ok());
  const ArrayPadding padding{{}, 0.5};
  auto fill = ArrayFillBytes(0.5, DType::kFloat32);
  ASSERT_TRUE(fill.ok());
  std::vector<int64_t> shape;
  ArrayRows rows;
  ASSERT_TRUE(PadArrayRows(*levels, *leaf, values.view(), padding, *fill, &shape, &body, &rows).ok());
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(rows.offsets.size(), 2u);
  std::vector<float> first(4);
  std::memcpy(first.data(), body.data() + rows.offsets[0], 16);
  EXPECT_EQ(first, (std::vector<float>{1.0f, 0.5f, 3.0f, 4.0f}));
  EXPECT_EQ(rows.offsets[1], ArrayRows::kNull);
  EXPECT_EQ(ArrayRowProblem(*levels, *leaf, 1, shape, padding), "a ragged list, or another shape than [2, 2]");
  // A padding shape of another depth is refused before anything is laid out.
  EXPECT_EQ(CheckArrayPadding(ArrayPadding{{4}, {}}, *leaf, "m").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckArrayPadding(ArrayPadding{{4, 0}, {}}, *leaf, "m").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckArrayPadding(ArrayPadding{{int64_t{1} << 40, 4}, {}}, *leaf, "m").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckArrayPadding(ArrayPadding{{4, 4}, {}}, *leaf, "m").ok());
  std::vector<int64_t> deeper{2, 2, 2};
  EXPECT_EQ(PadArrayRows(*levels, *leaf, values.view(), padding, *fill, &deeper, &body, &rows).code(),
            StatusCode::kInvalidArgument);
  std::filesystem::remove_all(dir);
}

TEST(ArrayPadding, AFillValueMustBeExactInTheColumnsDType) {
  EXPECT_EQ(*ArrayFillBytes(-1, DType::kInt32), (std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff}));
  EXPECT_EQ(*ArrayFillBytes(1, DType::kBool), (std::vector<uint8_t>{1}));
  EXPECT_EQ(ArrayFillBytes(1.5, DType::kInt32).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ArrayFillBytes(2, DType::kBool).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ArrayFillBytes(128, DType::kInt8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ArrayFillBytes(-1, DType::kUInt64).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ArrayFillBytes(9223372036854775808.0, DType::kInt64).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(ArrayFillBytes(-9223372036854775808.0, DType::kInt64).ok());
  EXPECT_EQ(ArrayFillBytes(std::numeric_limits<double>::quiet_NaN(), DType::kInt64).status().code(),
            StatusCode::kInvalidArgument);
  auto nan = ArrayFillBytes(std::numeric_limits<double>::quiet_NaN(), DType::kFloat32);
  ASSERT_TRUE(nan.ok());
  float f;
  std::memcpy(&f, nan->data(), 4);
  EXPECT_TRUE(std::isnan(f));
  EXPECT_EQ(ArrayFillBytes(-0.5, DType::kFloat64)->size(), 8u);
}

}  // namespace
}  // namespace stoke
