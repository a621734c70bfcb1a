#include "core/thread_pool.h"

#include <atomic>

namespace stoke {

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = std::max<size_t>(1, std::thread::hardware_concurrency());
  workers_.reserve(threads);
  for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
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
    std::mutex mu;
    std::condition_variable done_cv;
    size_t remaining;
    size_t first_failed_index;
    Status first_error;
    std::atomic<bool> failed{false};
  } shared;
  shared.remaining = n;
  shared.first_failed_index = n;
  for (size_t i = 0; i < n; ++i) {
    pool.Submit([&shared, &fn, i] {
      Status s = shared.failed.load(std::memory_order_relaxed) ? Status::OK() : fn(i);
      std::lock_guard<std::mutex> lock(shared.mu);
      if (!s.ok() && i < shared.first_failed_index) {
        shared.first_failed_index = i;
        shared.first_error = std::move(s);
        shared.failed = true;
      }
      if (--shared.remaining == 0) shared.done_cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(shared.mu);
  shared.done_cv.wait(lock, [&shared] { return shared.remaining == 0; });
  return shared.first_error;
}

}  // namespace stoke
