// The loader's completer (docs/architecture.md, "The loader"): it takes the fetcher's completed
// reads and hands them to the decode stage, a group at a time. Private to src/loader.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/mutex.h"
#include "loader/batch_queue.h"
#include "loader/batch_slots.h"
#include "loader/fetcher.h"
#include "loader/loader_telemetry.h"
#include "loader/sample_decoder.h"
#include "loader/tensor_column.h"

namespace stoke {

// Thread-safe, with its own lock: the producer counts the reads it started, the completer thread
// runs Run, and the run's owner wakes it.
class ReadCompleter {
 public:
  // Every pointer and reference outlives it; `fetcher` may be null (then Run is never called).
  ReadCompleter(Fetcher* fetcher, BatchSlots* slots, SampleDecoder* decoder, BatchQueue* queue,
                const std::vector<TensorColumn>& tensors, LoaderTelemetry* telemetry, const std::atomic<bool>& stop)
      : fetcher_(fetcher), slots_(slots), decoder_(decoder), queue_(queue), tensors_(tensors), telemetry_(telemetry),
        stop_(stop) {}

  // A run starts: no read started. REQUIRES: no thread of a run is left.
  void Reset() EXCLUDES(mu_);
  // The producer: the fetcher started n more reads.
  void Started(size_t n) EXCLUDES(mu_);
  // The producer is done starting reads: waits until the completer took every read it started (io_uring
  // cancels the requests of a thread that exits while they are queued for its async workers), then
  // lets Run return.
  void ProducerDone() EXCLUDES(mu_);
  // Wakes Run (the run is stopping).
  void Wake() { cv_.SignalAll(); }
  // The completer thread's loop: takes completed reads and hands them to the decode stage, until the
  // producer is done and every read it started was taken.
  void Run() EXCLUDES(mu_);

 private:
  // Run's step for `live` completed reads: decoded at once when they leave little to do, else handed
  // to the workers in tasks of a share of them each.
  void HandOut(Read* const* reads, size_t live);
  // The reads' samples fail with `st` (their task could not be queued).
  void FailTask(Read* const* reads, size_t n, const Status& st);

  Fetcher* const fetcher_;
  BatchSlots* const slots_;
  SampleDecoder* const decoder_;
  BatchQueue* const queue_;
  const std::vector<TensorColumn>& tensors_;
  LoaderTelemetry* const telemetry_;
  const std::atomic<bool>& stop_;

  Mutex mu_;
  CondVar cv_;            // a read was started, the producer is done, or stop
  CondVar completed_cv_;  // completed_ grew
  int64_t started_ GUARDED_BY(mu_) = 0;    // reads the fetcher started this run
  int64_t taken_ GUARDED_BY(mu_) = 0;      // reads the completer started to take
  int64_t completed_ GUARDED_BY(mu_) = 0;  // reads the completer has taken
  bool producer_done_ GUARDED_BY(mu_) = false;
};

}  // namespace stoke
