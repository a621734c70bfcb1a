#include "format/parquet_cells.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/image.h"
#include "format/npy.h"

namespace stoke {
namespace {

// ---- FlattenArrayRows over hand-made levels ----

ArrayLeaf Leaf(int depth, uint32_t max_def) { return ArrayLeaf{.leaf = 0, .depth = depth, .max_def = max_def, .dtype = DType::kFloat32}; }

ColumnLevels Levels(std::vector<uint32_t> reps, std::vector<uint32_t> defs) {
  ColumnLevels l;
  l.num_levels = reps.size();
  l.rep_levels = std::move(reps);
  l.def_levels = std::move(defs);
  return l;
}

TEST(FlattenArrayRows, OneLevelRowsOfOneLengthAndTheRowsThatAreNot) {
  // A list<float> with OPTIONAL list and element (max_def 3): rows [a, b], [c, d], null, [], [e, null],
  // [f], [g, h].
  const ColumnLevels l = Levels({0, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1}, {3, 3, 3, 3, 0, 1, 3, 2, 3, 3, 3});
  std::vector<int64_t> shape;
  ArrayRows out;
  ASSERT_TRUE(FlattenArrayRows(l, Leaf(1, 3), &shape, &out).ok());
  EXPECT_EQ(shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(out.value_size, 8u);
  const uint32_t kNull = ArrayRows::kNull;
  // Offsets count present values before the row (4 bytes each): a, b, c, d, e, f, g, h.
  EXPECT_EQ(out.offsets, (std::vector<uint32_t>{0, 8, kNull, kNull, kNull, kNull, 24}));
}

TEST(FlattenArrayRows, NestedRowsMustBeRectangular) {
  // list<list<int>>, all REQUIRED but the lists' repeated groups (max_def 2, max_rep 2):
  // [[1, 2], [3, 4]], [[5, 6, 7], [8]] (ragged: 4 values too, but not 2 x 2), [[9, 10], [11, 12]].
  const ColumnLevels l = Levels({0, 2, 1, 2, 0, 2, 2, 1, 0, 2, 1, 2}, std::vector<uint32_t>(12, 2));
  std::vector<int64_t> shape;
  ArrayRows out;
  ASSERT_TRUE(FlattenArrayRows(l, Leaf(2, 2), &shape, &out).ok());
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out.offsets, (std::vector<uint32_t>{0, ArrayRows::kNull, 32}));
  // A shape given beforehand is checked, not learnt: [3, 1] matches no row here.
  std::vector<int64_t> other = {3, 1};
  ASSERT_TRUE(FlattenArrayRows(l, Leaf(2, 2), &other, &out).ok());
  EXPECT_EQ(out.offsets, (std::vector<uint32_t>(3, ArrayRows::kNull)));
}

TEST(FlattenArrayRows, TheShapeComesFromTheFirstDenseRow) {
  // Rows: null, [x, y, z], [u, v, w].
  const ColumnLevels l = Levels({0, 0, 1, 1, 0, 1, 1}, {0, 3, 3, 3, 3, 3, 3});
  std::vector<int64_t> shape;
  ArrayRows out;
  ASSERT_TRUE(FlattenArrayRows(l, Leaf(1, 3), &shape, &out).ok());
  EXPECT_EQ(shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(out.offsets, (std::vector<uint32_t>{ArrayRows::kNull, 0, 12}));
}

TEST(FlattenDenseListRows, AgreesWithFlattenArrayRowsOnADensePage) {
  // Rows [a, b], [c, d], [e, f, g], [h, i] of a page whose values start at byte 100 of its body.
  const ColumnLevels l = Levels({0, 1, 0, 1, 0, 1, 1, 0, 1}, std::vector<uint32_t>(9, 3));
  std::vector<int64_t> levels_shape;
  ArrayRows from_levels;
  ASSERT_TRUE(FlattenArrayRows(l, Leaf(1, 3), &levels_shape, &from_levels).ok());
  DenseListPage page;
  page.row_lengths = {2, 2, 3, 2};
  page.num_values = 9;
  page.values_offset = 100;
  std::vector<int64_t> shape;
  ArrayRows out;
  FlattenDenseListRows(page, 4, &shape, &out);
  EXPECT_EQ(shape, levels_shape);
  EXPECT_EQ(out.value_size, from_levels.value_size);
  ASSERT_EQ(out.offsets.size(), from_levels.offsets.size());
  for (size_t r = 0; r < out.offsets.size(); ++r) {
    const uint32_t expected = from_levels.offsets[r] == ArrayRows::kNull ? ArrayRows::kNull : from_levels.offsets[r] + 100;
    EXPECT_EQ(out.offsets[r], expected) << "row " << r;
  }
  // A shape given beforehand is checked, not learnt.
  std::vector<int64_t> three = {3};
  FlattenDenseListRows(page, 4, &three, &out);
  EXPECT_EQ(out.offsets, (std::vector<uint32_t>{ArrayRows::kNull, ArrayRows::kNull, 116, ArrayRows::kNull}));
  EXPECT_EQ(out.value_size, 12u);
}

// ---- Binary cells ----

// A .npy file's bytes: float32 [2, 3], element k = id + k / 10.
std::string NpyOf(int64_t id, std::vector<int64_t> shape = {2, 3}) {
  std::vector<float> v(6);
  for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(id) + static_cast<float>(k) / 10;
  return EncodeNpyHeader(DType::kFloat32, shape) + std::string(reinterpret_cast<const char*>(v.data()), 24);
}

TEST(ParquetCells, CellsAreToldByTheirMagicBytes) {
  EXPECT_EQ(BinaryCellKindOf(AsBytes(NpyOf(1))), BinaryCellKind::kNpy);
  std::vector<uint8_t> px(12, 7);
  auto png = EncodePng(ByteView(px.data(), px.size()), 2, 2, 3);
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(BinaryCellKindOf(AsBytes(*png)), BinaryCellKind::kImage);
  EXPECT_EQ(BinaryCellKindOf(AsBytes(std::string("\xFF\xD8\xFF\xE0", 4))), BinaryCellKind::kImage);
  EXPECT_EQ(BinaryCellKindOf(AsBytes(std::string("PK\x03\x04"))), BinaryCellKind::kOther);
  EXPECT_EQ(BinaryCellKindOf(ByteView()), BinaryCellKind::kOther);
}

TEST(ParquetCells, NpyCellDataChecksDtypeAndShapeAndConvertsFortranOrder) {
  AlignedBuffer scratch;
  const std::string cell = NpyOf(2);
  auto data = NpyCellData(AsBytes(cell), DType::kFloat32, {2, 3}, &scratch);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  EXPECT_EQ(data->size(), 24u);
  EXPECT_EQ(data->data(), AsBytes(cell).data() + cell.size() - 24);  // a view into the cell: no copy
  auto other = NpyCellData(AsBytes(cell), DType::kFloat32, {3, 2}, &scratch);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("float32 [2, 3]"), std::string::npos) << other.status().ToString();
  EXPECT_FALSE(NpyCellData(AsBytes(cell.substr(0, cell.size() - 1)), DType::kFloat32, {2, 3}, &scratch).ok());
  // Fortran order: the column-major bytes of [[0, 1, 2], [3, 4, 5]] come back row-major.
  std::string header = EncodeNpyHeader(DType::kFloat32, std::vector<int64_t>{2, 3});
  const size_t at = header.find("'fortran_order': False");
  ASSERT_NE(at, std::string::npos);
  header.replace(at, 22, "'fortran_order': True ");
  const float column_major[6] = {0, 3, 1, 4, 2, 5};
  const std::string fortran = header + std::string(reinterpret_cast<const char*>(column_major), 24);
  auto converted = NpyCellData(AsBytes(fortran), DType::kFloat32, {2, 3}, &scratch);
  ASSERT_TRUE(converted.ok()) << converted.status().ToString();
  float got[6];
  std::memcpy(got, converted->data(), 24);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(got[k], static_cast<float>(k));
}

}  // namespace
}  // namespace stoke
