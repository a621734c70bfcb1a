#include "io/azure_storage.h"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <random>

#include "core/random.h"
#include "core/text.h"
#include "io/crypto.h"
#include "io/signing.h"
#include "io/uri.h"
#include "io/xml.h"

namespace stoke {
namespace {

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class AzureBlobClient final : public ObjectStoreClient {
 public:
  AzureBlobClient(AzureBlobOptions o, std::string decoded_key)
      : o_(std::move(o)), key_(std::move(decoded_key)), http_(o_.http), endpoint_path_(SplitUrl(o_.endpoint).path) {}

  std::string Describe(const std::string& key) const override {
    return key.empty() ? fmt::format("az://{}", o_.container) : fmt::format("az://{}/{}", o_.container, key);
  }

  Result<ObjectInfo> Head(const std::string& key) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("HEAD", key, {}, {}, {}, {}));
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
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", key, {}, {}, {}, {}));
    if (!r.ok()) return MapError(r, "read", key);
    return std::move(r.body);
  }

  Status Put(const std::string& key, ByteView data, bool if_absent) override {
    KeyValues h = {{"x-ms-blob-type", "BlockBlob"}};
    if (if_absent) h.emplace_back("If-None-Match", "*");
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", key, {}, std::move(h), data, {}));
    if (r.ok()) return Status::OK();
    if (if_absent && (r.status == 409 || r.status == 412) && ObjectHoldsExactly(*this, key, data)) {
      // An earlier attempt of ours committed and its answer was lost (libcurl itself resends a
      // request whose reused connection died, so attempts cannot tell): identical bytes are success.
      return Status::OK();
    }
    return MapError(r, "write", key);
  }

  Result<std::string> StartUpload(const std::string& key) override {
    // Block ids must have one length per blob; a random tag keeps concurrent writers' blocks apart.
    thread_local Rng rng(std::random_device{}());
    return fmt::format("{:016x}", rng.Next());
  }

  Result<std::string> UploadPart(const std::string& key, const std::string& upload_id, int part_number,
                                 ByteView data) override {
    std::string block_id = Base64Encode(fmt::format("{}-{:06d}", upload_id, part_number));
    STOKE_ASSIGN_OR_RETURN(HttpResponse r,
                           Send("PUT", key, {{"comp", "block"}, {"blockid", block_id}}, {}, data, {}));
    if (!r.ok()) return MapError(r, fmt::format("write block {} of", part_number), key);
    return block_id;
  }

  Status CompleteUpload(const std::string& key, const std::string& upload_id, const std::vector<std::string>& parts,
                        bool if_absent) override {
    std::string body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
    for (const auto& id : parts) body += "<Latest>" + XmlEscape(id) + "</Latest>";
    body += "</BlockList>";
    KeyValues h;
    if (if_absent) h.emplace_back("If-None-Match", "*");
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", key, {{"comp", "blocklist"}}, std::move(h), AsBytes(body), {}));
    if (!r.ok()) return MapError(r, "commit block list of", key);
    return Status::OK();
  }

  // Uncommitted blocks are invisible and garbage-collected by the service (after a week): nothing to do.
  Status AbortUpload(const std::string&, const std::string&) override { return Status::OK(); }

  Result<ObjectListing> ListPage(const std::string& prefix, bool delimited, const std::string& token) override {
    KeyValues q = {{"restype", "container"}, {"comp", "list"}};
    if (!prefix.empty()) q.emplace_back("prefix", prefix);
    if (delimited) q.emplace_back("delimiter", "/");
    if (o_.list_page_size > 0) q.emplace_back("maxresults", std::to_string(o_.list_page_size));
    if (!token.empty()) q.emplace_back("marker", token);
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("GET", "", std::move(q), {}, {}, {}));
    std::string what = fmt::format("list {}", Describe(prefix));
    if (!r.ok()) return MapError(r, "list", prefix);
    return ParseAzureBlobListing(r.body, what);
  }

  Status DeleteObject(const std::string& key) override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("DELETE", key, {}, {}, {}, {}));
    if (!r.ok()) return MapError(r, "delete", key);
    return Status::OK();
  }

  Status CopyObject(const std::string& from, const std::string& to) override {
    std::string source = BlobUrl(from, {});
    if (key_.empty() && !o_.sas_token.empty()) source += "?" + o_.sas_token;
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", to, {}, {{"x-ms-copy-source", source}}, {}, {}));
    if (!r.ok()) return MapError(r, fmt::format("copy {} to", Describe(from)), to);
    std::string state = r.Header("x-ms-copy-status");
    // Copies within an account usually finish synchronously; otherwise poll, backing off, for about
    // a minute.
    const RetryPolicy poll{.max_attempts = 120, .initial_backoff_us = 100'000, .max_backoff_us = 1'000'000};
    for (int attempt = 1; state == "pending" && poll.AllowsAnother(attempt); ++attempt) {
      poll.Wait(attempt);
      STOKE_ASSIGN_OR_RETURN(HttpResponse h, Send("HEAD", to, {}, {}, {}, {}));
      if (!h.ok()) return MapError(h, "copy (poll)", to);
      state = h.Header("x-ms-copy-status");
    }
    if (!state.empty() && state != "success") {
      return Status::IOError(fmt::format("copy {} to {}: copy status '{}'", Describe(from), Describe(to), state));
    }
    return Status::OK();
  }

  Status CreateContainer() override {
    STOKE_ASSIGN_OR_RETURN(HttpResponse r, Send("PUT", "", {{"restype", "container"}}, {}, {}, {}));
    if (r.ok() || (r.status == 409 && HttpErrorCode(r) == "ContainerAlreadyExists")) return Status::OK();
    return MapError(r, "create container", "");
  }

 private:
  std::string BlobUrl(const std::string& key, const KeyValues& query) const {
    std::string url = o_.endpoint + "/" + o_.container;
    if (!key.empty()) url += "/" + UriEncode(key, true);
    char sep = '?';
    for (const auto& [k, v] : query) {
      url += sep;
      url += UriEncode(k, false);
      if (!v.empty()) url += "=" + UriEncode(v, false);
      sep = '&';
    }
    return url;
  }

  HttpRequest Build(const std::string& method, const std::string& key, const KeyValues& query, KeyValues headers,
                    ByteView body) const {
    HttpRequest req;
    req.method = method;
    req.url = BlobUrl(key, query);
    headers.emplace_back("x-ms-version", kAzureApiVersion);
    headers.emplace_back("x-ms-date", HttpDate(NowSeconds()));
    if (method == "PUT" || method == "POST") headers.emplace_back("Content-Length", std::to_string(body.size()));
    if (!key_.empty()) {
      std::string path = endpoint_path_ + "/" + o_.container + (key.empty() ? "" : "/" + UriEncode(key, true));
      std::string sts = AzureSharedKeyStringToSign(method, o_.account, path, query, headers);
      headers.emplace_back("Authorization", AzureSharedKeyAuthorization(o_.account, key_, sts));
    } else if (!o_.sas_token.empty()) {
      req.url += (query.empty() ? "?" : "&") + o_.sas_token;
    }
    req.headers = std::move(headers);
    req.body = body;
    return req;
  }

  // A ranged GET of dst.size() bytes at `offset` into `dst`.
  HttpRequest RangeGet(const std::string& key, uint64_t offset, MutableByteView dst) const {
    HttpRequest req = Build("GET", key, {}, {{"x-ms-range", fmt::format("bytes={}-{}", offset, offset + dst.size() - 1)}}, {});
    req.response_buffer = dst;
    return req;
  }

  Result<HttpResponse> Send(const std::string& method, const std::string& key, KeyValues query, KeyValues headers,
                            ByteView body, MutableByteView out) {
    HttpRequest req = Build(method, key, query, std::move(headers), body);
    req.response_buffer = out;
    auto r = http_.Execute(req);
    if (!r.ok()) return r.status().WithContext(fmt::format("{} {}", AsciiLower(method), Describe(key)));
    return r;
  }

  Status MapError(const HttpResponse& r, std::string_view op, const std::string& key) const {
    std::string code = HttpErrorCode(r);
    std::string what = fmt::format("{} {}", op, Describe(key));
    std::string desc = DescribeHttpError(r);
    if (code == "ContainerNotFound") {
      return Status::NotFound(fmt::format("{}: container '{}' does not exist in account '{}' ({})", what, o_.container,
                                          o_.account, desc));
    }
    if (r.status == 404) {
      if (code.empty() && !key.empty()) {
        // A HEAD carries no body; ask the container so that a missing container is named.
        auto c = http_.Execute(Build("HEAD", "", {{"restype", "container"}}, {}, {}));
        if (c.ok() && c->status == 404) {
          return Status::NotFound(fmt::format("{}: container '{}' does not exist in account '{}'", what, o_.container,
                                              o_.account));
        }
      }
      return Status::NotFound(fmt::format("{}: not found ({})", what, desc));
    }
    if (r.status == 409 || r.status == 412) return Status::AlreadyExists(fmt::format("{}: already exists ({})", what, desc));
    if (r.status == 403 || r.status == 401) {
      return Status::IOError(fmt::format(
          "{}: access denied ({}); check the credentials for account '{}' (AZURE_STORAGE_CONNECTION_STRING, "
          "AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)",
          what, desc, o_.account));
    }
    if (r.status == 416) return Status::IOError(fmt::format("{}: range not satisfiable ({})", what, desc));
    return Status::IOError(fmt::format("{}: {}", what, desc), IsRetryableHttpStatus(r.status));
  }

  AzureBlobOptions o_;
  std::string key_;  // decoded account key; empty without Shared Key. Never printed.
  mutable HttpClient http_;  // thread-safe
  std::string endpoint_path_;
};

}  // namespace

Result<ObjectListing> ParseAzureBlobListing(std::string_view body, const std::string& what) {
  STOKE_ASSIGN_OR_RETURN(XmlElement doc, ParseXml(body, what));
  if (doc.name != "EnumerationResults") {
    return Status::Corruption(fmt::format("{}: expected <EnumerationResults>, got <{}>", what, doc.name));
  }
  ObjectListing out;
  if (const XmlElement* blobs = doc.Child("Blobs")) {
    for (const XmlElement* b : blobs->Children("Blob")) {
      ObjectListing::Object o;
      o.key = b->ChildText("Name");
      if (o.key.empty()) return Status::Corruption(fmt::format("{}: a <Blob> without <Name>", what));
      if (const XmlElement* p = b->Child("Properties")) {
        auto size = ParseDecimalU64(p->ChildText("Content-Length"));
        if (!size.ok()) return Status::Corruption(fmt::format("{}: blob '{}': {}", what, o.key, size.status().message()));
        o.size = *size;
        auto t = ParseHttpDateMs(p->ChildText("Last-Modified"));
        if (t.ok()) o.modification_time_ms = *t;
        o.etag = UnquotedEtag(p->ChildText("Etag"));
      }
      out.objects.push_back(std::move(o));
    }
    for (const XmlElement* p : blobs->Children("BlobPrefix")) out.prefixes.push_back(p->ChildText("Name"));
  }
  out.next_token = doc.ChildText("NextMarker");
  return out;
}


Result<std::shared_ptr<ObjectStorage>> NewAzureBlobStorage(AzureBlobOptions options) {
  if (options.account.empty()) return Status::InvalidArgument("Azure Blob storage: no account name");
  if (options.container.empty()) return Status::InvalidArgument("Azure Blob storage: no container");
  if (options.endpoint.empty()) options.endpoint = fmt::format("https://{}.blob.core.windows.net", options.account);
  while (!options.endpoint.empty() && options.endpoint.back() == '/') options.endpoint.pop_back();
  if (!options.sas_token.empty() && options.sas_token.front() == '?') options.sas_token.erase(0, 1);
  std::string decoded;
  if (!options.account_key.empty()) {
    auto k = Base64Decode(options.account_key);
    if (!k.ok()) {
      return Status::InvalidArgument(
          fmt::format("Azure account key for '{}' is not valid base64 ({})", options.account, k.status().message()));
    }
    decoded = std::move(*k);
  }
  auto client = std::make_shared<AzureBlobClient>(options, std::move(decoded));
  return std::make_shared<ObjectStorage>(std::move(client), options.storage);
}

Result<AzureConnectionString> ParseAzureConnectionString(std::string_view text) {
  AzureConnectionString out;
  std::string protocol = "https";
  std::string suffix = "core.windows.net";
  bool dev = false;
  int element = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t semi = text.find(';', i);
    if (semi == std::string_view::npos) semi = text.size();
    std::string_view part = text.substr(i, semi - i);
    i = semi + 1;
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.front()))) part.remove_prefix(1);
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.remove_suffix(1);
    if (part.empty()) continue;
    ++element;
    size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      // The element is not echoed: it may be a fragment of a key or signature.
      return Status::InvalidArgument(
          fmt::format("Azure connection string: element {} (counting from 1) is not Key=Value", element));
    }
    std::string key = AsciiLower(part.substr(0, eq));
    std::string value(part.substr(eq + 1));  // base64 keys and SAS tokens contain '='
    if (key == "accountname") out.account_name = value;
    else if (key == "accountkey") out.account_key = value;
    else if (key == "blobendpoint") out.blob_endpoint = value;
    else if (key == "sharedaccesssignature") out.sas_token = value;
    else if (key == "defaultendpointsprotocol") protocol = value;
    else if (key == "endpointsuffix") suffix = value;
    else if (key == "usedevelopmentstorage") dev = AsciiLower(value) == "true";
    // Other keys (QueueEndpoint, TableEndpoint, ...) do not concern blobs.
  }
  if (dev) {
    // Azurite's documented defaults.
    if (out.account_name.empty()) out.account_name = "devstoreaccount1";
    if (out.account_key.empty()) {
      out.account_key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    }
    if (out.blob_endpoint.empty()) out.blob_endpoint = "http://127.0.0.1:10000/" + out.account_name;
  }
  if (out.blob_endpoint.empty() && !out.account_name.empty()) {
    if (protocol != "https" && protocol != "http") {
      return Status::InvalidArgument("Azure connection string: DefaultEndpointsProtocol must be http or https");
    }
    out.blob_endpoint = fmt::format("{}://{}.blob.{}", protocol, out.account_name, suffix);
  }
  if (out.account_name.empty() && out.blob_endpoint.empty()) {
    return Status::InvalidArgument("Azure connection string: no AccountName and no BlobEndpoint");
  }
  if (out.account_key.empty() && out.sas_token.empty()) {
    return Status::InvalidArgument("Azure connection string: neither AccountKey nor SharedAccessSignature");
  }
  if (!out.account_key.empty() && !Base64Decode(out.account_key).ok()) {
    return Status::InvalidArgument("Azure connection string: AccountKey is not valid base64");
  }
  if (out.account_name.empty()) {
    // A SAS connection string may give only BlobEndpoint: take the account from its host.
    const std::string host = SplitUrl(out.blob_endpoint).host;
    out.account_name = host.substr(0, host.find('.'));
  }
  return out;
}

}  // namespace stoke
