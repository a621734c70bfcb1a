// Options of stoke's tools. Plain structs: each field's default is in its initialiser, its unit and
// meaning in its comment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stoke {

// `stoke synth volumes`: the seed workload, one .npy file per sample plus labels.csv.
struct SynthVolumesOptions {
  std::string out_dir;                    // created if missing; required
  int64_t samples = 2000;                 // number of volumes
  std::vector<int64_t> shape = {30, 30, 10};  // spatial shape (x, y, z)
  int64_t channels = 10;                  // channels per voxel; arrays are shape + [channels], float32
  uint64_t seed = 0;                      // same seed, same bytes
  double label_noise = 0.05;              // fraction of labels flipped at random
  size_t threads = 0;                     // 0 = one per core
  bool progress = true;                   // draw a progress bar when stdout is a terminal
};

// `stoke convert`: source files (.npy/.npz, HDF5, JPEG/PNG images; + labels CSV) into Parquet files.
struct ConvertOptions {
  std::string source_dir;                 // required: a directory, or one file (a path or a URI)
  std::string labels_csv;                 // optional CSV with a `file` column joined on the file's path relative to the source
  std::string out;                        // a directory (part files) or one path ending in .parquet
  std::string tensor_column = "data";     // column name for .npy arrays (.npz use their member names)
  std::string format;                     // "" = detected from the file names; or npy, npz, hdf5, images
  std::vector<std::string> datasets;      // HDF5: the datasets to convert (empty = all)
  std::string hdf5_samples = "auto";      // HDF5: auto, axis0 or file (as IngestOptions)
  std::vector<int64_t> decode_images;     // images: {} encoded bytes, or {height, width} (as IngestOptions)
  std::string codec = "auto";             // auto (zstd per column chunk where it saves >= 10 %), zstd, lz4_raw, snappy, gzip or uncompressed
  int compression_level = 0;              // 0 = the codec's default
  int64_t target_file_bytes = int64_t{1} << 30;   // output file size to aim for (directory output)
  int64_t row_group_bytes = int64_t{128} << 20;   // row group size to aim for
  size_t threads = 0;                     // encoding threads; 0 = one per core
  bool progress = true;
};

// `stoke synth images`: an ImageFolder of generated images, ROOT/class_<k>/<n>.jpg (and .png).
struct SynthImagesOptions {
  std::string out_dir;                    // created if missing; required
  int64_t images = 1000;                  // number of images, spread evenly over the classes
  int64_t classes = 10;                   // class directories class_000, class_001, ...
  int64_t min_size = 200;                 // each side of an image, drawn uniformly in [min_size, max_size] px
  int64_t max_size = 500;
  int quality = 92;                       // JPEG quality 1..100 (a ~350 px image is about 110 KB at 92)
  double png_fraction = 0;                // share of the images written as PNG instead of JPEG
  uint64_t seed = 0;                      // same seed, same bytes
  size_t threads = 0;                     // 0 = one per core
  bool progress = true;                   // draw a progress bar when stdout is a terminal
};

struct ConvertReport {
  int64_t files_in = 0;
  int64_t bytes_in = 0;
  int64_t rows = 0;
  std::vector<std::string> files_out;
  int64_t bytes_out = 0;
  double seconds = 0;
};

// `stoke cat`.
struct CatOptions {
  enum class Format { kTable, kCsv, kJson };
  std::vector<std::string> columns;       // empty = all columns
  int64_t offset = 0;                     // first row to print
  int64_t limit = -1;                     // rows to print; -1 = all
  Format format = Format::kTable;         // json prints one JSON object per line
};

// `stoke inspect`.
struct InspectOptions {
  bool pages = false;                     // list every page of every column chunk
  bool json = false;                      // one JSON document instead of text
};

}  // namespace stoke
