// The `stoke` command. Converts library errors (Status) to messages and exit codes here, in one place.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "stoke/options.h"
#include "stoke/status.h"
#include "stoke/tools.h"

namespace {

constexpr int kExitError = 1;

int Fail(const stoke::Status& s) {
  std::fprintf(stderr, "stoke: error: %s\n", s.ToString().c_str());
  return kExitError;
}

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

std::vector<int64_t> ParseShape(const std::string& s) {
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
      throw CLI::ValidationError("--shape", "expected sizes separated by commas, e.g. 30,30,10");
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stoke: many small array files in, Parquet/Delta tables out, and batches at storage speed."};
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
  volumes->add_option("--out", so.out_dir, "Output directory (created if missing)")->required();
  volumes->add_option("--shape", shape, "Spatial shape x,y,z")->capture_default_str();
  volumes->add_option("--channels", so.channels, "Channels per voxel (the array is x,y,z,channels)")->capture_default_str();
  volumes->add_option("--seed", so.seed, "Random seed: the same seed gives the same bytes")->capture_default_str();
  volumes->add_option("--label-noise", so.label_noise, "Fraction of labels flipped at random")->capture_default_str();
  volumes->add_option("--threads", so.threads, "Worker threads (0 = one per core)")->capture_default_str();

  // convert npy
  auto* convert = app.add_subcommand("convert", "Convert files into Parquet with one sample per page");
  convert->require_subcommand(1);
  stoke::ConvertOptions co;
  auto* npy = convert->add_subcommand("npy", "Convert a directory of .npy (or .npz) files, joined with a labels CSV");
  npy->add_option("dir", co.source_dir, "Directory holding the .npy or .npz files")->required();
  npy->add_option("--labels", co.labels_csv, "CSV with a 'file' column (the file name) and label/attribute columns");
  npy->add_option("--out", co.out, "Output directory for part files, or one FILE.parquet")->required();
  npy->add_option("--tensor-column", co.tensor_column, "Column name for .npy arrays (.npz members keep their names)")
      ->capture_default_str();
  npy->add_option("--codec", co.codec, "Page codec: zstd, lz4_raw, snappy, gzip, uncompressed")->capture_default_str();
  npy->add_option("--level", co.compression_level, "Codec level (0 = codec default)")->capture_default_str();
  npy->add_option("--target-file-size", co.target_file_bytes, "Size of each output file, e.g. 1GiB, 256MB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  npy->add_option("--row-group-size", co.row_group_bytes, "Size of each row group, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  npy->add_option("--threads", co.threads, "Encoding threads (0 = one per core)")->capture_default_str();

  // inspect
  auto* inspect = app.add_subcommand("inspect", "Describe a Parquet file: schema, row groups, pages, sizes, codecs, statistics");
  std::string inspect_path;
  stoke::InspectOptions io;
  inspect->add_option("file", inspect_path, "Parquet file")->required();
  inspect->add_flag("--pages", io.pages, "List every page of every column chunk");
  inspect->add_flag("--json", io.json, "Print one JSON document");

  // cat
  auto* cat = app.add_subcommand("cat", "Print rows; binary and tensor cells print as md5:<hex> len:<bytes>");
  std::string cat_path, cat_columns, cat_format = "table";
  stoke::CatOptions catopt;
  cat->add_option("file", cat_path, "Parquet file")->required();
  cat->add_option("--columns", cat_columns, "Comma-separated columns (default: all)");
  cat->add_option("--offset", catopt.offset, "First row")->capture_default_str();
  cat->add_option("--limit", catopt.limit, "Number of rows (-1 = all)")->capture_default_str();
  cat->add_option("--format", cat_format, "table, csv or json (one object per line)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();

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
  if (npy->parsed()) {
    co.progress = !no_progress;
    auto r = stoke::ConvertNpyDirectory(co);
    if (!r.ok()) return Fail(r.status());
    std::printf("convert: %lld files (%s) -> %zu Parquet file%s (%s), %lld rows, in %.2f s (%.1f MB/s)\n",
                static_cast<long long>(r->files_in), Mb(r->bytes_in).c_str(), r->files_out.size(),
                r->files_out.size() == 1 ? "" : "s", Mb(r->bytes_out).c_str(), static_cast<long long>(r->rows), r->seconds,
                r->bytes_in / 1e6 / r->seconds);
    for (const auto& f : r->files_out) std::printf("  %s\n", f.c_str());
    return 0;
  }
  if (inspect->parsed()) {
    stoke::Status s = stoke::InspectParquetFile(inspect_path, io, std::cout);
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
  return 0;
}
