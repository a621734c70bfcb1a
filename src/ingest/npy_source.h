// .npy and .npz sources: one file, one sample. A .npy file gives one tensor column
// (SourceOptions::npy_column), an .npz file one tensor column per member, named after it. The first
// file sets the columns; every other file must hold the same arrays (names, dtypes, shapes).
#pragma once

#include <string_view>

#include "ingest/source.h"

namespace stoke {

// Plans set->files (listed, sorted, of kind kNpy or kNpz): reads the first file for the tensor
// columns, joins the labels CSV, sets the columns, items and reader.
Status PlanNpy(const SourceOptions& options, std::string_view what, SourceSet* set);

}  // namespace stoke
