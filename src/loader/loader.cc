// The loader pipeline (include/stoke/loader.h; docs/architecture.md, "The loader").
//
// Threads of one run (a run lasts from the first Next() after Open/SetEpoch/Restore to the end of the
// epoch or the next SetEpoch/Restore/destruction):
//   producer    takes batch_size ids from the sampler, takes a free batch slot (blocks: back-pressure),
//               gathers the scalar columns into it, plans the page reads (coalescing neighbours),
//               does the small ones whose pages are cached at once and submits the rest to the
//               Fetcher (blocks on queue depth and the byte budget)
//   completer   takes completed reads from the Fetcher in groups; decodes a group itself when it is
//               a few plain small reads, else hands it to the worker pool
//   workers     check the CRC of and decompress each page (or check a split read's header and CRC),
//               transform the sample into its row of the slot, give the read buffer back
//               (Fetcher::Release, any thread); the last sample of a batch marks the slot ready
//   consumer    Next() waits for the oldest slot to be ready (doing its reads at once nobody has
//               claimed yet) and returns it as a Batch; the slot goes back to the free list when the
//               Batch is destroyed
// Decompression and transforms run on the workers, in parallel; the producer, the completer and the
// consumer decode only small uncompressed reads, where a hand-off would cost more than the copy.
//
// Out of memory: core's buffers throw std::bad_alloc. Each pipeline thread catches it around the step
// that allocates and turns it into OutOfMemoryError, which fails the batch (whatever on_error says) and
// reaches the consumer from Next(); no exception leaves a pipeline thread.
//
// This file: Open (the table, the columns, the sampler, the memory budget, the fetcher, then the
// stages of loader_impl.h) and the public Batch and Loader classes.
#include "loader/loader_impl.h"

#include <algorithm>

#include "core/cpus.h"
#include "core/fd_limit.h"
#include "core/host_memory.h"
#include "format/image.h"
#include "format/npy.h"
#include "io/read_cache.h"
#include "io/storage.h"
#include "io/uri.h"
#include "loader/decode_units.h"
#include "loader/page_decoder.h"
#include "table/parquet_dataset.h"

namespace stoke {

namespace {
// InvalidArgument naming the first of `o`'s sizes, counts and coalescing limits that is out of range.
Status CheckLoaderOptions(const LoaderOptions& o) {
  if (o.batch_size < 1) return Status::InvalidArgument(fmt::format("batch_size must be >= 1, got {}", o.batch_size));
  if (o.shuffle_buffer < 1) {  // whatever the shuffle: a bad value is a mistake even where unused
    return Status::InvalidArgument(fmt::format("shuffle_buffer must be >= 1, got {}", o.shuffle_buffer));
  }
  if (o.prefetch_bytes < 1) return Status::InvalidArgument(fmt::format("prefetch_bytes must be >= 1, got {}", o.prefetch_bytes));
  if (o.threads < 0 || o.threads > 4096) {
    return Status::InvalidArgument(fmt::format("threads must be in [1, 4096], or 0 for one per available CPU, got {}",
                                               o.threads));
  }
  if (o.queue_depth < 0 || o.queue_depth > 4096) {
    return Status::InvalidArgument(fmt::format("queue_depth must be in [1, 4096], or 0 for the default, got {}",
                                               o.queue_depth));
  }
  for (const auto& [name, value] : {std::pair{"coalesce_bytes", o.coalesce_bytes},
                                    std::pair{"remote_coalesce_bytes", o.remote_coalesce_bytes},
                                    std::pair{"remote_coalesce_gap_bytes", o.remote_coalesce_gap_bytes}}) {
    if (value < 0 || value > kMaxCoalesceBytes) {
      return Status::InvalidArgument(fmt::format("{} must be in [0, {}] (1 GiB), got {}", name, kMaxCoalesceBytes, value));
    }
  }
  if (o.cache_bytes < 1) return Status::InvalidArgument(fmt::format("cache_bytes must be >= 1, got {}", o.cache_bytes));
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return Status::InvalidArgument(fmt::format("rank {} is not in [0, world_size {})", o.rank, o.world_size));
  }
  return Status::OK();
}

// For the read cache, the version of each of the sample index's data files (`index_paths`, joined to
// the table's URI as the index joins them): its modification time in the log, which with the URI
// and size names the file's bytes; "" for a file the log does not list.
std::vector<std::string> ReadCacheFileVersions(const TableView& view, const std::string& dir,
                                               const std::vector<std::string>& index_paths) {
  std::map<std::string, int64_t> file_mtimes;
  for (const auto& add : view.snapshot.files) {
    auto rel = delta::DecodePath(add.path);
    file_mtimes[JoinPath(dir, rel.ok() ? *rel : add.path)] = add.modification_time;
  }
  std::vector<std::string> versions;
  versions.reserve(index_paths.size());
  for (const auto& path : index_paths) {
    auto it = file_mtimes.find(path);
    versions.push_back(it == file_mtimes.end() ? "" : fmt::format("mtime={}", it->second));
  }
  return versions;
}

// The sampler's options from the loader's.
SamplerOptions SamplerOptionsFor(const LoaderOptions& o) {
  SamplerOptions so;
  so.shuffle = o.shuffle == LoaderOptions::Shuffle::kNone    ? SamplerOptions::Shuffle::kNone
               : o.shuffle == LoaderOptions::Shuffle::kBlock ? SamplerOptions::Shuffle::kBlock
                                                             : SamplerOptions::Shuffle::kGlobal;
  so.seed = o.seed;
  so.rank = o.rank;
  so.world_size = o.world_size;
  so.drop_last = o.drop_last;
  so.shuffle_buffer = o.shuffle_buffer;
  return so;
}

}  // namespace

Batch::Batch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Batch::~Batch() {
  if (impl_ && impl_->slot) impl_->pool->Return(impl_->slot);
}
Batch::Batch(Batch&&) noexcept = default;
Batch& Batch::operator=(Batch&& o) noexcept {
  if (this != &o) {
    if (impl_ && impl_->slot) impl_->pool->Return(impl_->slot);
    impl_ = std::move(o.impl_);
  }
  return *this;
}
int64_t Batch::size() const { return impl_->size; }
int64_t Batch::epoch() const { return impl_->slot->epoch; }
int64_t Batch::index() const { return impl_->slot->index; }
const std::vector<int64_t>& Batch::row_ids() const { return impl_->slot->rows; }
std::span<const BatchColumn> Batch::columns() const { return impl_->slot->columns; }
std::span<BatchColumn> Batch::columns() { return impl_->slot->columns; }
const BatchColumn* Batch::column(std::string_view name) const {
  for (const auto& c : impl_->slot->columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}
BatchColumn* Batch::column(std::string_view name) { return const_cast<BatchColumn*>(std::as_const(*this).column(name)); }
bool Batch::pinned() const {
  for (const auto& t : impl_->slot->tensors) {
    if (!t.pinned()) return false;
  }
  return !impl_->slot->tensors.empty();
}

Status Loader::Impl::Open() {
  STOKE_RETURN_IF_ERROR(CheckLoaderOptions(o_));
  // Tables of many files: the fetcher sizes its descriptor cache from the soft limit.
  RaiseOpenFileLimitOnce();
  AllocationFaults::Instance().Check();
  STOKE_ASSIGN_OR_RETURN(TableView view, OpenDatasetView(dir_, o_.version));
  root_ = view.location;
  // An index built here (none cached for this version) takes the files from this snapshot: opened
  // again, the log's second copy took 3 s and 500 MB at 650,000 files. A plain dataset's made-up
  // version names no set of files: its index is never cached.
  SampleIndex::Options index_options;
  index_options.snapshot = &view.snapshot;
  index_options.use_cache = index_options.write_cache = !view.plain;
  STOKE_ASSIGN_OR_RETURN(SampleIndex index, SampleIndex::Open(root_, view.snapshot.version, index_options));
  remote_ = HasUriScheme(root_);  // read through its Storage, as the fetcher will (fetcher.h)
  index_ = std::make_unique<SampleIndex>(std::move(index));
  queue_depth_ = o_.queue_depth > 0 ? o_.queue_depth : remote_ ? kRemoteQueueDepth : kLocalQueueDepth;

  const ScalarColumns::ReadOptions scalar_read{dir_, index_->num_rows(), remote_,
                                               static_cast<uint64_t>(o_.remote_coalesce_gap_bytes)};
  STOKE_RETURN_IF_ERROR(columns_.Select(view, *index_, scalar_read));
  std::vector<std::string> file_versions;
  if (remote_ && !o_.cache_dir.empty() && !columns_.tensors().empty()) {
    file_versions = ReadCacheFileVersions(view, root_, *index_->file_paths());
  }
  // Nothing below uses the log. A table of 650,000 files holds about 350 MB of add actions (paths,
  // statistics, slots): released here, with the heap's free pages, the fetcher's per-file state, the
  // sampler's blocks and the batch slots take their place instead of adding to them.
  const bool large_log = view.snapshot.files.size() >= kReleaseHeapAfterFiles;
  view = TableView{};
  if (large_log) ReleaseFreeHeapMemory();
  SizeWorkers();
  // The slow path's decoded pages take the last quarter of the budget (DivideMemoryBudget).
  STOKE_RETURN_IF_ERROR(columns_.SetUpCells(o_.prefetch_bytes / 4, max_decoded_bytes_));
  STOKE_RETURN_IF_ERROR(CreateSampler());
  // A batch never holds more than the rank's samples of an epoch: a batch_size beyond that sizes
  // nothing (batch buffers, id lists) past what can be filled.
  batch_rows_ = static_cast<size_t>(std::clamp<int64_t>(sampler_->size(), 1, o_.batch_size));
  int64_t fetch_budget = 0;
  const size_t max_slots = DivideMemoryBudget(&fetch_budget);
  STOKE_RETURN_IF_ERROR(OpenFetcher(std::move(file_versions), fetch_budget));
  CreateStages(max_slots);
  return Status::OK();
}

void Loader::Impl::CreateStages(size_t max_slots) {
  const BatchSlots::Options so{.max_slots = max_slots, .batch_rows = batch_rows_, .batch_size = o_.batch_size,
                               .pin_memory = o_.pin_memory};
  slots_ = std::make_unique<BatchSlots>(columns_.tensors(), columns_.scalars(), so);
  CreateMappedReads();
  const ReadPlanner::Options po{
      .max_read = static_cast<uint64_t>(remote_ ? o_.remote_coalesce_bytes : o_.coalesce_bytes),
      .max_gap = remote_ ? static_cast<uint64_t>(o_.remote_coalesce_gap_bytes) : 0,
      .split_reads = !o_.direct && !remote_,
      .mapped = mapped_.get(),
      .decode_units = decode_units_,
      .max_run_cells = std::max<size_t>(1, (batch_rows_ + threads_ - 1) / threads_)};
  planner_ = std::make_unique<ReadPlanner>(*index_, columns_.tensors(), po);
  const SampleDecoder::Options dopt{.verify_crc = o_.verify_crc, .on_error = o_.on_error, .seed = o_.seed,
                                    .max_decoded_bytes = max_decoded_bytes_, .threads = threads_};
  decoder_ = std::make_unique<SampleDecoder>(*index_, columns_.tensors(), columns_.cells(), fetcher_.get(), &queue_,
                                             &telemetry_, dopt);
  reads_now_ = std::make_unique<ReadsNow>(fetcher_.get(), decoder_.get(), &telemetry_);
  completer_ = std::make_unique<ReadCompleter>(fetcher_.get(), slots_.get(), decoder_.get(), &queue_, columns_.tensors(),
                                               &telemetry_, stop_);
}

void Loader::Impl::CreateMappedReads() {
  if (fetcher_ == nullptr) return;
  if (fetcher_->read_now()) {
    mapped_ = std::make_unique<MappedReads>(index_->file_paths());
  } else if (remote_ && fetcher_->cache() != nullptr && !o_.direct) {
    std::vector<std::string> identities;
    std::vector<uint64_t> sizes;
    for (uint32_t f = 0; f < index_->num_files(); ++f) {
      identities.push_back(fetcher_->CacheIdentity(f));
      sizes.push_back(index_->file_size(f));
    }
    mapped_ = std::make_unique<MappedReads>(index_->file_paths(), fetcher_->cache(), std::move(identities),
                                            std::move(sizes));
  }
}

void Loader::Impl::SizeWorkers() {
  threads_ = o_.threads > 0 ? static_cast<size_t>(o_.threads) : AvailableCpus();
  // Each worker holds at most one decoded image: a quarter of the budget shared by the workers, but
  // never less than a 64 MiB image (a 20-megapixel RGB photo).
  max_decoded_bytes_ = std::max<int64_t>(o_.prefetch_bytes / 4 / static_cast<int64_t>(threads_), int64_t{64} << 20);
}

std::vector<int64_t> Loader::Impl::ServedSizes(const std::vector<int64_t>& starts) const {
  std::vector<int64_t> sizes;
  size_t next = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : index_->num_rows();
    sizes.push_back(columns_.scalars().ServedIn(starts[i], end, &next));
  }
  if (sizes.empty()) sizes.push_back(0);
  return sizes;
}

Status Loader::Impl::CreateSampler() {
  std::vector<int64_t> files;
  for (uint32_t f = 0; f < index_->num_files(); ++f) files.push_back(index_->file_first_row(f));
  block_sizes_ = ServedSizes(files);
  decode_units_.clear();
  file_starts_.clear();
  for (int64_t served = 0; int64_t size : block_sizes_) {
    file_starts_.push_back(served);
    served += size;
  }
  sampler_options_ = SamplerOptionsFor(o_);
  const auto& tensors = columns_.tensors();
  if (sampler_options_.shuffle == SamplerOptions::Shuffle::kBlock &&
      std::any_of(tensors.begin(), tensors.end(), [](const TensorColumn& t) { return t.chunked(); })) {
    STOKE_ASSIGN_OR_RETURN(const DecodeUnits units,
                           FindDecodeUnits(*index_, columns_.cells(), tensors, columns_.cell_cache_bytes()));
    block_sizes_ = ServedSizes(units.starts);
    sampler_options_.window_blocks = units.window;
    decode_units_ = units.starts;
  }
  auto sampler = Sampler::Create(block_sizes_, sampler_options_);
  if (!sampler.ok()) return sampler.status();
  sampler_ = std::make_unique<Sampler>(std::move(*sampler));
  return Status::OK();
}

size_t Loader::Impl::DivideMemoryBudget(int64_t* fetch_budget) const {
  // Batch slots take at most half the budget (at least 2 slots), reads in flight (and read results
  // waiting for a decode worker) a quarter, and the slow path's decoded pages the last quarter
  // (LoaderColumns::SetUpCells). The fetcher's pooled idle buffers, decode scratch and allocator slack come
  // on top; docs/benchmarks.md has the measured peak memory.
  size_t batch_bytes = 0;
  for (const auto& t : columns_.tensors()) batch_bytes += t.out_bytes * batch_rows_;
  batch_bytes = std::max<size_t>(batch_bytes, 1);
  *fetch_budget = std::max<int64_t>(o_.prefetch_bytes / 4, int64_t{8} << 20);
  size_t slots = std::clamp<size_t>(static_cast<size_t>(o_.prefetch_bytes / 2) / batch_bytes, 2, 64);
  // Where every tensor is decoded by the workers from the cells' caches (other writers' array and
  // binary columns: no reads in flight to keep busy), batches beyond one a worker, one the consumer
  // holds and one ready add nothing but memory touched for the first time.
  const auto& tensors = columns_.tensors();
  if (!tensors.empty() &&
      std::all_of(tensors.begin(), tensors.end(), [](const TensorColumn& t) { return t.array || t.binary_cells; })) {
    slots = std::min(slots, std::max<size_t>(threads_ + 2, 2));
  }
  return slots;
}

Status Loader::Impl::OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget) {
  if (columns_.tensors().empty()) return Status::OK();
  FetcherOptions fo;
  fo.backend = o_.backend == LoaderOptions::Backend::kIoUring ? FetcherOptions::Backend::kIoUring
               : o_.backend == LoaderOptions::Backend::kPread ? FetcherOptions::Backend::kPread
                                                              : FetcherOptions::Backend::kAuto;
  fo.queue_depth = queue_depth_;
  fo.max_bytes_in_flight = fetch_budget;
  fo.direct = o_.direct;
  // A sample read straight into its batch row by a reading thread is checksummed there, while in that
  // thread's cache (DecodeMember combines it with the page's length prefix).
  fo.checksum_tails = o_.verify_crc;
  if (remote_) {
    // Sizes from the log: no HEAD per data file.
    for (uint32_t f = 0; f < index_->num_files(); ++f) fo.file_sizes.push_back(index_->file_size(f));
    if (!o_.cache_dir.empty()) {
      ReadCacheOptions co;
      co.dir = o_.cache_dir;
      co.capacity_bytes = static_cast<uint64_t>(o_.cache_bytes);
      co.max_fetch_bytes = static_cast<uint64_t>(std::max<int64_t>(o_.prefetch_bytes / kCacheFetchBudgetDivisor, 1));
      STOKE_ASSIGN_OR_RETURN(fo.cache, ReadCache::Open(co));
      fo.file_versions = std::move(file_versions);
    }
  }
  STOKE_ASSIGN_OR_RETURN(fetcher_, Fetcher::Open(index_->file_paths(), fo));
  return Status::OK();
}

Result<std::unique_ptr<Loader>> Loader::Open(const std::string& table_dir, LoaderOptions options) {
  try {
    auto impl = std::make_unique<Impl>(table_dir, std::move(options));
    STOKE_RETURN_IF_ERROR(impl->Open());
    return std::unique_ptr<Loader>(new Loader(std::move(impl)));
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("opening {} for loading", table_dir); });
  } catch (const std::system_error& e) {  // a reading thread the system refused
    return Status::IOError(fmt::format("opening {} for loading: could not start a thread: {}", table_dir, e.what()),
                           /*retryable=*/true);
  }
}

Status Loader::SetEpoch(int64_t epoch) {
  try {
    return impl_->SetEpoch(epoch);  // the sampler's permutation for the epoch
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the order of epoch {}", epoch); });
  }
}

Result<std::optional<Batch>> Loader::Next() { return impl_->Next(); }

Loader::State Loader::state() const { return impl_->state(); }

Status Loader::Restore(const State& s) {
  try {
    return impl_->Restore(s);
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the order of epoch {}", s.epoch); });
  }
}

int64_t Loader::epoch() const { return impl_->epoch(); }

int64_t Loader::num_rows() const { return impl_->num_rows(); }

int64_t Loader::samples_per_epoch() const { return impl_->samples_per_epoch(); }

int64_t Loader::batches_per_epoch() const { return impl_->batches_per_epoch(); }

int64_t Loader::table_version() const { return impl_->table_version(); }

bool Loader::index_from_cache() const { return impl_->index_from_cache(); }

LoaderStats Loader::stats() const { return impl_->stats(); }

ShuffleQuality Loader::shuffle_quality() const { return impl_->MeasureShuffle(false); }

ShuffleQuality Loader::global_shuffle_quality() const { return impl_->MeasureShuffle(true); }

Status Loader::WriteTrace(const std::string& path) const { return impl_->WriteTrace(path); }

}  // namespace stoke
