#include "io/fault_storage.h"

#include <fmt/format.h>

#include <chrono>
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
    default: return "operation";
  }
}

class FaultyReadFile final : public RandomAccessFile {
 public:
  FaultyReadFile(FaultInjectingStorage* owner, std::unique_ptr<RandomAccessFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    STOKE_RETURN_IF_ERROR(owner_->MaybeFail(kOpRead, base_->path()));
    return base_->ReadAt(offset, dst);
  }
  uint64_t size() const override { return base_->size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectingStorage* owner_;
  std::unique_ptr<RandomAccessFile> base_;
};

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultInjectingStorage* owner, std::unique_ptr<WritableFile> base)
      : owner_(owner), base_(std::move(base)) {}
  Status Append(ByteView data) override {
    STOKE_RETURN_IF_ERROR(owner_->MaybeFail(kOpAppend, base_->path()));
    return base_->Append(data);
  }
  Status Sync() override {
    STOKE_RETURN_IF_ERROR(owner_->MaybeFail(kOpSync, base_->path()));
    return base_->Sync();
  }
  Status Close() override {
    Status injected = owner_->MaybeFail(kOpClose, base_->path());
    if (!injected.ok()) {
      // Like a crash before the data was committed: the base file is never closed (an object-store
      // upload is then dropped; a local file keeps what was appended).
      return injected;
    }
    return base_->Close();
  }
  uint64_t bytes_written() const override { return base_->bytes_written(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectingStorage* owner_;
  std::unique_ptr<WritableFile> base_;
};

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

Status FaultInjectingStorage::MaybeFail(StorageOp op, const std::string& path) {
  MutexLock lock(&mu_);
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

Result<std::unique_ptr<RandomAccessFile>> FaultInjectingStorage::OpenForRead(const std::string& path) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpOpenForRead, path));
  STOKE_ASSIGN_OR_RETURN(auto f, base_.OpenForRead(path));
  return std::unique_ptr<RandomAccessFile>(std::make_unique<FaultyReadFile>(this, std::move(f)));
}

Result<std::unique_ptr<WritableFile>> FaultInjectingStorage::Create(const std::string& path, bool exclusive) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpCreate, path));
  STOKE_ASSIGN_OR_RETURN(auto f, base_.Create(path, exclusive));
  return std::unique_ptr<WritableFile>(std::make_unique<FaultyWritableFile>(this, std::move(f)));
}

Result<std::vector<DirEntry>> FaultInjectingStorage::List(const std::string& dir) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpList, dir));
  return base_.List(dir);
}

Result<std::vector<std::string>> FaultInjectingStorage::ListNames(const std::string& dir) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpList, dir));
  return base_.ListNames(dir);
}

Result<DirEntry> FaultInjectingStorage::Stat(const std::string& path) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpStat, path));
  return base_.Stat(path);
}

Status FaultInjectingStorage::CreateDirectories(const std::string& path) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpCreateDirectories, path));
  return base_.CreateDirectories(path);
}

Status FaultInjectingStorage::Rename(const std::string& from, const std::string& to) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpRename, from));
  return base_.Rename(from, to);
}

Status FaultInjectingStorage::Delete(const std::string& path) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpDelete, path));
  return base_.Delete(path);
}

Status FaultInjectingStorage::PutIfAbsent(const std::string& path, ByteView data) {
  STOKE_RETURN_IF_ERROR(MaybeFail(kOpPutIfAbsent, path));
  return base_.PutIfAbsent(path, data);
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

}  // namespace stoke
