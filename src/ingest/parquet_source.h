// Parquet sources: a Delta table or a plain Parquet dataset (a directory, a glob, a file; see
// table/parquet_dataset.h), re-laid out by ingest and convert into stoke's layout, one sample per
// page, so that a dataset read for many epochs costs one read per sample (docs/format.md, "Parquet
// sources"). One row is one sample; the `file` column holds its data file's path under the
// dataset's root and `index` its row in that file. Each column of the dataset is kept:
//  - scalars (numbers, booleans, strings, binary, dates, timestamps, decimals of up to 18 digits)
//    with their type;
//  - array columns (lists of numbers nested to any depth) as tensor columns of the first row's
//    shape, which every row must have;
//  - binary cells holding .npy arrays as tensor columns of the first cell's dtype and shape;
//  - binary cells holding JPEG/PNG images, and Hugging Face {bytes, path} image structs, as image
//    (blob) columns of the encoded bytes (a struct's `path` is not kept).
// Other nested columns (structs, maps, lists of strings) and decimals of more than 18 digits are
// refused, naming the column. The dataset's Hugging Face metadata and ClassLabel names go with the
// table (the `huggingface` and stoke.classes keys).
#pragma once

#include <string>
#include <string_view>

#include "ingest/source.h"

namespace stoke {

// Plans a Parquet source: opens it (OpenDatasetView: a Delta table's latest version, or the plain
// dataset), reads every data file's footer for its rows, and decides the columns from the first row
// served. A labels CSV is refused (the dataset's columns are the labels), and so is a table with
// deletion vectors. `what` names the command in errors.
Result<SourceSet> PlanParquetSource(const SourceOptions& options, std::string_view what);

}  // namespace stoke
