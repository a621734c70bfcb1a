// libFuzzer target: other writers' cells as parquet_cells.h reads them. The first byte chooses:
//  - even: FlattenArrayRows over arbitrary levels of a list column (as ParquetReader hands a column
//    chunk's levels over: repetition levels within the nesting depth, the first one 0, definition
//    levels within the maximum), then PadArrayRows and ArrayRowProblem over the same levels, padded
//    to a shape or not, with a fill value or not;
//  - odd: a binary cell (the rest of the input): BinaryCellKindOf, then NpyCellData against the shape its
//    own header claims and against a fixed one.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/array_padding.h"
#include "format/npy.h"
#include "format/parquet_cells.h"

namespace {

// PadArrayRows over `levels` of a leaf like `given` whose lists' definition levels are consistent
// (ParquetReader derives them from the schema): increasing, the last at most the maximum.
void PadLevels(const stoke::ColumnLevels& levels, const stoke::ArrayLeaf& given, uint8_t a, uint8_t b, uint8_t c) {
  stoke::ArrayLeaf leaf = given;
  leaf.max_def = std::max<uint32_t>(leaf.max_def, static_cast<uint32_t>(leaf.depth));
  const uint32_t slack = leaf.max_def - static_cast<uint32_t>(leaf.depth);
  for (int j = 0; j < leaf.depth; ++j) leaf.list_defs[j] = static_cast<uint32_t>(j) + 1 + (b >> 4) % (slack + 1);
  stoke::ArrayPadding padding;
  if (c & 1) {
    for (int j = 0; j < leaf.depth; ++j) padding.shape.push_back(1 + (a >> j) % 4);
  }
  if (c & 2) padding.fill = -1;
  size_t present = 0;
  for (size_t k = 0; k < levels.num_levels; ++k) present += levels.def_levels.empty() || levels.def_levels[k] == leaf.max_def;
  const size_t es = stoke::DTypeSize(leaf.dtype);
  stoke::AlignedBuffer values, body;
  values.Resize(present * es);
  auto fill = stoke::ArrayFillBytes(padding.fill.value_or(0), leaf.dtype);
  if (!fill.ok()) return;
  std::vector<int64_t> shape;
  stoke::ArrayRows out;
  (void)stoke::PadArrayRows(levels, leaf, values.view(), padding, *fill, &shape, &body, &out);
  for (int64_t r = 0; r < 4; ++r) (void)stoke::ArrayRowProblem(levels, leaf, r, shape, padding);
  (void)stoke::ArrayRowShape(levels, leaf, 0, true);
}

void FlattenLevels(const uint8_t* data, size_t size) {
  if (size < 3) return;
  stoke::ArrayLeaf leaf;
  leaf.depth = 1 + data[0] % stoke::kMaxArrayDepth;
  leaf.max_def = data[1] % 12;
  leaf.dtype = data[2] % 2 ? stoke::DType::kFloat64 : stoke::DType::kInt32;
  stoke::ColumnLevels levels;
  for (size_t i = 3; i + 1 < size; i += 2) {
    levels.rep_levels.push_back(levels.rep_levels.empty() ? 0 : data[i] % (leaf.depth + 1));
    levels.def_levels.push_back(leaf.max_def == 0 ? 0 : data[i + 1] % (leaf.max_def + 1));
  }
  if (leaf.max_def == 0) levels.def_levels.clear();
  levels.num_levels = levels.rep_levels.size();
  std::vector<int64_t> shape;
  stoke::ArrayRows out;
  (void)stoke::FlattenArrayRows(levels, leaf, &shape, &out);
  (void)stoke::ArrayRowShape(levels, leaf, static_cast<int64_t>(data[0]) % 4);
  PadLevels(levels, leaf, data[0], data[1], data[2]);
}

void ReadCell(const uint8_t* data, size_t size) {
  const stoke::ByteView cell(data, size);
  if (stoke::BinaryCellKindOf(cell) != stoke::BinaryCellKind::kNpy) return;
  stoke::AlignedBuffer scratch;
  auto header = stoke::ParseNpyHeader(cell, "cell");
  if (header.ok()) (void)stoke::NpyCellData(cell, header->dtype, header->shape, &scratch);
  (void)stoke::NpyCellData(cell, stoke::DType::kFloat32, {2, 3}, &scratch);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (data[0] % 2 == 0) {
    FlattenLevels(data + 1, size - 1);
  } else {
    ReadCell(data + 1, size - 1);
  }
  return 0;
}
