#include "loader/read_completer.h"

#include <algorithm>
#include <array>

#include "core/clock.h"
#include "format/codec.h"
#include "loader/page_decoder.h"

namespace stoke {
namespace {

// The page body's CRC of a split read from its tail's (FetchResult::tail_crc).
uint32_t BodyCrc(const Read& read, uint32_t tail_crc) {
  const uint32_t tail_bytes = read.length - read.head_length;
  return Crc32Combine(SplitPrefixCrc(tail_bytes), tail_crc, tail_bytes);
}

}  // namespace

void ReadCompleter::Reset() {
  MutexLock l(&mu_);
  started_ = taken_ = completed_ = 0;
  producer_done_ = false;
}

void ReadCompleter::Started(size_t n) {
  {
    MutexLock l(&mu_);
    started_ += static_cast<int64_t>(n);
  }
  cv_.Signal();
}

void ReadCompleter::ProducerDone() {
  {
    MutexLock l(&mu_);
    while (completed_ != started_) completed_cv_.Wait(&mu_);
    producer_done_ = true;
  }
  cv_.SignalAll();
}

void ReadCompleter::Run() {
  telemetry_->NameThisThread("fetch-completion");
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
      while (started_ == taken_ && !producer_done_) cv_.Wait(&mu_);
      if (started_ == taken_) return;  // the producer is done and every read was taken
      wanted = static_cast<size_t>(std::min<int64_t>(started_ - taken_, kMaxTaken));
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
    slots_->SlotsOf(results.data(), n, slots.data());
    size_t live = 0;
    for (size_t k = 0; k < n; ++k) {
      FetchResult& r = results[k];
      Slot* s = slots[k];
      Read& read = ReadOfTag(*s, r.tag);
      telemetry_->Trace(TraceStage::kFetch, read.submit_ns, now, s->index, read.length);
      telemetry_->bytes_read += read.length;
      read.status = std::move(r.status);
      read.out_of_memory = r.out_of_memory;
      read.bytes = r.bytes();  // the buffer's memory does not move with it
      if (r.tail_crc.has_value()) read.body_crc = BodyCrc(read, *r.tail_crc);
      read.data = std::move(r.data);
      read.next_in_task = nullptr;
      if (stop_) {
        if (read.status.ok()) fetcher_->Release(std::move(read.data));
        queue_->FinishPending(s, static_cast<int64_t>(read.members.size()));
        continue;
      }
      reads[live++] = &read;
    }
    HandOut(reads.data(), live);
  }
}

void ReadCompleter::HandOut(Read* const* reads, size_t live) {
  // Uncompressed reads that leave this little to do (a batch of 512-byte samples from the page
  // cache, or split reads whose sample a reading thread already put in its row and checksummed)
  // are decoded here: a header, a CRC and a copy cost less than waking a worker, and at 10,000s
  // of batches a second the hand-offs were what bounded the loader. Anything to decompress or
  // transform goes to the workers, on every core.
  constexpr uint64_t kInlineBytes = 32 << 10;
  uint64_t live_bytes = 0;
  bool plain = true;
  for (size_t k = 0; k < live && plain; ++k) {
    live_bytes += decoder_->DecodeBytes(*reads[k]);
    for (const ReadMember& m : reads[k]->members) {
      plain = plain && m.codec == parquet::Codec::kUncompressed && tensors_[m.column].direct();
    }
  }
  if (plain && live_bytes <= kInlineBytes) {
    for (size_t k = 0; k < live; ++k) decoder_->DecodeRead(*reads[k]);
    return;
  }
  // One task per share of the workers, but a new task once one holds kTaskBytes, so that large
  // reads are still decoded in parallel.
  constexpr uint64_t kTaskBytes = 256 << 10;
  const size_t workers = decoder_->workers();
  const size_t per_task = (live + workers - 1) / std::max<size_t>(workers, 1);
  for (size_t k = 0; k < live;) {
    size_t end = k + 1;
    uint64_t bytes = reads[k]->length;
    while (end < live && end - k < per_task && bytes < kTaskBytes) {
      reads[end - 1]->next_in_task = reads[end];
      bytes += reads[end]->length;
      ++end;
    }
    if (Status st = decoder_->SubmitReads(reads[k]); !st.ok()) FailTask(reads + k, end - k, st);
    k = end;
  }
}

void ReadCompleter::FailTask(Read* const* reads, size_t n, const Status& st) {
  for (size_t j = 0; j < n; ++j) {
    Read& read = *reads[j];
    SampleDecoder::FailBatch(read.slot, st);
    if (read.status.ok()) fetcher_->Release(std::move(read.data));
    queue_->FinishPending(read.slot, static_cast<int64_t>(read.members.size()));
  }
}

}  // namespace stoke
