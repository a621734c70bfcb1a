// The loader's open stage for columns (docs/architecture.md, "The loader"): the columns a loader
// delivers, chosen from the table's, with their transforms and image pipelines; the scalar columns
// and the rows served; the readers of cells that are not a page of their own. Private to src/loader.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loader/array_cells.h"
#include "loader/binary_cells.h"
#include "loader/sample_decoder.h"
#include "loader/scalar_columns.h"
#include "loader/slow_cells.h"
#include "loader/tensor_column.h"
#include "stoke/loader.h"
#include "table/sample_index.h"
#include "table/scan.h"

namespace stoke {

// Set up once, in two steps (Select, then SetUpCells); read-only after that, by every stage.
// Not movable: the stages keep references into it.
class LoaderColumns {
 public:
  // `dir` names the table in messages; `o` outlives it.
  LoaderColumns(std::string dir, const LoaderOptions& o) : dir_(std::move(dir)), o_(o) {}
  LoaderColumns(const LoaderColumns&) = delete;
  LoaderColumns& operator=(const LoaderColumns&) = delete;

  // Open's first step, while the log is at hand: the columns o.columns names (every column when it
  // is empty) sorted into tensor columns (tensors, images, arrays, binary cells) and scalar columns,
  // and the scalar values and the rows o.where keeps, read from `view`'s data files. `index` (the
  // sample index of `view`) outlives it.
  Status Select(const TableView& view, const SampleIndex& index, const ScalarColumns::ReadOptions& read);
  // Open's second step: the readers of the slow path, array and binary cells, which share `cache_bytes`
  // in equal parts; the array and binary columns' types from the first row served; the image
  // pipelines, whose decoded images may take up to `max_decoded_bytes` each.
  Status SetUpCells(int64_t cache_bytes, int64_t max_decoded_bytes);

  const std::vector<TensorColumn>& tensors() const { return tensors_; }
  const ScalarColumns& scalars() const { return scalars_; }
  // The selected columns in the requested order.
  const std::vector<std::string>& order() const { return order_; }
  SampleDecoder::Cells cells() const { return {slow_cells_.get(), array_cells_.get(), binary_cells_.get()}; }
  const SlowCells* slow_cells() const { return slow_cells_.get(); }
  // The array and the binary stage's caches' budget, each (SetUpCells).
  size_t cell_cache_bytes() const { return cell_cache_bytes_; }
  std::string Context(int64_t row, uint32_t column) const { return CellContext(*index_, tensors_, row, column); }

 private:
  // Select's step for the `selected` columns (indices in view.columns; `image_columns`: the blob
  // columns holding images).
  Status SortColumns(const TableView& view, const std::vector<size_t>& selected,
                     const std::vector<std::string>& image_columns);
  // The column `spec` (a tensor, or an image column when it is a blob) with its transforms; image
  // pipelines are made once the rows are known (CreateImagePipelines).
  Result<TensorColumn> MakeTensorColumn(const ColumnSpec& spec) const;
  // The tensor column `t` (its input dtype and shape set) with its transforms (none of them image
  // transforms, unless `t` is a uint8 [H, W, C] tensor: then the image pipeline is made later).
  Status SetTransforms(TensorColumn* t) const;
  // SetUpCells' step for the array column `t`, and for the binary column `t`: what the first served
  // cell (`first`, when a row is served) holds.
  Status SetUpArrayColumn(TensorColumn* t, std::optional<int64_t> first);
  Status SetUpBinaryColumn(TensorColumn* t, std::optional<int64_t> first);
  // InvalidArgument, naming `option`, where a key of `by_column` is not a selected array column.
  template <typename Map>
  Status CheckArrayColumnNames(std::string_view option, const Map& by_column) const;
  // o.pad and o.fill of the selected array columns, keyed by their fields in the data files.
  std::map<std::string, ArrayPadding> ArrayPaddings() const;
  // Sets t->in.shape to o.shapes' entry for the array column `t`, or else to metadata_shapes_', when
  // there is one (its value count must be the rows').
  Status ReshapeArrayColumn(TensorColumn* t) const;
  // Image columns: the size of the first selected row's image, for a chain that does not fix one.
  Result<std::pair<int64_t, int64_t>> ProbeImageSize(const TensorColumn& t, int64_t max_decoded_bytes) const;
  // Sets up the image pipelines of the image columns (after the rows are known).
  Status CreateImagePipelines(int64_t max_decoded_bytes);

  const std::string dir_;
  const LoaderOptions& o_;
  const SampleIndex* index_ = nullptr;
  std::vector<TensorColumn> tensors_;
  ScalarColumns scalars_;
  std::vector<std::string> order_;
  // Array shapes a dataset's metadata gives (Hugging Face features), used where o.shapes has none.
  std::map<std::string, std::vector<int64_t>> metadata_shapes_;
  // Cells that are not a page of their own (other writers' files), read by the workers.
  std::unique_ptr<SlowCells> slow_cells_;
  // Array columns' cells, decoded from their column chunks by the workers.
  std::unique_ptr<ArrayCells> array_cells_;
  // Binary columns' cells (other writers' .npy and image cells), likewise.
  std::unique_ptr<BinaryCells> binary_cells_;
  size_t cell_cache_bytes_ = 0;
};

}  // namespace stoke
