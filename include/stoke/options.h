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

// `stoke convert npy`: a directory of .npy/.npz files (+ labels CSV) into Parquet files.
struct ConvertOptions {
  std::string source_dir;                 // directory holding the .npy or .npz files; required
  std::string labels_csv;                 // optional CSV with a `file` column joined on the file name
  std::string out;                        // a directory (part files) or one path ending in .parquet
  std::string tensor_column = "data";     // column name for .npy arrays (.npz use their member names)
  std::string codec = "auto";             // auto (zstd per column chunk where it saves >= 10 %), zstd, lz4_raw, snappy, gzip or uncompressed
  int compression_level = 0;              // 0 = the codec's default
  int64_t target_file_bytes = int64_t{1} << 30;   // output file size to aim for (directory output)
  int64_t row_group_bytes = int64_t{128} << 20;   // row group size to aim for
  size_t threads = 0;                     // encoding threads; 0 = one per core
  bool progress = true;
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
