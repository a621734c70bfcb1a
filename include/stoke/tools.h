// The entry points of stoke's file tools, as used by the `stoke` command and the Python module.
#pragma once

#include <ostream>
#include <string>

#include "stoke/options.h"
#include "stoke/status.h"

namespace stoke {

struct SynthReport {
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t positives = 0;  // samples labelled 1
  double seconds = 0;
};

// Writes options.samples volumes as .npy files and labels.csv (file,label,x,y,split) into out_dir.
Result<SynthReport> SynthVolumes(const SynthVolumesOptions& options);

// Writes options.images generated images (JPEG, optionally some PNG) into an ImageFolder tree:
// out_dir/class_<k>/<n>.jpg. Report: files, bytes, seconds.
Result<SynthReport> SynthImages(const SynthImagesOptions& options);

// Converts source files (.npy/.npz, HDF5 or JPEG/PNG images, joined with a labels CSV) into Parquet
// files whose tensor and image columns hold one sample per page.
Result<ConvertReport> ConvertSources(const ConvertOptions& options);

// Describes a Parquet file: schema, row groups, column chunks, statistics, page indexes, pages.
Status InspectParquetFile(const std::string& path, const InspectOptions& options, std::ostream& out);

// Prints rows of a Parquet file; binary and tensor cells print as "md5:<hex> len:<bytes>".
Status CatParquetFile(const std::string& path, const CatOptions& options, std::ostream& out);

}  // namespace stoke
