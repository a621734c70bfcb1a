// `stoke bench memcpy`: the warm limit for a loader on a local table (include/stoke/bench.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "core/buffer.h"
#include "core/clock.h"
#include "core/cpus.h"
#include "io/local_files.h"
#include "io/mapped_file.h"
#include "loader/page_decoder.h"
#include "loader/sampler.h"
#include "stoke/bench.h"
#include "table/sample_index.h"

namespace stoke {
namespace {

// Where each row's bytes lie in the mapped data files: the row's value inside its page where the
// page is stored uncompressed, else the whole stored page.
struct CopyPlan {
  std::vector<MappedFile> files;
  std::vector<ByteView> rows;  // by table row
  bool whole_pages = false;    // some page was compressed: its stored bytes stand for its value
  size_t max_bytes = 0;
  uint64_t total_bytes = 0;
  int64_t resident_pages = 0;  // of the data files, before the plan touched them
  int64_t file_pages = 0;
};

Result<size_t> ColumnOf(const SampleIndex& index, const std::string& column) {
  const auto& columns = index.tensor_columns();
  if (columns.empty()) return Status::InvalidArgument("the table has no tensor or blob column to copy");
  if (column.empty()) return size_t{0};
  const auto it = std::find(columns.begin(), columns.end(), column);
  if (it == columns.end()) {
    return Status::InvalidArgument(
        fmt::format("no tensor or blob column '{}' (the table has: {})", column, fmt::join(columns, ", ")));
  }
  return static_cast<size_t>(it - columns.begin());
}

Status MapFiles(const SampleIndex& index, CopyPlan* plan) {
  for (uint32_t f = 0; f < index.num_files(); ++f) {
    const std::string& path = index.FilePath(f);
    const int64_t resident = ResidentPages(path, 0, index.file_size(f));
    plan->resident_pages += std::max<int64_t>(resident, 0);
    plan->file_pages += static_cast<int64_t>((index.file_size(f) + 4095) / 4096);
    STOKE_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path));
    plan->files.push_back(std::move(mapped));
  }
  return Status::OK();
}

// The bytes of the row at `loc`: its value (the page is checked as the loader checks it, CRC
// included) or, for a compressed page, the stored page.
Result<ByteView> RowBytes(const SampleIndex& index, const CopyPlan& plan, const SampleIndex::Location& loc,
                          AlignedBuffer* scratch) {
  const std::string context = fmt::format("{} row {}", index.FilePath(loc.file), loc.row_in_file);
  if (loc.needs_decode) {
    return Status::InvalidArgument(context + ": not in a page of its own (another writer's layout, read by "
                                             "decoding); the reference copies stoke's page layout only");
  }
  const ByteView file = plan.files[loc.file].bytes();
  if (loc.offset > file.size() || loc.length > file.size() - loc.offset) {
    return Status::Corruption(fmt::format("{}: page at offset {} (+{}) lies past the file's end ({} bytes)", context,
                                          loc.offset, loc.length, file.size()));
  }
  const ByteView page = file.subspan(loc.offset, loc.length);
  if (loc.codec != parquet::Codec::kUncompressed) return page;
  return DecodeBlobFromPage(page, loc.codec, loc.row_in_page, loc.rows_in_page, loc.definition_levels, page.size(),
                            scratch, PageDecodeOptions{}, context);
}

// Maps the files, finds every row's bytes and touches each 4 KiB page of them once, so that the
// measured copies fault nothing in.
Result<CopyPlan> MakePlan(const SampleIndex& index, size_t column) {
  CopyPlan plan;
  STOKE_RETURN_IF_ERROR(MapFiles(index, &plan));
  plan.rows.reserve(static_cast<size_t>(index.num_rows()));
  AlignedBuffer scratch;
  volatile uint8_t sink = 0;
  for (int64_t row = 0; row < index.num_rows(); ++row) {
    const SampleIndex::Location loc = index.Find(row, column);
    STOKE_ASSIGN_OR_RETURN(ByteView bytes, RowBytes(index, plan, loc, &scratch));
    plan.whole_pages |= loc.codec != parquet::Codec::kUncompressed;
    for (size_t i = 0; i < bytes.size(); i += 4096) sink = sink + bytes[i];
    if (!bytes.empty()) sink = sink + bytes.back();  // the last page, where the value does not start on one
    plan.rows.push_back(bytes);
    plan.max_bytes = std::max(plan.max_bytes, bytes.size());
    plan.total_bytes += bytes.size();
  }
  return plan;
}

// What the copying threads share.
struct CopyRun {
  const CopyPlan* plan = nullptr;
  const std::vector<int64_t>* order = nullptr;  // epoch 0's global order of the rows, repeated
  size_t batch_size = 0;
  int64_t deadline = 0;  // NowNanos() after which no batch is started
  std::atomic<int64_t> next_batch{0};
  std::atomic<int64_t> samples{0};
  std::atomic<int64_t> batches{0};
  std::atomic<uint64_t> bytes{0};
};

// One thread: takes the next batch, copies its rows one after another into `batch` (its own buffer,
// faulted in before the clock started), until the deadline.
void CopyBatches(CopyRun* run, AlignedBuffer* buffer) {
  const size_t n = run->order->size();
  AlignedBuffer& batch = *buffer;
  int64_t samples = 0, batches = 0;
  uint64_t bytes = 0;
  while (NowNanos() < run->deadline) {
    const auto b = static_cast<size_t>(run->next_batch.fetch_add(1, std::memory_order_relaxed));
    uint8_t* dest = batch.data();
    for (size_t i = 0; i < run->batch_size; ++i) {
      const ByteView src = run->plan->rows[static_cast<size_t>((*run->order)[(b * run->batch_size + i) % n])];
      std::memcpy(dest, src.data(), src.size());
      dest += src.size();
    }
    samples += static_cast<int64_t>(run->batch_size);
    bytes += static_cast<uint64_t>(dest - batch.data());
    ++batches;
  }
  run->samples += samples;
  run->batches += batches;
  run->bytes += bytes;
}

Result<std::vector<int64_t>> GlobalOrder(int64_t rows, uint64_t seed) {
  SamplerOptions so;
  so.shuffle = SamplerOptions::Shuffle::kGlobal;
  so.seed = seed;
  STOKE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create({rows}, so));
  sampler.SetEpoch(0);
  std::vector<int64_t> order(static_cast<size_t>(rows));
  order.resize(sampler.NextBatch(order.data(), order.size()));
  return order;
}

constexpr double kMaxSeconds = 30 * 24 * 3600;  // a month

Status CheckOptions(const MemcpyBenchOptions& options) {
  if (options.table_dir.empty()) return Status::InvalidArgument("`table_dir` is required");
  if (options.batch_size < 1) return Status::InvalidArgument(fmt::format("`batch_size` must be >= 1, got {}", options.batch_size));
  if (options.threads < 0) return Status::InvalidArgument(fmt::format("`threads` must be >= 0, got {}", options.threads));
  if (!(options.seconds > 0 && options.seconds <= kMaxSeconds)) {
    return Status::InvalidArgument(fmt::format("`seconds` must be > 0 and at most {}, got {}", kMaxSeconds, options.seconds));
  }
  return Status::OK();
}

// Copies batches on `threads` threads for `seconds`, each into a buffer of its own that is allocated
// and faulted in before the clock starts; fills the report's counts and wall time.
Status RunCopies(const CopyPlan& plan, const std::vector<int64_t>& order, const MemcpyBenchOptions& options,
                 MemcpyBenchReport* report) {
  const auto batch_size = static_cast<size_t>(options.batch_size);
  if (plan.max_bytes > 0 && batch_size > (size_t{1} << 40) / plan.max_bytes) {
    return Status::InvalidArgument(fmt::format("a batch of {} samples of up to {} bytes is too large to copy into",
                                               batch_size, plan.max_bytes));
  }
  std::vector<AlignedBuffer> buffers;
  for (int t = 0; t < report->threads; ++t) {
    buffers.emplace_back(batch_size * plan.max_bytes);
    std::memset(buffers.back().data(), 0, buffers.back().size());
  }
  CopyRun run;
  run.plan = &plan;
  run.order = &order;
  run.batch_size = batch_size;
  const int64_t start = NowNanos();
  run.deadline = start + static_cast<int64_t>(options.seconds * 1e9);
  std::vector<std::thread> threads;
  for (int t = 0; t < report->threads; ++t) threads.emplace_back(CopyBatches, &run, &buffers[static_cast<size_t>(t)]);
  for (auto& t : threads) t.join();
  report->wall_seconds = (NowNanos() - start) * 1e-9;
  report->samples = run.samples.load();
  report->batches = run.batches.load();
  report->bytes = static_cast<int64_t>(run.bytes.load());
  return Status::OK();
}

}  // namespace

Result<MemcpyBenchReport> RunMemcpyBench(const MemcpyBenchOptions& options) {
  STOKE_RETURN_IF_ERROR(CheckOptions(options));
  STOKE_ASSIGN_OR_RETURN(SampleIndex index, SampleIndex::Open(options.table_dir));
  if (index.num_rows() == 0) return Status::InvalidArgument(options.table_dir + ": the table has no rows");
  STOKE_ASSIGN_OR_RETURN(size_t column, ColumnOf(index, options.column));
  STOKE_ASSIGN_OR_RETURN(CopyPlan plan, MakePlan(index, column));
  STOKE_ASSIGN_OR_RETURN(std::vector<int64_t> order, GlobalOrder(index.num_rows(), options.seed));

  MemcpyBenchReport report;
  report.column = index.tensor_columns()[column];
  report.table_rows = index.num_rows();
  report.batch_size = options.batch_size;
  report.threads = options.threads > 0 ? options.threads : static_cast<int>(AvailableCpus());
  report.copies = plan.whole_pages ? "pages" : "values";
  report.sample_bytes_mean = static_cast<double>(plan.total_bytes) / static_cast<double>(index.num_rows());
  report.resident_share =
      plan.file_pages > 0 ? static_cast<double>(plan.resident_pages) / static_cast<double>(plan.file_pages) : 0;

  STOKE_RETURN_IF_ERROR(RunCopies(plan, order, options, &report));
  return report;
}

std::string MemcpyReportJson(const MemcpyBenchReport& r) {
  return fmt::format(
      R"({{"tool":"memcpy","samples":{},"batches":{},"wall_s":{:.6f},"samples_per_s":{:.3f},"mb_per_s":{:.3f},)"
      R"("threads":{},"batch_size":{},"column":{},"table_rows":{},"copies":"{}","sample_bytes_mean":{:.1f},)"
      R"("resident_share":{:.4f}}})",
      r.samples, r.batches, r.wall_seconds, r.samples_per_second(), r.mb_per_second(), r.threads, r.batch_size,
      nlohmann::json(r.column).dump(),
      r.table_rows, r.copies, r.sample_bytes_mean, r.resident_share);
}

}  // namespace stoke
