#include "loader/tensor_column.h"

#include <fmt/format.h>

namespace stoke {

std::string CellContext(const SampleIndex& index, const std::vector<TensorColumn>& tensors, int64_t row,
                        uint32_t column) {
  const TensorColumn& t = tensors[column];
  if (t.chunked()) {
    const uint32_t file = index.FileOfRow(row);
    return fmt::format("{} row {} (table row {}) column '{}'", index.FilePath(file), row - index.file_first_row(file),
                       row, t.name);
  }
  const SampleIndex::Location loc = index.Find(row, t.index_column);
  return fmt::format("{} row {} (table row {}) column '{}'", index.FilePath(loc.file), loc.row_in_file, row, t.name);
}

}  // namespace stoke
