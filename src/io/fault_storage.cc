#include "io/fault_storage.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace stoke {
namespace {

const char* OpName(StorageOp op) {
  switch (op) {
    case kOpOpenForRead: return "open";
    case kOpRead: return "read";
    case kOpCreate: return "create";
    case kOpAppend: return "append";
    case kOpSync: return "sync";
    case kOpClose: return "close";
    case kOpList: return "list";
    case kOpStat: return "stat";
    case kOpCreateDirectories: return "create directories";
    case kOpRename: return "rename";
    case kOpDelete: return "delete";
    case kOpPutIfAbsent: return "put-if-absent";
    case kOpSyncDirectory: return "sync directory";
    case kOpSyncFiles: return "sync files";
    default: return "operation";
  }
}

// Holds one operation in flight for its scope (when it was let through).
class InFlightOperation {
 public:
  InFlightOperation(FaultInjectingStorage* owner, StorageOp op, const std::string& path)
      : owner_(owner), status_(owner->BeginOperation(op, path)) {}
  ~InFlightOperation() {
    if (status_.ok()) owner_->EndOperation();
  }
  InFlightOperation(const InFlightOperation&) = delete;
  InFlightOperation& operator=(const InFlightOperation&) = delete;
  const Status& status() const { return status_; }

 private:
  FaultInjectingStorage* owner_;
  Status status_;
};

class FaultyReadFile final : public RandomAccessFile {
 public:
  FaultyReadFile(FaultInjectingStorage* owner, std::unique_ptr<RandomAccessFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    InFlightOperation op(owner_, kOpRead, base_->path());
    STOKE_RETURN_IF_ERROR(op.status());
    return base_->ReadAt(offset, dst);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  bool remote() const override { return base_->remote(); }

 private:
  FaultInjectingStorage* owner_;
  std::unique_ptr<RandomAccessFile> base_;
};

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectingStorage* owner, std::unique_ptr<WritableFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status Append(ByteView data) override {
    InFlightOperation op(owner_, kOpAppend, base_->path());
    STOKE_RETURN_IF_ERROR(op.status());
    owner_->NoteAppended(base_->path());
    return base_->Append(data);
  }
  Status Sync() override {
    InFlightOperation op(owner_, kOpSync, base_->path());
    STOKE_RETURN_IF_ERROR(op.status());
    STOKE_RETURN_IF_ERROR(base_->Sync());
    owner_->NoteSynced(base_->path(), base_->bytes_written());
    return Status::OK();
  }
  Status Close() override {
    InFlightOperation op(owner_, kOpClose, base_->path());
    if (!op.status().ok()) {
      // Like a crash before the data was committed: the base file is never closed (an object-store
      // upload is then dropped; a local file keeps what was appended).
      return op.status();
    }
    return base_->Close();
  }
  uint64_t bytes_written() const override { return base_->bytes_written(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectingStorage* owner_;
  std::unique_ptr<WritableFile> base_;
};

// Replaces the content of `path` on `storage` with `data`, durably.
Status RewriteFile(Storage& storage, const std::string& path, ByteView data) {
  STOKE_ASSIGN_OR_RETURN(auto f, storage.Create(path));
  STOKE_RETURN_IF_ERROR(f->Append(data));
  STOKE_RETURN_IF_ERROR(f->Sync());
  return f->Close();
}

std::string WithoutTrailingSlash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

class ThrottledReadFile final : public RandomAccessFile {
 public:
  ThrottledReadFile(ThrottledStorage* owner, std::unique_ptr<RandomAccessFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    owner_->Charge(dst.size());
    return base_->ReadAt(offset, dst);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }
  bool remote() const override { return base_->remote(); }

 private:
  ThrottledStorage* owner_;
  std::unique_ptr<RandomAccessFile> base_;
};

class ThrottledWritableFile final : public WritableFile {
 public:
  ThrottledWritableFile(ThrottledStorage* owner, std::unique_ptr<WritableFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status Append(ByteView data) override {
    owner_->Charge(data.size());
    return base_->Append(data);
  }
  Status Sync() override { return base_->Sync(); }
  Status Close() override {
    owner_->Charge(0);
    return base_->Close();
  }
  uint64_t bytes_written() const override { return base_->bytes_written(); }
  const std::string& path() const override { return base_->path(); }

 private:
  ThrottledStorage* owner_;
  std::unique_ptr<WritableFile> base_;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// --- FaultInjectingStorage -------------------------------------------------------------------------

FaultInjectingStorage::FaultInjectingStorage(Storage& base, uint64_t seed) : base_(base), rng_(seed) {}

void FaultInjectingStorage::AddRule(FaultRule rule) {
  MutexLock lock(&mu_);
  rules_.push_back(RuleState{std::move(rule)});
}

void FaultInjectingStorage::ClearRules() {
  MutexLock lock(&mu_);
  rules_.clear();
}

uint64_t FaultInjectingStorage::faults_injected() const {
  MutexLock lock(&mu_);
  return faults_;
}

uint64_t FaultInjectingStorage::operations() const {
  MutexLock lock(&mu_);
  return operations_;
}

void FaultInjectingStorage::FailOperation(uint64_t n, FaultKind kind) {
  MutexLock lock(&mu_);
  fail_at_ = n == 0 ? 0 : operations_ + n;
  fail_kind_ = kind;
}

Status FaultInjectingStorage::Crash() {
  MutexLock lock(&mu_);
  return SimulateCrashLocked();
}

bool FaultInjectingStorage::crashed() const {
  MutexLock lock(&mu_);
  return crashed_;
}

void FaultInjectingStorage::ResetCrash() {
  MutexLock lock(&mu_);
  crashed_ = false;
  written_.clear();
  new_names_.clear();
}

Status FaultInjectingStorage::DecideLocked(StorageOp op, const std::string& path) {
  const uint64_t number = ++operations_;
  if (crashed_) {
    return Status::IOError(fmt::format("storage lost power (injected: {} '{}' after the crash)", OpName(op), path));
  }
  if (fail_at_ != 0 && number == fail_at_) {
    fail_at_ = 0;
    ++faults_;
    if (fail_kind_ == FaultKind::kCrash) {
      Status undone = SimulateCrashLocked();
      std::string m = fmt::format("storage lost power (injected: {} '{}', operation {})", OpName(op), path, number);
      if (!undone.ok()) m += "; simulating it failed: " + undone.ToString();
      return Status::IOError(std::move(m));
    }
    const int err = fail_kind_ == FaultKind::kENOSPC ? ENOSPC : EIO;
    return Status::IOError(
        fmt::format("{} '{}': {} (injected: operation {})", OpName(op), path, std::strerror(err), number));
  }
  for (RuleState& r : rules_) {
    if ((r.rule.ops & op) == 0) continue;
    if (!r.rule.path_substring.empty() && path.find(r.rule.path_substring) == std::string::npos) continue;
    if (r.seen++ < r.rule.after_calls) continue;
    if (r.injected >= r.rule.max_faults) continue;
    if (r.rule.probability < 1.0 && rng_.Uniform() >= r.rule.probability) continue;
    ++r.injected;
    ++faults_;
    const Status& e = r.rule.error;
    return Status(e.code(), fmt::format("{} (injected: {} '{}')", e.message(), OpName(op), path), e.retryable());
  }
  return Status::OK();
}

Status FaultInjectingStorage::MaybeFail(StorageOp op, const std::string& path) {
  MutexLock lock(&mu_);
  return DecideLocked(op, path);
}

Status FaultInjectingStorage::BeginOperation(StorageOp op, const std::string& path) {
  MutexLock lock(&mu_);
  Status s = DecideLocked(op, path);
  if (s.ok()) ++in_flight_;
  return s;
}

void FaultInjectingStorage::EndOperation() {
  MutexLock lock(&mu_);
  if (--in_flight_ == 0) idle_.SignalAll();
}

Status FaultInjectingStorage::SimulateCrashLocked() {
  crashed_ = true;
  while (in_flight_ > 0) idle_.Wait(&mu_);
  Status first;
  auto keep_first = [&first](Status s) {
    if (first.ok() && !s.ok() && s.code() != StatusCode::kNotFound) first = std::move(s);
  };
  // Data: cut each file back to what its last Sync made durable.
  for (const auto& [path, state] : written_) {
    if (!state.dirty) continue;
    auto file = base_.OpenForRead(path);
    if (!file.ok()) {
      keep_first(file.status());
      continue;
    }
    std::string kept(std::min<uint64_t>(state.synced_bytes, (*file)->size()), '\0');
    Status s = (*file)->ReadAt(0, MutableByteView(reinterpret_cast<uint8_t*>(kept.data()), kept.size()));
    file->reset();
    if (s.ok()) s = RewriteFile(base_, path, AsBytes(kept));
    keep_first(std::move(s));
  }
  // Names: undo each one no directory sync made durable.
  for (const auto& [path, undo] : new_names_) {
    if (!undo.durable_source.empty()) {
      auto bytes = ReadFileToString(base_, path);
      keep_first(bytes.ok() ? RewriteFile(base_, undo.durable_source, AsBytes(*bytes)) : bytes.status());
    }
    keep_first(undo.replaced ? RewriteFile(base_, path, AsBytes(*undo.replaced)) : base_.Delete(path));
  }
  written_.clear();
  new_names_.clear();
  return first;
}

void FaultInjectingStorage::NoteCreated(const std::string& path, bool existed) {
  MutexLock lock(&mu_);
  written_[path] = WrittenState{};  // truncated: nothing of it is durable
  if (!existed) new_names_.try_emplace(path);
}

void FaultInjectingStorage::NoteAppended(const std::string& path) {
  MutexLock lock(&mu_);
  written_[path].dirty = true;
}

void FaultInjectingStorage::NoteSynced(const std::string& path, uint64_t bytes) {
  MutexLock lock(&mu_);
  written_[path] = WrittenState{bytes, false};
}

void FaultInjectingStorage::NoteRenamed(const std::string& from, const std::string& to,
                                        std::optional<std::string> replaced) {
  MutexLock lock(&mu_);
  auto w = written_.find(from);
  if (w != written_.end()) {
    written_[to] = w->second;
    written_.erase(from);  // `w` is not used after this
  } else {
    written_.erase(to);  // its data now is from's, which was durable
  }
  if (new_names_.count(to)) return;  // keeps the undo back to the last durable state of `to`
  NameUndo undo;
  undo.replaced = std::move(replaced);
  // A source name that was durable comes back on a crash; one that was not has its own undo
  // entry, which stays (it removes the name, or restores what that name replaced).
  if (!new_names_.count(from)) undo.durable_source = from;
  new_names_[to] = std::move(undo);
}

void FaultInjectingStorage::NoteDeleted(const std::string& path) {
  MutexLock lock(&mu_);
  written_.erase(path);
  new_names_.erase(path);
}

void FaultInjectingStorage::NoteDirectorySyncedLocked(const std::string& dir) {
  const std::string d = WithoutTrailingSlash(dir);
  for (auto it = new_names_.begin(); it != new_names_.end();) {
    it = WithoutTrailingSlash(ParentPath(it->first)) == d ? new_names_.erase(it) : std::next(it);
  }
}

Result<std::unique_ptr<RandomAccessFile>> FaultInjectingStorage::OpenForRead(const std::string& path) {
  InFlightOperation op(this, kOpOpenForRead, path);
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_ASSIGN_OR_RETURN(auto f, base_.OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(std::make_unique<FaultyReadFile>(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectingStorage::Create(const std::string& path, bool exclusive) {
  InFlightOperation op(this, kOpCreate, path);
  STOKE_RETURN_IF_ERROR(op.status());
  const bool existed = !exclusive && base_.Stat(path).ok();
  STOKE_ASSIGN_OR_RETURN(auto f, base_.Create(path, exclusive));
  NoteCreated(path, existed);
  return std::unique_ptr<WritableFile>(std::make_unique<FaultyWritableFile>(this, std::move(f)));
}

Result<std::vector<DirEntry>> FaultInjectingStorage::List(const std::string& dir) {
  InFlightOperation op(this, kOpList, dir);
  STOKE_RETURN_IF_ERROR(op.status());
  return base_.List(dir);
}

Result<std::vector<std::string>> FaultInjectingStorage::ListNames(const std::string& dir) {
  InFlightOperation op(this, kOpList, dir);
  STOKE_RETURN_IF_ERROR(op.status());
  return base_.ListNames(dir);
}

Result<std::vector<std::string>> FaultInjectingStorage::ListNamesWithPrefix(const std::string& dir,
                                                                          const std::string& prefix) {
  InFlightOperation op(this, kOpList, dir);
  STOKE_RETURN_IF_ERROR(op.status());
  return base_.ListNamesWithPrefix(dir, prefix);
}

Result<DirEntry> FaultInjectingStorage::Stat(const std::string& path) {
  InFlightOperation op(this, kOpStat, path);
  STOKE_RETURN_IF_ERROR(op.status());
  return base_.Stat(path);
}

Status FaultInjectingStorage::CreateDirectories(const std::string& path) {
  InFlightOperation op(this, kOpCreateDirectories, path);
  STOKE_RETURN_IF_ERROR(op.status());
  return base_.CreateDirectories(path);
}

Status FaultInjectingStorage::Rename(const std::string& from, const std::string& to) {
  InFlightOperation op(this, kOpRename, from);
  STOKE_RETURN_IF_ERROR(op.status());
  // The bytes a crash would bring back at `to`: needed only when `to` is a durable name.
  std::optional<std::string> replaced;
  bool to_is_new;
  {
    MutexLock lock(&mu_);
    to_is_new = new_names_.count(to) > 0;
  }
  if (!to_is_new) {
    auto bytes = ReadFileToString(base_, to);
    if (bytes.ok()) replaced = std::move(*bytes);
  }
  STOKE_RETURN_IF_ERROR(base_.Rename(from, to));
  NoteRenamed(from, to, std::move(replaced));
  return Status::OK();
}

Status FaultInjectingStorage::Delete(const std::string& path) {
  InFlightOperation op(this, kOpDelete, path);
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_RETURN_IF_ERROR(base_.Delete(path));
  NoteDeleted(path);
  return Status::OK();
}

Status FaultInjectingStorage::PutIfAbsent(const std::string& path, ByteView data) {
  InFlightOperation op(this, kOpPutIfAbsent, path);
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_RETURN_IF_ERROR(base_.PutIfAbsent(path, data));
  // Durable when it returns, and (as on local disks, where it ends with a directory fsync) so is
  // every other entry of its directory.
  MutexLock lock(&mu_);
  NoteDirectorySyncedLocked(ParentPath(path));
  return Status::OK();
}

Status FaultInjectingStorage::PublishIfAbsent(const std::string& tmp, const std::string& path) {
  InFlightOperation op(this, kOpPutIfAbsent, path);
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_RETURN_IF_ERROR(base_.PublishIfAbsent(tmp, path));
  // As a rename of `tmp` to a name that was free, then (as PutIfAbsent) a sync of the directory:
  // `path` keeps the durable length of tmp's data, and the name is durable.
  NoteRenamed(tmp, path, std::nullopt);
  MutexLock lock(&mu_);
  NoteDirectorySyncedLocked(ParentPath(path));
  return Status::OK();
}

Status FaultInjectingStorage::SyncFiles(const std::vector<std::string>& paths) {
  InFlightOperation op(this, kOpSyncFiles, paths.empty() ? std::string() : paths.front());
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_RETURN_IF_ERROR(base_.SyncFiles(paths));
  // Every byte of these files is durable now, as after a Sync of each.
  for (const auto& p : paths) {
    auto st = base_.Stat(p);
    if (st.ok()) NoteSynced(p, st->size);
  }
  return Status::OK();
}

Status FaultInjectingStorage::SyncDirectory(const std::string& dir) {
  InFlightOperation op(this, kOpSyncDirectory, dir);
  STOKE_RETURN_IF_ERROR(op.status());
  STOKE_RETURN_IF_ERROR(base_.SyncDirectory(dir));
  MutexLock lock(&mu_);
  NoteDirectorySyncedLocked(dir);
  return Status::OK();
}

// --- ThrottledStorage --------------------------------------------------------------------------------

ThrottledStorage::ThrottledStorage(Storage& base, ThrottleOptions options) : base_(base), options_(options) {}

void ThrottledStorage::Charge(uint64_t bytes) {
  int64_t now = NowNs();
  int64_t wake = now + options_.latency_us * 1000;
  if (options_.bytes_per_second > 0 && bytes > 0) {
    int64_t transfer_ns = static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / options_.bytes_per_second);
    MutexLock lock(&mu_);
    int64_t start = std::max(now, next_free_ns_);
    next_free_ns_ = start + transfer_ns;
    wake = std::max(wake, next_free_ns_);
  }
  int64_t wait = wake - NowNs();
  if (wait > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(wait));
}

Result<std::unique_ptr<RandomAccessFile>> ThrottledStorage::OpenForRead(const std::string& path) {
  Charge(0);
  STOKE_ASSIGN_OR_RETURN(auto f, base_.OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(std::make_unique<ThrottledReadFile>(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> ThrottledStorage::Create(const std::string& path, bool exclusive) {
  Charge(0);
  STOKE_ASSIGN_OR_RETURN(auto f, base_.Create(path, exclusive));
  return std::unique_ptr<WritableFile>(std::make_unique<ThrottledWritableFile>(this, std::move(f)));
}

Result<std::vector<DirEntry>> ThrottledStorage::List(const std::string& dir) {
  Charge(0);
  return base_.List(dir);
}

Result<std::vector<std::string>> ThrottledStorage::ListNames(const std::string& dir) {
  Charge(0);
  return base_.ListNames(dir);
}

Result<std::vector<std::string>> ThrottledStorage::ListNamesWithPrefix(const std::string& dir, const std::string& prefix) {
  Charge(0);
  return base_.ListNamesWithPrefix(dir, prefix);
}

Result<DirEntry> ThrottledStorage::Stat(const std::string& path) {
  Charge(0);
  return base_.Stat(path);
}

Status ThrottledStorage::CreateDirectories(const std::string& path) {
  Charge(0);
  return base_.CreateDirectories(path);
}

Status ThrottledStorage::Rename(const std::string& from, const std::string& to) {
  Charge(0);
  return base_.Rename(from, to);
}

Status ThrottledStorage::Delete(const std::string& path) {
  Charge(0);
  return base_.Delete(path);
}

Status ThrottledStorage::PutIfAbsent(const std::string& path, ByteView data) {
  Charge(data.size());
  return base_.PutIfAbsent(path, data);
}

Status ThrottledStorage::SyncFiles(const std::vector<std::string>& paths) {
  Charge(0);
  return base_.SyncFiles(paths);
}

Status ThrottledStorage::PublishIfAbsent(const std::string& tmp, const std::string& path) {
  Charge(0);
  return base_.PublishIfAbsent(tmp, path);
}

Status ThrottledStorage::SyncDirectory(const std::string& dir) {
  Charge(0);
  return base_.SyncDirectory(dir);
}

}  // namespace stoke
