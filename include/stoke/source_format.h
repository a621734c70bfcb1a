// What kind of source files an ingest or a conversion reads (SourceFormat), and how HDF5 files
// split into samples (Hdf5Samples), with the names the CLI and Python take.
#pragma once

#include <string_view>

#include "stoke/status.h"

namespace stoke {

// The kind of source files (IngestOptions::format, ConvertOptions::format). Kinds cannot be mixed.
enum class SourceFormat {
  kAuto,     // detected: a Delta table, a glob or *.parquet files are kParquet; else by the file
             // names: .npy, .npz, .h5/.hdf5, .jpg/.jpeg/.png
  kNpy,      // NumPy .npy arrays, one sample per file
  kNpz,      // NumPy .npz archives, one sample per file (each member a column)
  kHdf5,     // HDF5 files (docs/format.md, "HDF5 sources")
  kImages,   // JPEG and PNG images
  kParquet,  // a Delta table or a plain Parquet dataset, one sample per row (docs/format.md, "Parquet sources")
};

// The SourceFormat named "auto", "npy", "npz", "hdf5", "images" or "parquet" (the CLI's --format,
// the Python keyword `format`; "" is "auto"). InvalidArgument otherwise, saying what is expected.
Result<SourceFormat> ParseSourceFormat(std::string_view name);
// "auto", "npy", "npz", "hdf5", "images" or "parquet".
std::string_view SourceFormatName(SourceFormat format);

// What one sample of an HDF5 source is (IngestOptions::hdf5_samples; docs/format.md, "HDF5 sources").
enum class Hdf5Samples {
  kAuto,   // N samples along axis 0 when the first file's datasets share their first extent N, else kFile
  kAxis0,  // the rows along axis 0 of every dataset are the samples
  kFile,   // each file is one sample
};

// The Hdf5Samples named "auto", "axis0" or "file" (the CLI's --hdf5-samples, the Python keyword
// `hdf5_samples`). InvalidArgument otherwise, saying what is expected.
Result<Hdf5Samples> ParseHdf5Samples(std::string_view name);
// "auto", "axis0" or "file".
std::string_view Hdf5SamplesName(Hdf5Samples samples);

}  // namespace stoke
