#include "loader/batch_queue.h"

namespace stoke {

void BatchQueue::Reset() {
  MutexLock l(&mu_);
  queue_.clear();
  producer_done_ = false;
  producer_error_ = Status::OK();
}

void BatchQueue::Push(Slot* s) {
  {
    // Counted under mu_, which a consumer holds from its look at events() in WaitForEvent until it
    // sleeps: it sees the count, or it sleeps before this and the signal below wakes it.
    MutexLock l(&mu_);
    queue_.push_back(s);
    events_.fetch_add(1, std::memory_order_release);  // a consumer waiting may help with its copies
  }
  cv_.SignalAll();
}

void BatchQueue::WaitForEvent(uint64_t seen) {
  MutexLock l(&mu_);
  while (events_.load(std::memory_order_acquire) == seen && !FrontReadyLocked()) cv_.Wait(&mu_);
}

void BatchQueue::FinishPending(Slot* s, int64_t n) {
  if (s->pending.fetch_sub(n, std::memory_order_acq_rel) != n) return;
  events_.fetch_add(1, std::memory_order_release);
  // The batch is ready. A consumer that saw it pending holds mu_ until it sleeps on cv_, so taking mu_
  // here orders this signal after that wait (no lost wake-up).
  { MutexLock l(&mu_); }
  cv_.SignalAll();
}

void BatchQueue::ProducerDone(Status error) {
  {
    MutexLock l(&mu_);
    producer_done_ = true;
    producer_error_ = std::move(error);
  }
  events_.fetch_add(1, std::memory_order_release);
  cv_.SignalAll();
}

bool BatchQueue::Ready(Slot** oldest) {
  MutexLock l(&mu_);
  if (FrontReadyLocked()) return true;
  *oldest = queue_.empty() ? nullptr : queue_.front();
  return false;
}

Slot* BatchQueue::OldestWith(bool (*has_work)(const Slot&), size_t* count) {
  MutexLock l(&mu_);
  Slot* oldest = nullptr;
  size_t n = 0;
  for (Slot* s : queue_) {
    if (!has_work(*s)) continue;
    if (oldest == nullptr) oldest = s;
    if (count == nullptr) break;
    ++n;
  }
  if (count != nullptr) *count = n;
  return oldest;
}

Result<Slot*> BatchQueue::WaitAndPop() {
  MutexLock l(&mu_);
  // The oldest batch is ready (Slot::pending says why acquire suffices), or none will come.
  while (!FrontReadyLocked()) cv_.Wait(&mu_);
  if (queue_.empty()) {
    if (!producer_error_.ok()) return producer_error_;
    return static_cast<Slot*>(nullptr);
  }
  Slot* s = queue_.front();
  queue_.pop_front();
  return s;
}

void BatchQueue::Drain(BatchSlots* slots) {
  MutexLock l(&mu_);
  for (Slot* s : queue_) slots->PutBack(s);
  queue_.clear();
}

}  // namespace stoke
