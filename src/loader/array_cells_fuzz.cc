// libFuzzer target: FlattenArrayRows over arbitrary levels of a list column (the levels of a column
// chunk another engine wrote, as ParquetReader::ReadColumnChunkLevels hands them over: repetition
// levels within the nesting depth, the first one 0, definition levels within the maximum).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/array_cells.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  stoke::ArrayLeaf leaf;
  leaf.depth = 1 + data[0] % stoke::ArrayCells::kMaxDepth;
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
  stoke::DecodedPage out;
  (void)stoke::FlattenArrayRows(levels, leaf, &shape, &out);
  return 0;
}
