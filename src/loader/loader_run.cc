// The loader's run loop (loader_impl.h): a run's threads (the producer, the completer) are started
// and stopped here, and the consumer's Next() waits for the oldest batch; epoch, resume state and
// statistics.
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
    producer_done_ = false;
    producer_error_ = Status::OK();
    submitted_ = taken_ = completed_ = 0;
    ids_delivered_ = 0;
    end_reached_ = false;
    epoch_done_ = false;
    failed_ = false;
    next_batch_index_ = 0;
    const int64_t run = run_;
    try {
      producer_ = std::thread([this, run] { ProducerLoop(run); });
      if (fetcher_) completer_ = std::thread([this] { CompleterLoop(); });
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
  { MutexLock pl(&pool_->mu); }  // a producer about to wait in AcquireSlot sees stop_
  pool_->cv.SignalAll();
  completer_cv_.SignalAll();
  if (producer_.joinable()) producer_.join();
  if (completer_.joinable()) completer_.join();
  {
    MutexLock l(&mu_);
    while (tasks_ != 0) tasks_cv_.Wait(&mu_);
    // Batches planned but not delivered go back to the free list.
    for (Slot* s : queue_) {
      MutexLock pl(&pool_->mu);
      pool_->free.push_back(s);
    }
    queue_.clear();
    running_ = false;
    epoch_done_ = false;
    failed_ = false;
    ids_delivered_ = 0;
    end_reached_ = false;
  }
  pool_->cv.SignalAll();
}

void Loader::Impl::ProducerLoop(int64_t run) {
  NameThisThread("producer");
  std::vector<int64_t> ids;
  std::vector<Read> slow;
  std::vector<FetchRequest> requests;
  const std::function<void(size_t)> on_started = [this](size_t n) {
    {
      MutexLock l(&mu_);
      submitted_ += static_cast<int64_t>(n);
    }
    completer_cv_.Signal();
  };
  int64_t batch_index = 0;
  Status error;
  try {
    AllocationFaults::Instance().Check();
    ids.resize(batch_rows_);
    // At most one read per cell of a batch.
    requests.reserve(batch_rows_ * std::max<size_t>(tensors_.size(), 1));
  } catch (const std::bad_alloc&) {
    error = OutOfMemory([&] { return fmt::format("the sample ids of a batch of {}", o_.batch_size); });
  }
  while (error.ok() && !stop_) {
    Result<Slot*> planned = PlanBatch(run, batch_index, ids, &slow);
    if (!planned.ok()) {
      error = planned.status();
      break;
    }
    Slot* s = *planned;
    if (s == nullptr) break;
    ++batch_index;
    SubmitBatch(s, slow, requests, on_started);
  }
  {
    // Reads submitted by this thread must complete before it exits: io_uring cancels (ECANCELED) the
    // requests of a task that exits while they are queued for its async workers.
    MutexLock l(&mu_);
    while (completed_ != submitted_) completed_cv_.Wait(&mu_);
    producer_done_ = true;
    producer_error_ = std::move(error);
  }
  ready_events_.fetch_add(1, std::memory_order_release);
  cv_.SignalAll();
  completer_cv_.SignalAll();
}

void Loader::Impl::SubmitBatch(Slot* s, const std::vector<Read>& slow, std::vector<FetchRequest>& requests,
                               const std::function<void(size_t)>& on_started) {
  // The slot is queued: from here on it completes through FinishPending, whatever fails.
  for (auto& r : slow) {
    const ReadMember m = r.members[0];
    if (Status st = SubmitSlowDecode(s, m.sample, m.column); !st.ok()) {
      FailBatch(s, std::move(st));
      FinishPending(s, 1);
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
  if (!s->now_reads.empty()) ReadClaimedNow(s, &requests);
  // The read a request stands for.
  auto read_of = [s](const FetchRequest& q) -> Read& { return s->reads[static_cast<size_t>(q.tag & 0xFFFFFFFFu)]; };
  for (size_t g = 0; g < requests.size();) {
    if (stop_) {
      // Not submitted: account their samples as done so the slot can complete.
      for (; g < requests.size(); ++g) FinishPending(s, static_cast<int64_t>(read_of(requests[g]).members.size()));
      break;
    }
    size_t queued = 0;
    Status st = fetcher_->Submit(std::span(requests).subspan(g), &queued, on_started);
    g += queued;
    if (!st.ok()) {  // out of memory, or a request the planner should not have made: not the sample's fault
      FailBatch(s, std::move(st));
      FinishPending(s, static_cast<int64_t>(read_of(requests[g]).members.size()));
      ++g;
    }
  }
  FinishPending(s, 1);  // planning done
}

void Loader::Impl::TaskDone() {
  MutexLock l(&mu_);
  if (--tasks_ == 0) tasks_cv_.SignalAll();
}

void Loader::Impl::CompleterLoop() {
  NameThisThread("fetch-completion");
  // Results are taken in groups (all that completed, up to kMaxTaken) and their reads handed to the
  // workers in groups: per-read locks and wake-ups cost more than small cached reads themselves.
  constexpr size_t kMaxTaken = 64;
  std::array<FetchResult, kMaxTaken> results;
  std::array<Read*, kMaxTaken> reads{};
  std::array<Slot*, kMaxTaken> slots{};
  for (;;) {
    size_t wanted;
    {
      MutexLock l(&mu_);
      while (submitted_ == taken_ && !producer_done_) completer_cv_.Wait(&mu_);
      if (submitted_ == taken_) return;  // the producer is done and every read was taken
      wanted = static_cast<size_t>(std::min<int64_t>(submitted_ - taken_, kMaxTaken));
      taken_ += static_cast<int64_t>(wanted);
    }
    // Blocks until at least one of the `wanted` outstanding reads completes; the rest of `wanted`
    // that did not come back yet are given back to taken_ below.
    const size_t n = fetcher_->Next(results.data(), wanted);
    {
      MutexLock l(&mu_);
      taken_ -= static_cast<int64_t>(wanted - n);
      completed_ += static_cast<int64_t>(n);
    }
    completed_cv_.SignalAll();
    const int64_t now = NowNanos();
    {
      MutexLock l(&pool_->mu);  // `all` may grow on the producer thread
      for (size_t k = 0; k < n; ++k) slots[k] = pool_->all[static_cast<size_t>(results[k].tag >> 32)].get();
    }
    size_t live = 0;
    for (size_t k = 0; k < n; ++k) {
      FetchResult& r = results[k];
      Slot* s = slots[k];
      Read& read = s->reads[static_cast<size_t>(r.tag & 0xFFFFFFFFu)];
      Trace(TraceStage::kFetch, read.submit_ns, now, s->index, read.length);
      stat_bytes_read_ += read.length;
      read.status = std::move(r.status);
      read.out_of_memory = r.out_of_memory;
      read.bytes = r.bytes();  // the buffer's memory does not move with it
      read.tail_crc = r.tail_crc;
      read.data = std::move(r.data);
      read.next_in_task = nullptr;
      if (stop_) {
        if (read.status.ok()) fetcher_->Release(std::move(read.data));
        FinishPending(s, static_cast<int64_t>(read.members.size()));
        continue;
      }
      reads[live++] = &read;
    }
    HandOutDecodes(reads.data(), live);
  }
}

void Loader::Impl::HandOutDecodes(Read* const* reads, size_t live) {
  // Uncompressed reads that leave this little to do (a batch of 512-byte samples from the page
  // cache, or split reads whose sample a reading thread already put in its row and checksummed)
  // are decoded here: a header, a CRC and a copy cost less than waking a worker, and at 10,000s
  // of batches a second the hand-offs were what bounded the loader. Anything to decompress or
  // transform goes to the workers, on every core.
  constexpr uint64_t kInlineBytes = 32 << 10;
  uint64_t live_bytes = 0;
  bool plain = true;
  for (size_t k = 0; k < live && plain; ++k) {
    live_bytes += DecodeBytes(*reads[k]);
    for (const ReadMember& m : reads[k]->members) {
      plain = plain && m.codec == parquet::Codec::kUncompressed && tensors_[m.column].direct();
    }
  }
  if (plain && live_bytes <= kInlineBytes) {
    for (size_t k = 0; k < live; ++k) DecodeRead(*reads[k]);
    return;
  }
  // One task per share of the workers, but a new task once one holds kTaskBytes, so that large
  // reads are still decoded in parallel.
  constexpr uint64_t kTaskBytes = 256 << 10;
  const size_t workers = workers_->size();
  const size_t per_task = (live + workers - 1) / std::max<size_t>(workers, 1);
  for (size_t k = 0; k < live;) {
    size_t end = k + 1;
    uint64_t bytes = reads[k]->length;
    while (end < live && end - k < per_task && bytes < kTaskBytes) {
      reads[end - 1]->next_in_task = reads[end];
      bytes += reads[end]->length;
      ++end;
    }
    if (Status st = SubmitDecode(reads[k]); !st.ok()) {
      for (size_t j = k; j < end; ++j) {
        Read& read = *reads[j];
        FailBatch(read.slot, st);
        if (read.status.ok()) fetcher_->Release(std::move(read.data));
        FinishPending(read.slot, static_cast<int64_t>(read.members.size()));
      }
    }
    k = end;
  }
}

bool Loader::Impl::WaitAwake(int64_t deadline) {
  const Slot* missed = nullptr;  // a batch whose reads at once met the disk: left to the producer
  for (bool first = true;; first = false) {
    const uint64_t seen = ready_events_.load(std::memory_order_acquire);
    Slot* s = nullptr;
    {
      MutexLock l(&mu_);
      if (FrontReadyLocked()) return first;
      if (!queue_.empty()) s = queue_.front();  // stays the consumer's to read: only this thread pops the queue
    }
    if (s != nullptr && s != missed && s->now_next.load(std::memory_order_relaxed) < s->now_reads.size()) {
      if (ReadClaimedNow(s, nullptr)) missed = s;
      continue;
    }
    while (ready_events_.load(std::memory_order_acquire) == seen) {
      if (NowNanos() >= deadline) return false;
      CpuRelax();
    }
  }
}

Result<Slot*> Loader::Impl::TakeOldestBatch() {
  const int64_t t0 = NowNanos();
  const bool ready_at_once = WaitAwake(last_wait_ns_ <= kSpinWaitNs ? t0 + kSpinWaitNs : 0);
  MutexLock l(&mu_);
  // The oldest batch is ready (Slot::pending says why acquire suffices), or none will come.
  while (!FrontReadyLocked()) cv_.Wait(&mu_);
  const int64_t t1 = NowNanos();
  if (!ready_at_once) last_wait_ns_ = t1 - t0;
  stat_wait_ns_ += t1 - t0;
  Trace(TraceStage::kWait, t0, t1, next_batch_index_, 0);
  if (queue_.empty()) {
    epoch_done_ = true;
    end_reached_ = true;
    if (!producer_error_.ok()) {
      failed_ = true;
      return producer_error_;
    }
    return nullptr;
  }
  Slot* s = queue_.front();
  queue_.pop_front();
  ids_delivered_ += s->size;
  ++next_batch_index_;
  return s;
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
      {
        MutexLock pl(&pool_->mu);
        pool_->free.push_back(s);  // reserved in AcquireSlot: does not allocate
      }
      pool_->cv.SignalAll();
      MutexLock l(&mu_);
      failed_ = true;
      return OutOfMemory([] { return std::string("the consumer's view of a batch"); });
    }
    {
      MutexLock pl(&pool_->mu);
      ++pool_->held_by_consumer;
    }
    pool_->cv.SignalAll();  // a producer waiting for a slot may now grow the pool
    impl->pool = pool_;
    impl->slot = s;
    Batch::Impl* batch_impl = impl.get();
    Batch batch(std::move(impl));  // returns the slot to the pool when it goes out of scope
    const int64_t tc = NowNanos();
    Status error;
    {
      // Uncontended: every worker is done with the slot (pending reached 0); the lock says so to the
      // analysis, and costs one uncontended lock per batch.
      MutexLock l(&s->mu);
      error = std::move(s->error);  // the slot is the consumer's now; its next use resets it
      if (error.ok()) {
        stat_skipped_ += s->skipped_count;
        CompactSkipped(s);
      }
    }
    if (!error.ok()) {
      MutexLock l(&mu_);
      failed_ = true;
      return error;
    }
    // The consumer's view of the slot.
    if (Status st = BuildColumns(s); !st.ok()) {
      MutexLock l(&mu_);
      failed_ = true;
      return st;
    }
    Trace(TraceStage::kCollate, tc, NowNanos(), s->index, 0);
    batch_impl->size = s->size;
    if (s->size == 0) continue;  // every sample skipped: the slot goes back, try the next batch
    ++stat_batches_;
    stat_samples_ += s->size;
    return std::optional<Batch>(std::move(batch));
  }
}

LoaderStats Loader::Impl::stats() const {
  LoaderStats st;
  st.batches = stat_batches_;
  st.samples = stat_samples_;
  st.samples_skipped = stat_skipped_;
  st.bytes_read = stat_bytes_read_ + (slow_cells_ ? slow_cells_->bytes_read() : 0);
  st.cells_decoded = slow_cells_ ? slow_cells_->cells_decoded() : 0;
  st.reads_at_once = stat_reads_at_once_;
  st.sample_bytes = stat_sample_bytes_;
  st.wall_seconds = first_next_ns_ == 0 ? 0 : (NowNanos() - first_next_ns_) * 1e-9;
  st.wait_seconds = stat_wait_ns_ * 1e-9;
  if (st.wall_seconds > 0) {
    st.samples_per_second = st.samples / st.wall_seconds;
    st.mb_per_second = st.bytes_read / st.wall_seconds / 1e6;
    st.wait_share = st.wait_seconds / st.wall_seconds;
  }
  const auto totals = trace_.Totals();
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
  const Sampler::Quality q = sampler->MeasureQuality(o_.batch_size);
  return ShuffleQuality{q.mean_jump, q.distinct_block_fraction};
}

Status Loader::Impl::WriteTrace(const std::string& path) const {
  if (!o_.trace) return Status::InvalidArgument("WriteTrace: the loader was opened without trace = true");
  return trace_.WriteChromeTrace(path, "stoke loader");
}

// Loader: forwards to Impl.
Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

}  // namespace stoke
