// A tensor, image, array or binary column as the loader delivers it, set up by the open stage
// (loader_columns.h) and read by every later stage. Private to src/loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loader/image_transform.h"
#include "loader/transform.h"
#include "format/parquet_column.h"
#include "table/sample_index.h"

namespace stoke {

// A tensor column, or an image column (a blob column named in `stoke.images`: one encoded JPEG/PNG
// per cell, decoded and transformed by `image`).
struct TensorColumn {
  std::string name;
  size_t index_column = 0;  // in SampleIndex::tensor_columns()
  TensorSpec in;
  TransformPipeline transforms;  // tensor columns without image transforms
  // Image columns (encoded_image), and uint8 [H, W, C] tensor columns whose transforms start with
  // image transforms (use_image): the whole chain.
  bool encoded_image = false;
  bool use_image = false;
  // An array column (array_cells.h): `file_name` is its field in the data files; `in` is set from
  // the first served row (LoaderColumns::SetUpCells). index_column is unused.
  bool array = false;
  // A binary column of other writers' files (binary_cells.h), or a struct with a binary `bytes`
  // field: its cells are .npy arrays (`in` set from the first served row) or encoded images
  // (encoded_image). `file_name` is its field in the data files; index_column is unused.
  bool binary_cells = false;
  std::string file_name;
  std::vector<int64_t> array_shape;  // the shape the rows' lists nest to (`in.shape` may reshape it)
  ImagePipeline image;
  size_t in_bytes = 0;   // the cell's bytes (0 for image columns: cells vary)
  size_t out_bytes = 0;
  DType out_dtype = DType::kUInt8;
  std::vector<int64_t> out_shape;
  bool direct() const { return !use_image && transforms.empty(); }  // cells go to the batch as they are
  // Decoded from its column chunks by a stage of its own, row by row, not read page by page.
  bool chunked() const { return array || binary_cells; }
};

// "<file> row <r> (table row <row>) column '<name>'" for error messages about table row `row` of
// tensors[column]; formats a string, so it is called only once something failed.
std::string CellContext(const SampleIndex& index, const std::vector<TensorColumn>& tensors, int64_t row,
                        uint32_t column);

}  // namespace stoke
