// The names of SourceFormat and Hdf5Samples (stoke/source_format.h), as users type them.
#include "stoke/source_format.h"

#include <fmt/format.h>

namespace stoke {

Result<SourceFormat> ParseSourceFormat(std::string_view name) {
  if (name.empty() || name == "auto") return SourceFormat::kAuto;
  if (name == "npy") return SourceFormat::kNpy;
  if (name == "npz") return SourceFormat::kNpz;
  if (name == "hdf5") return SourceFormat::kHdf5;
  if (name == "images") return SourceFormat::kImages;
  if (name == "parquet") return SourceFormat::kParquet;
  return Status::InvalidArgument(fmt::format("`format` must be auto, npy, npz, hdf5, images or parquet, not '{}'", name));
}

std::string_view SourceFormatName(SourceFormat format) {
  switch (format) {
    case SourceFormat::kAuto: return "auto";
    case SourceFormat::kNpy: return "npy";
    case SourceFormat::kNpz: return "npz";
    case SourceFormat::kHdf5: return "hdf5";
    case SourceFormat::kImages: return "images";
    case SourceFormat::kParquet: return "parquet";
  }
  return "unknown";
}

Result<Hdf5Samples> ParseHdf5Samples(std::string_view name) {
  if (name == "auto") return Hdf5Samples::kAuto;
  if (name == "axis0") return Hdf5Samples::kAxis0;
  if (name == "file") return Hdf5Samples::kFile;
  return Status::InvalidArgument(fmt::format("`hdf5_samples` must be auto, axis0 or file, not '{}'", name));
}

std::string_view Hdf5SamplesName(Hdf5Samples samples) {
  switch (samples) {
    case Hdf5Samples::kAuto: return "auto";
    case Hdf5Samples::kAxis0: return "axis0";
    case Hdf5Samples::kFile: return "file";
  }
  return "unknown";
}

}  // namespace stoke
