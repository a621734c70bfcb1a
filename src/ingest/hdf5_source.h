// HDF5 sources (.h5/.hdf5 files on the local file system). The datasets selected (all, or
// SourceOptions::datasets) become columns, and so do the root group's attributes. Layout rule
// (SourceOptions::hdf5_samples; docs/format.md):
//   axis0: a file holds N samples along axis 0 of its datasets: every selected dataset of rank >= 1
//     has the same first extent N (N may differ between files). A rank-1 dataset gives a scalar
//     column, rank >= 2 a tensor column of shape dims[1:], a rank-0 dataset a scalar column whose
//     value repeats for each sample of the file. An `index` column holds each sample's position in
//     its file.
//   file: a file is one sample: each dataset a tensor column of its full shape (rank-0 datasets
//     scalar columns).
//   auto (default): axis0 when the first file's selected datasets of rank >= 1 all share their first
//     extent, file otherwise.
// Root attributes (single numbers and strings) become scalar columns, repeated for each sample of the
// file. Every file must hold the first file's datasets and attributes with the same types and
// per-sample shapes; a mismatch is an error naming the file and the dataset.
//
// Objects stores are refused: libhdf5 reads through file names, with many small reads of its B-trees
// that would each be a request; copy the files to a local disk first.
#pragma once

#include <string_view>

#include "ingest/source.h"

namespace stoke {

// Plans set->files (listed, sorted, kind kHdf5): opens every file (in parallel) for its layout,
// checks that they agree, joins the labels CSV, and sets the columns, items and reader.
Status PlanHdf5(const SourceOptions& options, std::string_view what, SourceSet* set);

}  // namespace stoke
