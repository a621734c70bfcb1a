// `stoke bench load`: the loader driven as a training loop would drive it (include/stoke/bench.h).
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "core/clock.h"
#include "core/process_memory.h"
#include "stoke/bench.h"
#include "stoke/gpu_images.h"

namespace stoke {
namespace {

// Sleeps `ms` milliseconds (the emulated accelerator) and returns the seconds actually spent.
double EmulateCompute(double ms) {
  if (ms <= 0) return 0;
  const int64_t t0 = NowNanos();
  std::this_thread::sleep_for(std::chrono::nanoseconds(static_cast<int64_t>(ms * 1e6)));
  return (NowNanos() - t0) * 1e-9;
}

// The peak of the process's own resident memory (AnonymousResidentBytes), sampled once every
// kEvery batches and at the end: /proc is read a few times a second at most.
class PeakAnonymousRss {
 public:
  static constexpr int64_t kEvery = 16;
  void Batch() {
    if (++batches_ % kEvery == 0) Sample();
  }
  void Sample() { peak_ = std::max(peak_, AnonymousResidentBytes()); }
  int64_t peak() const { return peak_; }

 private:
  int64_t batches_ = 0;
  int64_t peak_ = 0;
};

}  // namespace

Result<LoadBenchReport> RunLoadBench(const LoadBenchOptions& options) {
  if (options.epochs < 1) return Status::InvalidArgument(fmt::format("`epochs` must be >= 1, got {}", options.epochs));
  if (options.batches < 0 || options.warmup_batches < 0) {
    return Status::InvalidArgument("`batches` and `warmup_batches` must be >= 0");
  }
  if (options.compute_ms < 0) return Status::InvalidArgument("`compute_ms` must be >= 0");
  LoadBenchReport report;
  report.options = options;
  report.compute_ms = options.compute_ms;
  LoaderOptions lo = options.loader;
  if (!options.trace_path.empty()) lo.trace = true;

  const int64_t t_open = NowNanos();
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader, Loader::Open(options.table_dir, lo));
  report.open_seconds = (NowNanos() - t_open) * 1e-9;
  report.index_from_cache = loader->index_from_cache();
  report.table_rows = loader->num_rows();
  report.shuffle = loader->shuffle_quality();
  report.global_shuffle = loader->global_shuffle_quality();

  // Batches to consume: warm-up first, then the measured ones; epochs follow one another.
  const bool by_batches = options.batches > 0;
  const int64_t measured_target = by_batches ? options.batches : -1;
  int64_t epoch = 0;
  int64_t warm_left = options.warmup_batches;
  int64_t bytes_at_start = 0;
  double wait_at_start = 0;
  int64_t t_start = 0;
  auto begin_measuring = [&] {
    const LoaderStats st = loader->stats();
    bytes_at_start = st.bytes_read;
    wait_at_start = st.wait_seconds;
    t_start = NowNanos();
  };
  if (warm_left == 0) begin_measuring();
  GpuImageFinisher finisher;
  PeakAnonymousRss anonymous;
  for (;;) {
    auto next = loader->Next();
    if (!next.ok()) return next.status();
    anonymous.Batch();
    if (!next->has_value()) {
      ++epoch;
      if (!by_batches && epoch >= options.epochs) break;
      if (by_batches && loader->samples_per_epoch() == 0) break;
      STOKE_RETURN_IF_ERROR(loader->SetEpoch(epoch));
      continue;
    }
    if (warm_left > 0) {
      STOKE_RETURN_IF_ERROR(finisher.Finish(**next));
      next->reset();
      EmulateCompute(options.compute_ms);
      if (--warm_left == 0) begin_measuring();
      continue;
    }
    ++report.batches;
    report.samples += (*next)->size();
    STOKE_RETURN_IF_ERROR(finisher.Finish(**next));  // transforms_on cuda: the images, on the device
    next->reset();  // the batch goes back to the loader before the compute, as after a copy to the device
    report.compute_seconds += EmulateCompute(options.compute_ms);
    if (measured_target > 0 && report.batches >= measured_target) break;
  }
  const int64_t t_end = NowNanos();
  report.stats = loader->stats();
  report.wall_seconds = t_start == 0 ? 0 : (t_end - t_start) * 1e-9;
  report.bytes_read = report.stats.bytes_read - bytes_at_start;
  report.wait_seconds = report.stats.wait_seconds - wait_at_start;
  report.page_bytes_mean = report.samples > 0 ? static_cast<double>(report.bytes_read) / report.samples : 0;
  struct rusage ru {};
  if (getrusage(RUSAGE_SELF, &ru) == 0) report.max_rss_bytes = static_cast<int64_t>(ru.ru_maxrss) * 1024;
  anonymous.Sample();
  report.max_anonymous_rss_bytes = anonymous.peak();
  if (!options.trace_path.empty()) STOKE_RETURN_IF_ERROR(loader->WriteTrace(options.trace_path));
  return report;
}

std::string LoadReportJson(const LoadBenchReport& r) {
  const LoaderOptions& o = r.options.loader;
  std::string stages;  // busy seconds per stage, summed over threads
  for (const auto& [stage, secs] : r.stats.stage_seconds) {
    stages += fmt::format("{}\"{}\":{:.6f}", stages.empty() ? "" : ",", stage, secs);
  }
  return fmt::format(
      "{{\"tool\":\"stoke\",\"samples\":{},\"batches\":{},\"wall_s\":{:.6f},\"samples_per_s\":{:.3f},"
      "\"mb_per_s\":{:.3f},\"wait_share\":{:.6f},\"utilisation\":{:.6f},\"compute_ms\":{},\"open_s\":{:.6f},"
      "\"index_from_cache\":{},\"backend\":\"{}\",\"page_bytes_mean\":{:.1f},\"cold\":{},\"batch_size\":{},"
      "\"shuffle\":\"{}\",\"threads\":{},\"queue_depth\":{},\"prefetch_bytes\":{},\"table_rows\":{},"
      "\"samples_skipped\":{},\"cells_decoded\":{},\"pages_decoded\":{},\"reads_at_once\":{},\"reads_mapped\":{},\"workers\":{},\"read_threads\":{},"
      "\"max_rss_mb\":{:.1f},\"max_anonymous_rss_mb\":{:.1f},\"mean_jump\":{:.1f},\"distinct_file_fraction\":{:.4f},"
      "\"global_mean_jump\":{:.1f},\"global_distinct_file_fraction\":{:.4f},\"remote_coalesce_bytes\":{},"
      "\"remote_coalesce_gap_bytes\":{},\"cache\":{},\"transforms\":{},\"transforms_on\":\"{}\",\"stage_seconds\":{{{}}}}}",
      r.samples, r.batches, r.wall_seconds, r.samples_per_second(), r.mb_per_second(), r.wait_share(), r.utilisation(), r.compute_ms,
      r.open_seconds, r.index_from_cache ? "true" : "false", r.stats.backend, r.page_bytes_mean, o.direct ? "true" : "false",
      o.batch_size, ShuffleName(o.shuffle), o.threads, o.queue_depth, o.prefetch_bytes, r.table_rows,
      r.stats.samples_skipped, r.stats.cells_decoded, r.stats.pages_decoded, r.stats.reads_at_once, r.stats.reads_mapped, r.stats.workers, r.stats.read_threads,
      r.max_rss_bytes / 1e6, r.max_anonymous_rss_bytes / 1e6, r.shuffle.mean_jump, r.shuffle.distinct_file_fraction,
      r.global_shuffle.mean_jump, r.global_shuffle.distinct_file_fraction, o.remote_coalesce_bytes,
      o.remote_coalesce_gap_bytes, o.cache_dir.empty() ? "false" : "true", o.transforms.size(),
      TransformsOnName(o.transforms_on), stages);
}

std::string FormatLoadReport(const LoadBenchReport& r) {
  const LoaderOptions& o = r.options.loader;
  std::string s = fmt::format(
      "bench load: {} rows, opened in {:.3f} s (sample index {}), {} batches of up to {}, shuffle {}, {}, {} reads{}, "
      "{} decode workers, queue depth {}{}\n",
      r.table_rows, r.open_seconds, r.index_from_cache ? "cached" : "built", r.batches, o.batch_size, ShuffleName(o.shuffle),
      o.direct ? "O_DIRECT (cold)" : "page cache allowed", r.stats.backend,
      r.stats.read_threads > 0 ? fmt::format(" ({} reading threads)", r.stats.read_threads) : std::string(),
      r.stats.workers,
      o.queue_depth > 0 ? std::to_string(o.queue_depth) : std::string("default"),
      o.cache_dir.empty() ? "" : ", read cache " + o.cache_dir);
  s += fmt::format("{:>12} {:>10} {:>12} {:>12} {:>12} {:>10}\n", "samples/s", "MB/s", "wait share", "utilisation",
                   "compute ms", "wall s");
  s += fmt::format("{:>12.1f} {:>10.1f} {:>12.3f} {:>12.3f} {:>12g} {:>10.2f}\n", r.samples_per_second(), r.mb_per_second(),
                   r.wait_share(), r.utilisation(), r.compute_ms, r.wall_seconds);
  s += "busy seconds per stage (summed over threads, whole run):";
  for (const auto& [stage, secs] : r.stats.stage_seconds) s += fmt::format(" {} {:.2f}", stage, secs);
  s += fmt::format("\nshuffle quality (epoch 0): mean jump {:.0f} rows, distinct files per batch {:.0f}%; a global "
                   "shuffle: {:.0f} rows, {:.0f}%",
                   r.shuffle.mean_jump, 100 * r.shuffle.distinct_file_fraction, r.global_shuffle.mean_jump,
                   100 * r.global_shuffle.distinct_file_fraction);
  s += fmt::format("\npeak RSS {:.0f} MB, of it the process's own memory {:.0f} MB (sampled; the rest: data files' pages "
                   "read through mappings, which the kernel may drop) (prefetch budget {:.0f} MB)",
                   r.max_rss_bytes / 1e6, r.max_anonymous_rss_bytes / 1e6, o.prefetch_bytes / 1e6);
  if (r.stats.samples_skipped > 0) s += fmt::format(", {} samples skipped", r.stats.samples_skipped);
  if (r.stats.cells_decoded > 0) {
    s += fmt::format(", {} cells read by decoding their column chunk (pages stoke cannot read alone)",
                     r.stats.cells_decoded);
  }
  if (r.stats.pages_decoded > 0) {
    s += fmt::format(", {} pages or chunks of array and binary columns decoded", r.stats.pages_decoded);
  }
  s += "\n";
  return s;
}

}  // namespace stoke
