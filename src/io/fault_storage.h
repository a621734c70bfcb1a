// Storage wrappers for tests and benchmarks:
//  - FaultInjectingStorage: fails chosen operations on chosen paths (after N calls, a limited number
//    of times, or with a probability) to test error paths; or fails the Nth operation overall with
//    EIO or ENOSPC, or crashes there (a simulated power loss), to test crash consistency.
//  - ThrottledStorage: adds a fixed latency per request and caps aggregate bandwidth, to emulate
//    remote storage on a local disk in benchmarks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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
  kOpList = 1u << 6,    // List, ListNames and ListNamesWithPrefix
  kOpStat = 1u << 7,
  kOpCreateDirectories = 1u << 8,
  kOpRename = 1u << 9,  // matched against the source path
  kOpDelete = 1u << 10,
  kOpPutIfAbsent = 1u << 11,
  kOpSyncDirectory = 1u << 12,
  kOpSyncFiles = 1u << 13,  // Storage::SyncFiles, matched against its first path
  kOpAll = 0xffffffffu,
};

// What FailOperation does to the operation it hits.
enum class FaultKind {
  kEIO,     // fails with IOError "Input/output error" (not retryable), before taking effect
  kENOSPC,  // fails with IOError "No space left on device" (not retryable), before taking effect
  kCrash,   // a power loss just before the operation: see Crash()
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

// Every call through this storage and the files it returns is one operation (StorageOp), counted
// in order whether it fails or not, so a harness can run a workload once to learn how many it
// makes and then fail or crash each one in turn.
//
// The crash model (Crash, FaultKind::kCrash) is that of a local file system losing power, for
// files written through this wrapper since it was made:
//  - data: a file appended to since its last Sync is cut back to the length that Sync made
//    durable (to empty when never synced);
//  - names: a file created, or renamed into place, whose directory has not been synced since
//    (SyncDirectory, or a PutIfAbsent into the same directory, which syncs it as the local backend
//    does) is gone again: a rename is undone (the file it replaced comes back, and its source name
//    too when that name was durable), a new file is removed.
// Deletes and CreateDirectories count as durable at once; PutIfAbsent is atomic and durable when it
// returns OK. After a crash every operation fails with IOError until ResetCrash. The undo copies
// replaced files into memory at each rename: meant for tests on small files.
//
// Thread-safe (one mutex guards the rules, counters, crash state and random generator). A crash
// waits for the operations in flight to finish, so none lands after the simulated power loss.
// REQUIRES: `base` outlives this object, and this object outlives the files it returns.
class FaultInjectingStorage final : public Storage {
 public:
  explicit FaultInjectingStorage(Storage& base, uint64_t seed = 1);
  // The wrapped storage's answers (local_files() stays false: reading the names directly would
  // bypass this wrapper).
  bool remote() const override { return base_.remote(); }
  bool CreateIsAtomic() const override { return base_.CreateIsAtomic(); }

  void AddRule(FaultRule rule) EXCLUDES(mu_);
  void ClearRules() EXCLUDES(mu_);
  uint64_t faults_injected() const EXCLUDES(mu_);

  // Operations counted so far (including those that failed).
  uint64_t operations() const EXCLUDES(mu_);
  // Fails the `n`-th operation from now (n >= 1; 1 = the next one) as `kind` says; once. Replaces
  // an earlier FailOperation that has not fired. Checked before the rules.
  void FailOperation(uint64_t n, FaultKind kind) EXCLUDES(mu_);
  // Simulates a power loss now (see the crash model above): undoes what was not durable on the
  // base storage, then fails every later operation. Returns the first error met while undoing.
  Status Crash() EXCLUDES(mu_);
  bool crashed() const EXCLUDES(mu_);
  // Lets operations through again after a crash, and forgets what was written so far (all of it
  // now counts as durable).
  void ResetCrash() EXCLUDES(mu_);

  // Counts one operation and returns its injected error, or OK.
  Status MaybeFail(StorageOp op, const std::string& path) EXCLUDES(mu_);

  // For the files this storage returns. BeginOperation is MaybeFail that, on OK, also marks the
  // operation in flight until EndOperation (a crash waits for it); the Note functions keep the
  // crash model's books and are called while the operation is in flight.
  Status BeginOperation(StorageOp op, const std::string& path) EXCLUDES(mu_);
  void EndOperation() EXCLUDES(mu_);
  void NoteAppended(const std::string& path) EXCLUDES(mu_);
  void NoteSynced(const std::string& path, uint64_t bytes) EXCLUDES(mu_);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) override;
  Result<std::vector<DirEntry>> List(const std::string& dir) override;
  Result<std::vector<std::string>> ListNames(const std::string& dir) override;
  Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix) override;
  Result<DirEntry> Stat(const std::string& path) override;
  Status CreateDirectories(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Delete(const std::string& path) override;
  Status PutIfAbsent(const std::string& path, ByteView data) override;
  Status PublishIfAbsent(const std::string& tmp, const std::string& path) override;
  Status SyncDirectory(const std::string& dir) override;
  Status SyncFiles(const std::vector<std::string>& paths) override;

 private:
  struct RuleState {
    FaultRule rule;
    uint64_t seen = 0;      // matching calls so far
    uint64_t injected = 0;  // faults injected so far
  };
  // A file written through this wrapper and not yet wholly durable.
  struct WrittenState {
    uint64_t synced_bytes = 0;  // the length its last Sync made durable (0 before any)
    bool dirty = true;          // appended to (or created) since that Sync
  };
  // How to undo a name that a Create or Rename made and no directory sync has made durable yet.
  struct NameUndo {
    std::optional<std::string> replaced;  // the bytes of the durable file this name replaced; none: remove the name
    std::string durable_source;           // Rename from a durable name: put the file back there; "" otherwise
  };

  // The error of an operation that FailOperation or a rule picks, or OK; counts the operation.
  Status DecideLocked(StorageOp op, const std::string& path) REQUIRES(mu_);
  // Sets crashed_, waits for the operations in flight, then undoes on base_ what a power loss
  // would lose. Holds mu_ throughout, so nothing else runs meanwhile.
  Status SimulateCrashLocked() REQUIRES(mu_);
  // Crash-model bookkeeping, called while the operation is in flight.
  void NoteCreated(const std::string& path, bool existed) EXCLUDES(mu_);
  void NoteRenamed(const std::string& from, const std::string& to, std::optional<std::string> replaced) EXCLUDES(mu_);
  void NoteDeleted(const std::string& path) EXCLUDES(mu_);
  void NoteDirectorySyncedLocked(const std::string& dir) REQUIRES(mu_);

  Storage& base_;
  mutable Mutex mu_;
  CondVar idle_;  // signalled when in_flight_ drops to 0
  std::vector<RuleState> rules_ GUARDED_BY(mu_);
  Rng rng_ GUARDED_BY(mu_);
  uint64_t faults_ GUARDED_BY(mu_) = 0;
  uint64_t operations_ GUARDED_BY(mu_) = 0;
  uint64_t fail_at_ GUARDED_BY(mu_) = 0;  // FailOperation: the operation number to fail; 0 = none
  FaultKind fail_kind_ GUARDED_BY(mu_) = FaultKind::kEIO;
  bool crashed_ GUARDED_BY(mu_) = false;
  int in_flight_ GUARDED_BY(mu_) = 0;
  std::map<std::string, WrittenState> written_ GUARDED_BY(mu_);  // by current path
  std::map<std::string, NameUndo> new_names_ GUARDED_BY(mu_);    // by path
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
  // The wrapped storage's answers (local_files() stays false: reading the names directly would
  // bypass this wrapper).
  bool remote() const override { return base_.remote(); }
  bool CreateIsAtomic() const override { return base_.CreateIsAtomic(); }

  // Sleeps for one request's latency plus the transfer time of `bytes`.
  void Charge(uint64_t bytes) EXCLUDES(mu_);

  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) override;
  Result<std::vector<DirEntry>> List(const std::string& dir) override;
  Result<std::vector<std::string>> ListNames(const std::string& dir) override;
  Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix) override;
  Result<DirEntry> Stat(const std::string& path) override;
  Status CreateDirectories(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Delete(const std::string& path) override;
  Status PutIfAbsent(const std::string& path, ByteView data) override;
  Status PublishIfAbsent(const std::string& tmp, const std::string& path) override;
  Status SyncDirectory(const std::string& dir) override;
  Status SyncFiles(const std::vector<std::string>& paths) override;

 private:
  Storage& base_;
  ThrottleOptions options_;
  Mutex mu_;
  int64_t next_free_ns_ GUARDED_BY(mu_) = 0;  // steady-clock time when the bandwidth timeline is free
};

}  // namespace stoke
