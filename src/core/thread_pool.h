// A fixed-size pool of worker threads and a parallel loop that collects errors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "stoke/status.h"

namespace stoke {

// Thread-safe: Submit may be called from any thread, including workers.
// The destructor runs every task already submitted, then joins the workers.
// When the system refuses a thread, the pool keeps those it started (size() says how many; a warning
// is logged); with none, Submit runs each task on the calling thread.
class ThreadPool {
 public:
  // threads == 0 means AvailableCpus(): the CPUs this process may use (core/cpus.h).
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

// Runs fn(i) for i in [0, n) on `pool` and hands the results back in index order, with at most
// `window` tasks started and not yet taken (the one being waited for included), so the results
// held at once stay bounded whatever n is. Stop() starts no more tasks; those started are still
// handed back, so their results (files written, say) are not lost. The destructor waits for every
// started task: fn may refer to the caller's frame. One thread takes the results; it must not be
// one of the pool's workers.
template <typename T>
class OrderedTasks {
 public:
  OrderedTasks(ThreadPool& pool, size_t n, size_t window, std::function<T(size_t)> fn)
      : pool_(pool), n_(n), window_(std::max<size_t>(window, 1)), fn_(std::move(fn)) {}
  ~OrderedTasks() {
    for (auto& f : in_flight_) f.wait();
  }
  OrderedTasks(const OrderedTasks&) = delete;
  OrderedTasks& operator=(const OrderedTasks&) = delete;

  // Whether a result is left to take.
  bool HasNext() {
    Start();
    return !in_flight_.empty();
  }
  // The next result in index order, once its task is done. Requires HasNext().
  T Next() {
    Start();
    std::future<T> next = std::move(in_flight_.front());
    in_flight_.pop_front();
    return next.get();
  }
  void Stop() { n_ = started_; }

 private:
  void Start() {
    for (; started_ < n_ && in_flight_.size() < window_; ++started_) {
      auto task = std::make_shared<std::packaged_task<T()>>([this, i = started_] { return fn_(i); });
      in_flight_.push_back(task->get_future());
      pool_.Submit([task] { (*task)(); });
    }
  }

  ThreadPool& pool_;
  size_t n_;
  const size_t window_;
  const std::function<T(size_t)> fn_;
  size_t started_ = 0;
  std::deque<std::future<T>> in_flight_;
};

}  // namespace stoke
