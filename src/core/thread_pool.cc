#include "core/thread_pool.h"

#include <atomic>
#include <system_error>

#include "core/cpus.h"
#include "core/log.h"

namespace stoke {

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = AvailableCpus();
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { WorkerLoop(); });
    } catch (const std::system_error& e) {
      // The system refused a thread (RLIMIT_NPROC, a container's pids limit, memory for stacks):
      // the pool works with those it has, or runs tasks on the submitting thread when it has none.
      STOKE_LOG(kWarn, "thread_pool.short", "threads={} wanted={} error=\"{}\"", workers_.size(), threads, e.what());
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  for (auto& w : workers_) w.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  if (workers_.empty()) {
    task();
    return;
  }
  {
    MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.Signal();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) cv_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

Status ParallelFor(ThreadPool& pool, size_t n, const std::function<Status(size_t)>& fn) {
  if (n == 0) return Status::OK();
  struct Shared {
    explicit Shared(size_t n) : remaining(n), first_failed_index(n) {}
    Mutex mu;
    CondVar done_cv;  // signalled when remaining reaches 0
    size_t remaining GUARDED_BY(mu);
    size_t first_failed_index GUARDED_BY(mu);
    Status first_error GUARDED_BY(mu);
    std::atomic<bool> failed{false};  // first_error is set; read without the lock to skip work
  } shared(n);
  for (size_t i = 0; i < n; ++i) {
    pool.Submit([&shared, &fn, i] {
      Status s = shared.failed.load(std::memory_order_relaxed) ? Status::OK() : fn(i);
      MutexLock lock(&shared.mu);
      if (!s.ok() && i < shared.first_failed_index) {
        shared.first_failed_index = i;
        shared.first_error = std::move(s);
        shared.failed = true;
      }
      if (--shared.remaining == 0) shared.done_cv.SignalAll();
    });
  }
  MutexLock lock(&shared.mu);
  while (shared.remaining != 0) shared.done_cv.Wait(&shared.mu);
  return shared.first_error;
}

}  // namespace stoke
