// The `stoke` command. Converts library errors (Status) to messages and exit codes here, in one place.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "stoke/bench.h"
#include "stoke/options.h"
#include "stoke/status.h"
#include "stoke/table.h"
#include "stoke/tools.h"

namespace {

constexpr int kExitError = 1;
constexpr const char* kSourceHelp =
    "Sources: a directory or one file (a path or a URI). The kind comes from the file names: .npy or .npz files "
    "(one sample each), HDF5 .h5/.hdf5 files (local only; datasets become columns, root attributes scalar columns; "
    "see --hdf5-samples), or JPEG/PNG images (.jpg/.jpeg/.png) in the ImageFolder layout ROOT/<class>/<image> "
    "(a `label` column from the class directories, class names in the table metadata) or anywhere under ROOT with "
    "--labels; images are stored as their encoded bytes, one per page, with width, height and channels columns. "
    "Kinds cannot be mixed.";
constexpr const char* kHdf5SamplesHelp =
    "HDF5 layout: axis0 (a file holds N samples along axis 0 of its datasets: rank-1 datasets become scalar "
    "columns, rank >= 2 tensor columns of shape dims[1:], plus an `index` column), file (a file is one sample: each "
    "dataset a tensor column of its full shape, rank-0 datasets scalar columns), or auto (axis0 when the first "
    "file's datasets of rank >= 1 share their first extent, else file)";
constexpr const char* kCodecHelp =
    "Page codec: auto (per column chunk, zstd where it saves at least 10 % of the bytes, else uncompressed), "
    "or one of zstd, lz4_raw, snappy, gzip, uncompressed for every chunk";

int Fail(const stoke::Status& s) {
  std::fprintf(stderr, "stoke: error: %s\n", s.ToString().c_str());
  return kExitError;
}

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

std::vector<int64_t> ParseShape(const std::string& s, const char* option = "--shape",
                                const char* example = "30,30,10") {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find_first_of(",x", pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (const std::exception&) {
      throw CLI::ValidationError(option, fmt::format("expected sizes separated by commas, e.g. {}", example));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// --decode: "224" (224 x 224) or HEIGHTxWIDTH ("224x160", or "224,160").
std::vector<int64_t> ParseDecodeSize(const std::string& s) {
  if (s.empty()) return {};
  std::vector<int64_t> size = ParseShape(s, "--decode", "224 or 224x160");
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2 || size[0] < 1 || size[1] < 1 || size[0] > 65535 || size[1] > 65535) {
    throw CLI::ValidationError("--decode", "expected SIZE or HEIGHTxWIDTH within 1..65535, e.g. 224 or 224x160");
  }
  return size;
}

constexpr char kDecodeHelp[] =
    "Images: decode each image and store its RGB pixels resized to SIZE x SIZE or HEIGHTxWIDTH (PIL's antialiased "
    "bilinear, as torchvision's Resize((h, w))) as a [h, w, 3] uint8 tensor, instead of the encoded bytes: more disk, "
    "no decoding when loading";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stoke: many small array files in, Delta tables of Parquet out, laid out so that one sample is one read."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "stoke 0.1.0");
  bool no_progress = false;
  app.add_flag("--no-progress", no_progress, "Never draw progress bars (they are drawn only on terminals anyway)");

  // synth volumes
  auto* synth = app.add_subcommand("synth", "Generate seed workloads");
  synth->require_subcommand(1);
  stoke::SynthVolumesOptions so;
  std::string shape = "30,30,10";
  auto* volumes = synth->add_subcommand(
      "volumes", "Write N float32 volumes as .npy files (one per sample) plus labels.csv (file,label,x,y,split)");
  volumes->add_option("--samples", so.samples, "Number of volumes")->capture_default_str();
  volumes->add_option("--out", so.out_dir, "Output directory or URI prefix (created if missing)")->required();
  volumes->add_option("--shape", shape, "Spatial shape x,y,z")->capture_default_str();
  volumes->add_option("--channels", so.channels, "Channels per voxel (the array is x,y,z,channels)")->capture_default_str();
  volumes->add_option("--seed", so.seed, "Random seed: the same seed gives the same bytes")->capture_default_str();
  volumes->add_option("--label-noise", so.label_noise, "Fraction of labels flipped at random")->capture_default_str();
  volumes->add_option("--threads", so.threads, "Worker threads (0 = one per core)")->capture_default_str();

  // synth images
  stoke::SynthImagesOptions si;
  auto* images = synth->add_subcommand(
      "images", "Write an ImageFolder of generated JPEGs (and optionally PNGs): OUT/class_<k>/<n>.jpg");
  images->add_option("--out", si.out_dir, "Output directory or URI prefix (created if missing)")->required();
  images->add_option("--images", si.images, "Number of images, spread evenly over the classes")->capture_default_str();
  images->add_option("--classes", si.classes, "Number of class directories")->capture_default_str();
  images->add_option("--min-size", si.min_size, "Smallest side in pixels")->capture_default_str();
  images->add_option("--max-size", si.max_size, "Largest side in pixels (each side is drawn in [min, max])")->capture_default_str();
  images->add_option("--quality", si.quality, "JPEG quality 1..100 (a ~350 px image is about 110 KB at 92)")->capture_default_str();
  images->add_option("--png-fraction", si.png_fraction, "Share of the images written as PNG")->capture_default_str();
  images->add_option("--seed", si.seed, "Random seed: the same seed gives the same bytes")->capture_default_str();
  images->add_option("--threads", si.threads, "Worker threads (0 = one per core)")->capture_default_str();

  // convert
  auto* convert = app.add_subcommand("convert", "Convert source files into Parquet with one sample per page");
  convert->require_subcommand(1);
  stoke::ConvertOptions co;
  auto* npy = convert->add_subcommand("npy", std::string("Convert source files (.npy/.npz, HDF5 or images; the kind is "
                                                         "detected, `convert hdf5` and `convert images` are the same "
                                                         "command), joined with a labels CSV. ") + kSourceHelp);
  npy->alias("hdf5");
  npy->alias("images");
  npy->add_option("src", co.source_dir, "Source directory or file (a path or a URI prefix)")->required();
  npy->add_option("--labels", co.labels_csv,
                  "CSV with a 'file' column (the file's path relative to the source) and label/attribute columns");
  npy->add_option("--format", co.format, "Force the source kind instead of detecting it from the file names")
      ->check(CLI::IsMember({"npy", "npz", "hdf5", "images"}));
  npy->add_option("--dataset", co.datasets, "HDF5: a dataset to convert (repeatable; default: all)");
  std::string co_decode;
  npy->add_option("--decode", co_decode, kDecodeHelp);
  npy->add_option("--hdf5-samples", co.hdf5_samples, kHdf5SamplesHelp)
      ->check(CLI::IsMember({"auto", "axis0", "file"}))
      ->capture_default_str();
  npy->add_option("--out", co.out, "Output directory (or URI prefix) for part files, or one FILE.parquet")->required();
  npy->add_option("--tensor-column", co.tensor_column, "Column name for .npy arrays (.npz members keep their names)")
      ->capture_default_str();
  npy->add_option("--codec", co.codec, kCodecHelp)->capture_default_str();
  npy->add_option("--level", co.compression_level, "Codec level (0 = codec default)")->capture_default_str();
  npy->add_option("--target-file-size", co.target_file_bytes, "Size of each output file, e.g. 1GiB, 256MB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  npy->add_option("--row-group-size", co.row_group_bytes, "Size of each row group, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  npy->add_option("--threads", co.threads, "Encoding threads (0 = one per core)")->capture_default_str();

  // ingest
  auto* ingest = app.add_subcommand("ingest", std::string("Ingest source files (.npy/.npz, HDF5 or images) into a Delta "
                                                          "table (created if missing). ") + kSourceHelp);
  stoke::IngestOptions ig;
  ingest->add_option("src", ig.source_dir, "Source directory or file (a path or a URI prefix)")->required();
  ingest->add_option("--table", ig.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  ingest->add_option("--labels", ig.labels_csv,
                     "CSV with a 'file' column (the file's path relative to the source) and label/attribute columns");
  ingest->add_option("--format", ig.format, "Force the source kind instead of detecting it from the file names")
      ->check(CLI::IsMember({"npy", "npz", "hdf5", "images"}));
  ingest->add_option("--dataset", ig.datasets, "HDF5: a dataset to ingest (repeatable; default: all)");
  std::string ig_decode;
  ingest->add_option("--decode", ig_decode, kDecodeHelp);
  ingest->add_option("--hdf5-samples", ig.hdf5_samples, kHdf5SamplesHelp)
      ->check(CLI::IsMember({"auto", "axis0", "file"}))
      ->capture_default_str();
  ingest->add_option("--mode", ig.mode,
                     "append (adds the files not yet in the table, all samples of a file at once; re-running resumes) or "
                     "overwrite")
      ->check(CLI::IsMember({"append", "overwrite"}))
      ->capture_default_str();
  ingest->add_option("--tensor-column", ig.tensor_column, "Column name for .npy arrays")->capture_default_str();
  ingest->add_option("--codec", ig.codec, kCodecHelp)->capture_default_str();
  ingest->add_option("--target-file-size", ig.target_file_bytes, "Data file size, e.g. 1GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  ingest->add_option("--row-group-size", ig.row_group_bytes, "Row group size, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  ingest->add_option("--rows-per-file", ig.rows_per_file, "Exactly N rows per data file (1 = one data file per sample)");
  ingest->add_option("--partition-by", ig.partition_by,
                     "A labels column to partition by (directories <column>=<value>/; appends use the table's)");
  ingest->add_option("--threads", ig.threads, "Encoding threads (0 = one per core)")->capture_default_str();
  std::string shard;
  ingest->add_option("--shard", shard,
                     "INDEX/COUNT: ingest only shard INDEX (0-based) of COUNT, a contiguous part of the sorted source "
                     "listing; COUNT processes (on any machines) ingest into one table concurrently, each resumable "
                     "on its own")
      ->check([](const std::string& v) -> std::string {
        long long i = 0, n = 0;
        char extra = 0;
        if (std::sscanf(v.c_str(), "%lld/%lld%c", &i, &n, &extra) != 2 || n < 1 || i < 0 || i >= n) {
          return "--shard must be INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4";
        }
        return "";
      });

  // optimize
  auto* optimize = app.add_subcommand("optimize", "Compact a table's small files into files of the target size (one commit)");
  stoke::OptimizeOptions oo;
  optimize->add_option("table", oo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  optimize->add_option("--target-file-size", oo.target_file_bytes, "Size of the compacted files, e.g. 1GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  optimize->add_option("--row-group-size", oo.row_group_bytes, "Row group size, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  optimize->add_option("--where", oo.where, "Only compact files whose statistics may match this predicate");
  optimize->add_option("--sort-by", oo.sort_by,
                       "Order rows by this scalar column within the new files (rewrites every matching file)");
  optimize->add_option("--codec", oo.codec,
                       "Page codec of the new files (default: the table's own, as recorded at ingest; auto when none)");
  optimize->add_option("--threads", oo.threads, "Threads (0 = one per core)")->capture_default_str();

  // vacuum
  auto* vacuum = app.add_subcommand("vacuum", "Delete data files no version inside the retention window references");
  stoke::VacuumOptions vo;
  vacuum->add_option("table", vo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  vacuum->add_option("--retain", vo.retain_hours, "Retention in hours: versions newer than this stay readable")
      ->capture_default_str();
  vacuum->add_flag("--dry-run", vo.dry_run, "List the files that would be deleted; delete nothing");

  // query
  auto* query = app.add_subcommand("query", "Rows of a table matching a predicate, e.g. --where \"label = 1 AND x < 100\"");
  stoke::QueryOptions qo;
  std::string query_select, query_format = "table";
  query->add_option("table", qo.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  query->add_option("--where", qo.where,
                    "Predicate over scalar columns: = != < <= > >= IN, NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT");
  query->add_option("--select", query_select, "Comma-separated columns (default: all)");
  query->add_option("--limit", qo.limit, "At most N rows (-1 = all)")->capture_default_str();
  query->add_flag("--count", qo.count_only, "Print only the number of matching rows");
  query->add_option("--version", qo.version, "Query the table as of this version");
  query->add_option("--format", query_format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();

  // checkpoint
  auto* checkpoint = app.add_subcommand("checkpoint", "Write a Delta checkpoint (commits write one every 10 versions)");
  std::string checkpoint_dir;
  std::optional<int64_t> checkpoint_version;
  checkpoint->add_option("table", checkpoint_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  checkpoint->add_option("--version", checkpoint_version, "Version to checkpoint (default: latest)");

  // history
  auto* history = app.add_subcommand("history", "List a table's versions, newest first");
  std::string history_dir;
  int64_t history_limit = 0;
  bool history_json = false;
  history->add_option("table", history_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  history->add_option("--limit", history_limit, "Show at most N versions (0 = all)");
  history->add_flag("--json", history_json, "One JSON object per version");

  // inspect
  auto* inspect = app.add_subcommand(
      "inspect", "Describe a Parquet file (schema, row groups, pages, codecs, statistics) or a table (version, schema, files)");
  std::string inspect_path;
  stoke::InspectOptions io;
  std::optional<int64_t> inspect_version;
  inspect->add_option("path", inspect_path, "Parquet file or table (a path or a URI)")->required();
  inspect->add_flag("--pages", io.pages, "List every page of every column chunk (files)");
  inspect->add_flag("--json", io.json, "Print one JSON document");
  inspect->add_option("--version", inspect_version, "Table version to describe (default: latest)");

  // cat
  auto* cat = app.add_subcommand("cat", "Print rows; binary and tensor cells print as md5:<hex> len:<bytes>");
  std::string cat_path, cat_columns, cat_format = "table";
  stoke::CatOptions catopt;
  cat->add_option("file", cat_path, "Parquet file (a path or a URI)")->required();
  cat->add_option("--columns", cat_columns, "Comma-separated columns (default: all)");
  cat->add_option("--offset", catopt.offset, "First row")->capture_default_str();
  cat->add_option("--limit", catopt.limit, "Number of rows (-1 = all)")->capture_default_str();
  cat->add_option("--format", cat_format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();

  // ---- bench: one group; each benchmark is a subcommand of `bench` -------------------------------
  auto* bench = app.add_subcommand("bench", "Benchmarks: the loader, and baselines on the same samples");
  bench->require_subcommand(1);

  // bench files
  stoke::PerFileBenchOptions pf;
  bool pf_json = false;
  auto* bench_files = bench->add_subcommand(
      "files", "Baseline: read a directory of .npy files the naive way (open, read, close, parse per sample) into batches");
  bench_files->add_option("dir", pf.dir, "Directory or URI prefix of .npy files (e.g. from `stoke synth volumes`); on an object store one GET per file")->required();
  bench_files->add_option("--batch-size", pf.batch_size, "Samples per batch")->check(CLI::PositiveNumber)->capture_default_str();
  bench_files->add_option("--epochs", pf.epochs, "Epochs (each a new seeded shuffle of all files)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_files->add_option("--batches", pf.batches, "Stop after N batches, crossing epochs as needed (0 = whole epochs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_files->add_option("--seed", pf.seed, "Shuffle seed")->capture_default_str();
  bench_files->add_option("--compute-ms", pf.compute_ms, "Emulated compute: the consumer sleeps this long per batch")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_files->add_option("--threads", pf.threads, "Reader threads (1 = one loop that reads, then computes)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_files->add_flag("--cold", pf.cold, "Read with O_DIRECT, bypassing the page cache");
  bench_files->add_flag("--json", pf_json, "Print one line of JSON");

  // bench load
  stoke::LoadBenchOptions lb;
  std::string lb_shuffle = "global", lb_backend = "auto";
  bool lb_json = false, lb_cold = false, lb_no_crc = false, lb_no_dct = false, lb_no_region = false;
  std::vector<std::string> lb_transforms;
  auto* bench_load = bench->add_subcommand(
      "load", "The loader on a table: samples/s, MB/s, consumer wait share and accelerator utilisation");
  bench_load->add_option("table", lb.table_dir, "Table: a directory, or a URI (az://container/path, abfss://, https://<account>.blob.core.windows.net/..., s3://bucket/path)")->required();
  bench_load->add_option("--batch-size", lb.loader.batch_size, "Samples per batch")->check(CLI::PositiveNumber)->capture_default_str();
  bench_load->add_option("--epochs", lb.epochs, "Epochs (each a new shuffle)")->check(CLI::PositiveNumber)->capture_default_str();
  bench_load->add_option("--batches", lb.batches, "Stop after N measured batches, crossing epochs as needed (0 = whole epochs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_load->add_option("--warmup-batches", lb.warmup_batches, "Batches consumed before the clock starts")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_load->add_option("--compute-ms", lb.compute_ms, "Emulated accelerator time per batch (the consumer sleeps)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_load->add_option("--shuffle", lb_shuffle, "global, block or none")
      ->check(CLI::IsMember({"global", "block", "none"}))
      ->capture_default_str();
  bench_load->add_option("--shuffle-buffer", lb.loader.shuffle_buffer, "Rows in the block shuffle's buffer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_load->add_option("--seed", lb.loader.seed, "Shuffle seed")->capture_default_str();
  bench_load->add_option("--where", lb.loader.where, "Only rows matching this predicate (as in `stoke query`)");
  bench_load->add_option("--prefetch-bytes", lb.loader.prefetch_bytes, "Memory budget for reads in flight and batch buffers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_load->add_option("--threads", lb.loader.threads, "Decode/transform workers (0 = one per core)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  bench_load->add_option("--queue-depth", lb.loader.queue_depth,
                         "Reads in flight (0 = 64 on local files, 256 ranged GETs on object stores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  bench_load->add_option("--remote-coalesce-bytes", lb.loader.remote_coalesce_bytes,
                         "Object stores: the largest GET that merges a batch's pages of one object, e.g. 8MiB (0 = one GET per page)")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("8MiB");
  bench_load->add_option("--remote-coalesce-gap", lb.loader.remote_coalesce_gap_bytes,
                         "Object stores: pages at most this far apart are merged into one GET, e.g. 256KiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("256KiB");
  bench_load->add_option("--cache-dir", lb.loader.cache_dir,
                         "Object stores: keep fetched bytes in this local directory (1 MiB blocks, CRC-checked, shared by "
                         "processes), so later epochs read from local disk");
  bench_load->add_option("--cache-bytes", lb.loader.cache_bytes, "Size of the --cache-dir cache, e.g. 16GiB (least recently used blocks go)")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("16GiB");
  bench_load->add_option("--backend", lb_backend, "auto, io_uring or pread")
      ->check(CLI::IsMember({"auto", "io_uring", "pread"}))
      ->capture_default_str();
  bench_load->add_flag("--cold", lb_cold, "O_DIRECT reads: the page cache plays no part");
  bench_load->add_flag("--no-crc", lb_no_crc, "Skip the pages' CRC-32 check");
  bench_load->add_option("--transform", lb_transforms,
                         "A transform, in order, repeatable: KIND[:VALUE][,key=value...], e.g. "
                         "random_resized_crop:224 (or 224x192, scale=0.08/1, ratio=0.75/1.333), resize:256, "
                         "center_crop:224, hflip (random_horizontal_flip:P), color_jitter:brightness=0.4,contrast=0.4, "
                         "to_tensor (to_tensor:float16), normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225, "
                         "cast:float16; as the Python transform classes (docs/python.md). Image columns are decoded "
                         "to HWC uint8 first")
      ->allow_extra_args(false);
  bench_load->add_option("--image-channels", lb.loader.image_channels, "Channels of decoded images: 3 (RGB), 1 (gray) or 4 (RGBA)")
      ->check(CLI::IsMember({1, 3, 4}))
      ->capture_default_str();
  bench_load->add_flag("--no-dct-scaling", lb_no_dct,
                       "Decode JPEGs at full size even when a crop is much smaller (no DCT-domain downscaling)");
  bench_load->add_flag("--no-jpeg-region", lb_no_region,
                       "Decode whole JPEGs even when a crop needs only part of them (no skipped rows or columns)");
  bench_load->add_option("--trace", lb.trace_path, "Write a Chrome trace (open in Perfetto) of the run to this file");
  bench_load->add_flag("--json", lb_json, "Print one line of JSON");
  // ---- end of bench -----------------------------------------------------------------------------

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (volumes->parsed()) {
    try {
      so.shape = ParseShape(shape);
    } catch (const CLI::ValidationError& e) {
      return app.exit(e);
    }
    so.progress = !no_progress;
    auto r = stoke::SynthVolumes(so);
    if (!r.ok()) return Fail(r.status());
    std::printf("synth volumes: %lld files, %s, %lld positive (%.1f%%), in %.2f s (%.1f MB/s) -> %s\n",
                static_cast<long long>(r->files), Mb(r->bytes).c_str(), static_cast<long long>(r->positives),
                100.0 * r->positives / r->files, r->seconds, r->bytes / 1e6 / r->seconds, so.out_dir.c_str());
    return 0;
  }
  if (images->parsed()) {
    si.progress = !no_progress;
    auto r = stoke::SynthImages(si);
    if (!r.ok()) return Fail(r.status());
    std::printf("synth images: %lld files in %lld classes, %s (%.1f KB each), in %.2f s -> %s\n",
                static_cast<long long>(r->files), static_cast<long long>(si.classes), Mb(r->bytes).c_str(),
                r->bytes / 1e3 / std::max<int64_t>(r->files, 1), r->seconds, si.out_dir.c_str());
    return 0;
  }
  if (npy->parsed()) {
    co.progress = !no_progress;
    try {
      co.decode_images = ParseDecodeSize(co_decode);
    } catch (const CLI::ValidationError& e) {
      return app.exit(e);
    }
    auto r = stoke::ConvertSources(co);
    if (!r.ok()) return Fail(r.status());
    std::printf("convert: %lld files (%s) -> %zu Parquet file%s (%s), %lld rows, in %.2f s (%.1f MB/s)\n",
                static_cast<long long>(r->files_in), Mb(r->bytes_in).c_str(), r->files_out.size(),
                r->files_out.size() == 1 ? "" : "s", Mb(r->bytes_out).c_str(), static_cast<long long>(r->rows), r->seconds,
                r->bytes_in / 1e6 / r->seconds);
    for (const auto& f : r->files_out) std::printf("  %s\n", f.c_str());
    return 0;
  }
  if (ingest->parsed()) {
    ig.progress = !no_progress;
    try {
      ig.decode_images = ParseDecodeSize(ig_decode);
    } catch (const CLI::ValidationError& e) {
      return app.exit(e);
    }
    if (!shard.empty()) {
      long long i = 0, n = 1;
      std::sscanf(shard.c_str(), "%lld/%lld", &i, &n);
      ig.shard_index = i;
      ig.shard_count = n;
    }
    auto r = stoke::IngestSources(ig);
    if (!r.ok()) return Fail(r.status());
    if (r->files_added == 0 && r->files_removed == 0) {
      std::printf("ingest: nothing to do: all %lld source files are in '%s' (version %lld)\n",
                  static_cast<long long>(r->source_files), ig.table_dir.c_str(), static_cast<long long>(r->version));
      return 0;
    }
    const std::string who = ig.shard_count > 1 ? "ingest (shard " + shard + ")" : "ingest";
    std::printf("%s: %lld source files (%lld already in the table), %lld rows (%s) -> %lld data files (%s), "
                "%lld removed, version %lld, in %.2f s (%.1f MB/s)\n",
                who.c_str(), static_cast<long long>(r->source_files), static_cast<long long>(r->skipped), static_cast<long long>(r->rows),
                Mb(r->bytes_in).c_str(), static_cast<long long>(r->files_added), Mb(r->bytes_out).c_str(),
                static_cast<long long>(r->files_removed), static_cast<long long>(r->version), r->seconds,
                r->bytes_in / 1e6 / r->seconds);
    return 0;
  }
  if (optimize->parsed()) {
    oo.progress = !no_progress;
    auto r = stoke::OptimizeTable(oo);
    if (!r.ok()) return Fail(r.status());
    if (r->version < 0) {
      std::printf("optimize: nothing to compact (%lld files)\n", static_cast<long long>(r->files_before));
      return 0;
    }
    std::printf("optimize: %lld files -> %lld files (rewrote %lld files, %lld rows, %s, into %lld), version %lld, in %.2f s\n",
                static_cast<long long>(r->files_before), static_cast<long long>(r->files_after),
                static_cast<long long>(r->files_removed), static_cast<long long>(r->rows_rewritten),
                Mb(r->bytes_rewritten).c_str(), static_cast<long long>(r->files_added), static_cast<long long>(r->version),
                r->seconds);
    return 0;
  }
  if (vacuum->parsed()) {
    vo.progress = !no_progress;
    auto r = stoke::VacuumTable(vo);
    if (!r.ok()) return Fail(r.status());
    for (const auto& f : r->files) std::printf("%s%s\n", vo.dry_run ? "would delete " : "deleted ", f.c_str());
    std::printf("vacuum: %s %zu files (%s); %lld files referenced by retained versions kept\n",
                vo.dry_run ? "would delete" : "deleted", r->files.size(), Mb(r->bytes).c_str(),
                static_cast<long long>(r->referenced_kept));
    return 0;
  }
  if (query->parsed()) {
    if (!query_select.empty()) {
      size_t pos = 0;
      while (pos <= query_select.size()) {
        size_t comma = query_select.find(',', pos);
        qo.select.push_back(query_select.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    }
    qo.format = query_format == "csv"    ? stoke::CatOptions::Format::kCsv
                : query_format == "json" ? stoke::CatOptions::Format::kJson
                                         : stoke::CatOptions::Format::kTable;
    auto r = stoke::QueryTable(qo, std::cout);
    return r.ok() ? 0 : Fail(r.status());
  }
  if (checkpoint->parsed()) {
    stoke::Status s = stoke::CheckpointTable(checkpoint_dir, checkpoint_version);
    if (!s.ok()) return Fail(s);
    std::printf("checkpoint written\n");
    return 0;
  }
  if (history->parsed()) {
    stoke::Status s = stoke::PrintTableHistory(history_dir, history_limit, history_json, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (inspect->parsed()) {
    // A directory (or an object-store prefix holding a Delta log) is a table; anything else a
    // Parquet file.
    std::error_code ec;
    stoke::Status s = std::filesystem::is_directory(inspect_path, ec) || stoke::IsTableDirectory(inspect_path)
                          ? stoke::InspectTable(inspect_path, inspect_version, io.json, std::cout)
                          : stoke::InspectParquetFile(inspect_path, io, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (cat->parsed()) {
    if (!cat_columns.empty()) {
      size_t pos = 0;
      while (pos <= cat_columns.size()) {
        size_t comma = cat_columns.find(',', pos);
        catopt.columns.push_back(cat_columns.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
        if (comma == std::string::npos) break;
        pos = comma + 1;
      }
    }
    catopt.format = cat_format == "csv"    ? stoke::CatOptions::Format::kCsv
                    : cat_format == "json" ? stoke::CatOptions::Format::kJson
                                           : stoke::CatOptions::Format::kTable;
    stoke::Status s = stoke::CatParquetFile(cat_path, catopt, std::cout);
    return s.ok() ? 0 : Fail(s);
  }
  if (bench_load->parsed()) {
    lb.loader.shuffle = lb_shuffle == "none"    ? stoke::LoaderOptions::Shuffle::kNone
                        : lb_shuffle == "block" ? stoke::LoaderOptions::Shuffle::kBlock
                                                : stoke::LoaderOptions::Shuffle::kGlobal;
    lb.loader.backend = lb_backend == "io_uring" ? stoke::LoaderOptions::Backend::kIoUring
                        : lb_backend == "pread"  ? stoke::LoaderOptions::Backend::kPread
                                                 : stoke::LoaderOptions::Backend::kAuto;
    lb.loader.direct = lb_cold;
    lb.loader.verify_crc = !lb_no_crc;
    lb.loader.jpeg_dct_scaling = !lb_no_dct;
    lb.loader.jpeg_region_decode = !lb_no_region;
    for (const auto& text : lb_transforms) {
      auto t = stoke::ParseTransformText(text);
      if (!t.ok()) return Fail(t.status());
      lb.loader.transforms.push_back(std::move(*t));
    }
    auto r = stoke::RunLoadBench(lb);
    if (!r.ok()) return Fail(r.status());
    if (lb_json) {
      std::printf("%s\n", stoke::LoadReportJson(*r).c_str());
    } else {
      std::fputs(stoke::FormatLoadReport(*r).c_str(), stdout);
    }
    return 0;
  }
  if (bench_files->parsed()) {
    auto r = stoke::RunPerFileBench(pf);
    if (!r.ok()) return Fail(r.status());
    if (pf_json) {
      std::printf("%s\n", stoke::PerFileReportJson(*r).c_str());
      return 0;
    }
    std::printf("bench files: %lld samples (%lld files), %lld batches of up to %lld, %d reader thread%s, %s, %.2f s\n",
                static_cast<long long>(r->samples), static_cast<long long>(r->files), static_cast<long long>(r->batches),
                static_cast<long long>(pf.batch_size), r->threads, r->threads == 1 ? "" : "s",
                r->cold ? "O_DIRECT" : "page cache allowed", r->wall_s);
    std::printf("%12s %10s %12s %12s %12s\n", "samples/s", "MB/s", "wait share", "utilisation", "compute ms");
    std::printf("%12.1f %10.1f %12.3f %12.3f %12g\n", r->samples_per_s(), r->mb_per_s(), r->wait_share(),
                r->utilisation(), r->compute_ms);
    return 0;
  }
  return 0;
}
