// libFuzzer target: a binary cell of another writer's file as the loader reads it: CellKindOf, then
// NpyCellData against the shape its own header claims and against a fixed one (a malformed header,
// data shorter or longer than the header says, another dtype or shape).
#include <cstddef>
#include <cstdint>

#include "format/npy.h"
#include "loader/binary_cells.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const stoke::ByteView cell(data, size);
  if (stoke::CellKindOf(cell) != stoke::CellKind::kNpy) return 0;
  stoke::AlignedBuffer scratch;
  auto header = stoke::ParseNpyHeader(cell, "cell");
  if (header.ok()) (void)stoke::NpyCellData(cell, header->dtype, header->shape, &scratch);
  (void)stoke::NpyCellData(cell, stoke::DType::kFloat32, {2, 3}, &scratch);
  return 0;
}
