// `stoke synth`, `stoke convert` and `stoke ingest`: the commands that read source files.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "stoke/codec.h"
#include "stoke/ingest.h"
#include "stoke/source_format.h"
#include "stoke/tools.h"

namespace stoke::cli {
namespace {

constexpr const char* kSourceHelp =
    "Sources: a directory or one file (a path or a URI). The kind comes from the file names: .npy or .npz files "
    "(one sample each), HDF5 .h5/.hdf5 files (local only; datasets become columns, root attributes scalar columns; "
    "see --hdf5-samples), or JPEG/PNG images (.jpg/.jpeg/.png) in the ImageFolder layout ROOT/<class>/<image> "
    "(a `label` column from the class directories, class names in the table metadata) or anywhere under ROOT with "
    "--labels; images are stored as their encoded bytes, one per page, with width, height and channels columns. "
    "A Delta table, a glob or Parquet files (*.parquet, Hive key=value directories) are a Parquet source: one row "
    "per sample, every column kept (arrays of numbers and .npy cells as tensors, JPEG/PNG cells and {bytes, path} "
    "structs as images). Kinds cannot be mixed.";
constexpr const char* kHdf5SamplesHelp =
    "HDF5 layout: axis0 (a file holds N samples along axis 0 of its datasets: rank-1 datasets become scalar "
    "columns, rank >= 2 tensor columns of shape dims[1:], plus an `index` column), file (a file is one sample: each "
    "dataset a tensor column of its full shape, rank-0 datasets scalar columns), or auto (axis0 when the first "
    "file's datasets of rank >= 1 share their first extent, else file)";
constexpr const char* kFormatHelp =
    "Source kind: auto (a table or a glob is parquet; else detected from the file names), or npy, npz, hdf5, "
    "images or parquet to force one";
constexpr const char* kCodecHelp =
    "Page codec: auto (per column chunk, zstd where it saves at least 10 % of the bytes; for tensor and blob "
    "columns only where their pages average 64 KiB or more and it saves at least 90 %, as decoding costs the "
    "loader more than smaller savings; else uncompressed), or one of zstd, lz4_raw, snappy, gzip, uncompressed "
    "for every chunk";

// --format and --hdf5-samples as typed, parsed by the library's one parser of each.
struct SourceNames {
  SourceNames(SourceFormat f, Hdf5Samples h) : format(SourceFormatName(f)), hdf5_samples(Hdf5SamplesName(h)) {}
  Status Parse(SourceFormat* f, Hdf5Samples* h) const {
    STOKE_ASSIGN_OR_RETURN(*f, ParseSourceFormat(format));
    STOKE_ASSIGN_OR_RETURN(*h, ParseHdf5Samples(hdf5_samples));
    return Status::OK();
  }
  std::string format;
  std::string hdf5_samples;
};

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

namespace {

void AddSynth(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  struct State {
    SynthVolumesOptions so;
    std::string shape = "30,30,10";
    SynthImagesOptions si;
  };
  auto s = std::make_shared<State>();
  auto& so = s->so;
  auto& shape = s->shape;
  auto& si = s->si;
  auto* synth = app.add_subcommand("synth", "Generate seed workloads");
  synth->require_subcommand(1);
  auto* volumes = synth->add_subcommand(
      "volumes", "Write N float32 volumes as .npy files (one per sample) plus labels.csv (file,label,x,y,split)");
  volumes->add_option("--samples", so.samples, "Number of volumes")->capture_default_str();
  volumes->add_option("--out", so.out_dir, "Output directory or URI prefix (created if missing)")->required();
  volumes->add_option("--shape", shape, "Spatial shape x,y,z")->capture_default_str();
  volumes->add_option("--channels", so.channels, "Channels per voxel (the array is x,y,z,channels)")->capture_default_str();
  volumes->add_option("--seed", so.seed, "Random seed: the same seed gives the same bytes")->capture_default_str();
  volumes->add_option("--label-noise", so.label_noise, "Fraction of labels flipped at random")->capture_default_str();
  volumes->add_option("--threads", so.threads, "Worker threads (0 = one per available CPU)")->capture_default_str();
  volumes->add_flag("--parquet", so.parquet,
                    "Write one file, volumes.parquet, as Spark writes such a table instead: id, label, x, y, split "
                    "and `volume`, an array<float> of the values (snappy, ~1 MiB pages, ~128 MiB row groups)");

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
  images->add_option("--threads", si.threads, "Worker threads (0 = one per available CPU)")->capture_default_str();

  out->push_back({volumes, [s, &ctx]() -> int {
    auto& so = s->so;
    auto& shape = s->shape;
    try {
      so.shape = ParseShape(shape);
    } catch (const CLI::ValidationError& e) {
      return ctx.app->exit(e);
    }
    so.progress = !ctx.no_progress;
    auto r = SynthVolumes(so);
    if (!r.ok()) return Fail(r.status());
    std::printf("synth volumes: %lld %s, %s, %lld positive (%.1f%%), in %.2f s (%.1f MB/s) -> %s\n",
                static_cast<long long>(r->files), so.parquet ? "volumes" : "files", Mb(r->bytes).c_str(), static_cast<long long>(r->positives),
                100.0 * r->positives / r->files, r->seconds, r->bytes / 1e6 / r->seconds, so.out_dir.c_str());
    return 0;
  }});
  out->push_back({images, [s, &ctx]() -> int {
    auto& si = s->si;
    si.progress = !ctx.no_progress;
    auto r = SynthImages(si);
    if (!r.ok()) return Fail(r.status());
    std::printf("synth images: %lld files in %lld classes, %s (%.1f KB each), in %.2f s -> %s\n",
                static_cast<long long>(r->files), static_cast<long long>(si.classes), Mb(r->bytes).c_str(),
                r->bytes / 1e3 / std::max<int64_t>(r->files, 1), r->seconds, si.out_dir.c_str());
    return 0;
  }});
}

void AddConvert(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  struct State {
    ConvertOptions co;
    std::string co_decode;
    std::string co_codec = std::string(CodecName(ConvertOptions{}.codec));
    SourceNames names{ConvertOptions{}.format, ConvertOptions{}.hdf5_samples};
  };
  auto s = std::make_shared<State>();
  auto& co = s->co;
  auto& co_decode = s->co_decode;
  auto* convert = app.add_subcommand("convert", "Convert source files into Parquet with one sample per page");
  convert->require_subcommand(1);
  auto* npy = convert->add_subcommand("npy", std::string("Convert source files (.npy/.npz, HDF5 or images; the kind is "
                                                         "detected, `convert hdf5` and `convert images` are the same "
                                                         "command), joined with a labels CSV. ") + kSourceHelp);
  npy->alias("hdf5");
  npy->alias("images");
  npy->add_option("src", co.source_dir, "Source directory or file (a path or a URI prefix)")->required();
  npy->add_option("--labels", co.labels_csv,
                  "CSV with a 'file' column (the file's path relative to the source) and label/attribute columns");
  npy->add_option("--format", s->names.format, kFormatHelp)->capture_default_str();
  npy->add_option("--dataset", co.datasets, "HDF5: a dataset to convert (repeatable; default: all)");
  npy->add_option("--decode", co_decode, kDecodeHelp);
  npy->add_option("--hdf5-samples", s->names.hdf5_samples, kHdf5SamplesHelp)->capture_default_str();
  npy->add_option("--out", co.out, "Output directory (or URI prefix) for part files, or one FILE.parquet")->required();
  npy->add_option("--tensor-column", co.tensor_column, "Column name for .npy arrays (.npz members keep their names)")
      ->capture_default_str();
  npy->add_option("--codec", s->co_codec, kCodecHelp)->capture_default_str();
  npy->add_option("--level", co.compression_level, "Codec level (0 = codec default)")->capture_default_str();
  npy->add_option("--target-file-size", co.target_file_bytes, "Size of each output file, e.g. 1GiB, 256MB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  npy->add_option("--row-group-size", co.row_group_bytes, "Size of each row group, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  npy->add_option("--threads", co.threads, "Encoding threads (0 = one per available CPU)")->capture_default_str();

  out->push_back({npy, [s, &ctx]() -> int {
    auto& co = s->co;
    auto& co_decode = s->co_decode;
    co.progress = !ctx.no_progress;
    try {
      co.decode_images = ParseDecodeSize(co_decode);
    } catch (const CLI::ValidationError& e) {
      return ctx.app->exit(e);
    }
    auto codec = ParseCodec(s->co_codec);
    if (!codec.ok()) return Fail(codec.status());
    co.codec = *codec;
    if (Status st = s->names.Parse(&co.format, &co.hdf5_samples); !st.ok()) return Fail(st);
    auto r = ConvertSources(co);
    if (!r.ok()) return Fail(r.status());
    std::printf("convert: %lld files (%s) -> %zu Parquet file%s (%s), %lld rows, in %.2f s (%.1f MB/s)\n",
                static_cast<long long>(r->files_in), Mb(r->bytes_in).c_str(), r->files_out.size(),
                r->files_out.size() == 1 ? "" : "s", Mb(r->bytes_out).c_str(), static_cast<long long>(r->rows), r->seconds,
                r->bytes_in / 1e6 / r->seconds);
    for (const auto& f : r->files_out) std::printf("  %s\n", f.c_str());
    return 0;
  }});
}

// The state of `stoke ingest`: its options as parsed.
struct IngestState {
  IngestOptions ig;
  std::string ig_decode;
  std::string ig_mode = std::string(IngestModeName(IngestOptions{}.mode));
  std::string ig_codec = std::string(CodecName(IngestOptions{}.codec));
  std::string on_changed = std::string(OnChangedName(IngestOptions{}.on_changed));
  SourceNames names{IngestOptions{}.format, IngestOptions{}.hdf5_samples};
  std::string shard;
};

CLI::App* AddIngestOptions(CLI::App& app, IngestState* s) {
  auto& ig = s->ig;
  auto& ig_decode = s->ig_decode;
  auto& shard = s->shard;
  auto* ingest = app.add_subcommand("ingest", std::string("Ingest source files (.npy/.npz, HDF5 or images) into a Delta "
                                                          "table (created if missing). ") + kSourceHelp);
  ingest->add_option("src", ig.source_dir, "Source directory or file (a path or a URI prefix)")->required();
  ingest->add_option("--table", ig.table_dir, kTableHelp)->required();
  ingest->add_option("--labels", ig.labels_csv,
                     "CSV with a 'file' column (the file's path relative to the source) and label/attribute columns");
  ingest->add_option("--format", s->names.format, kFormatHelp)->capture_default_str();
  ingest->add_option("--dataset", ig.datasets, "HDF5: a dataset to ingest (repeatable; default: all)");
  ingest->add_option("--decode", ig_decode, kDecodeHelp);
  ingest->add_option("--hdf5-samples", s->names.hdf5_samples, kHdf5SamplesHelp)->capture_default_str();
  ingest->add_option("--mode", s->ig_mode,
                     "append (adds the files not yet in the table, all samples of a file at once; re-running resumes) or "
                     "overwrite. A file is in the table when a row records its location (absolute path or URI) and "
                     "version (size and modification time; the ETag on object stores)")
      ->check(CLI::IsMember({"append", "overwrite"}))
      ->capture_default_str();
  ingest->add_option("--on-changed", s->on_changed,
                     "Appending, a source file whose location is in the table with another version (it changed after "
                     "it was ingested): skip (report it, leave it out), append (add the new version as new rows) or "
                     "error (stop before writing anything)")
      ->check(CLI::IsMember({"skip", "append", "error"}))
      ->capture_default_str();
  ingest->add_option("--tensor-column", ig.tensor_column, "Column name for .npy arrays")->capture_default_str();
  ingest->add_option("--codec", s->ig_codec, kCodecHelp)->capture_default_str();
  ingest->add_option("--target-file-size", ig.target_file_bytes, "Data file size, e.g. 1GiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("1GiB");
  ingest->add_option("--row-group-size", ig.row_group_bytes, "Row group size, e.g. 128MiB")
      ->transform(CLI::AsSizeValue(false))
      ->default_str("128MiB");
  ingest->add_option("--rows-per-file", ig.rows_per_file, "Exactly N rows per data file (1 = one data file per sample)");
  ingest->add_option("--partition-by", ig.partition_by,
                     "A labels column to partition by (directories <column>=<value>/; appends use the table's)");
  ingest->add_option("--threads", ig.threads, "Encoding threads (0 = one per available CPU)")->capture_default_str();
  ingest->add_option("--shard", shard,
                     "INDEX/COUNT: ingest only shard INDEX (0-based) of COUNT, a contiguous part of the sorted source "
                     "listing; COUNT processes (on any machines) ingest into one table concurrently, each resumable "
                     "on its own, each writing its data files in the table's directory shard-INDEX-of-COUNT")
      ->check([](const std::string& v) -> std::string {
        long long i = 0, n = 0;
        char extra = 0;
        if (std::sscanf(v.c_str(), "%lld/%lld%c", &i, &n, &extra) != 2 || n < 1 || i < 0 || i >= n) {
          return "--shard must be INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/4";
        }
        return "";
      });
  return ingest;
}

// One line per changed source file (IngestReport lists the first kMaxChangedFilesListed), on stderr.
void PrintChangedFiles(const std::string& who, OnChanged on_changed, const IngestReport& r) {
  const char* what = on_changed == OnChanged::kAppend ? "appended the new version of" : "skipped";
  for (const ChangedSourceFile& f : r.changed_files) {
    std::fprintf(stderr, "%s: %s changed file '%s' (the table holds %s, the file is now %s)\n", who.c_str(), what,
                 f.location.c_str(), f.table_version.c_str(), f.source_version.c_str());
  }
  if (r.changed > static_cast<int64_t>(r.changed_files.size())) {
    std::fprintf(stderr, "%s: ... and %lld more changed files\n", who.c_str(),
                 static_cast<long long>(r.changed - static_cast<int64_t>(r.changed_files.size())));
  }
  if (r.changed > 0 && on_changed == OnChanged::kSkip) {
    std::fprintf(stderr, "%s: --on-changed append adds the new versions of changed files\n", who.c_str());
  }
}

int RunIngest(IngestState* s, const Context& ctx) {
  auto& ig = s->ig;
  auto& ig_decode = s->ig_decode;
  auto& shard = s->shard;
  ig.progress = !ctx.no_progress;
  try {
    ig.decode_images = ParseDecodeSize(ig_decode);
  } catch (const CLI::ValidationError& e) {
    return ctx.app->exit(e);
  }
  auto mode = ParseIngestMode(s->ig_mode);  // CLI11 has checked the name
  if (!mode.ok()) return Fail(mode.status());
  ig.mode = *mode;
  auto codec = ParseCodec(s->ig_codec);
  if (!codec.ok()) return Fail(codec.status());
  ig.codec = *codec;
  auto on_changed = ParseOnChanged(s->on_changed);
  if (!on_changed.ok()) return Fail(on_changed.status());
  ig.on_changed = *on_changed;
  if (Status st = s->names.Parse(&ig.format, &ig.hdf5_samples); !st.ok()) return Fail(st);
  if (!shard.empty()) {
    long long i = 0, n = 1;
    std::sscanf(shard.c_str(), "%lld/%lld", &i, &n);
    ig.shard_index = i;
    ig.shard_count = n;
  }
  auto r = IngestSources(ig);
  if (!r.ok()) return Fail(r.status());
  const std::string who = ig.shard_count > 1 ? "ingest (shard " + shard + ")" : "ingest";
  PrintChangedFiles(who, ig.on_changed, *r);
  const std::string counts = fmt::format("{} source files: {} new, {} already in the table, {} changed{}", r->source_files,
                                         r->new_files, r->skipped, r->changed,
                                         r->changed == 0 ? "" : ig.on_changed == OnChanged::kAppend ? " (appended)" : " (skipped)");
  if (r->files_added == 0 && r->files_removed == 0) {
    std::printf("%s: nothing to do: %s; table '%s' stays at version %lld\n", who.c_str(), counts.c_str(),
                ig.table_dir.c_str(), static_cast<long long>(r->version));
    return 0;
  }
  std::printf("%s: %s; %lld rows (%s) -> %lld data files (%s), %lld removed, version %lld, in %.2f s (%.1f MB/s)\n",
              who.c_str(), counts.c_str(), static_cast<long long>(r->rows), Mb(r->bytes_in).c_str(),
              static_cast<long long>(r->files_added), Mb(r->bytes_out).c_str(), static_cast<long long>(r->files_removed),
              static_cast<long long>(r->version), r->seconds, r->bytes_in / 1e6 / r->seconds);
  return 0;
}

void AddIngest(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  auto s = std::make_shared<IngestState>();
  CLI::App* ingest = AddIngestOptions(app, s.get());
  out->push_back({ingest, [s, &ctx]() -> int { return RunIngest(s.get(), ctx); }});
}

}  // namespace

void AddSourceCommands(CLI::App& app, const Context& ctx, std::vector<Command>* out) {
  AddSynth(app, ctx, out);
  AddConvert(app, ctx, out);
  AddIngest(app, ctx, out);
}

}  // namespace stoke::cli
