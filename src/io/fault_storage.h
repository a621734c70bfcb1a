// Storage wrappers for tests and benchmarks:
//  - FaultInjectingStorage: fails chosen operations on chosen paths (after N calls, a limited number
//    of times, or with a probability) to test crash consistency and error paths.
//  - ThrottledStorage: adds a fixed latency per request and caps aggregate bandwidth, to emulate
//    remote storage on a local disk in benchmarks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "core/random.h"
#include "io/storage.h"

namespace stoke {

// Operations a fault rule can target (a bit mask).
enum StorageOp : uint32_t {
  kOpOpenForRead = 1u << 0,
  kOpRead = 1u << 1,  // RandomAccessFile::ReadAt
  kOpCreate = 1u << 2,
  kOpAppend = 1u << 3,  // WritableFile::Append
  kOpSync = 1u << 4,    // WritableFile::Sync
  kOpClose = 1u << 5,   // WritableFile::Close
  kOpList = 1u << 6,    // List and ListNames
  kOpStat = 1u << 7,
  kOpCreateDirectories = 1u << 8,
  kOpRename = 1u << 9,  // matched against the source path
  kOpDelete = 1u << 10,
  kOpPutIfAbsent = 1u << 11,
  kOpAll = 0xffffffffu,
};

struct FaultRule {
  uint32_t ops = kOpAll;           // which operations (StorageOp bits). Default: all
  std::string path_substring;      // the path must contain this; "" matches every path
  uint64_t after_calls = 0;        // matching calls let through before faults start. Default 0
  uint64_t max_faults = UINT64_MAX;  // faults injected by this rule at most. Default unlimited
  double probability = 1.0;        // chance that an eligible call fails. Default 1
  // The error returned; its message gets " (injected: <op> '<path>')" appended.
  Status error = Status::IOError("injected fault", /*retryable=*/true);
};

// Thread-safe (one mutex guards the rules, counters and random generator). REQUIRES: `base`
// outlives this object, and this object outlives the files it returns.
class FaultInjectingStorage final : public Storage {
 public:
  explicit FaultInjectingStorage(Storage& base, uint64_t seed = 1);

  void AddRule(FaultRule rule) EXCLUDES(mu_);
  void ClearRules() EXCLUDES(mu_);
  uint64_t faults_injected() const EXCLUDES(mu_);

  // Returns the injected error for (op, path), or OK. Used by the wrapped files too.
  Status MaybeFail(StorageOp op, const std::string& path) EXCLUDES(mu_);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) override;
  Result<std::vector<DirEntry>> List(const std::string& dir) override;
  Result<std::vector<std::string>> ListNames(const std::string& dir) override;
  Result<DirEntry> Stat(const std::string& path) override;
  Status CreateDirectories(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Delete(const std::string& path) override;
  Status PutIfAbsent(const std::string& path, ByteView data) override;

 private:
  struct RuleState {
    FaultRule rule;
    uint64_t seen = 0;      // matching calls so far
    uint64_t injected = 0;  // faults injected so far
  };
  Storage& base_;
  mutable Mutex mu_;
  std::vector<RuleState> rules_ GUARDED_BY(mu_);
  Rng rng_ GUARDED_BY(mu_);
  uint64_t faults_ GUARDED_BY(mu_) = 0;
};

struct ThrottleOptions {
  // Added to every request (open, read, append, close, list, stat, ...), in microseconds. Default 0.
  int64_t latency_us = 0;
  // Aggregate cap over all threads for bytes read and written, in bytes per second; 0 = no cap. Default 0.
  double bytes_per_second = 0;
};

// Thread-safe. Requests sleep in parallel for their latency; bandwidth is a shared timeline, so
// concurrent transfers split the cap. REQUIRES: `base` outlives this object, and this object
// outlives the files it returns.
class ThrottledStorage final : public Storage {
 public:
  ThrottledStorage(Storage& base, ThrottleOptions options);

  // Sleeps for one request's latency plus the transfer time of `bytes`.
  void Charge(uint64_t bytes) EXCLUDES(mu_);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) override;
  Result<std::vector<DirEntry>> List(const std::string& dir) override;
  Result<std::vector<std::string>> ListNames(const std::string& dir) override;
  Result<DirEntry> Stat(const std::string& path) override;
  Status CreateDirectories(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Delete(const std::string& path) override;
  Status PutIfAbsent(const std::string& path, ByteView data) override;

 private:
  Storage& base_;
  ThrottleOptions options_;
  Mutex mu_;
  int64_t next_free_ns_ GUARDED_BY(mu_) = 0;  // steady-clock time when the bandwidth timeline is free
};

}  // namespace stoke
