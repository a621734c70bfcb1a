#include "core/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <utility>

#include <fmt/format.h>

#include "core/text.h"

namespace stoke {

namespace {

// Spans are stored in fixed-size chunks so that growing a buffer never copies kept spans (a stall of
// the recording thread proportional to what it recorded). 4096 spans = 160 KiB per chunk.
constexpr size_t kSpansPerChunk = 4096;

std::atomic<uint64_t> next_recorder_id{1};  // 0 marks an empty cache entry
std::atomic<uint64_t> next_thread_serial{1};
std::atomic<uint64_t> next_temp_file{0};

// A process-wide serial for the calling thread, assigned on first use and never reused (unlike
// std::thread::id, which the OS may hand to a later thread).
uint64_t ThisThreadSerial() {
  thread_local uint64_t serial = 0;
  if (serial == 0) serial = next_thread_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Appends `s` as a JSON string literal. Invalid UTF-8 would make the file unreadable to strict
// parsers, so in such a string every byte >= 0x80 becomes U+FFFD.
void AppendJsonString(fmt::memory_buffer& out, std::string_view s) {
  const bool valid = IsValidUtf8(s);
  out.push_back('"');
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out.append(std::string_view("\\\"")); break;
      case '\\': out.append(std::string_view("\\\\")); break;
      case '\n': out.append(std::string_view("\\n")); break;
      case '\r': out.append(std::string_view("\\r")); break;
      case '\t': out.append(std::string_view("\\t")); break;
      case '\b': out.append(std::string_view("\\b")); break;
      case '\f': out.append(std::string_view("\\f")); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
        } else if (c >= 0x80 && !valid) {
          out.append(std::string_view("\\ufffd"));
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// Nanoseconds relative to the origin as microseconds with nanosecond precision (exact for any
// interval under 104 days, the limit of a double's 53-bit mantissa).
double Micros(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

std::string_view TraceStageName(TraceStage s) {
  switch (s) {
    case TraceStage::kPlan: return "plan";
    case TraceStage::kFetch: return "fetch";
    case TraceStage::kDecode: return "decode";
    case TraceStage::kTransform: return "transform";
    case TraceStage::kCollate: return "collate";
    case TraceStage::kWait: return "wait";
    case TraceStage::kCompute: return "compute";
  }
  return "unknown";
}

// Everything one thread recorded. Written only by its thread; read by Totals, Snapshot and
// dropped_spans, reset by Clear.
struct TraceRecorder::ThreadBuffer {
  // Per-stage counters with a single writer, so they are bumped with a relaxed load and store rather
  // than a locked read-modify-write, and never reset (Clear subtracts a baseline instead): readers
  // only ever see values the writer stored.
  struct Counters {
    std::atomic<int64_t> busy_ns{0};
    std::atomic<int64_t> count{0};
    std::atomic<int64_t> bytes{0};
  };
  static void Bump(std::atomic<int64_t>& c, int64_t delta) {
    c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }

  explicit ThreadBuffer(uint32_t index) : thread_index(index) {}

  // Own cache lines, so readers of the mutex-guarded part do not disturb the writer's counters.
  alignas(64) std::array<Counters, kNumTraceStages> totals;
  const uint32_t thread_index;
  // Uncontended except while a Snapshot, Clear or dropped_spans reads this one buffer.
  alignas(64) Mutex mu;
  std::string name GUARDED_BY(mu);
  std::vector<std::unique_ptr<TraceSpan[]>> chunks GUARDED_BY(mu);  // kSpansPerChunk spans each; kept by Clear
  size_t size GUARDED_BY(mu) = 0;                                   // spans kept
  int64_t dropped GUARDED_BY(mu) = 0;
};

namespace {

// The calling thread's cache of (recorder id, buffer) for the recorders it used last, most recent
// first. Plain data, so thread exit runs no destructor; entries of destroyed recorders are never
// dereferenced because their ids are never issued again, and they age out of the fixed-size array.
constexpr int kThreadCacheSize = 8;
struct ThreadCacheEntry {
  uint64_t recorder_id;
  void* buffer;  // a TraceRecorder::ThreadBuffer* (the type is private to TraceRecorder)
};
thread_local ThreadCacheEntry thread_cache[kThreadCacheSize];

}  // namespace

TraceRecorder::TraceRecorder(bool enabled, size_t max_spans_per_thread)
    : id_(next_recorder_id.fetch_add(1, std::memory_order_relaxed)),
      enabled_(enabled),
      max_spans_per_thread_(max_spans_per_thread),
      origin_ns_(NowNanos()) {}

TraceRecorder::~TraceRecorder() = default;

TraceRecorder::ThreadBuffer* TraceRecorder::BufferForThisThread() {
  ThreadCacheEntry* cache = thread_cache;
  if (cache[0].recorder_id == id_) return static_cast<ThreadBuffer*>(cache[0].buffer);
  for (int i = 1; i < kThreadCacheSize; ++i) {
    if (cache[i].recorder_id == id_) {
      std::swap(cache[0], cache[i]);
      return static_cast<ThreadBuffer*>(cache[0].buffer);
    }
  }
  ThreadBuffer* buffer = RegisterThisThread();
  for (int i = kThreadCacheSize - 1; i > 0; --i) cache[i] = cache[i - 1];  // drops the oldest
  cache[0] = ThreadCacheEntry{id_, buffer};
  return buffer;
}

// The cache missed: either the thread's first use of this recorder, or its entry was evicted by
// other recorders, in which case the thread must get its existing buffer back, not a second one.
TraceRecorder::ThreadBuffer* TraceRecorder::RegisterThisThread() {
  const uint64_t serial = ThisThreadSerial();
  MutexLock lock(&registry_mu_);
  auto it = buffer_by_thread_.find(serial);
  if (it != buffer_by_thread_.end()) return it->second;
  buffers_.push_back(std::make_unique<ThreadBuffer>(static_cast<uint32_t>(buffers_.size() + 1)));
  ThreadBuffer* buffer = buffers_.back().get();
  buffer_by_thread_.emplace(serial, buffer);
  return buffer;
}

std::vector<TraceRecorder::ThreadBuffer*> TraceRecorder::Buffers() const {
  MutexLock lock(&registry_mu_);
  std::vector<ThreadBuffer*> out;
  out.reserve(buffers_.size());
  for (const auto& b : buffers_) out.push_back(b.get());
  return out;
}

void TraceRecorder::Record(TraceStage stage, int64_t start_ns, int64_t end_ns, int64_t batch, int64_t bytes) {
  const int64_t dur = end_ns > start_ns ? end_ns - start_ns : 0;
  ThreadBuffer* b = BufferForThisThread();
  ThreadBuffer::Counters& t = b->totals[static_cast<size_t>(stage)];
  ThreadBuffer::Bump(t.busy_ns, dur);
  ThreadBuffer::Bump(t.count, 1);
  if (bytes != 0) ThreadBuffer::Bump(t.bytes, bytes);
  if (!enabled_) return;

  MutexLock lock(&b->mu);
  if (b->size >= max_spans_per_thread_) {
    ++b->dropped;
    return;
  }
  const size_t chunk = b->size / kSpansPerChunk;
  if (chunk >= b->chunks.size()) b->chunks.push_back(std::make_unique<TraceSpan[]>(kSpansPerChunk));
  b->chunks[chunk][b->size % kSpansPerChunk] = TraceSpan{start_ns, start_ns + dur, batch, bytes, stage};
  ++b->size;
}

void TraceRecorder::SetThreadName(std::string_view name) {
  if (!enabled_) return;
  ThreadBuffer* b = BufferForThisThread();
  MutexLock lock(&b->mu);
  b->name.assign(name);
}

std::array<TraceRecorder::StageTotal, kNumTraceStages> TraceRecorder::SumTotalsLocked() const {
  std::array<StageTotal, kNumTraceStages> sum{};
  for (const auto& b : buffers_) {
    for (int i = 0; i < kNumTraceStages; ++i) {
      sum[i].busy_ns += b->totals[i].busy_ns.load(std::memory_order_relaxed);
      sum[i].count += b->totals[i].count.load(std::memory_order_relaxed);
      sum[i].bytes += b->totals[i].bytes.load(std::memory_order_relaxed);
    }
  }
  return sum;
}

std::array<TraceRecorder::StageTotal, kNumTraceStages> TraceRecorder::Totals() const {
  MutexLock lock(&registry_mu_);
  std::array<StageTotal, kNumTraceStages> out = SumTotalsLocked();
  for (int i = 0; i < kNumTraceStages; ++i) {
    out[i].busy_ns -= cleared_totals_[i].busy_ns;
    out[i].count -= cleared_totals_[i].count;
    out[i].bytes -= cleared_totals_[i].bytes;
  }
  return out;
}

int64_t TraceRecorder::dropped_spans() const {
  int64_t dropped = 0;
  for (ThreadBuffer* b : Buffers()) {
    MutexLock lock(&b->mu);
    dropped += b->dropped;
  }
  return dropped;
}

std::vector<TraceRecorder::ThreadSpans> TraceRecorder::Snapshot() const {
  std::vector<ThreadSpans> out;
  if (!enabled_) return out;  // threads register for their totals only
  for (ThreadBuffer* b : Buffers()) {
    ThreadSpans ts;
    ts.thread_index = b->thread_index;
    MutexLock lock(&b->mu);
    ts.name = b->name.empty() ? fmt::format("thread-{}", b->thread_index) : b->name;
    ts.spans.reserve(b->size);
    for (size_t c = 0; c * kSpansPerChunk < b->size; ++c) {
      const size_t n = std::min(kSpansPerChunk, b->size - c * kSpansPerChunk);
      ts.spans.insert(ts.spans.end(), b->chunks[c].get(), b->chunks[c].get() + n);
    }
    out.push_back(std::move(ts));
  }
  return out;
}

void TraceRecorder::Clear() {
  MutexLock registry_lock(&registry_mu_);
  cleared_totals_ = SumTotalsLocked();
  for (const auto& b : buffers_) {
    MutexLock lock(&b->mu);
    b->size = 0;  // the chunks stay allocated: touching fresh pages is most of a span's first cost
    b->dropped = 0;
  }
}

std::string TraceRecorder::ChromeTraceJson(std::string_view process_name) const {
  const std::vector<ThreadSpans> threads = Snapshot();
  fmt::memory_buffer out;
  auto it = std::back_inserter(out);
  out.append(std::string_view("{\"traceEvents\":[\n"));
  out.append(std::string_view(R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":)"));
  AppendJsonString(out, process_name);
  out.append(std::string_view("}}"));
  for (const ThreadSpans& t : threads) {
    fmt::format_to(it, ",\n{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":",
                   t.thread_index);
    AppendJsonString(out, t.name);
    out.append(std::string_view("}}"));
    fmt::format_to(it,
                   ",\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{0},"
                   "\"args\":{{\"sort_index\":{0}}}}}",
                   t.thread_index);
  }
  for (const ThreadSpans& t : threads) {
    for (const TraceSpan& s : t.spans) {
      fmt::format_to(it,
                     ",\n{{\"name\":\"{}\",\"cat\":\"stoke\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{:.3f},"
                     "\"dur\":{:.3f},\"args\":{{\"batch\":{},\"bytes\":{}}}}}",
                     TraceStageName(s.stage), t.thread_index, Micros(s.start_ns - origin_ns_),
                     Micros(s.end_ns - s.start_ns), s.batch, s.bytes);
    }
  }
  out.append(std::string_view("\n],\"displayTimeUnit\":\"ms\"}\n"));
  return fmt::to_string(out);
}

Status TraceRecorder::WriteChromeTrace(const std::string& path, std::string_view process_name) const {
  const std::string json = ChromeTraceJson(process_name);
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, static_cast<long>(getpid()),
                                      next_temp_file.fetch_add(1, std::memory_order_relaxed));
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::IOError(fmt::format("writing Chrome trace '{}': cannot create '{}': {}", path, tmp,
                                       ErrnoText(errno)));
  }
  size_t done = 0;
  while (done < json.size()) {
    const ssize_t n = write(fd, json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return Status::IOError(fmt::format("writing Chrome trace '{}': write to '{}' failed at byte {}: {}", path,
                                         tmp, done, ErrnoText(err)));
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return Status::IOError(
        fmt::format("writing Chrome trace '{}': closing '{}' failed: {}", path, tmp, ErrnoText(err)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return Status::IOError(fmt::format("writing Chrome trace '{}': rename from '{}' failed: {}", path, tmp,
                                       ErrnoText(err)));
  }
  return Status::OK();
}

std::string FormatTraceSummary(const std::array<TraceRecorder::StageTotal, kNumTraceStages>& totals,
                               double wall_seconds) {
  std::string out = fmt::format("{:<9}{:>8}{:>8}{:>8}{:>8}\n", "stage", "busy s", "share", "count", "MB");
  for (int i = 0; i < kNumTraceStages; ++i) {
    const TraceRecorder::StageTotal& t = totals[i];
    const double busy_s = static_cast<double>(t.busy_ns) * 1e-9;
    const std::string share =
        wall_seconds > 0 ? fmt::format("{:.1f}%", 100.0 * busy_s / wall_seconds) : std::string("-");
    out += fmt::format("{:<9}{:>8.3f}{:>8}{:>8}{:>8.1f}\n", TraceStageName(static_cast<TraceStage>(i)), busy_s,
                       share, t.count, static_cast<double>(t.bytes) / 1e6);
  }
  return out;
}

}  // namespace stoke
