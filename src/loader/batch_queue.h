// The loader's queue of planned batches (docs/architecture.md, "The loader"): the producer queues
// each slot in order, the decode stage counts its samples done, and the consumer takes the oldest
// once it is ready. Private to src/loader.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>

#include "core/mutex.h"
#include "loader/batch_slots.h"
#include "stoke/status.h"

namespace stoke {

// Thread-safe, with its own lock. One producer pushes, one consumer pops, any thread finishes samples.
class BatchQueue {
 public:
  // A run starts: nothing queued, the producer not done. REQUIRES: no thread of a run is left.
  void Reset() EXCLUDES(mu_);
  // Queues a planned slot (its `pending` set: this publishes it). Throws std::bad_alloc when the queue
  // cannot grow; then nothing is queued.
  void Push(Slot* s) EXCLUDES(mu_);
  // Counts n of the batch's pending parts done (sample-columns, scalar chunks, the planning); the last
  // one wakes the consumer. Nothing reads or writes the batch's values after that: the consumer may
  // already own it. (A thread may still find its claims of copies empty, Loader::Impl::CopyOnce:
  // those counters are atomic, and what they are compared with is rewritten only by the producer
  // when it reuses the slot.)
  void FinishPending(Slot* s, int64_t n) EXCLUDES(mu_);
  // The producer is done: it planned its last batch and every read it started completed. `error` is
  // why it stopped early (OK at the end of the epoch).
  void ProducerDone(Status error) EXCLUDES(mu_);

  // Counts the events that can make the oldest batch ready or give a waiting consumer reads to do (a
  // batch queued, a batch ready, the producer done), so that a consumer spinning looks again under the
  // lock only when something happened.
  uint64_t events() const { return events_.load(std::memory_order_acquire); }
  // Whether the oldest batch is ready, or none will come; else *oldest is the oldest batch queued
  // (null when none is). The consumer alone pops, so *oldest stays queued for it.
  bool Ready(Slot** oldest) EXCLUDES(mu_);
  // The oldest queued batch for which has_work is true (null when none is), and in *count (when not
  // null) how many queued batches it is true for. Only the producer reuses a slot, and only the
  // consumer pops one: a batch returned stays queued, or at least unused, for either of them.
  Slot* OldestWith(bool (*has_work)(const Slot&), size_t* count) EXCLUDES(mu_);
  // Waits asleep until events() is no longer `seen` or the oldest batch is ready.
  void WaitForEvent(uint64_t seen) EXCLUDES(mu_);
  // Waits asleep until the oldest batch is ready and takes it; null when none will come, the
  // producer's error when it failed.
  Result<Slot*> WaitAndPop() EXCLUDES(mu_);
  // Puts every queued batch back into `slots`. REQUIRES: the run's producer has stopped and no
  // decode is left.
  void Drain(BatchSlots* slots) EXCLUDES(mu_);

 private:
  bool FrontReadyLocked() const REQUIRES(mu_) {
    return queue_.empty() ? producer_done_ : queue_.front()->pending.load(std::memory_order_acquire) == 0;
  }

  Mutex mu_;
  CondVar cv_;  // a batch was queued, the oldest batch became ready, or the producer is done
  std::deque<Slot*> queue_ GUARDED_BY(mu_);  // planned batches in order
  bool producer_done_ GUARDED_BY(mu_) = false;
  Status producer_error_ GUARDED_BY(mu_);
  std::atomic<uint64_t> events_{0};
};

}  // namespace stoke
