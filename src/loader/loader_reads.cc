// The loader's batch slots and read planning (loader_impl.h): the producer takes a slot, plans a
// batch's page reads (coalescing neighbours) and submits them, or does them at once when they are small
// and cached.
#include "loader/loader_impl.h"

namespace stoke {

Result<Slot*> Loader::Impl::AcquireSlot() {
  MutexLock l(&pool_->mu);
  for (;;) {
    if (stop_) return static_cast<Slot*>(nullptr);
    if (!pool_->free.empty()) {
      Slot* s = pool_->free.back();
      pool_->free.pop_back();
      return s;
    }
    // Grow up to max_slots_; beyond it only when the consumer holds every slot (it could never
    // release one while waiting for the next batch): memory over the budget rather than a hang.
    const bool consumer_holds_all = pool_->held_by_consumer >= static_cast<int64_t>(pool_->all.size());
    if (pool_->all.size() < max_slots_ || consumer_holds_all) {
      const size_t bs = batch_rows_;
      try {
        if (pool_->all.size() == max_slots_) {
          STOKE_LOG(kWarn, "loader.over_budget", "held_batches={} note=\"the consumer holds every batch buffer; allocating "
                    "beyond prefetch_bytes (release batches sooner, or raise prefetch_bytes)\"", pool_->all.size());
        }
        AllocationFaults::Instance().Check();
        auto slot = std::make_unique<Slot>();
        slot->id = static_cast<uint32_t>(pool_->all.size());
        for (const auto& t : tensors_) slot->tensors.emplace_back(t.out_bytes * bs, o_.pin_memory);
        for (const auto& sc : scalars_.columns()) {
          slot->scalars.emplace_back(sc.is_string ? 0 : bs * DTypeSize(sc.dtype));
          slot->scalar_valid.emplace_back();
          slot->strings.emplace_back();
        }
        Slot* raw = slot.get();
        pool_->all.push_back(std::move(slot));
        // Room for every slot on the free list, so that returning one never allocates.
        pool_->free.reserve(pool_->all.size());
        return raw;
      } catch (const std::bad_alloc&) {
        size_t bytes = 0;
        for (const auto& t : tensors_) bytes += t.out_bytes * bs;
        const size_t number = pool_->all.size();  // read here, under the lock: the lambda is analysed apart
        return OutOfMemory([&] {
          return fmt::format("batch buffer {} ({} bytes of tensors for batch_size {}); lower batch_size or prefetch_bytes",
                             number, bytes, o_.batch_size);
        });
      }
    }
    pool_->cv.Wait(&pool_->mu);
  }
}

Status Loader::Impl::PlanReads(Slot* s, std::vector<Read>* slow) {
  s->num_reads = 0;
  FindCells(s, slow);
  CoalesceCells(s);
  return Status::OK();
}

void Loader::Impl::FindCells(Slot* s, std::vector<Read>* slow) const {
  std::vector<PlannedCell>& cells = s->cells;
  cells.clear();
  std::vector<SampleIndex::Location>& found = s->locations;  // [column][sample]
  found.resize(static_cast<size_t>(s->size) * tensors_.size());
  for (uint32_t c = 0; c < tensors_.size(); ++c) {
    if (tensors_[c].chunked()) continue;
    index_->FindMany(s->rows.data(), static_cast<size_t>(s->size), tensors_[c].index_column,
                     found.data() + static_cast<size_t>(c) * static_cast<size_t>(s->size));
  }
  for (uint32_t i = 0; i < static_cast<uint32_t>(s->size); ++i) {
    for (uint32_t c = 0; c < tensors_.size(); ++c) {
      if (tensors_[c].chunked()) {  // decoded from its column chunk; rows in order, so a chunk's rows go together
        Read r;
        r.offset = static_cast<uint64_t>(s->rows[i]);
        r.members.push_back({.sample = i, .column = c});
        slow->push_back(std::move(r));
        continue;
      }
      const SampleIndex::Location& loc = found[static_cast<size_t>(c) * static_cast<size_t>(s->size) + i];
      // Image pages are read one by one (the decoded-page cache holds fixed-size tensors).
      if (loc.needs_decode || (!tensors_[c].encoded_image && SlowCells::InPageCache(loc))) {
        Read r;
        r.file = loc.file;
        r.offset = loc.offset;
        r.members.push_back({.sample = i, .column = c});
        slow->push_back(std::move(r));
        continue;
      }
      cells.push_back({loc, i, c});
    }
  }
  std::sort(cells.begin(), cells.end(), [](const PlannedCell& a, const PlannedCell& b) {
    return a.loc.file != b.loc.file ? a.loc.file < b.loc.file : a.loc.offset < b.loc.offset;
  });
  // Cells of one cached page are queued together: the page is decoded once for all of them, even
  // when the cache cannot hold every page the batch touches.
  std::stable_sort(slow->begin(), slow->end(), [](const Read& a, const Read& b) {
    return a.file != b.file ? a.file < b.file : a.offset < b.offset;
  });
}

namespace {

// The slot's next read (reusing its vector's entries from batch to batch).
Read& NewRead(Slot* s, uint32_t file, uint64_t offset, uint32_t length) {
  if (s->num_reads == s->reads.size()) s->reads.emplace_back();
  Read& r = s->reads[s->num_reads++];
  r.Reset(s, file, offset, length);
  return r;
}

}  // namespace

void Loader::Impl::CoalesceCells(Slot* s) const {
  const std::vector<PlannedCell>& cells = s->cells;
  const uint64_t max_read = static_cast<uint64_t>(remote_ ? o_.remote_coalesce_bytes : o_.coalesce_bytes);
  const uint64_t max_gap = remote_ ? static_cast<uint64_t>(o_.remote_coalesce_gap_bytes) : 0;
  for (size_t k = 0; k < cells.size(); ++k) {
    const PlannedCell& cell = cells[k];
    const auto& loc = cell.loc;
    const TensorColumn& t = tensors_[cell.column];
    if (!o_.direct && !remote_ && loc.rows_in_page == 1 && loc.codec == parquet::Codec::kUncompressed &&
        !loc.definition_levels && t.direct() && !t.encoded_image && loc.length > t.in_bytes) {
      Read& r = NewRead(s, loc.file, loc.offset, loc.length);
      r.tail = s->tensors[cell.column].data() + static_cast<size_t>(cell.sample) * t.out_bytes;
      r.head_length = static_cast<uint32_t>(loc.length - t.in_bytes);
      r.members.push_back({cell.sample, cell.column, 0, loc.length, 0, 1, loc.codec});
      continue;
    }
    Read* last = s->num_reads == 0 || s->reads[s->num_reads - 1].tail != nullptr ? nullptr : &s->reads[s->num_reads - 1];
    // Coalesce with the previous read when this page is the same page (another row of a packed page),
    // or starts where it ends (local files) or at most max_gap after (object stores, where a request
    // costs more than reading the gap), and the merged read stays within max_read.
    if (last != nullptr && last->file == loc.file && max_read > 0) {
      const uint64_t end = last->offset + last->length;
      const ReadMember& prev = last->members.back();
      const uint64_t prev_page = last->offset + prev.offset;
      if (loc.offset == prev_page && loc.length == prev.length) {
        last->members.push_back({cell.sample, cell.column, prev.offset, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                                  loc.definition_levels});
        continue;
      }
      // Open keeps max_read <= kMaxCoalesceBytes, so the merged length and offsets fit 32 bits.
      if (loc.offset >= end && loc.offset - end <= max_gap && loc.offset + loc.length - last->offset <= max_read) {
        const uint32_t at = static_cast<uint32_t>(loc.offset - last->offset);
        last->members.push_back({cell.sample, cell.column, at, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                                  loc.definition_levels});
        last->length = at + loc.length;
        continue;
      }
    }
    Read& r = NewRead(s, loc.file, loc.offset, loc.length);
    r.members.push_back({cell.sample, cell.column, 0, loc.length, loc.row_in_page, loc.rows_in_page, loc.codec,
                         loc.definition_levels});
  }
}

Result<Slot*> Loader::Impl::PlanBatch(int64_t run, int64_t batch_index, std::vector<int64_t>& ids,
                                      std::vector<Read>* slow) {
  const int64_t t0 = NowNanos();
  const size_t n = sampler_->NextBatch(ids.data(), ids.size());
  if (n == 0 || (o_.drop_last && n < static_cast<size_t>(o_.batch_size))) return static_cast<Slot*>(nullptr);
  STOKE_ASSIGN_OR_RETURN(Slot* s, AcquireSlot());
  if (s == nullptr) return s;
  auto give_back = [&] {  // the slot was not queued
    for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
    s->now_files.clear();
    {
      MutexLock pl(&pool_->mu);
      pool_->free.push_back(s);  // reserved in AcquireSlot: does not allocate
    }
    pool_->cv.SignalAll();
  };
  try {
    s->now_files.clear();  // nothing pinned yet (give_back unpins what is listed)
    s->now_reads.clear();
    AllocationFaults::Instance().Check();
    s->run = run;
    s->epoch = sampler_->epoch();
    s->index = batch_index;
    s->size = static_cast<int64_t>(n);
    s->rows.resize(n);
    for (size_t i = 0; i < n; ++i) s->rows[i] = scalars_.TableRow(ids[i]);
    {
      MutexLock l(&s->mu);
      s->error = Status::OK();
      s->skipped.assign(n, 0);
      s->skipped_count = 0;
    }
    s->pending = static_cast<int64_t>(n * tensors_.size()) + 1;  // reaches the consumer through queue_ (mu_)
    const int64_t tc = NowNanos();
    scalars_.Gather(s->rows, {&s->scalars, &s->strings, &s->scalar_valid});
    Trace(TraceStage::kCollate, tc, NowNanos(), s->index, 0);
    slow->clear();
    if (Status plan = PlanReads(s, slow); !plan.ok()) {
      give_back();
      return plan;
    }
    PlanReadsNow(s);
    Trace(TraceStage::kPlan, t0, NowNanos(), s->index, 0);
    {
      MutexLock l(&mu_);
      queue_.push_back(s);  // last: when it throws, the slot was not queued
    }
    ready_events_.fetch_add(1, std::memory_order_release);  // a consumer waiting awake may help with its reads
  } catch (const std::bad_alloc&) {
    give_back();
    return OutOfMemory([&] { return fmt::format("planning batch {} ({} samples)", batch_index, n); });
  }
  return s;
}

void Loader::Impl::PlanReadsNow(Slot* s) {
  s->now_reads.clear();
  s->now_files.clear();
  s->now_next.store(0, std::memory_order_relaxed);
  s->now_left.store(0, std::memory_order_relaxed);
  if (!fetcher_ || !fetcher_->read_now()) return;
  if (read_now_missed_.exchange(false, std::memory_order_relaxed)) {
    read_now_backoff_ = std::min<int64_t>(std::max<int64_t>(1, read_now_backoff_ * 2), 64);
    read_now_skip_ = read_now_backoff_;
  } else if (read_now_tried_) {
    read_now_backoff_ = 0;
  }
  read_now_tried_ = false;
  if (read_now_skip_ > 0) {
    --read_now_skip_;
    return;
  }
  // Room for every read first: a push below never throws with files pinned.
  s->now_reads.reserve(s->num_reads);
  s->now_files.reserve(s->num_reads);
  const int64_t now = NowNanos();
  uint32_t file = std::numeric_limits<uint32_t>::max();  // no file index is this large
  int fd = -1;
  for (size_t g = 0; g < s->num_reads; ++g) {
    Read& r = s->reads[g];
    if (r.tail == nullptr || r.length >= kReadNowBytes || r.head_length > kMaxReadNowHead) continue;
    // Reads are in file order: one pin (or one attempt) per file of the batch.
    if (r.file != file) {
      file = r.file;
      Result<int> pinned = fetcher_->PinForReadNow(file);  // -1: no descriptor free now
      fd = pinned.ok() ? *pinned : -1;  // an error comes again from Submit, naming the read
      if (fd >= 0) s->now_files.push_back(file);
    }
    if (fd < 0) continue;
    r.now = true;
    r.now_fd = fd;
    r.submit_ns = now;
    s->now_reads.push_back(static_cast<uint32_t>(g));
  }
  s->now_left.store(static_cast<uint32_t>(s->now_reads.size()), std::memory_order_relaxed);
  read_now_tried_ = !s->now_reads.empty();
}

void Loader::Impl::FinishReadsNow(Slot* s, uint32_t n) {
  if (s->now_left.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  for (uint32_t f : s->now_files) fetcher_->UnpinForReadNow(f);
}

bool Loader::Impl::ReadClaimedNow(Slot* s, std::vector<FetchRequest>* missed) {
  const uint32_t n = static_cast<uint32_t>(s->now_reads.size());
  auto request = [s](uint32_t k) { return RequestOf(*s, s->now_reads[k]); };
  for (;;) {
    const uint32_t k = s->now_next.fetch_add(1, std::memory_order_relaxed);
    if (k >= n) return false;
    Read& r = s->reads[s->now_reads[k]];
    const FetchRequest q = request(k);
    uint8_t head[kMaxReadNowHead];
    // False when the page cache lacks some of the bytes (only without `wait`); else the read is over,
    // failed when `error` says so. Its error message is the one allocation here: without memory for
    // it the read fails the batch (out of memory, as elsewhere) instead of an exception leaving the
    // claim unfinished.
    Status error;
    auto read_now = [&](bool wait) -> bool {
      try {
        Result<bool> got = fetcher_->ReadNow(r.now_fd, q, head, wait);
        if (got.ok()) return *got;
        error = got.status();
      } catch (const std::bad_alloc&) {
        r.out_of_memory = true;
        error = OutOfMemory([&] { return fmt::format("the error of a {}-byte read", q.length); });
      }
      return true;
    };
    const bool miss = !read_now(/*wait=*/false);
    if (miss) {  // not all in the page cache
      read_now_missed_.store(true, std::memory_order_relaxed);
      if (missed != nullptr) {
        // The producer: this read and those nobody claimed yet go to the fetcher, which keeps the
        // queue depth at the disk.
        const uint32_t rest = std::min(s->now_next.exchange(n, std::memory_order_relaxed), n);
        missed->push_back(q);
        for (uint32_t j = rest; j < n; ++j) missed->push_back(request(j));
        FinishReadsNow(s, 1 + (n - rest));
        return true;
      }
      read_now(/*wait=*/true);  // a consumer: this batch is what it waits for
    }
    FinishReadsNow(s, 1);  // before the decode counts the samples done: the slot is not handed over yet
    if (error.ok()) {
      Trace(TraceStage::kFetch, r.submit_ns, NowNanos(), s->index, r.length);
      stat_bytes_read_ += r.length;
      stat_reads_at_once_ += 1;
      r.bytes = ByteView(head, r.head_length);
    } else {
      r.status = std::move(error);
    }
    DecodeRead(r);  // counts the read's samples done: the batch may be handed over after it
    if (miss) return true;  // a consumer: one wait for the disk per batch, the producer does the rest
  }
}

Status Loader::Impl::SubmitDecode(Read* first) {
  {
    MutexLock l(&mu_);
    ++tasks_;
  }
  try {
    AllocationFaults::Instance().Check();
    // Two words of captures: std::function keeps them inline, so queueing reads allocates nothing.
    workers_->Submit([this, first] {
      for (Read* r = first; r != nullptr;) {
        // Read the link first: once its samples are done the batch may be delivered and its slot reused.
        Read* next = r->next_in_task;
        DecodeRead(*r);
        r = next;
      }
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing reads for the decode workers"); });
  }
  return Status::OK();
}

Status Loader::Impl::SubmitSlowDecode(Slot* s, uint32_t sample, uint32_t column) {
  {
    MutexLock l(&mu_);
    ++tasks_;
  }
  try {
    AllocationFaults::Instance().Check();
    workers_->Submit([this, s, sample, column] {
      DecodeSlow(s, sample, column);
      TaskDone();
    });
  } catch (const std::bad_alloc&) {
    TaskDone();
    return OutOfMemory([] { return std::string("queueing a sample for the decode workers"); });
  }
  return Status::OK();
}

}  // namespace stoke
