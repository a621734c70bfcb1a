// The loader's run loop (loader_impl.h): a run's threads (the producer, the completer) are started
// and stopped here; the producer plans each batch and submits its reads, and the consumer's Next()
// waits for the oldest batch; epoch, resume state and statistics.
#include "loader/loader_impl.h"

namespace stoke {

Status Loader::Impl::SetEpoch(int64_t epoch) {
  if (epoch < 0) return Status::InvalidArgument(fmt::format("epoch must be >= 0, got {}", epoch));
  StopRun();
  sampler_->SetEpoch(epoch);
  start_consumed_ = 0;
  return Status::OK();
}

Status Loader::Impl::Restore(const State& s) {
  StopRun();
  STOKE_RETURN_IF_ERROR(sampler_->Restore(Sampler::State{s.epoch, s.consumed}));
  start_consumed_ = s.consumed;
  return Status::OK();
}

Loader::State Loader::Impl::state() const {
  MutexLock l(&mu_);
  const int64_t n = sampler_->num_rows();
  if (end_reached_ || ids_delivered_ >= sampler_->size()) return State{sampler_->epoch(), n};
  return State{sampler_->epoch(), std::min(n, start_consumed_ + ids_delivered_ * o_.world_size)};
}

Status Loader::Impl::StartRun() {
  std::string refused;
  {
    MutexLock l(&mu_);
    if (running_) return Status::OK();
    running_ = true;
    ++run_;
    stop_ = false;
    queue_.Reset();
    completer_->Reset();
    ids_delivered_ = 0;
    end_reached_ = false;
    epoch_done_ = false;
    failed_ = false;
    next_batch_index_ = 0;
    const int64_t run = run_;
    try {
      producer_ = std::thread([this, run] { ProducerLoop(run); });
      if (fetcher_) completer_thread_ = std::thread([this] { completer_->Run(); });
      return Status::OK();
    } catch (const std::system_error& e) {  // the system refused a thread (RLIMIT_NPROC, a pids limit)
      refused = e.what();
    }
  }
  StopRun();  // joins the thread that did start
  return Status::IOError(fmt::format("the loader could not start its threads: {}", refused), /*retryable=*/true);
}

void Loader::Impl::StopRun() {
  {
    MutexLock l(&mu_);
    if (!running_) {
      epoch_done_ = false;
      failed_ = false;
      ids_delivered_ = 0;
      end_reached_ = false;
      return;
    }
    stop_ = true;
  }
  slots_->Wake();  // a producer waiting in Acquire sees stop_
  completer_->Wake();
  if (producer_.joinable()) producer_.join();
  if (completer_thread_.joinable()) completer_thread_.join();
  decoder_->WaitIdle();
  queue_.Drain(slots_.get());  // batches planned but not delivered go back to the free list
  MutexLock l(&mu_);
  running_ = false;
  epoch_done_ = false;
  failed_ = false;
  ids_delivered_ = 0;
  end_reached_ = false;
}

void Loader::Impl::ProducerLoop(int64_t run) {
  telemetry_.NameThisThread("producer");
  std::vector<int64_t> ids;
  std::vector<FetchRequest> requests;
  const std::function<void(size_t)> on_started = [this](size_t n) { completer_->Started(n); };
  int64_t batch_index = 0;
  Status error;
  try {
    AllocationFaults::Instance().Check();
    ids.resize(batch_rows_);
    // At most one read per cell of a batch.
    requests.reserve(batch_rows_ * std::max<size_t>(columns_.tensors().size(), 1));
  } catch (const std::bad_alloc&) {
    error = OutOfMemory([&] { return fmt::format("the sample ids of a batch of {}", o_.batch_size); });
  }
  while (error.ok() && !stop_) {
    if (ProducerCopies()) continue;
    Result<Slot*> planned = PlanBatch(run, batch_index, ids);
    if (!planned.ok()) {
      error = planned.status();
      break;
    }
    Slot* s = *planned;
    if (s == nullptr) break;
    ++batch_index;
    SubmitBatch(s, requests, on_started);
  }
  // The epoch's last batches: their copies, beside a consumer waiting for them.
  while (!stop_ && CopyOldest()) {
  }
  completer_->ProducerDone();  // waits for the reads this thread started
  queue_.ProducerDone(std::move(error));
}

Result<Slot*> Loader::Impl::PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids) {
  const int64_t t0 = NowNanos();
  const size_t n = sampler_->NextBatch(ids.data(), ids.size());
  if (n == 0 || (o_.drop_last && n < static_cast<size_t>(o_.batch_size))) return static_cast<Slot*>(nullptr);
  STOKE_ASSIGN_OR_RETURN(Slot* s, slots_->Acquire(stop_));
  if (s == nullptr) return s;
  try {
    s->now_files.clear();  // nothing pinned yet (Unplan unpins what is listed)
    s->now_reads.clear();
    s->mapped_copies.clear();
    AllocationFaults::Instance().Check();
    FillSlot(s, run, batch_index, ids, n);
    telemetry_.Trace(TraceStage::kPlan, t0, NowNanos(), s->index, 0);
    queue_.Push(s);  // last: when it throws, the slot was not queued
  } catch (const std::bad_alloc&) {
    reads_now_->Unplan(s);
    slots_->PutBack(s);
    return OutOfMemory([&] { return fmt::format("planning batch {} ({} samples)", batch_index, n); });
  }
  return s;
}

void Loader::Impl::FillSlot(Slot* s, int64_t run, int64_t batch_index, const std::vector<int64_t>& ids, size_t n) {
  s->run = run;
  s->epoch = sampler_->epoch();
  s->index = batch_index;
  s->size = static_cast<int64_t>(n);
  s->rows.resize(n);
  for (size_t i = 0; i < n; ++i) s->rows[i] = columns_.scalars().TableRow(ids[i]);
  {
    MutexLock l(&s->mu);
    s->error = Status::OK();
    s->skipped.assign(n, 0);
    s->skipped_count = 0;
  }
  s->gather_chunks = columns_.scalars().size() == 0 ? 0 : static_cast<uint32_t>((n + kGatherRows - 1) / kGatherRows);
  s->gather_next.store(0, std::memory_order_relaxed);
  // Reaches the consumer through the queue's lock.
  s->pending = static_cast<int64_t>(n * columns_.tensors().size()) + s->gather_chunks + 1;
  columns_.scalars().PrepareBatch(n, {&s->scalars, &s->strings, &s->scalar_valid});
  if (mapped_ != nullptr) mapped_->BeginBatch();
  planner_->Plan(s);
  reads_now_->Plan(s);
}

void Loader::Impl::SubmitBatch(Slot* s, std::vector<FetchRequest>& requests,
                               const std::function<void(size_t)>& on_started) {
  // The slot is queued: from here on it completes through FinishPending, whatever fails.
  for (const SlowRun& run : s->slow_runs) {
    if (Status st = decoder_->SubmitSlow(&run); !st.ok()) {
      SampleDecoder::FailBatch(s, std::move(st));
      queue_.FinishPending(s, run.end - run.begin);
    }
  }
  // The batch's reads go to the fetcher together (one system call where nothing waits); the
  // completer learns of them as the fetcher starts them.
  requests.clear();
  const int64_t submit_ns = NowNanos();
  for (size_t g = 0; g < s->num_reads; ++g) {
    Read& r = s->reads[g];
    if (r.now) continue;  // the consumer may be reading it already
    r.submit_ns = submit_ns;
    requests.push_back(RequestOf(*s, static_cast<uint32_t>(g)));
  }
  // The reads at once first: until they are done their files stay pinned, and a Submit below may
  // wait for a descriptor (a batch can span more files than max_open_files) that only they free.
  // Those the page cache cannot serve join the fetcher's.
  if (!s->now_reads.empty()) reads_now_->ReadClaimed(s, &requests);
  for (size_t g = 0; g < requests.size();) {
    if (stop_) {
      // Not submitted: account their samples as done so the slot can complete.
      for (; g < requests.size(); ++g) {
        queue_.FinishPending(s, static_cast<int64_t>(ReadOfTag(*s, requests[g].tag).members.size()));
      }
      break;
    }
    size_t queued = 0;
    Status st = fetcher_->Submit(std::span(requests).subspan(g), &queued, on_started);
    g += queued;
    if (!st.ok()) {  // out of memory, or a request the planner should not have made: not the sample's fault
      SampleDecoder::FailBatch(s, std::move(st));
      queue_.FinishPending(s, static_cast<int64_t>(ReadOfTag(*s, requests[g].tag).members.size()));
      ++g;
    }
  }
  // A batch without mapped reads has its scalar values copied here, while its reads go on: the
  // consumer sleeps while the fetcher reads, and may not be there to copy them soon.
  if (s->mapped_copies.empty()) {
    while (CopyOnce(s)) {
    }
  }
  queue_.FinishPending(s, 1);  // planning done
}

bool Loader::Impl::CopyOnce(Slot* s) {
  const uint32_t k = s->gather_next.fetch_add(1, std::memory_order_relaxed);
  if (k >= s->gather_chunks) return reads_now_->CopyMappedOnce(s);
  const int64_t t0 = NowNanos();
  const size_t begin = size_t{k} * kGatherRows;
  const size_t end = std::min(begin + kGatherRows, static_cast<size_t>(s->size));
  try {
    AllocationFaults::Instance().Check();
    // A string longer than the slot's string held before allocates.
    columns_.scalars().Gather(s->rows, begin, end, {&s->scalars, &s->strings, &s->scalar_valid});
  } catch (const std::bad_alloc&) {
    SampleDecoder::FailBatch(s, OutOfMemory([&] {
                               return fmt::format("copying the scalar values of rows {} to {} of batch {}", begin,
                                                  end, s->index);
                             }));
  }
  telemetry_.Trace(TraceStage::kCollate, t0, NowNanos(), s->index, 0);
  queue_.FinishPending(s, 1);
  return true;
}

bool Loader::Impl::CopyOldest() {
  Slot* s = queue_.OldestWith(&HasCopies, nullptr);
  if (s == nullptr) return false;
  CopyOnce(s);
  return true;
}

bool Loader::Impl::ProducerCopies() {
  size_t with_copies = 0;
  Slot* oldest = queue_.OldestWith(&HasCopies, &with_copies);
  if (oldest == nullptr || (with_copies < kPlanAhead && !slots_->WouldWait())) return false;
  CopyOnce(oldest);
  return true;
}

bool Loader::Impl::WaitAwake(int64_t deadline) {
  const Slot* missed = nullptr;  // a batch whose reads at once met the disk: left to the producer
  for (bool first = true;; first = false) {
    const uint64_t seen = queue_.events();
    Slot* s = nullptr;
    if (queue_.Ready(&s)) return first;
    if (s != nullptr && s != missed && ReadsNow::Unclaimed(*s)) {
      if (reads_now_->ReadClaimed(s, nullptr)) missed = s;
      continue;
    }
    if (CopyOldest()) continue;
    while (queue_.events() == seen) {
      if (NowNanos() >= deadline) {
        // Past the spin: asleep until a batch is queued (it may have reads at once to help with) or
        // ready, where reads at once are done (local files, or mapped cache entries); else the
        // caller sleeps until the batch is ready.
        if (fetcher_ == nullptr || (!fetcher_->read_now() && mapped_ == nullptr)) return false;
        queue_.WaitForEvent(seen);
        break;
      }
      CpuRelax();
    }
  }
}

Result<Slot*> Loader::Impl::TakeOldestBatch() {
  const int64_t t0 = NowNanos();
  const bool ready_at_once = WaitAwake(last_wait_ns_ <= kSpinWaitNs ? t0 + kSpinWaitNs : 0);
  Result<Slot*> taken = queue_.WaitAndPop();
  const int64_t t1 = NowNanos();
  if (!ready_at_once) last_wait_ns_ = t1 - t0;
  telemetry_.wait_ns += t1 - t0;
  telemetry_.Trace(TraceStage::kWait, t0, t1, next_batch_index_, 0);
  MutexLock l(&mu_);
  if (!taken.ok() || *taken == nullptr) {
    epoch_done_ = true;
    end_reached_ = true;
    failed_ = !taken.ok();
    return taken;
  }
  ids_delivered_ += (*taken)->size;
  ++next_batch_index_;
  return taken;
}

Result<std::optional<Batch>> Loader::Impl::Next() {
  if (first_next_ns_ == 0) first_next_ns_ = NowNanos();
  {
    MutexLock l(&mu_);
    if (failed_) {
      return Status::InvalidArgument("the epoch failed earlier; call SetEpoch or Restore to start again");
    }
    if (epoch_done_) return std::optional<Batch>();
  }
  STOKE_RETURN_IF_ERROR(StartRun());
  for (;;) {
    STOKE_ASSIGN_OR_RETURN(Slot* s, TakeOldestBatch());
    if (s == nullptr) return std::optional<Batch>();
    std::unique_ptr<Batch::Impl> impl;
    try {
      AllocationFaults::Instance().Check();
      impl = std::make_unique<Batch::Impl>();
    } catch (const std::bad_alloc&) {
      slots_->PutBack(s);
      Fail();
      return OutOfMemory([] { return std::string("the consumer's view of a batch"); });
    }
    slots_->HandedOver();
    impl->pool = slots_->pool();
    impl->slot = s;
    Batch::Impl* batch_impl = impl.get();
    Batch batch(std::move(impl));  // returns the slot to the pool when it goes out of scope
    if (Status st = Deliver(s); !st.ok()) {
      Fail();
      return st;
    }
    batch_impl->size = s->size;
    if (s->size == 0) continue;  // every sample skipped: the slot goes back, try the next batch
    ++telemetry_.batches;
    telemetry_.samples += s->size;
    return std::optional<Batch>(std::move(batch));
  }
}

Status Loader::Impl::Deliver(Slot* s) {
  const int64_t tc = NowNanos();
  {
    // Uncontended: every worker is done with the slot (pending reached 0); the lock says so to the
    // analysis, and costs one uncontended lock per batch.
    MutexLock l(&s->mu);
    Status error = std::move(s->error);  // the slot is the consumer's now; its next use resets it
    if (!error.ok()) return error;
    telemetry_.skipped += s->skipped_count;
    slots_->CompactSkipped(s);
  }
  STOKE_RETURN_IF_ERROR(BuildColumns(s));
  telemetry_.Trace(TraceStage::kCollate, tc, NowNanos(), s->index, 0);
  return Status::OK();
}

Status Loader::Impl::BuildColumns(Slot* s) {
  try {
    AllocationFaults::Instance().Check();
    s->columns.clear();
    size_t ti = 0, si = 0;
    for (const auto& name : columns_.order()) {
      BatchColumn bc;
      bc.name = name;
      if (ti < columns_.tensors().size() && columns_.tensors()[ti].name == name) {
        const TensorColumn& t = columns_.tensors()[ti];
        bc.kind = ColumnKind::kTensor;
        bc.dtype = t.out_dtype;
        bc.shape.push_back(s->size);
        for (int64_t d : t.out_shape) bc.shape.push_back(d);
        bc.data_ = s->tensors[ti].data();
        bc.num_bytes = static_cast<size_t>(s->size) * t.out_bytes;
        bc.gpu_images = (t.encoded_image || t.use_image) && o_.transforms_on == LoaderOptions::TransformsOn::kCuda;
        ++ti;
      } else {
        const ScalarColumn& c = columns_.scalars().column(si);
        bc.shape = {s->size};
        bc.dtype = c.dtype;
        bc.kind = c.is_string ? ColumnKind::kString : ColumnKind::kScalar;
        if (c.is_string) {
          bc.strings.swap(s->strings[si]);  // back to the slot when it is reused (BatchSlots::Acquire)
        } else {
          bc.data_ = s->scalars[si].data();
          bc.num_bytes = static_cast<size_t>(s->size) * DTypeSize(c.dtype);
        }
        bc.valid = s->scalar_valid[si];
        ++si;
      }
      s->columns.push_back(std::move(bc));
    }
  } catch (const std::bad_alloc&) {
    return OutOfMemory([&] { return fmt::format("the consumer's view of batch {}", s->index); });
  }
  return Status::OK();
}

LoaderStats Loader::Impl::stats() const {
  LoaderStats st;
  st.batches = telemetry_.batches;
  st.samples = telemetry_.samples;
  st.samples_skipped = telemetry_.skipped;
  st.bytes_read = telemetry_.bytes_read + (columns_.slow_cells() ? columns_.slow_cells()->bytes_read() : 0);
  st.cells_decoded = columns_.slow_cells() ? columns_.slow_cells()->cells_decoded() : 0;
  const SampleDecoder::Cells cells = columns_.cells();
  st.pages_decoded = (cells.array ? cells.array->chunks_decoded() : 0) + (cells.binary ? cells.binary->chunks_decoded() : 0);
  st.reads_at_once = telemetry_.reads_at_once;
  st.reads_mapped = telemetry_.reads_mapped;
  st.sample_bytes = telemetry_.sample_bytes;
  st.wall_seconds = first_next_ns_ == 0 ? 0 : (NowNanos() - first_next_ns_) * 1e-9;
  st.wait_seconds = telemetry_.wait_ns * 1e-9;
  if (st.wall_seconds > 0) {
    st.samples_per_second = st.samples / st.wall_seconds;
    st.mb_per_second = st.bytes_read / st.wall_seconds / 1e6;
    st.wait_share = st.wait_seconds / st.wall_seconds;
  }
  const auto totals = telemetry_.trace().Totals();
  for (int k = 0; k < kNumTraceStages; ++k) {
    st.stage_seconds.emplace_back(std::string(TraceStageName(static_cast<TraceStage>(k))), totals[k].busy_ns * 1e-9);
  }
  st.backend = fetcher_ ? fetcher_->backend_name() : "none";
  st.workers = static_cast<int64_t>(threads_);
  st.read_threads = fetcher_ ? static_cast<int64_t>(fetcher_->read_threads()) : 0;
  return st;
}

ShuffleQuality Loader::Impl::MeasureShuffle(bool global) const {
  // A sampler of its own: the loader's is the producer's while a run is active.
  SamplerOptions so = sampler_options_;
  if (global) so.shuffle = SamplerOptions::Shuffle::kGlobal;
  auto sampler = Sampler::Create(block_sizes_, so);
  if (!sampler.ok()) return {};
  // epoch() and start_consumed_ change only between runs, so reading them here does not race.
  if (!sampler->Restore({sampler_->epoch(), start_consumed_}).ok()) return {};
  const Sampler::Quality q = sampler->MeasureQuality(o_.batch_size, file_starts_);
  return ShuffleQuality{q.mean_jump, q.distinct_block_fraction};
}

Status Loader::Impl::WriteTrace(const std::string& path) const {
  if (!o_.trace) return Status::InvalidArgument("WriteTrace: the loader was opened without trace = true");
  return telemetry_.trace().WriteChromeTrace(path, "stoke loader");
}

// Loader: forwards to Impl.
Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

}  // namespace stoke
