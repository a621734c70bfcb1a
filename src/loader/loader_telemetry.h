// What every stage of the loader reports to (docs/architecture.md, "The loader"): the trace of its
// spans and the counters behind LoaderStats. Private to src/loader.
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>

#include "core/trace.h"

namespace stoke {

class LoaderTelemetry {
 public:
  explicit LoaderTelemetry(bool trace) : trace_(trace) {}

  // trace_.Record, losing the span rather than throwing when the trace cannot grow.
  void Trace(TraceStage stage, int64_t start_ns, int64_t end_ns, int64_t batch, int64_t bytes) const noexcept {
    try {
      trace_.Record(stage, start_ns, end_ns, batch, bytes);
    } catch (const std::bad_alloc&) {
    }
  }
  // Names the thread in traces and, as "stoke-<name>" (cut to 15 bytes), for top, perf and gdb.
  void NameThisThread(std::string_view name) const noexcept {
    char os_name[16] = "stoke-";  // the kernel keeps 15 bytes
    const size_t n = std::min(name.size(), sizeof(os_name) - 7);
    std::memcpy(os_name + 6, name.data(), n);
    os_name[6 + n] = '\0';
    pthread_setname_np(pthread_self(), os_name);
    try {
      trace_.SetThreadName(name);
    } catch (const std::bad_alloc&) {
    }
  }
  const TraceRecorder& trace() const { return trace_; }

  // Counters, updated by any thread.
  std::atomic<int64_t> batches{0};        // delivered by Next()
  std::atomic<int64_t> samples{0};        // in those batches
  std::atomic<int64_t> skipped{0};        // samples skipped (on_error=skip)
  std::atomic<int64_t> bytes_read{0};     // by the fetcher and by reads at once
  std::atomic<int64_t> sample_bytes{0};   // decoded samples' bytes (encoded images: their files')
  std::atomic<int64_t> wait_ns{0};        // the consumer's waits in Next()
  std::atomic<int64_t> reads_at_once{0};  // reads done at once (ReadsNow)
  std::atomic<int64_t> reads_mapped{0};   // of those, copied out of a mapping

 private:
  mutable TraceRecorder trace_;
};

}  // namespace stoke
