// A fixed-size pool of worker threads and a parallel loop that collects errors.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "stoke/status.h"

namespace stoke {

// Thread-safe: Submit may be called from any thread, including workers.
// The destructor runs every task already submitted, then joins the workers.
class ThreadPool {
 public:
  // threads == 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(size_t threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size(); }
  void Submit(std::function<void()> task) EXCLUDES(mu_);

 private:
  void WorkerLoop() EXCLUDES(mu_);

  Mutex mu_;
  CondVar cv_;  // signalled when a task is queued, and at stop
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Runs fn(i) for i in [0, n) on the pool; the calling thread waits, so it must not be one of the
// pool's own workers. Returns the error of the lowest
// index that failed, so the reported error is deterministic; after a failure, indices not yet started
// are skipped.
Status ParallelFor(ThreadPool& pool, size_t n, const std::function<Status(size_t)>& fn);

}  // namespace stoke
