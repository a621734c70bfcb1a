#include "io/object_storage.h"

#include "io/http_client.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "core/random.h"

namespace stoke {
namespace {

class ObjectRandomAccessFile final : public RandomAccessFile {
 public:
  ObjectRandomAccessFile(std::shared_ptr<ObjectStoreClient> client, std::string path, std::string key, uint64_t size)
      : client_(std::move(client)), path_(std::move(path)), key_(std::move(key)), size_(size) {}

  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    if (offset > size_ || dst.size() > size_ - offset) {
      return Status::IOError(fmt::format("read of {} bytes at offset {} is past the end of {} ({} bytes)", dst.size(),
                                         offset, client_->Describe(key_), size_));
    }
    if (dst.empty()) return Status::OK();
    return client_->GetRange(key_, offset, dst);
  }
  void ReadAtAsync(uint64_t offset, MutableByteView dst, ReadCallback done) const override {
    if (offset > size_ || dst.size() > size_ - offset || dst.empty()) {
      done(ReadAt(offset, dst));  // the error, or nothing to read: no request
      return;
    }
    client_->GetRangeAsync(key_, offset, dst, std::move(done));
  }
  uint64_t size() const override { return size_; }
  const std::string& path() const override { return path_; }
  bool remote() const override { return true; }

 private:
  std::shared_ptr<ObjectStoreClient> client_;
  std::string path_;
  std::string key_;
  uint64_t size_;
};

// Buffers appends; uploads one object at Close, or parts as they fill once the data outgrows one part.
// Not thread-safe (WritableFile's contract).
class ObjectWritableFile final : public WritableFile {
 public:
  ObjectWritableFile(std::shared_ptr<ObjectStoreClient> client, std::string path, std::string key, bool exclusive,
                     uint64_t part_size)
      : client_(std::move(client)),
        path_(std::move(path)),
        key_(std::move(key)),
        exclusive_(exclusive),
        part_size_(std::max<uint64_t>(part_size, 1)) {}
  ~ObjectWritableFile() override {
    if (!closed_ && upload_started_) (void)client_->AbortUpload(key_, upload_id_);
  }

  Status Append(ByteView data) override {
    if (closed_) return Status::Internal(fmt::format("append to closed file {}", client_->Describe(key_)));
    if (!error_.ok()) return error_;
    buffer_.append(reinterpret_cast<const char*>(data.data()), data.size());
    bytes_written_ += data.size();
    // Keep up to one whole part buffered so that a write of at most part_size is one PUT.
    while (buffer_.size() > part_size_) {
      Status s = FlushPart(ByteView(reinterpret_cast<const uint8_t*>(buffer_.data()), part_size_));
      if (!s.ok()) return Fail(s);
      buffer_.erase(0, part_size_);
    }
    return Status::OK();
  }
  Status Sync() override { return error_; }  // object stores make data durable (and visible) at Close
  Status Close() override {
    if (closed_) return error_;
    if (!error_.ok()) {
      closed_ = true;
      return error_;
    }
    Status s;
    if (!upload_started_) {
      s = client_->Put(key_, AsBytes(buffer_), exclusive_);
    } else {
      if (!buffer_.empty()) s = FlushPart(AsBytes(buffer_));
      if (s.ok()) s = client_->CompleteUpload(key_, upload_id_, parts_, exclusive_);
      if (!s.ok()) (void)client_->AbortUpload(key_, upload_id_);
    }
    closed_ = true;
    buffer_.clear();
    buffer_.shrink_to_fit();
    error_ = s;
    return s;
  }
  uint64_t bytes_written() const override { return bytes_written_; }
  const std::string& path() const override { return path_; }

 private:
  Status FlushPart(ByteView part) {
    if (!upload_started_) {
      STOKE_ASSIGN_OR_RETURN(upload_id_, client_->StartUpload(key_));
      upload_started_ = true;
    }
    STOKE_ASSIGN_OR_RETURN(std::string token,
                           client_->UploadPart(key_, upload_id_, static_cast<int>(parts_.size()) + 1, part));
    parts_.push_back(std::move(token));
    return Status::OK();
  }
  Status Fail(Status s) {
    error_ = s;
    if (upload_started_) (void)client_->AbortUpload(key_, upload_id_);
    upload_started_ = false;
    return s;
  }

  std::shared_ptr<ObjectStoreClient> client_;
  std::string path_;
  std::string key_;
  bool exclusive_;
  uint64_t part_size_;
  std::string buffer_;
  uint64_t bytes_written_ = 0;
  bool upload_started_ = false;
  std::string upload_id_;
  std::vector<std::string> parts_;
  bool closed_ = false;
  Status error_;
};

std::string DirPrefix(const std::string& key) { return key.empty() ? "" : key + "/"; }

}  // namespace

Result<std::string> ObjectKeyFromPath(const std::string& path, bool allow_empty) {
  std::string key;
  size_t i = 0;
  while (i <= path.size()) {
    size_t slash = path.find('/', i);
    if (slash == std::string::npos) slash = path.size();
    std::string_view seg(path.data() + i, slash - i);
    if (seg == "..") return Status::InvalidArgument(fmt::format("path '{}' has a '..' segment (not allowed in object keys)", path));
    if (!seg.empty() && seg != ".") {
      if (!key.empty()) key += '/';
      key += seg;
    }
    i = slash + 1;
  }
  if (key.empty() && !allow_empty) return Status::InvalidArgument(fmt::format("path '{}' names no object", path));
  return key;
}

ObjectStorage::ObjectStorage(std::shared_ptr<ObjectStoreClient> client, ObjectStorageOptions options)
    : client_(std::move(client)), options_(options) {}

Result<std::unique_ptr<RandomAccessFile>> ObjectStorage::OpenForRead(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  STOKE_ASSIGN_OR_RETURN(ObjectInfo info, client_->Head(key));
  return std::unique_ptr<RandomAccessFile>(std::make_unique<ObjectRandomAccessFile>(client_, path, key, info.size));
}

Result<std::unique_ptr<RandomAccessFile>> ObjectStorage::OpenForReadWithSize(const std::string& path, uint64_t size) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  return std::unique_ptr<RandomAccessFile>(std::make_unique<ObjectRandomAccessFile>(client_, path, key, size));
}

Result<std::string> ObjectStorage::ReadFile(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  return client_->GetObject(key);
}

Result<std::string> ObjectStoreClient::GetObject(const std::string& key) {
  STOKE_ASSIGN_OR_RETURN(ObjectInfo info, Head(key));
  std::string out(info.size, '\0');
  if (!out.empty()) {
    STOKE_RETURN_IF_ERROR(GetRange(key, 0, MutableByteView(reinterpret_cast<uint8_t*>(out.data()), out.size())));
  }
  return out;
}

Result<std::unique_ptr<WritableFile>> ObjectStorage::Create(const std::string& path, bool exclusive) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  if (exclusive) {
    // Fail early as local files do; the commit at Close is conditional as well.
    auto head = client_->Head(key);
    if (head.ok()) return Status::AlreadyExists(fmt::format("create {}: the object exists", client_->Describe(key)));
    if (head.status().code() != StatusCode::kNotFound) return head.status();
  }
  return std::unique_ptr<WritableFile>(
      std::make_unique<ObjectWritableFile>(client_, path, key, exclusive, options_.part_size));
}

Result<std::vector<DirEntry>> ObjectStorage::List(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(dir, true));
  std::string prefix = DirPrefix(key);
  std::vector<DirEntry> out;
  std::string token;
  do {
    STOKE_ASSIGN_OR_RETURN(ObjectListing page, client_->ListPage(prefix, true, token));
    for (auto& o : page.objects) {
      if (o.key.size() <= prefix.size()) continue;  // a "directory marker" object named like the prefix
      DirEntry e;
      e.name = o.key.substr(prefix.size());
      e.size = o.size;
      e.modification_time_ms = o.modification_time_ms;
      e.etag = std::move(o.etag);
      out.push_back(std::move(e));
    }
    for (auto& p : page.prefixes) {
      if (p.size() <= prefix.size() + 1) continue;
      DirEntry e;
      e.name = p.substr(prefix.size(), p.size() - prefix.size() - 1);
      e.is_directory = true;
      out.push_back(std::move(e));
    }
    token = std::move(page.next_token);
  } while (!token.empty());
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  // A prefix may repeat across pages on some servers; keep one entry per name.
  out.erase(std::unique(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name == b.name; }),
            out.end());
  return out;
}

Result<std::vector<std::string>> ObjectStorage::ListNames(const std::string& dir) { return ListNamesWithPrefix(dir, ""); }

Result<std::vector<std::string>> ObjectStorage::ListNamesWithPrefix(const std::string& dir, const std::string& name_prefix) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(dir, true));
  const std::string prefix = DirPrefix(key);
  std::vector<std::string> out;
  std::string token;
  do {
    STOKE_ASSIGN_OR_RETURN(ObjectListing page, client_->ListPage(prefix + name_prefix, true, token));
    for (auto& o : page.objects) {
      if (o.key.size() > prefix.size()) out.push_back(o.key.substr(prefix.size()));
    }
    token = std::move(page.next_token);
  } while (!token.empty());
  std::sort(out.begin(), out.end());
  return out;
}

Result<DirEntry> ObjectStorage::Stat(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, true));
  DirEntry e;
  e.name = key.substr(key.rfind('/') == std::string::npos ? 0 : key.rfind('/') + 1);
  if (!key.empty()) {
    auto info = client_->Head(key);
    if (info.ok()) {
      e.size = info->size;
      e.modification_time_ms = info->modification_time_ms;
      e.etag = std::move(info->etag);
      return e;
    }
    if (info.status().code() != StatusCode::kNotFound) return info.status();
    // Not an object: a "directory" when some key starts with "<key>/".
    auto page = client_->ListPage(DirPrefix(key), true, "");
    if (!page.ok()) return page.status();
    if (page->objects.empty() && page->prefixes.empty()) return info.status();
  }
  e.is_directory = true;
  return e;
}

Status ObjectStorage::CreateDirectories(const std::string& path) {
  return ObjectKeyFromPath(path, true).status();  // directories are prefixes: nothing to create
}

Status ObjectStorage::Rename(const std::string& from, const std::string& to) {
  STOKE_ASSIGN_OR_RETURN(std::string from_key, ObjectKeyFromPath(from, false));
  STOKE_ASSIGN_OR_RETURN(std::string to_key, ObjectKeyFromPath(to, false));
  if (from_key == to_key) return Status::OK();
  // Not atomic: a crash between the copy and the delete leaves both objects.
  STOKE_RETURN_IF_ERROR(client_->CopyObject(from_key, to_key));
  return client_->DeleteObject(from_key);
}

Status ObjectStorage::Delete(const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  return client_->DeleteObject(key);
}

Status ObjectStorage::PutIfAbsent(const std::string& path, ByteView data) {
  STOKE_ASSIGN_OR_RETURN(std::string key, ObjectKeyFromPath(path, false));
  return client_->Put(key, data, /*if_absent=*/true);
}

std::vector<Status> ObjectStorage::ReadRanges(const std::string& path, const std::vector<ByteRangeRead>& ranges) {
  auto key = ObjectKeyFromPath(path, false);
  if (!key.ok()) return std::vector<Status>(ranges.size(), key.status());
  // Empty ranges need no request (and have no valid Range header).
  std::vector<Status> out(ranges.size());
  std::vector<ByteRangeRead> nonempty;
  std::vector<size_t> where;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].dst.empty()) continue;
    nonempty.push_back(ranges[i]);
    where.push_back(i);
  }
  if (nonempty.empty()) return out;
  std::vector<Status> got = client_->GetRanges(*key, nonempty);
  for (size_t j = 0; j < got.size() && j < where.size(); ++j) out[where[j]] = std::move(got[j]);
  return out;
}

bool ObjectHoldsExactly(ObjectStoreClient& client, const std::string& key, ByteView data) {
  auto info = client.Head(key);
  if (!info.ok() || info->size != data.size()) return false;
  if (data.empty()) return true;
  std::string got(data.size(), '\0');
  if (!client.GetRange(key, 0, MutableByteView(reinterpret_cast<uint8_t*>(got.data()), got.size())).ok()) return false;
  return AsBytes(got).size() == data.size() && std::memcmp(got.data(), data.data(), data.size()) == 0;
}

Status ProbeConditionalPut(Storage& storage, const std::string& dir) {
  static std::atomic<uint64_t> counter{0};
  std::string name = fmt::format(
      ".stoke-probe-{:016x}",
      SplitMix64((static_cast<uint64_t>(::getpid()) << 32) ^ counter.fetch_add(1) ^
                 static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())));
  std::string path = JoinPath(dir, name);
  STOKE_RETURN_IF_ERROR(storage.PutIfAbsent(path, AsBytes("first")));
  Status second = storage.PutIfAbsent(path, AsBytes("second"));
  (void)storage.Delete(path);
  if (second.code() == StatusCode::kAlreadyExists) return Status::OK();
  if (second.ok()) {
    return Status::Unsupported(fmt::format(
        "the storage under '{}' ignores conditional creation (If-None-Match: *): a second put-if-absent of {} "
        "succeeded; concurrent commits would overwrite each other",
        dir, name));
  }
  return second;
}

Result<int64_t> ParseHttpDateMs(std::string_view text) {
  std::string s(text);
  struct tm tm;
  std::memset(&tm, 0, sizeof(tm));
  const char* end = strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') {
    return Status::InvalidArgument(fmt::format("malformed HTTP date '{}'", s.substr(0, 64)));
  }
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

Result<int64_t> ParseIso8601Ms(std::string_view text) {
  std::string s(text);
  struct tm tm;
  std::memset(&tm, 0, sizeof(tm));
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  auto bad = [&] { return Status::InvalidArgument(fmt::format("malformed ISO 8601 time '{}'", s.substr(0, 64))); };
  if (end == nullptr) return bad();
  int64_t ms = 0;
  if (*end == '.') {
    ++end;
    int digits = 0;
    while (*end >= '0' && *end <= '9') {
      if (digits < 3) ms = ms * 10 + (*end - '0');
      ++digits;
      ++end;
    }
    if (digits == 0) return bad();
    for (int d = digits; d < 3; ++d) ms *= 10;
  }
  if (std::string_view(end) != "Z") return bad();
  return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
}

Result<uint64_t> ParseDecimalU64(std::string_view text) {
  if (text.empty() || text.size() > 20) return Status::InvalidArgument(fmt::format("malformed size '{}'", text.substr(0, 32)));
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return Status::InvalidArgument(fmt::format("malformed size '{}'", text.substr(0, 32)));
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return Status::InvalidArgument(fmt::format("size '{}' overflows", text));
    v = v * 10 + d;
  }
  return v;
}

std::string UnquotedEtag(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

Result<ObjectInfo> ObjectInfoFromHead(const HttpResponse& r, const std::string& described_key) {
  ObjectInfo info;
  auto size = ParseDecimalU64(r.Header("content-length"));
  if (!size.ok()) return Status::Corruption(fmt::format("stat {}: {}", described_key, size.status().message()));
  info.size = *size;
  auto t = ParseHttpDateMs(r.Header("last-modified"));
  if (t.ok()) info.modification_time_ms = *t;
  info.etag = UnquotedEtag(r.Header("etag"));
  return info;
}

Status RangeReadStatus(const Result<HttpResponse>& result, uint64_t offset, uint64_t size,
                       const std::string& described_key, const HttpErrorMapper& map_error) {
  if (!result.ok()) return result.status().WithContext(fmt::format("read {}", described_key));
  if (!result->ok()) return map_error(*result, fmt::format("read bytes {}-{} of", offset, offset + size - 1));
  return Status::OK();
}

HttpCallback RangeReadCallback(uint64_t offset, uint64_t size, std::function<std::string()> describe,
                               HttpErrorMapper map_error, ReadCallback done) {
  return [offset, size, describe = std::move(describe), map_error = std::move(map_error),
          done = std::move(done)](Result<HttpResponse> r) {
    if (r.ok() && r->ok()) return done(Status::OK());
    done(RangeReadStatus(r, offset, size, describe(), map_error));
  };
}

std::vector<Status> RangeReadStatuses(const std::vector<Result<HttpResponse>>& results,
                                      const std::vector<ByteRangeRead>& ranges, const std::string& described_key,
                                      const HttpErrorMapper& map_error) {
  std::vector<Status> out;
  out.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    out.push_back(RangeReadStatus(results[i], ranges[i].offset, ranges[i].dst.size(), described_key, map_error));
  }
  return out;
}

}  // namespace stoke
