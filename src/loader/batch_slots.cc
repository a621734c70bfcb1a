#include "loader/batch_slots.h"

#include <fmt/format.h>

#include <cstring>

#include "core/log.h"
#include "loader/out_of_memory.h"

namespace stoke {

void Read::Reset(Slot* s, uint32_t f, uint64_t off, uint32_t len) {
  slot = s;
  file = f;
  offset = off;
  length = len;
  submit_ns = 0;
  tail = nullptr;
  head_length = 0;
  members.clear();
  data = AlignedBuffer();
  bytes = ByteView();
  body_crc.reset();
  status = Status::OK();
  out_of_memory = false;
  now = false;
  now_fd = -1;
}

void SlotPool::Return(Slot* s) {
  {
    MutexLock l(&mu);
    free.push_back(s);
    --held_by_consumer;
  }
  cv.SignalAll();
}

// The string columns' vectors that the consumer's view took (Loader::Impl::BuildColumns swaps them
// out of the slot instead of copying every string) go back to the slot, with their strings'
// capacity, for the next batch's ScalarColumns::Gather.
void BatchSlots::ReclaimStrings(Slot* s) {
  size_t scalar = 0;
  for (BatchColumn& c : s->columns) {
    if (c.kind == ColumnKind::kTensor) continue;
    if (c.kind == ColumnKind::kString && scalar < s->strings.size()) c.strings.swap(s->strings[scalar]);
    ++scalar;
  }
}

Result<Slot*> BatchSlots::Acquire(const std::atomic<bool>& stop) {
  MutexLock l(&pool_->mu);
  for (;;) {
    if (stop) return static_cast<Slot*>(nullptr);
    if (!pool_->free.empty()) {
      Slot* s = pool_->free.back();
      pool_->free.pop_back();
      ReclaimStrings(s);
      return s;
    }
    if (MayGrowLocked()) return NewSlotLocked();
    pool_->cv.Wait(&pool_->mu);
  }
}

bool BatchSlots::WouldWait() const {
  MutexLock l(&pool_->mu);
  return pool_->free.empty() && !MayGrowLocked();
}

bool BatchSlots::MayGrowLocked() const {
  // Up to max_slots; beyond it only when the consumer holds every slot (it could never release one
  // while waiting for the next batch): memory over the budget rather than a hang.
  const bool consumer_holds_all = pool_->held_by_consumer >= static_cast<int64_t>(pool_->all.size());
  return pool_->all.size() < o_.max_slots || consumer_holds_all;
}

Result<Slot*> BatchSlots::NewSlotLocked() {
  const size_t bs = o_.batch_rows;
  try {
    if (pool_->all.size() == o_.max_slots) {
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

void BatchSlots::PutBack(Slot* s) {
  {
    MutexLock l(&pool_->mu);
    pool_->free.push_back(s);  // reserved in NewSlotLocked: does not allocate
  }
  pool_->cv.SignalAll();
}

void BatchSlots::HandedOver() {
  {
    MutexLock l(&pool_->mu);
    ++pool_->held_by_consumer;
  }
  pool_->cv.SignalAll();  // a producer waiting for a slot may now grow the pool
}

void BatchSlots::Wake() {
  { MutexLock l(&pool_->mu); }  // a producer about to wait in Acquire sees what changed
  pool_->cv.SignalAll();
}

void BatchSlots::SlotsOf(const FetchResult* results, size_t n, Slot** slots) {
  MutexLock l(&pool_->mu);  // `all` may grow on the producer thread
  for (size_t k = 0; k < n; ++k) slots[k] = pool_->all[SlotIdOfTag(results[k].tag)].get();
}

void BatchSlots::CompactSkipped(Slot* s) {
  if (s->skipped_count == 0) return;
  const size_t n = static_cast<size_t>(s->size);
  size_t w = 0;
  for (size_t i = 0; i < n; ++i) {
    if (s->skipped[i]) continue;
    if (w != i) {
      for (size_t c = 0; c < tensors_.size(); ++c) {
        const size_t b = tensors_[c].out_bytes;
        std::memmove(s->tensors[c].data() + w * b, s->tensors[c].data() + i * b, b);
      }
      for (size_t k = 0; k < scalars_.size(); ++k) {
        if (scalars_.column(k).is_string) {
          s->strings[k][w] = std::move(s->strings[k][i]);
        } else {
          const size_t es = DTypeSize(scalars_.column(k).dtype);
          std::memmove(s->scalars[k].data() + w * es, s->scalars[k].data() + i * es, es);
        }
        if (!s->scalar_valid[k].empty()) s->scalar_valid[k][w] = s->scalar_valid[k][i];
      }
      s->rows[w] = s->rows[i];
    }
    ++w;
  }
  s->rows.resize(w);
  for (size_t k = 0; k < scalars_.size(); ++k) {
    if (scalars_.column(k).is_string) s->strings[k].resize(w);
    if (!s->scalar_valid[k].empty()) s->scalar_valid[k].resize(w);
  }
  s->size = static_cast<int64_t>(w);
}

}  // namespace stoke
