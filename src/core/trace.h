// A low-overhead per-thread span recorder for the loader pipeline, with per-stage totals that are
// always kept and an export to the Chrome "Trace Event Format" (opens in Perfetto and
// chrome://tracing).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "stoke/status.h"

namespace stoke {

// Pipeline stages. Not persisted; the names (TraceStageName) appear in trace files and summaries.
enum class TraceStage : uint8_t { kPlan, kFetch, kDecode, kTransform, kCollate, kWait, kCompute };
inline constexpr int kNumTraceStages = 7;

// "plan", "fetch", "decode", "transform", "collate", "wait", "compute"; "unknown" for a value outside
// the enum.
std::string_view TraceStageName(TraceStage s);

struct TraceSpan {
  int64_t start_ns = 0, end_ns = 0;  // NowNanos() values
  int64_t batch = -1;                // batch number, -1 when not tied to one
  int64_t bytes = 0;                 // bytes the span handled (0 when not meaningful)
  TraceStage stage = TraceStage::kPlan;
};

// Records spans of pipeline work.
//
// Thread-safe: every method may be called from any number of threads at once, except the destructor,
// which REQUIRES that no other thread is still inside a method.
//
// Everything a thread records goes to a buffer owned by the recorder but written by that thread
// only, so recording threads never contend with each other: the stage totals (busy ns, count, bytes;
// always kept, including spans dropped for the per-thread limit) are per-thread counters updated
// without read-modify-write, and spans (kept only when enabled) go into chunked storage behind a
// per-thread mutex that only Snapshot(), Clear() and dropped_spans() also take, briefly.
//
// A thread registers with a recorder on its first Record() or SetThreadName() and gets a thread index
// (1, 2, ... in registration order; the trace's tid). Each thread caches its buffers for the last 8
// recorders it used, keyed by a process-wide recorder id that is never reused, so a destroyed
// recorder's cache entries can never match a live one. A thread alternating between more recorders
// than that stays correct but takes the recorder's registry mutex on each miss.
//
// Cost of Record(), measured as thread CPU time over 10^6 calls (g++ 12 -O2, x86-64, 1 and 2
// threads alike): disabled ~3 ns; enabled ~18 ns into span memory already touched (after Clear) and
// ~30 ns into fresh memory (first-touch page faults, 40 bytes a span). Scope adds two NowNanos() (~17 ns
// each).
class TraceRecorder {
 public:
  // max_spans_per_thread: spans kept per thread; later ones are dropped and counted. Default 2^20
  // (40 MiB per thread at 40 bytes a span).
  explicit TraceRecorder(bool enabled, size_t max_spans_per_thread = size_t{1} << 20);
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  bool enabled() const { return enabled_; }

  // Adds [start_ns, end_ns) to the stage's totals and, when enabled, keeps it as a span of the
  // calling thread. REQUIRES: `stage` is one of the enum's values; end_ns >= start_ns (a negative
  // duration is counted as 0).
  void Record(TraceStage stage, int64_t start_ns, int64_t end_ns, int64_t batch = -1, int64_t bytes = 0);

  // Names the calling thread in the trace ("fetch-completion", "worker-3", "consumer"); the last name
  // set wins. Unnamed threads appear as "thread-<index>". No-op when disabled.
  void SetThreadName(std::string_view name);

  // RAII: records [construction, destruction) as one span of `r`. A null `r` records nothing and does
  // not read the clock. Not thread-safe itself: one Scope belongs to one thread.
  class Scope {
   public:
    Scope(TraceRecorder* r, TraceStage s, int64_t batch = -1, int64_t bytes = 0)
        : r_(r), stage_(s), batch_(batch), bytes_(bytes), start_ns_(r != nullptr ? NowNanos() : 0) {}
    ~Scope() {
      if (r_ != nullptr) r_->Record(stage_, start_ns_, NowNanos(), batch_, bytes_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    // For work whose size or batch is known only at its end.
    void set_bytes(int64_t b) { bytes_ = b; }
    void set_batch(int64_t b) { batch_ = b; }

   private:
    TraceRecorder* r_;
    TraceStage stage_;
    int64_t batch_;
    int64_t bytes_;
    int64_t start_ns_;
  };

  struct StageTotal {
    int64_t busy_ns = 0;
    int64_t count = 0;
    int64_t bytes = 0;
  };
  // Indexed by static_cast<int>(TraceStage). Each field is read atomically, but a Record() running
  // concurrently may be reflected in some fields and not yet in others.
  std::array<StageTotal, kNumTraceStages> Totals() const EXCLUDES(registry_mu_);

  // Spans not kept because their thread had reached max_spans_per_thread (since creation or Clear()).
  int64_t dropped_spans() const;

  // All spans kept so far, one entry per registered thread in thread-index order, each thread's spans
  // in the order it recorded them. A copy; safe while other threads keep recording (their newest
  // spans may or may not be included), though each thread waits while its own spans are copied.
  struct ThreadSpans {
    uint32_t thread_index = 0;
    std::string name;
    std::vector<TraceSpan> spans;
  };
  std::vector<ThreadSpans> Snapshot() const;

  // Chrome trace event JSON: {"traceEvents":[...],"displayTimeUnit":"ms"} with one "X" (complete)
  // event per span (ts/dur in microseconds; ts relative to the recorder's creation, negative for a
  // span that began before it; pid 1, tid = thread index, name = stage name, args {batch, bytes}) and "M" metadata events for process_name,
  // thread_name and thread_sort_index. Names are JSON-escaped; a name that is not valid UTF-8 has each
  // byte >= 0x80 replaced by U+FFFD. Builds the whole document in memory (about 150 bytes a span).
  std::string ChromeTraceJson(std::string_view process_name = "stoke") const;

  // Writes ChromeTraceJson to `path` through a temporary file in the same directory and a rename, so
  // readers see the old file or the whole new one. Not fsynced: a trace is a diagnostic. IOError
  // naming `path` on failure (the temporary file is removed).
  Status WriteChromeTrace(const std::string& path, std::string_view process_name = "stoke") const;

  // Drops every kept span, zeroes the totals and the dropped count (e.g. between benchmark phases).
  // Registered threads keep their index and name, and their span memory for reuse (freed with the
  // recorder); the time origin stays the recorder's creation.
  // Spans recorded concurrently with Clear() may land on either side of it.
  void Clear() EXCLUDES(registry_mu_);

 private:
  struct ThreadBuffer;  // defined in trace.cc

  std::array<StageTotal, kNumTraceStages> SumTotalsLocked() const REQUIRES(registry_mu_);
  ThreadBuffer* BufferForThisThread() EXCLUDES(registry_mu_);
  ThreadBuffer* RegisterThisThread() EXCLUDES(registry_mu_);
  std::vector<ThreadBuffer*> Buffers() const EXCLUDES(registry_mu_);

  const uint64_t id_;  // process-wide, never reused; the thread_local caches' key
  const bool enabled_;
  const size_t max_spans_per_thread_;
  const int64_t origin_ns_;  // NowNanos() at creation; trace timestamps are relative to it

  mutable Mutex registry_mu_;
  // Buffers live as long as the recorder, so they outlive the threads that wrote them.
  std::vector<std::unique_ptr<ThreadBuffer>> buffers_ GUARDED_BY(registry_mu_);
  std::unordered_map<uint64_t, ThreadBuffer*> buffer_by_thread_ GUARDED_BY(registry_mu_);  // thread serial -> buffer
  // The threads' totals only grow (one writer each, no read-modify-write); Clear() records their sum
  // here and Totals() subtracts it.
  std::array<StageTotal, kNumTraceStages> cleared_totals_ GUARDED_BY(registry_mu_){};
};

// A human summary of totals over a wall interval: a header and one line per stage with busy seconds,
// share of wall (busy / wall; may exceed 100% with several threads; "-" when wall_seconds <= 0),
// count and MB (10^6 bytes):
//   stage      busy s   share   count      MB
//   fetch       1.234   61.7%    2000   720.0
std::string FormatTraceSummary(const std::array<TraceRecorder::StageTotal, kNumTraceStages>& totals,
                               double wall_seconds);

}  // namespace stoke
