// The loader pipeline (include/stoke/loader.h; docs/architecture.md, "The loader").
//
// Threads of one run (a run lasts from the first Next() after Open/SetEpoch/Restore to the end of the
// epoch or the next SetEpoch/Restore/destruction):
//   producer    takes batch_size ids from the sampler, takes a free batch slot (blocks: back-pressure),
//               gathers the scalar columns into it, plans the page reads (coalescing neighbours) and
//               submits them to the Fetcher (blocks on queue depth and the byte budget)
//   completer   takes completed reads from the Fetcher and hands each to the worker pool; nothing
//               else: per read it only moves a buffer and queues a task, so it never limits throughput
//   workers     check the CRC of and decompress each page (or check a split read's header and CRC),
//               transform the sample into its row of the slot, give the read buffer back
//               (Fetcher::Release, any thread); the last sample of a batch marks the slot ready
//   consumer    Next() waits for the oldest slot to be ready and returns it as a Batch; the slot goes
//               back to the free list when the Batch is destroyed
// Every per-byte pass (CRC, decompression, copies, transforms) runs on the workers, in parallel; the
// producer and the completer do per-read bookkeeping only.
//
// Out of memory: core's buffers throw std::bad_alloc. Each pipeline thread catches it around the step
// that allocates and turns it into OutOfMemoryError, which fails the batch (whatever on_error says) and
// reaches the consumer from Next(); no exception leaves a pipeline thread.
//
// This file: Open (the table, the columns, the sampler, the memory budget, the fetcher) and the
// public Batch and Loader classes.
#include "loader/loader_impl.h"

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

// The indices in view.columns of the columns `names` asks for, in its order (every column, in table
// order, when it is empty). NotFound for a name the table lacks, InvalidArgument for one listed twice.
Result<std::vector<size_t>> SelectColumns(const TableView& view, const std::vector<std::string>& names) {
  std::vector<size_t> selected;
  if (names.empty()) {
    for (size_t c = 0; c < view.columns.size(); ++c) selected.push_back(c);
    return selected;
  }
  for (const auto& name : names) {
    auto it = std::find_if(view.columns.begin(), view.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
    if (it == view.columns.end()) {
      std::vector<std::string> all;
      for (const auto& c : view.columns) all.push_back(c.name);
      return Status::NotFound(fmt::format("columns: unknown column '{}' (the table has: {})", name, fmt::join(all, ", ")));
    }
    const size_t c = static_cast<size_t>(it - view.columns.begin());
    if (std::find(selected.begin(), selected.end(), c) != selected.end()) {
      return Status::InvalidArgument(fmt::format("columns: '{}' is listed twice", name));
    }
    selected.push_back(c);
  }
  return selected;
}

// The image columns: blob columns named in the table's stoke.images (docs/format.md). Corruption,
// naming `dir`, when that configuration is not a JSON object.
Result<std::vector<std::string>> ImageColumnNames(const TableView& view, const std::string& dir) {
  std::vector<std::string> image_columns;
  const auto& config = view.snapshot.metadata.configuration;
  auto it = config.find(kImagesMetadataKey);
  if (it == config.end()) return image_columns;
  const auto images = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!images.is_object()) {
    return Status::Corruption(fmt::format("{}: the table's {} configuration is not a JSON object", dir, kImagesMetadataKey));
  }
  for (auto e = images.begin(); e != images.end(); ++e) image_columns.push_back(e.key());
  return image_columns;
}

// Whether the loader reads `spec` through BinaryCells: a plain binary column (not stoke's tensor or
// blob layout), or a struct with a binary field `bytes` (a Hugging Face Image).
bool HoldsBinaryCells(const ColumnSpec& spec) {
  if (!spec.nested()) return spec.type == parquet::Type::kByteArray && !spec.is_string && !spec.paged();
  const auto type = nlohmann::json::parse(spec.nested_type, nullptr, false);
  if (!type.is_object() || type.value("type", "") != "struct" || !type.contains("fields")) return false;
  for (const auto& f : type["fields"]) {
    if (f.is_object() && f.value("name", "") == "bytes" && f.contains("type") && f["type"] == "binary") return true;
  }
  return false;
}

// The predicate `where` bound to `columns`; nullopt when `where` is empty.
Result<std::optional<Predicate>> BindWhere(const std::string& where, const std::vector<ColumnSpec>& columns) {
  std::optional<Predicate> predicate;
  if (where.empty()) return predicate;
  auto parsed = Predicate::Parse(where);
  if (!parsed.ok()) return parsed.status();
  predicate = std::move(*parsed);
  STOKE_RETURN_IF_ERROR(predicate->Bind(columns));
  return predicate;
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

  STOKE_ASSIGN_OR_RETURN(std::vector<size_t> selected_cols, SelectColumns(view, o_.columns));
  STOKE_ASSIGN_OR_RETURN(std::vector<std::string> image_columns, ImageColumnNames(view, dir_));
  if (o_.image_channels != 1 && o_.image_channels != 3 && o_.image_channels != 4) {
    return Status::InvalidArgument(fmt::format("image_channels must be 1, 3 or 4, got {}", o_.image_channels));
  }
  STOKE_RETURN_IF_ERROR(SetUpColumns(view, selected_cols, image_columns));
  for (const auto& entry : o_.shapes) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture those
    if (std::none_of(tensors_.begin(), tensors_.end(), [&](const TensorColumn& t) { return t.array && t.name == name; })) {
      return Status::InvalidArgument(fmt::format("shapes: '{}' is not an array column the loader delivers (selected array "
                                                 "columns only)", name));
    }
  }
  STOKE_ASSIGN_OR_RETURN(std::optional<Predicate> where, BindWhere(o_.where, view.columns));
  const auto& config = view.snapshot.metadata.configuration;
  if (auto hf = config.find(kHuggingFaceMetadataKey); hf != config.end()) metadata_shapes_ = HuggingFaceArrayShapes(hf->second);
  // Scalar columns and the filter, file by file (in parallel: footers are small, latency-bound reads).
  const ScalarColumns::ReadOptions scalar_read{dir_, index_->num_rows(), remote_,
                                               static_cast<uint64_t>(o_.remote_coalesce_gap_bytes)};
  STOKE_RETURN_IF_ERROR(scalars_.Read(view, where, scalar_read));
  std::vector<std::string> file_versions;
  if (remote_ && !o_.cache_dir.empty() && !tensors_.empty()) {
    file_versions = ReadCacheFileVersions(view, root_, *index_->file_paths());
  }
  // Nothing below uses the log. A table of 650,000 files holds about 350 MB of add actions (paths,
  // statistics, slots): released here, with the heap's free pages, the fetcher's per-file state, the
  // sampler's blocks and the batch slots take their place instead of adding to them.
  const bool large_log = view.snapshot.files.size() >= kReleaseHeapAfterFiles;
  view = TableView{};
  if (large_log) ReleaseFreeHeapMemory();
  SizeWorkers();
  STOKE_RETURN_IF_ERROR(SetUpChunkedColumns());
  STOKE_RETURN_IF_ERROR(CreateImagePipelines());
  STOKE_RETURN_IF_ERROR(CreateSampler());
  // A batch never holds more than the rank's samples of an epoch: a batch_size beyond that sizes
  // nothing (batch buffers, id lists) past what can be filled.
  batch_rows_ = static_cast<size_t>(std::clamp<int64_t>(sampler_->size(), 1, o_.batch_size));
  const int64_t fetch_budget = DivideMemoryBudget();
  STOKE_RETURN_IF_ERROR(OpenFetcher(std::move(file_versions), fetch_budget));
  workers_ = std::make_unique<ThreadPool>(threads_);
  return Status::OK();
}

Status Loader::Impl::SetUpColumns(const TableView& view, const std::vector<size_t>& selected,
                                  const std::vector<std::string>& image_columns) {
  for (size_t c : selected) {
    const ColumnSpec& spec = view.columns[c];
    column_order_.push_back(spec.name);
    if (spec.blob && std::find(image_columns.begin(), image_columns.end(), spec.name) == image_columns.end()) {
      return Status::Unsupported(fmt::format("column '{}' is a blob column without image metadata (stoke.images); the "
                                             "loader delivers image columns and tensors: select other columns",
                                             spec.name));
    }
    if (spec.tensor || spec.blob) {
      STOKE_ASSIGN_OR_RETURN(TensorColumn t, MakeTensorColumn(spec));
      tensors_.push_back(std::move(t));
    } else if (spec.nested() && nlohmann::json::parse(spec.nested_type, nullptr, false).value("type", "") == "array") {
      TensorColumn t;
      t.name = spec.name;
      t.file_name = spec.file_name();
      t.array = true;
      tensors_.push_back(std::move(t));
    } else if (HoldsBinaryCells(spec)) {
      TensorColumn t;
      t.name = spec.name;
      t.file_name = spec.file_name();
      t.binary_cells = true;
      tensors_.push_back(std::move(t));
    } else {
      STOKE_RETURN_IF_ERROR(scalars_.Add(spec, c));
    }
  }
  return Status::OK();
}

Result<TensorColumn> Loader::Impl::MakeTensorColumn(const ColumnSpec& spec) const {
  const auto& names = index_->tensor_columns();
  auto it = std::find(names.begin(), names.end(), spec.name);
  if (it == names.end()) return Status::Internal(fmt::format("tensor column '{}' is not in the sample index", spec.name));
  TensorColumn t;
  t.name = spec.name;
  t.index_column = static_cast<size_t>(it - names.begin());
  if (spec.blob) {
    t.encoded_image = true;  // the pipeline is made once the rows are known (CreateImagePipelines)
    return t;
  }
  t.in = *spec.tensor;
  STOKE_RETURN_IF_ERROR(SetTransforms(&t));
  return t;
}

Status Loader::Impl::SetTransforms(TensorColumn* t) const {
  t->in_bytes = static_cast<size_t>(t->in.num_bytes());
  if (ImagePipeline::HasImageTransforms(o_.transforms)) {
    if (t->in.dtype != DType::kUInt8) {
      return Status::InvalidArgument(fmt::format("column '{}': image transforms need images: an image column or a "
                                                 "uint8 [H, W, C] tensor column, not {}", t->name,
                                                 DTypeName(t->in.dtype)));
    }
    t->use_image = true;  // made in CreateImagePipelines too
    return Status::OK();
  }
  auto pipeline = TransformPipeline::Create(o_.transforms, t->in.dtype, t->in.shape);
  if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", t->name));
  t->transforms = std::move(*pipeline);
  t->out_bytes = t->transforms.out_bytes();
  t->out_dtype = t->transforms.out_dtype();
  t->out_shape = t->transforms.out_shape();
  return Status::OK();
}

Status Loader::Impl::SetUpChunkedColumns() {
  // The decoded pages of multi-row tensor pages and the decoded chunks of array and binary columns
  // share a quarter of the budget (see DivideMemoryBudget), in equal parts.
  const bool arrays = std::any_of(tensors_.begin(), tensors_.end(), [](const TensorColumn& t) { return t.array; });
  const bool binary = std::any_of(tensors_.begin(), tensors_.end(), [](const TensorColumn& t) { return t.binary_cells; });
  const size_t part = static_cast<size_t>(o_.prefetch_bytes / 4) / (1 + arrays + binary);
  slow_cells_ = std::make_unique<SlowCells>(*index_, part, o_.verify_crc);
  if (arrays) array_cells_ = std::make_unique<ArrayCells>(*index_, *slow_cells_, part);
  if (binary) binary_cells_ = std::make_unique<BinaryCells>(*slow_cells_, part);
  const std::optional<int64_t> first = scalars_.FirstRow(index_->num_rows());
  for (TensorColumn& t : tensors_) {
    if (t.binary_cells) STOKE_RETURN_IF_ERROR(SetUpBinaryColumn(&t, first));
    if (!t.array) continue;
    if (first) {
      auto probed = array_cells_->Probe(t.file_name, *first);
      if (!probed.ok()) return probed.status().WithContext(fmt::format("table '{}' column '{}'", dir_, t.name));
      t.in = TensorSpec{probed->first, probed->second};
    } else {
      t.in = TensorSpec{DType::kFloat32, {0}};  // no row is served: nothing is delivered
    }
    t.array_shape = t.in.shape;
    STOKE_RETURN_IF_ERROR(ReshapeArrayColumn(&t));
    STOKE_RETURN_IF_ERROR(SetTransforms(&t));
  }
  return Status::OK();
}

Status Loader::Impl::SetUpBinaryColumn(TensorColumn* t, std::optional<int64_t> first) {
  if (!first) {  // no row is served: nothing is delivered
    t->in = TensorSpec{DType::kUInt8, {0}};
    return SetTransforms(t);
  }
  AlignedBuffer cell;
  if (Status st = binary_cells_->ReadCell(t->file_name, *first, &cell); !st.ok()) {
    return st.WithContext(Context(*first, static_cast<uint32_t>(t - tensors_.data())));
  }
  switch (CellKindOf(cell.view())) {
    case CellKind::kImage:
      t->encoded_image = true;  // the pipeline is made once the rows are known (CreateImagePipelines)
      return Status::OK();
    case CellKind::kNpy: {
      auto header = ParseNpyHeader(cell.view(), "cell");
      if (!header.ok()) return header.status().WithContext(Context(*first, static_cast<uint32_t>(t - tensors_.data())));
      t->in = TensorSpec{header->dtype, header->shape};
      return SetTransforms(t);
    }
    case CellKind::kOther: break;
  }
  return Status::Unsupported(fmt::format("{}: its cells are neither .npy arrays nor JPEG/PNG images, which the loader "
                                         "delivers from binary columns; select other columns, or read it with a query",
                                         Context(*first, static_cast<uint32_t>(t - tensors_.data()))));
}

Status Loader::Impl::ReshapeArrayColumn(TensorColumn* t) const {
  auto given = o_.shapes.find(t->name);
  std::string source = fmt::format("shapes['{}']", t->name);
  if (given == o_.shapes.end()) {
    given = metadata_shapes_.find(t->name);
    if (given == metadata_shapes_.end()) return Status::OK();
    source = fmt::format("the Hugging Face features' shape of '{}'", t->name);
  }
  int64_t n = 1;
  for (int64_t d : given->second) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      return Status::InvalidArgument(fmt::format("{}: [{}] is not a shape", source, fmt::join(given->second, ", ")));
    }
  }
  int64_t have = 1;
  for (int64_t d : t->array_shape) have *= d;
  const bool served = t->array_shape != std::vector<int64_t>{0};  // {0}: no row is served (dense rows are never empty)
  if (served && n != have) {
    return Status::InvalidArgument(fmt::format("{}: [{}] holds {} values, but the column's rows hold {} ([{}])",
                                               source, fmt::join(given->second, ", "), n, have,
                                               fmt::join(t->array_shape, ", ")));
  }
  t->in.shape = given->second;
  return Status::OK();
}

void Loader::Impl::SizeWorkers() {
  threads_ = o_.threads > 0 ? static_cast<size_t>(o_.threads) : AvailableCpus();
  // Each worker holds at most one decoded image: a quarter of the budget shared by the workers, but
  // never less than a 64 MiB image (a 20-megapixel RGB photo).
  max_decoded_bytes_ = std::max<int64_t>(o_.prefetch_bytes / 4 / static_cast<int64_t>(threads_), int64_t{64} << 20);
}

std::vector<int64_t> Loader::Impl::BlockSizes() const {
  std::vector<int64_t> block_sizes;
  size_t next = 0;
  for (uint32_t f = 0; f < index_->num_files(); ++f) {
    const int64_t first = index_->file_first_row(f), end = first + index_->file_num_rows(f);
    block_sizes.push_back(scalars_.ServedIn(first, end, &next));
  }
  if (block_sizes.empty()) block_sizes.push_back(0);
  return block_sizes;
}

Status Loader::Impl::CreateSampler() {
  std::vector<int64_t> block_sizes = BlockSizes();
  SamplerOptions so = SamplerOptionsFor(o_);
  block_sizes_ = block_sizes;
  sampler_options_ = so;
  auto sampler = Sampler::Create(block_sizes, so);
  if (!sampler.ok()) return sampler.status();
  sampler_ = std::make_unique<Sampler>(std::move(*sampler));
  return Status::OK();
}

int64_t Loader::Impl::DivideMemoryBudget() {
  // Batch slots take at most half the budget (at least 2 slots), reads in flight (and read results
  // waiting for a decode worker) a quarter; the last quarter is headroom for the fetcher's pooled
  // idle buffers, decode scratch and allocator slack, so the whole process stays near the budget
  // (measured: docs/benchmarks.md).
  size_t batch_bytes = 0;
  for (const auto& t : tensors_) batch_bytes += t.out_bytes * batch_rows_;
  batch_bytes = std::max<size_t>(batch_bytes, 1);
  max_slots_ = std::clamp<size_t>(static_cast<size_t>(o_.prefetch_bytes / 2) / batch_bytes, 2, 64);
  const int64_t fetch_budget = std::max<int64_t>(o_.prefetch_bytes / 4, int64_t{8} << 20);
  return fetch_budget;
}

Status Loader::Impl::OpenFetcher(std::vector<std::string> file_versions, int64_t fetch_budget) {
  if (tensors_.empty()) return Status::OK();
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

Result<std::pair<int64_t, int64_t>> Loader::Impl::ProbeImageSize(const TensorColumn& t) const {
  // No rows: any size batches nothing.
  const std::optional<int64_t> first = scalars_.FirstRow(index_->num_rows());
  if (!first) return std::make_pair(int64_t{1}, int64_t{1});
  const int64_t row = *first;
  AlignedBuffer cell;
  if (t.binary_cells) {
    STOKE_RETURN_IF_ERROR(binary_cells_->ReadCell(t.file_name, row, &cell));
    STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell.view(), "image"));
    return std::make_pair(int64_t{info.height}, int64_t{info.width});
  }
  const SampleIndex::Location loc = index_->Find(row, t.index_column);
  if (loc.needs_decode) {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(*where.storage, where.path));
    STOKE_ASSIGN_OR_RETURN(size_t col, reader->FindColumn(t.name));
    STOKE_RETURN_IF_ERROR(reader->ReadBinaryCell(loc.row_in_file, col, &cell));
  } else {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_->FilePath(loc.file)));
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, where.storage->OpenForRead(where.path));
    AlignedBuffer page(loc.length);
    STOKE_RETURN_IF_ERROR(file->ReadAt(loc.offset, page.mutable_view()));
    PageDecodeOptions po;
    po.verify_crc = o_.verify_crc;
    AlignedBuffer scratch;
    STOKE_ASSIGN_OR_RETURN(ByteView value, DecodeBlobFromPage(page.view(), loc.codec, loc.row_in_page, loc.rows_in_page,
                                                              loc.definition_levels, static_cast<uint64_t>(max_decoded_bytes_),
                                                              &scratch, po, "page"));
    cell.Append(value);
  }
  STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell.view(), "image"));
  return std::make_pair(int64_t{info.height}, int64_t{info.width});
}

Status Loader::Impl::CreateImagePipelines() {
  ImagePipelineOptions io;
  io.channels = o_.image_channels;
  io.jpeg_dct_scaling = o_.jpeg_dct_scaling;
  io.jpeg_region_decode = o_.jpeg_region_decode;
  io.max_decoded_bytes = max_decoded_bytes_;
  io.for_gpu = o_.transforms_on == LoaderOptions::TransformsOn::kCuda;
  const bool any_image = std::any_of(tensors_.begin(), tensors_.end(),
                                     [](const TensorColumn& t) { return t.encoded_image || t.use_image; });
  if (io.for_gpu && !any_image) {
    return Status::InvalidArgument("transforms_on cuda: no selected column is an image column with image transforms "
                                   "(it finishes images on the GPU; use transforms_on cpu)");
  }
  for (TensorColumn& t : tensors_) {
    if (!t.encoded_image && !t.use_image) continue;
    std::optional<std::pair<int64_t, int64_t>> uniform;
    if (t.encoded_image && !ImagePipeline::FixesSize(o_.transforms)) {
      auto probed = ProbeImageSize(t);
      if (!probed.ok()) {
        const int64_t row = scalars_.FirstRow(index_->num_rows()).value_or(0);
        return probed.status().WithContext(Context(row, static_cast<uint32_t>(&t - tensors_.data())));
      }
      uniform = *probed;
    }
    auto pipeline = ImagePipeline::Create(o_.transforms, io, t.encoded_image ? std::vector<int64_t>{} : t.in.shape, uniform);
    if (!pipeline.ok()) return pipeline.status().WithContext(fmt::format("column '{}'", t.name));
    t.image = std::move(*pipeline);
    t.out_bytes = t.image.out_bytes();
    t.out_dtype = t.image.out_dtype();
    t.out_shape = t.image.out_shape();
  }
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
