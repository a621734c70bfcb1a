// `stoke bench`: the loader on a table, the naive per-file loop on the same samples, and the warm
// memory-copy limit.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "stoke/bench.h"
#include "stoke/loader.h"

namespace stoke::cli {
namespace {

// bench delete-rows: the deletion-vector benchmarks' input.
void AddBenchDeleteRows(CLI::App* bench, std::vector<Command>* out) {
  struct State {
    stoke::DeleteRowsOptions o;
    bool json = false;
  };
  auto s = std::make_shared<State>();
  auto* cmd = bench->add_subcommand(
      "delete-rows",
      "Benchmark input: delete a random share of every data file's rows with deletion vectors (one DV file, one "
      "DELETE commit), as Spark or Databricks would; turns the table's deletionVectors feature on");
  cmd->add_option("table", s->o.table, "Table: a directory or URI")->required();
  cmd->add_option("--fraction", s->o.fraction, "Share of each file's live rows to delete, rounded per file")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--seed", s->o.seed, "Seed of the rows chosen")->capture_default_str();
  cmd->add_flag("--json", s->json, "Print one line of JSON");
  out->push_back({cmd, [s]() -> int {
    auto r = stoke::RunDeleteRows(s->o);
    if (!r.ok()) return Fail(r.status());
    if (s->json) {
      std::printf(R"({"tool":"delete-rows","version":%lld,"files":%lld,"files_touched":%lld,"rows_before":%lld,)"
                  R"("rows_deleted":%lld})"
                  "\n",
                  static_cast<long long>(r->version), static_cast<long long>(r->files),
                  static_cast<long long>(r->files_touched), static_cast<long long>(r->rows_before),
                  static_cast<long long>(r->rows_deleted));
    } else if (r->version < 0) {
      std::printf("nothing to delete: %lld live rows in %lld files\n", static_cast<long long>(r->rows_before),
                  static_cast<long long>(r->files));
    } else {
      std::printf("deleted %lld of %lld rows in %lld of %lld files (version %lld)\n",
                  static_cast<long long>(r->rows_deleted), static_cast<long long>(r->rows_before),
                  static_cast<long long>(r->files_touched), static_cast<long long>(r->files),
                  static_cast<long long>(r->version));
    }
    return 0;
  }});
}

// bench files: the naive per-file baseline.
struct FilesState {
  stoke::PerFileBenchOptions pf;
  bool json = false;
};

int RunBenchFiles(const FilesState& st) {
  const auto& pf = st.pf;
  auto r = stoke::RunPerFileBench(pf);
  if (!r.ok()) return Fail(r.status());
  if (st.json) {
    std::printf("%s\n", stoke::PerFileReportJson(*r).c_str());
    return 0;
  }
  std::printf("bench files: %lld samples (%lld files), %lld batches of up to %lld, %d reader thread%s, %s, %.2f s\n",
              static_cast<long long>(r->samples), static_cast<long long>(r->files), static_cast<long long>(r->batches),
              static_cast<long long>(pf.batch_size), r->threads, r->threads == 1 ? "" : "s",
              r->cold ? "O_DIRECT" : "page cache allowed", r->wall_seconds);
  std::printf("%12s %10s %12s %12s %12s\n", "samples/s", "MB/s", "wait share", "utilisation", "compute ms");
  std::printf("%12.1f %10.1f %12.3f %12.3f %12g\n", r->samples_per_second(), r->mb_per_second(), r->wait_share(),
              r->utilisation(), r->compute_ms);
  return 0;
}

void AddBenchFiles(CLI::App* bench, std::vector<Command>* out) {
  auto s = std::make_shared<FilesState>();
  auto& pf = s->pf;
  auto& pf_json = s->json;
  auto* bench_files = bench->add_subcommand(
      "files", "Baseline: read a directory of .npy files the naive way (open, read, close, parse per sample) into batches");
  bench_files->add_option("dir", pf.dir, "Directory or URI prefix of .npy files (e.g. from `stoke synth volumes`); on an object store one GET per file")->required();
  bench_files->add_option("--batch-size", pf.batch_size, "Samples per batch")->check(Positive())->capture_default_str();
  bench_files->add_option("--epochs", pf.epochs, "Epochs (each a new seeded shuffle of all files)")
      ->check(Positive())
      ->capture_default_str();
  bench_files->add_option("--batches", pf.batches, "Stop after N batches, crossing epochs as needed (0 = whole epochs)")
      ->check(NonNegative())
      ->capture_default_str();
  bench_files->add_option("--seed", pf.seed, "Shuffle seed")->capture_default_str();
  bench_files->add_option("--compute-ms", pf.compute_ms, "Emulated compute: the consumer sleeps this long per batch")
      ->check(NonNegative())
      ->capture_default_str();
  bench_files->add_option("--threads", pf.threads, "Reader threads (1 = one loop that reads, then computes)")
      ->check(Positive())
      ->capture_default_str();
  bench_files->add_flag("--cold", pf.cold, "Read with O_DIRECT, bypassing the page cache");
  bench_files->add_flag("--json", pf_json, "Print one line of JSON");
  out->push_back({bench_files, [s]() -> int { return RunBenchFiles(*s); }});
}

// bench memcpy: the warm limit, one memory copy per sample.
struct MemcpyState {
  stoke::MemcpyBenchOptions o;
  bool json = false;
};

int RunBenchMemcpy(const MemcpyState& st) {
  auto r = stoke::RunMemcpyBench(st.o);
  if (!r.ok()) return Fail(r.status());
  if (st.json) {
    std::printf("%s\n", stoke::MemcpyReportJson(*r).c_str());
    return 0;
  }
  std::printf("bench memcpy: column '%s', %lld samples in %lld batches of %lld, %d thread%s, %.2f s; copies %s of "
              "%.0f bytes; %.0f %% of the files' pages were in the page cache\n",
              r->column.c_str(), static_cast<long long>(r->samples), static_cast<long long>(r->batches),
              static_cast<long long>(r->batch_size), r->threads, r->threads == 1 ? "" : "s", r->wall_seconds,
              r->copies.c_str(), r->sample_bytes_mean, 100 * r->resident_share);
  std::printf("%14s %10s\n", "samples/s", "MB/s");
  std::printf("%14.1f %10.1f\n", r->samples_per_second(), r->mb_per_second());
  return 0;
}

void AddBenchMemcpy(CLI::App* bench, std::vector<Command>* out) {
  auto s = std::make_shared<MemcpyState>();
  auto& o = s->o;
  auto* cmd = bench->add_subcommand(
      "memcpy", "Reference: the warm limit on a local table, one memory copy per sample out of its memory-mapped "
                "data files in the loader's shuffled order (no system call, no check), into batch buffers");
  cmd->add_option("table", o.table_dir, "Local table directory (read it into the page cache first)")->required();
  cmd->add_option("--column", o.column, "Tensor or blob column to copy (default: the first)");
  cmd->add_option("--batch-size", o.batch_size, "Samples per batch")->check(Positive())->capture_default_str();
  cmd->add_option("--threads", o.threads, "Copying threads (0 = one per available CPU, as the loader's workers)")
      ->check(NonNegative())
      ->capture_default_str();
  cmd->add_option("--seconds", o.seconds, "Start batches for this long")->check(Positive())->capture_default_str();
  cmd->add_option("--seed", o.seed, "Shuffle seed (epoch 0's global order, as the loader's)")->capture_default_str();
  cmd->add_flag("--json", s->json, "Print one line of JSON");
  out->push_back({cmd, [s]() -> int { return RunBenchMemcpy(*s); }});
}

// bench load: the loader as a training loop drives it.
struct LoadState {
  stoke::LoadBenchOptions lb;
  std::string shuffle = std::string(stoke::ShuffleName(stoke::LoaderOptions{}.shuffle));
  std::string backend = std::string(stoke::BackendName(stoke::LoaderOptions{}.backend));
  bool json = false;
  bool cold = false;
  bool no_crc = false;
  bool no_dct = false;
  bool no_region = false;
  std::string transforms_on = std::string(stoke::TransformsOnName(stoke::LoaderOptions{}.transforms_on));
  std::vector<std::string> transforms;
  std::string columns;              // --columns a,b
  std::vector<std::string> shapes;  // --shape NAME=D1,D2,...
  std::vector<std::string> pads;    // --pad NAME=L1,L2,...
  std::vector<std::string> fills;   // --fill NAME=VALUE
};

// --shape NAME=D1,D2,... (the array column NAME delivered as [D1, D2, ...]) or --pad NAME=L1,L2,...
// (its rows padded to [L1, L2, ...]): `flag` says which.
Status ParseShapeOption(std::string_view flag, const std::string& text, std::map<std::string, std::vector<int64_t>>* out) {
  const Status bad = Status::InvalidArgument(
      fmt::format("{} '{}': expected NAME=D1,D2,... (e.g. volume=30,30,10,10)", flag, text));
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return bad;
  std::vector<int64_t> dims;
  try {
    dims = ParseShape(text.substr(eq + 1));
  } catch (const CLI::ValidationError&) {
    return bad;
  }
  if (std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; })) return bad;
  (*out)[text.substr(0, eq)] = std::move(dims);
  return Status::OK();
}

// --fill NAME=VALUE: null elements (and padding) of the array column NAME take VALUE.
Status ParseFillOption(const std::string& text, std::map<std::string, double>* out) {
  const size_t eq = text.find('=');
  const std::string value = eq == std::string::npos ? "" : text.substr(eq + 1);
  char* end = nullptr;
  const double v = value.empty() ? 0 : std::strtod(value.c_str(), &end);
  if (eq == 0 || value.empty() || end != value.c_str() + value.size()) {
    return Status::InvalidArgument(fmt::format("--fill '{}': expected NAME=VALUE (e.g. tokens=-1)", text));
  }
  (*out)[text.substr(0, eq)] = v;
  return Status::OK();
}

// --shape, --pad and --fill into the loader's options.
Status ParseArrayOptions(const LoadState& st, stoke::LoaderOptions* o) {
  for (const auto& text : st.shapes) STOKE_RETURN_IF_ERROR(ParseShapeOption("--shape", text, &o->shapes));
  for (const auto& text : st.pads) STOKE_RETURN_IF_ERROR(ParseShapeOption("--pad", text, &o->pad));
  for (const auto& text : st.fills) STOKE_RETURN_IF_ERROR(ParseFillOption(text, &o->fill));
  return Status::OK();
}

int RunBenchLoad(LoadState& st) {
  auto& lb = st.lb;
  auto shuffle = stoke::ParseShuffle(st.shuffle);
  if (!shuffle.ok()) return Fail(shuffle.status());
  lb.loader.shuffle = *shuffle;
  auto backend = stoke::ParseBackend(st.backend);
  if (!backend.ok()) return Fail(backend.status());
  lb.loader.backend = *backend;
  lb.loader.direct = st.cold;
  lb.loader.verify_crc = !st.no_crc;
  lb.loader.jpeg_dct_scaling = !st.no_dct;
  lb.loader.jpeg_region_decode = !st.no_region;
  auto transforms_on = stoke::ParseTransformsOn(st.transforms_on);
  if (!transforms_on.ok()) return Fail(transforms_on.status());
  lb.loader.transforms_on = *transforms_on;
  if (Status parsed = ParseArrayOptions(st, &lb.loader); !parsed.ok()) return Fail(parsed);
  if (!st.columns.empty()) lb.loader.columns = ColumnList(st.columns);
  for (const auto& text : st.transforms) {
    auto t = stoke::ParseTransformText(text);
    if (!t.ok()) return Fail(t.status());
    lb.loader.transforms.push_back(std::move(*t));
  }
  auto r = stoke::RunLoadBench(lb);
  if (!r.ok()) return Fail(r.status());
  if (st.json) {
    std::printf("%s\n", stoke::LoadReportJson(*r).c_str());
  } else {
    std::fputs(stoke::FormatLoadReport(*r).c_str(), stdout);
  }
  return 0;
}

// bench load's transforms and the options of image columns.
void AddBenchLoadImageOptions(CLI::App* bench_load, LoadState* s) {
  bench_load->add_option("--transform", s->transforms,
                         "A transform, in order, repeatable: KIND[:VALUE][,key=value...], e.g. "
                         "random_resized_crop:224 (or 224x192, scale=0.08/1, ratio=0.75/1.333), resize:256, "
                         "center_crop:224, hflip (random_horizontal_flip:P), color_jitter:brightness=0.4,contrast=0.4, "
                         "to_tensor (to_tensor:float16), normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225, "
                         "cast:float16; as the Python transform classes (docs/python.md). Image columns are decoded "
                         "to HWC uint8 first")
      ->allow_extra_args(false);
  bench_load->add_option("--image-channels", s->lb.loader.image_channels, "Channels of decoded images: 3 (RGB), 1 (gray) or 4 (RGBA)")
      ->check(CLI::IsMember({1, 3, 4}))
      ->capture_default_str();
  bench_load->add_flag("--no-dct-scaling", s->no_dct,
                       "Decode JPEGs at full size even when a crop is much smaller (no DCT-domain downscaling)");
  bench_load->add_flag("--no-jpeg-region", s->no_region,
                       "Decode whole JPEGs even when a crop needs only part of them (no skipped rows or columns)");
  bench_load->add_option("--transforms-on", s->transforms_on,
                         "Where image columns are resampled and normalized: cpu (the decode workers) or cuda (the "
                         "workers decode and crop; each batch's images are finished on the GPU, copy included)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
}

void AddBenchLoad(CLI::App* bench, std::vector<Command>* out) {
  auto s = std::make_shared<LoadState>();
  auto& lb = s->lb;
  auto* bench_load = bench->add_subcommand(
      "load", "The loader on a table: samples/s, MB/s, consumer wait share and accelerator utilisation");
  bench_load->add_option("table", lb.table_dir, kReadTableHelp)->required();
  bench_load->add_option("--batch-size", lb.loader.batch_size, "Samples per batch")->check(Positive())->capture_default_str();
  bench_load->add_option("--epochs", lb.epochs, "Epochs (each a new shuffle)")->check(Positive())->capture_default_str();
  bench_load->add_option("--batches", lb.batches, "Stop after N measured batches, crossing epochs as needed (0 = whole epochs)")
      ->check(NonNegative())
      ->capture_default_str();
  bench_load->add_option("--warmup-batches", lb.warmup_batches, "Batches consumed before the clock starts")
      ->check(NonNegative())
      ->capture_default_str();
  bench_load->add_option("--compute-ms", lb.compute_ms, "Emulated accelerator time per batch (the consumer sleeps)")
      ->check(NonNegative())
      ->capture_default_str();
  bench_load->add_option("--shuffle", s->shuffle, "global, block or none")
      ->check(CLI::IsMember({"global", "block", "none"}))
      ->capture_default_str();
  bench_load->add_option("--shuffle-buffer", lb.loader.shuffle_buffer, "Rows in the block shuffle's buffer (the rows mixed at once)")
      ->check(Positive())
      ->capture_default_str();
  bench_load->add_option("--seed", lb.loader.seed, "Shuffle seed")->capture_default_str();
  bench_load->add_option("--rank", lb.loader.rank,
                         "This process's shard of each epoch, in [0, --world-size): a job's ranks, on one machine or "
                         "several, run one `bench load` each")
      ->check(NonNegative())
      ->capture_default_str();
  bench_load->add_option("--world-size", lb.loader.world_size, "Processes that read the table together, each a disjoint shard")
      ->check(Positive())
      ->capture_default_str();
  bench_load->add_option("--where", lb.loader.where, "Only rows matching this predicate (as in `stoke query`)");
  bench_load->add_option("--prefetch-bytes", lb.loader.prefetch_bytes,
                         "Memory budget for reads in flight and batch buffers, e.g. 512MiB, 64MB")
      ->transform(CLI::AsSizeValue(false))
      ->check(Positive())
      ->capture_default_str();
  bench_load->add_option("--threads", lb.loader.threads, "Decode/transform workers (0 = one per available CPU)")
      ->check(NonNegative())
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
  bench_load->add_option("--backend", s->backend,
                         "auto (io_uring; cached pages read at once by the loader's threads: out of a mapping at any size, else "
                         "below 64 KiB; the rest of 64 KiB to 1 MiB on threads of their own), io_uring or pread")
      ->check(CLI::IsMember({"auto", "io_uring", "pread"}))
      ->capture_default_str();
  bench_load->add_flag("--cold", s->cold, "O_DIRECT reads: the page cache plays no part");
  bench_load->add_flag("--no-crc", s->no_crc, "Skip the pages' CRC-32 check");
  bench_load->add_option("--columns", s->columns, "Comma-separated columns to load (default: all)");
  bench_load->add_option("--shape", s->shapes,
                         "NAME=D1,D2,...: deliver the array column NAME as [D1, D2, ...] (a row's values reshaped; "
                         "repeatable)");
  bench_load->add_option("--pad", s->pads,
                         "NAME=L1,L2,...: pad every row of the array column NAME to [L1, L2, ...] (one length per "
                         "nesting level; ragged, empty and null lists filled up with --fill's value or 0; repeatable)");
  bench_load->add_option("--fill", s->fills,
                         "NAME=VALUE: null elements (and padding) of the array column NAME take VALUE (repeatable)");
  AddBenchLoadImageOptions(bench_load, s.get());
  bench_load->add_option("--trace", lb.trace_path, "Write a Chrome trace (open in Perfetto) of the run to this file");
  bench_load->add_flag("--json", s->json, "Print one line of JSON");
  out->push_back({bench_load, [s]() -> int { return RunBenchLoad(*s); }});
}

}  // namespace

void AddBenchCommands(CLI::App& app, const Context& /*ctx*/, std::vector<Command>* out) {
  // One group; each benchmark is a subcommand of `bench`.
  auto* bench = app.add_subcommand("bench", "Benchmarks: the loader, and baselines on the same samples");
  bench->require_subcommand(1);
  AddBenchFiles(bench, out);
  AddBenchLoad(bench, out);
  AddBenchMemcpy(bench, out);
  AddBenchDeleteRows(bench, out);
}

}  // namespace stoke::cli
