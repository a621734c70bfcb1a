// The self-check of scripts/check_threads.sh: deliberate thread-safety violations that the analysis
// must reject (the script fails when this file passes). Built into nothing.
#include "core/mutex.h"

namespace stoke {

class Counter {
 public:
  // Violation: writes count_ without holding mu_.
  void BumpUnlocked() { ++count_; }
  // Violation: calls a function that requires mu_ without holding it.
  void BumpWithoutLock() { BumpLocked(); }
  // Correct, for contrast: must not be reported.
  void Bump() {
    MutexLock lock(&mu_);
    BumpLocked();
  }

 private:
  void BumpLocked() REQUIRES(mu_) { ++count_; }

  Mutex mu_;
  int count_ GUARDED_BY(mu_) = 0;
};

}  // namespace stoke
