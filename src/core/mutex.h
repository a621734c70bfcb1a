// A mutex, a scoped lock and a condition variable that clang's thread-safety analysis can see
// (core/thread_annotations.h; libstdc++'s std::mutex carries no capability attributes). Thin
// wrappers over std::mutex and std::condition_variable: the same size, and every call inlines to
// the standard one.
#pragma once

#include <condition_variable>
#include <mutex>

#include "core/thread_annotations.h"

namespace stoke {

class CondVar;

// Not recursive. Lock and Unlock directly only where a scope cannot say it (MutexLock can).
class CAPABILITY("mutex") Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // True when the lock was free and is now held by the caller.
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the lock, where it cannot follow why (a callback run under
  // it, say). Checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A condition variable for Mutex. Waits take no predicate (a lambda is analysed as a function of
// its own, which would not know the lock is held): loop instead, `while (!cond) cv.Wait(&mu);`.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Releases `mu`, sleeps until signalled (or spuriously), takes `mu` again.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's scope owns it
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace stoke
