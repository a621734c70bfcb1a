// The generic half of the object-store backends: a `Storage` over any flat key space (Azure Blob
// container, S3 bucket) given a small per-backend client. Paths are keys relative to the
// container/bucket ("table/_delta_log/00000000000000000000.json"); '/' separates "directories",
// which exist only as prefixes of keys.
//
// Semantics that differ from local files (see docs/object_storage.md):
//  - Create() buffers; nothing is visible until Close() succeeds (one PUT up to part_size, then a
//    block/multipart upload committed at Close). Sync() is a no-op. A file destroyed without Close(),
//    or whose upload fails, leaves no visible object (S3 multipart uploads are aborted).
//  - Create(path, exclusive=true) and PutIfAbsent commit with "If-None-Match: *". PutIfAbsent is
//    idempotent: when the object already holds exactly `data` it succeeds (a retried request whose
//    first attempt committed); different bytes give AlreadyExists.
//  - List/ListNames of a prefix with no keys return an empty list (not NotFound); CreateDirectories
//    is a no-op; Rename is copy + delete and NOT atomic (a crash between them leaves both).
//  - A missing container/bucket is NotFound naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/http_client.h"
#include "io/storage.h"

namespace stoke {

struct ObjectInfo {
  uint64_t size = 0;
  int64_t modification_time_ms = 0;
  std::string etag;  // as the service sent it, quotes removed; "" when it sent none
};

struct ObjectListing {
  struct Object {
    std::string key;
    uint64_t size = 0;
    int64_t modification_time_ms = 0;
    std::string etag;  // quotes removed; "" when the listing has none
  };
  std::vector<Object> objects;
  std::vector<std::string> prefixes;  // common prefixes ending in '/', when listing with a delimiter
  std::string next_token;             // empty on the last page
};

struct ByteRangeRead {
  uint64_t offset = 0;
  MutableByteView dst;  // filled exactly; not owned
};

// One backend's operations on whole keys of one container/bucket. Thread-safe. Every error
// message names the object as a URI (Describe) and never carries credentials or signatures.
class ObjectStoreClient {
 public:
  virtual ~ObjectStoreClient() = default;
  // "az://container/key" or "s3://bucket/key", for messages.
  virtual std::string Describe(const std::string& key) const = 0;
  virtual Result<ObjectInfo> Head(const std::string& key) = 0;
  // Reads exactly dst.size() bytes at offset (one ranged GET).
  virtual Status GetRange(const std::string& key, uint64_t offset, MutableByteView dst) = 0;
  // Ranged GETs run concurrently (one batch through the HTTP client); one Status per range.
  virtual std::vector<Status> GetRanges(const std::string& key, const std::vector<ByteRangeRead>& ranges) = 0;
  // GetRange without waiting: one ranged GET through the HTTP client's event loop, which calls
  // `done` with GetRange's status (see RandomAccessFile::ReadAtAsync). `dst` must stay valid until
  // then. The default runs GetRange on the calling thread.
  virtual void GetRangeAsync(const std::string& key, uint64_t offset, MutableByteView dst, ReadCallback done) {
    done(GetRange(key, offset, dst));
  }
  // The whole object with one GET. The default is Head and GetRange.
  virtual Result<std::string> GetObject(const std::string& key);
  // One-shot upload; if_absent adds If-None-Match: * (AlreadyExists when the key exists).
  virtual Status Put(const std::string& key, ByteView data, bool if_absent) = 0;
  // Block (Azure) / multipart (S3) uploads. StartUpload returns an upload id ("" where the backend
  // needs none); UploadPart returns the part's token (block id / ETag) for CompleteUpload.
  virtual Result<std::string> StartUpload(const std::string& key) = 0;
  virtual Result<std::string> UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                                         ByteView data) = 0;
  virtual Status CompleteUpload(const std::string& key, const std::string& upload_id,
                                const std::vector<std::string>& parts, bool if_absent) = 0;
  virtual Status AbortUpload(const std::string& key, const std::string& upload_id) = 0;
  // One page of keys starting with `prefix`; with delimited=true, keys containing '/' after the
  // prefix are folded into `prefixes`.
  virtual Result<ObjectListing> ListPage(const std::string& prefix, bool delimited, const std::string& token) = 0;
  virtual Status DeleteObject(const std::string& key) = 0;
  virtual Status CopyObject(const std::string& from, const std::string& to) = 0;
  // Creates the container/bucket (tests and tools); OK when it already exists.
  virtual Status CreateContainer() = 0;
};

struct ObjectStorageOptions {
  // Writes larger than this go through block/multipart uploads in parts of this size. Default
  // 8 MiB (S3 requires parts of at least 5 MiB except the last).
  uint64_t part_size = uint64_t{8} << 20;
};

// A Storage over an ObjectStoreClient. Thread-safe, as the client is.
class ObjectStorage final : public Storage {
 public:
  ObjectStorage(std::shared_ptr<ObjectStoreClient> client, ObjectStorageOptions options);

  // One HEAD for the size. Reads are ranged GETs; ReadAtAsync runs them on the HTTP client's event loop.
  Result<std::unique_ptr<RandomAccessFile>> OpenForRead(const std::string& path) override;
  // No request: the size is the caller's (from the Delta log).
  Result<std::unique_ptr<RandomAccessFile>> OpenForReadWithSize(const std::string& path, uint64_t size) override;
  Result<std::string> ReadFile(const std::string& path) override;  // one GET
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, bool exclusive = false) override;
  Result<std::vector<DirEntry>> List(const std::string& dir) override;
  Result<std::vector<std::string>> ListNames(const std::string& dir) override;
  Result<std::vector<std::string>> ListNamesWithPrefix(const std::string& dir, const std::string& prefix) override;
  Result<DirEntry> Stat(const std::string& path) override;
  Status CreateDirectories(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Delete(const std::string& path) override;
  Status PutIfAbsent(const std::string& path, ByteView data) override;
  bool CreateIsAtomic() const override { return true; }  // objects appear at Close, whole
  bool remote() const override { return true; }
  ObjectStorage* objects() override { return this; }

  // Many ranged reads of one object at once (hundreds in flight through one curl multi handle).
  // Returns one Status per range; ranges past the end fail individually; empty ranges are OK
  // without a request.
  std::vector<Status> ReadRanges(const std::string& path, const std::vector<ByteRangeRead>& ranges);

  ObjectStoreClient& client() { return *client_; }
  const ObjectStorageOptions& options() const { return options_; }

 private:
  std::shared_ptr<ObjectStoreClient> client_;
  ObjectStorageOptions options_;
};

// Checks that `storage` honours conditional creation: PutIfAbsent of a fresh probe object under
// `dir` twice; the second must give AlreadyExists. Returns OK when it does, Unsupported when the
// second write succeeded (the server ignores If-None-Match, as s3rver does: concurrent Delta commits
// would then overwrite each other), or the I/O error met. Deletes the probe object afterwards.
Status ProbeConditionalPut(Storage& storage, const std::string& dir);

// True when `key` exists and holds exactly `data`. Used when a conditional put is refused: the
// refused request may have followed one of our own that committed but whose answer was lost
// (connection reset), in which case the put succeeded. Put-if-absent is therefore idempotent: it
// succeeds when the object already holds exactly the same bytes. Errors read as false.
bool ObjectHoldsExactly(ObjectStoreClient& client, const std::string& key, ByteView data);

// Normalises a path to a key: drops leading '/', "." segments and empty segments. InvalidArgument
// for ".." segments (object stores have no parent links) and, with allow_empty=false, for "".
Result<std::string> ObjectKeyFromPath(const std::string& path, bool allow_empty);

// Date parsing for listings and headers; InvalidArgument on malformed input.
// RFC 1123 "Sun, 06 Nov 1994 08:49:37 GMT" to milliseconds since the epoch.
Result<int64_t> ParseHttpDateMs(std::string_view text);
// ISO 8601 "2009-10-12T17:50:30.000Z" (fraction optional) to milliseconds since the epoch.
Result<int64_t> ParseIso8601Ms(std::string_view text);
// Decimal uint64 (Content-Length, Size); InvalidArgument on anything else, overflow included.
Result<uint64_t> ParseDecimalU64(std::string_view text);

// The size (Content-Length) and modification time (Last-Modified) of an object from a successful
// HEAD response; Corruption naming `described_key` when the size is missing or malformed.
Result<ObjectInfo> ObjectInfoFromHead(const HttpResponse& response, const std::string& described_key);

// An ETag without the double quotes services put around it (and without a weak validator's "W/").
std::string UnquotedEtag(std::string_view etag);

// The Status of one ranged GET of `size` bytes at `offset`: the transport error in the context of
// `described_key`, the server's error as `map_error(response, "read bytes A-B of")` gives it, or OK.
using HttpErrorMapper = std::function<Status(const HttpResponse& response, const std::string& what)>;
Status RangeReadStatus(const Result<HttpResponse>& result, uint64_t offset, uint64_t size,
                       const std::string& described_key, const HttpErrorMapper& map_error);
// The callback of an asynchronous ranged GET (HttpClient::Submit): tells `done` RangeReadStatus's
// status, computing the object's description only when the read failed.
HttpCallback RangeReadCallback(uint64_t offset, uint64_t size, std::function<std::string()> describe,
                               HttpErrorMapper map_error, ReadCallback done);
// RangeReadStatus for each ranged GET of a batch (HttpClient::ExecuteBatch's results for `ranges`, in order).
std::vector<Status> RangeReadStatuses(const std::vector<Result<HttpResponse>>& results,
                                      const std::vector<ByteRangeRead>& ranges, const std::string& described_key,
                                      const HttpErrorMapper& map_error);

}  // namespace stoke
