// stoke's file tools that are not about tables, each with its options next to it: seed workloads
// (SynthVolumes, SynthImages), source files to plain Parquet files (ConvertSources), and describing
// or printing one Parquet file (InspectParquetFile, CatParquetRows). The `stoke` command and the
// Python module call them; options are plain structs whose defaults are their initialisers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stoke/codec.h"
#include "stoke/row_format.h"
#include "stoke/source_format.h"
#include "stoke/status.h"

namespace stoke {

// `stoke synth volumes`: the seed workload, one .npy file per sample plus labels.csv.
struct SynthVolumesOptions {
  std::string out_dir;                    // required: a directory or a URI prefix, created if missing
  int64_t samples = 2000;                 // default 2000: the number of volumes
  std::vector<int64_t> shape = {30, 30, 10};  // default {30, 30, 10}: the spatial shape (x, y, z)
  int64_t channels = 10;                  // default 10: channels per voxel; arrays are shape + [channels], float32
  uint64_t seed = 0;                      // default 0; same seed, same bytes
  double label_noise = 0.05;              // default 0.05: the fraction of labels flipped at random
  size_t threads = 0;                     // default 0: one per available CPU
  bool progress = true;                   // default true: a progress bar when stdout is a terminal
  // Default false: one .npy file per sample and labels.csv. true: one file, volumes.parquet, as
  // Spark writes such a table: columns id, label, x, y, split and volume, an array<float> of each
  // volume's values (snappy, pages of about 1 MiB, row groups of about 128 MiB, an OffsetIndex).
  bool parquet = false;
};

// `stoke synth images`: an ImageFolder of generated images, ROOT/class_<k>/<n>.jpg (and .png).
struct SynthImagesOptions {
  std::string out_dir;                    // required: a directory or a URI prefix, created if missing
  int64_t images = 1000;                  // default 1000 images, spread evenly over the classes
  int64_t classes = 10;                   // default 10 class directories class_000, class_001, ...
  int64_t min_size = 200;                 // default 200: each side of an image is drawn uniformly in
  int64_t max_size = 500;                 // default 500:  [min_size, max_size] pixels
  int quality = 92;                       // default 92: JPEG quality 1..100 (a ~350 px image is about 110 KB)
  double png_fraction = 0;                // default 0: the share of the images written as PNG instead of JPEG
  uint64_t seed = 0;                      // default 0; same seed, same bytes
  size_t threads = 0;                     // default 0: one per available CPU
  bool progress = true;                   // default true: a progress bar when stdout is a terminal
};

// What a synth wrote.
struct SynthReport {
  int64_t files = 0;                      // files written (.npy or images; not labels.csv)
  int64_t bytes = 0;                      // their bytes
  int64_t positives = 0;                  // volumes: samples labelled 1; images: 0
  double seconds = 0;                     // wall time
};

// Writes options.samples volumes as .npy files and labels.csv (file,label,x,y,split) into out_dir.
Result<SynthReport> SynthVolumes(const SynthVolumesOptions& options);

// Writes options.images generated images (JPEG, optionally some PNG) into an ImageFolder tree:
// out_dir/class_<k>/<n>.jpg. Report: files, bytes, seconds.
Result<SynthReport> SynthImages(const SynthImagesOptions& options);

// `stoke convert`: source files (.npy/.npz, HDF5, JPEG/PNG images; + labels CSV) into Parquet files.
struct ConvertOptions {
  std::string source_dir;                 // required: a directory, or one file (a path or a URI)
  std::string labels_csv;                 // default none: a CSV with a `file` column joined on the file's path relative to the source
  std::string out;                        // required: a directory (part files) or one path ending in .parquet
  std::string tensor_column = "data";     // default "data": the column name for .npy arrays (.npz use their member names)
  SourceFormat format = SourceFormat::kAuto;  // default kAuto: detected from the file names
  std::vector<std::string> datasets;      // HDF5: the datasets to convert (default, empty: all)
  Hdf5Samples hdf5_samples = Hdf5Samples::kAuto;  // HDF5: default kAuto (as IngestOptions::hdf5_samples)
  std::vector<int64_t> decode_images;     // images: {} encoded bytes, or {height, width} (as IngestOptions)
  Codec codec = Codec::kAuto;             // default kAuto (as IngestOptions::codec)
  int compression_level = 0;              // default 0: the codec's default level
  int64_t target_file_bytes = int64_t{1} << 30;   // default 1 GiB: the output file size to aim for (directory output)
  int64_t row_group_bytes = int64_t{128} << 20;   // default 128 MiB: the row group size to aim for
  size_t threads = 0;                     // default 0: one encoding thread per available CPU
  bool progress = true;                   // default true: a progress bar when stdout is a terminal
};

// What a convert did.
struct ConvertReport {
  int64_t files_in = 0;                   // source files read
  int64_t bytes_in = 0;                   // their bytes
  int64_t rows = 0;                       // rows written
  std::vector<std::string> files_out;     // the Parquet files written
  int64_t bytes_out = 0;                  // their bytes
  double seconds = 0;                     // wall time
};

// Converts source files (.npy/.npz, HDF5 or JPEG/PNG images, joined with a labels CSV) into Parquet
// files whose tensor and image columns hold one sample per page.
Result<ConvertReport> ConvertSources(const ConvertOptions& options);

// `stoke inspect FILE`.
struct InspectFileOptions {
  bool pages = false;                     // default false; true: list every page of every column chunk
  DescriptionFormat format = DescriptionFormat::kText;  // default text; kJson: one JSON document
};

// Describes a Parquet file: schema, row groups, column chunks, statistics, page indexes, pages.
Result<std::string> InspectParquetFile(const std::string& path, const InspectFileOptions& options);

// `stoke cat`.
struct CatOptions {
  std::vector<std::string> columns;       // default (empty): all columns
  int64_t offset = 0;                     // default 0: the first row to print
  int64_t limit = kNoLimit;               // default kNoLimit (-1): all rows; else at most this many
};

// Rows of a Parquet file as text cells, the way `stoke cat` prints them (RowsText, row_format.h):
// binary and tensor cells as "md5:<hex> len:<bytes>", nested fields as JSON text.
Result<TextRows> CatParquetRows(const std::string& path, const CatOptions& options);

}  // namespace stoke
