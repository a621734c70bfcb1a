#include "io/s3_storage.h"

#include <fmt/format.h>

#include <chrono>

#include "io/crypto.h"
#include "io/uri.h"
#include "io/xml.h"

namespace stoke {
namespace {

constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class S3Client final : public ObjectStoreClient {
 public:
  explicit S3Client(S3Options o) : o_(std::move(o)), http_(o_.http) {
    if (o_.endpoint.empty()) {
      path_style_ = false;
      base_ = fmt::format("https://{}.s3.{}.amazonaws.com", o_.bucket, o_.region);
    } else {
      path_style_ = true;
      base_ = o_.endpoint;
    }
    UrlParts parts = SplitUrl(base_);
    host_ = std::move(parts.host);
    base_path_ = std::move(parts.path);
  }

  std::string Describe(const std::string& key) const override {
    return key.empty() ? fmt::format("s3://{}", o_.bucket) : fmt::format("s3://{}/{}", o_.bucket, key);
  }

  Result<ObjectInfo> Head(const std::string& key) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("HEAD", key, {}, {}, {}));
    if (!r.ok()) return MapError(r, "stat", key);
    return ObjectInfoFromHead(r, Describe(key));
  }

  Status GetRange(const std::string& key, uint64_t offset, MutableByteView dst) override {
    return GetRanges(key, {ByteRangeRead{offset, dst}})[0];
  }

  std::vector<Status> GetRanges(const std::string& key, const std::vector<ByteRangeRead>& ranges) override {
    std::vector<HttpRequest> reqs;
    reqs.reserve(ranges.size());
    for (const auto& r : ranges) reqs.push_back(RangeGet(key, r.offset, r.dst));
    return RangeReadStatuses(http_.ExecuteBatch(reqs), ranges, Describe(key),
                             [&](const HttpResponse& r, const std::string& what) { return MapError(r, what, key); });
  }

  void GetRangeAsync(const std::string& key, uint64_t offset, MutableByteView dst, ReadCallback done) override {
    http_.Submit(RangeGet(key, offset, dst),
                 RangeReadCallback(offset, dst.size(), [this, key] { return Describe(key); },
                                   [this, key](const HttpResponse& r, const std::string& what) { return MapError(r, what, key); },
                                   std::move(done)));
  }

  Result<std::string> GetObject(const std::string& key) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", key, {}, {}, {}));
    if (!r.ok()) return MapError(r, "read", key);
    return std::move(r.body);
  }

  Status Put(const std::string& key, ByteView data, bool if_absent) override {
    KeyValues h;
    if (if_absent) h.emplace_back("if-none-match", "*");
    for (int attempt = 1;; ++attempt) {
      STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", key, {}, h, data));
      if (r.ok()) return Status::OK();
      // 409 ConditionalRequestConflict: another conditional write to the key is in flight; try again.
      if (if_absent && r.status == 409 && o_.conflict_retry.AllowsAnother(attempt)) {
        o_.conflict_retry.Wait(attempt);
        continue;
      }
      if (if_absent && r.status == 412 && ObjectHoldsExactly(*this, key, data)) {
        // An earlier attempt of ours committed and its answer was lost (libcurl itself resends a
        // request whose reused connection died, so attempts cannot tell): identical bytes are success.
        return Status::OK();
      }
      return MapError(r, "write", key);
    }
  }

  Result<std::string> StartUpload(const std::string& key) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("POST", key, {{"uploads", ""}}, {}, {}));
    if (!r.ok()) return MapError(r, "start multipart upload of", key);
    std::string what = fmt::format("start multipart upload of {}", Describe(key));
    STOKE_ASSIGN_OR_RETURN(XmlElement doc, ParseXml(r.body, what));
    std::string id = doc.ChildText("UploadId");
    if (id.empty()) return Status::Corruption(fmt::format("{}: response has no <UploadId>", what));
    return id;
  }

  Result<std::string> UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                                 ByteView data) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", key, {{"partNumber", std::to_string(part_number)}, {"uploadId", upload_id}},
                                                {}, data));
    if (!r.ok()) return MapError(r, fmt::format("upload part {} of", part_number), key);
    std::string etag = r.Header("etag");
    if (etag.empty()) return Status::Corruption(fmt::format("upload part {} of {}: no ETag in the response", part_number, Describe(key)));
    return etag;
  }

  Status CompleteUpload(const std::string& key, const std::string& upload_id, const std::vector<std::string>& parts,
                        bool if_absent) override {
    std::string body = "<CompleteMultipartUpload>";
    for (size_t i = 0; i < parts.size(); ++i) {
      body += fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", i + 1, XmlEscape(parts[i]));
    }
    body += "</CompleteMultipartUpload>";
    KeyValues h = {{"content-type", "application/xml"}};
    if (if_absent) h.emplace_back("if-none-match", "*");
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("POST", key, {{"uploadId", upload_id}}, h, AsBytes(body)));
    if (!r.ok() || IsErrorBody(r)) return MapError(r, "complete multipart upload of", key);
    return Status::OK();
  }

  Status AbortUpload(const std::string& key, const std::string& upload_id) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("DELETE", key, {{"uploadId", upload_id}}, {}, {}));
    if (!r.ok() && r.status != 404) return MapError(r, "abort multipart upload of", key);
    return Status::OK();
  }

  Result<ObjectListing> ListPage(const std::string& prefix, bool delimited, const std::string& token) override {
    KeyValues q = {{"list-type", "2"}};
    if (!prefix.empty()) q.emplace_back("prefix", prefix);
    if (delimited) q.emplace_back("delimiter", "/");
    if (o_.list_page_size > 0) q.emplace_back("max-keys", std::to_string(o_.list_page_size));
    if (!token.empty()) q.emplace_back("continuation-token", token);
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", "", q, {}, {}));
    if (!r.ok()) return MapError(r, "list", prefix);
    return ParseS3Listing(r.body, fmt::format("list {}", Describe(prefix)));
  }

  Status DeleteObject(const std::string& key) override {
    // S3 answers 204 for a missing key too; stat first so that deleting nothing is NotFound, as on disk.
    STOKE_RETURN_IF_ERROR(Head(key).status());
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("DELETE", key, {}, {}, {}));
    if (!r.ok()) return MapError(r, "delete", key);
    return Status::OK();
  }

  Status CopyObject(const std::string& from, const std::string& to) override {
    KeyValues h = {{"x-amz-copy-source", "/" + o_.bucket + "/" + UriEncode(from, true)}};
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", to, {}, h, {}));
    if (!r.ok() || IsErrorBody(r)) return MapError(r, fmt::format("copy {} to", Describe(from)), to);
    return Status::OK();
  }

  Status CreateContainer() override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", "", {}, {}, {}));
    if (r.ok()) return Status::OK();
    std::string code = HttpErrorCode(r);
    if (code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists") return Status::OK();
    return MapError(r, "create bucket", "");
  }

 private:
  static bool IsErrorBody(const HttpResponse& r) {
    // CompleteMultipartUpload and CopyObject may answer 200 with an <Error> body.
    if (r.body.find("<Error") == std::string::npos) return false;
    auto doc = ParseXml(r.body, "response");
    return doc.ok() && doc->name == "Error";
  }

  std::string EncodedPath(const std::string& key) const {
    std::string p = base_path_;
    if (path_style_) p += "/" + UriEncode(o_.bucket, false);
    p += "/";
    if (!key.empty()) p += UriEncode(key, true);
    return p;
  }

  HttpRequest Build(const std::string& method, const std::string& key, const KeyValues& query, KeyValues headers,
                    ByteView body) const {
    HttpRequest req;
    req.method = method;
    std::string path = EncodedPath(key);
    req.url = base_.substr(0, base_.size() - base_path_.size()) + path;
    char sep = '?';
    for (const auto& [k, v] : query) {
      req.url += sep;
      req.url += UriEncode(k, false);
      if (!v.empty()) req.url += "=" + UriEncode(v, false);
      sep = '&';
    }
    if (!o_.credentials.access_key_id.empty()) {
      std::string date = AmzDate(NowSeconds());
      std::string payload = body.empty() ? kEmptySha256 : HexEncode(Sha256(AsChars(body)));
      headers.emplace_back("host", host_);
      headers.emplace_back("x-amz-date", date);
      headers.emplace_back("x-amz-content-sha256", payload);
      if (!o_.credentials.session_token.empty()) headers.emplace_back("x-amz-security-token", o_.credentials.session_token);
      SigV4Signature sig = SignSigV4(method, path, query, headers, payload, o_.region, "s3", date, o_.credentials);
      headers.emplace_back("Authorization", sig.authorization);
    }
    if (method == "PUT" || method == "POST") headers.emplace_back("Content-Length", std::to_string(body.size()));
    req.headers = std::move(headers);
    req.body = body;
    return req;
  }

  // A ranged GET of dst.size() bytes at `offset` into `dst`.
  HttpRequest RangeGet(const std::string& key, uint64_t offset, MutableByteView dst) const {
    HttpRequest req = Build("GET", key, {}, {{"range", fmt::format("bytes={}-{}", offset, offset + dst.size() - 1)}}, {});
    req.response_buffer = dst;
    return req;
  }

  Result<HttpResponse> Send(const std::string& method, const std::string& key, const KeyValues& query,
                            KeyValues headers, ByteView body) {
    auto r = http_.Execute(Build(method, key, query, std::move(headers), body));
    if (!r.ok()) return r.status().WithContext(fmt::format("{} {}", method, Describe(key)));
    return r;
  }

  Status MapError(const HttpResponse& r, std::string_view op, const std::string& key) {
    std::string code = HttpErrorCode(r);
    std::string what = fmt::format("{} {}", op, Describe(key));
    std::string desc = DescribeHttpError(r);
    if (code == "NoSuchBucket") {
      return Status::NotFound(fmt::format("{}: bucket '{}' does not exist ({})", what, o_.bucket, desc));
    }
    if (r.status == 404) {
      if (code.empty() && !key.empty()) {
        // A HEAD carries no body: ask the bucket so that a missing bucket is named.
        auto b = http_.Execute(Build("HEAD", "", {}, {}, {}));
        if (b.ok() && b->status == 404) {
          return Status::NotFound(fmt::format("{}: bucket '{}' does not exist", what, o_.bucket));
        }
      }
      return Status::NotFound(fmt::format("{}: not found ({})", what, desc));
    }
    if (r.status == 412) return Status::AlreadyExists(fmt::format("{}: already exists ({})", what, desc));
    if (r.status == 409 && code == "ConditionalRequestConflict") {
      return Status::Conflict(fmt::format("{}: concurrent conditional writes ({})", what, desc));
    }
    if (r.status == 403 || r.status == 401) {
      return Status::IOError(fmt::format(
          "{}: access denied ({}); check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
          "AWS_SESSION_TOKEN) and AWS_REGION",
          what, desc));
    }
    return Status::IOError(fmt::format("{}: {}", what, desc), IsRetryableHttpStatus(r.status));
  }

  S3Options o_;
  HttpClient http_;  // thread-safe
  bool path_style_ = true;
  std::string base_;       // scheme://host[:port][/path]
  std::string host_;       // host[:port], the signed Host header
  std::string base_path_;  // path part of the endpoint ("" usually)
};

}  // namespace

Result<ObjectListing> ParseS3Listing(std::string_view body, const std::string& what) {
  STOKE_ASSIGN_OR_RETURN(XmlElement doc, ParseXml(body, what));
  if (doc.name != "ListBucketResult") {
    return Status::Corruption(fmt::format("{}: expected <ListBucketResult>, got <{}>", what, doc.name));
  }
  ObjectListing out;
  for (const XmlElement* c : doc.Children("Contents")) {
    ObjectListing::Object o;
    o.key = c->ChildText("Key");
    if (o.key.empty()) return Status::Corruption(fmt::format("{}: <Contents> without <Key>", what));
    auto size = ParseDecimalU64(c->ChildText("Size"));
    if (!size.ok()) return Status::Corruption(fmt::format("{}: key '{}': {}", what, o.key, size.status().message()));
    o.size = *size;
    auto t = ParseIso8601Ms(c->ChildText("LastModified"));
    if (t.ok()) o.modification_time_ms = *t;
    o.etag = UnquotedEtag(c->ChildText("ETag"));
    out.objects.push_back(std::move(o));
  }
  for (const XmlElement* p : doc.Children("CommonPrefixes")) out.prefixes.push_back(p->ChildText("Prefix"));
  if (doc.ChildText("IsTruncated") == "true") {
    out.next_token = doc.ChildText("NextContinuationToken");
    if (out.next_token.empty()) return Status::Corruption(fmt::format("{}: truncated listing without a continuation token", what));
  }
  return out;
}


Result<std::shared_ptr<ObjectStorage>> NewS3Storage(S3Options options) {
  if (options.bucket.empty()) return Status::InvalidArgument("S3 storage: no bucket");
  if (options.region.empty()) options.region = "us-east-1";
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  auto client = std::make_shared<S3Client>(options);
  return std::make_shared<ObjectStorage>(std::move(client), options.storage);
}

}  // namespace stoke
