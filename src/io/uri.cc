#include "io/uri.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/mutex.h"
#include "core/text.h"
#include "io/azure_storage.h"
#include "io/object_storage.h"
#include "io/s3_storage.h"

namespace stoke {
namespace {

Status Malformed(const std::string& uri, std::string_view why) {
  return Status::InvalidArgument(fmt::format("storage URI '{}': {}", uri, why));
}

// "container/rest" -> ("container", "rest").
std::pair<std::string, std::string> SplitFirst(std::string_view s) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return {std::string(s), ""};
  return {std::string(s.substr(0, slash)), std::string(s.substr(slash + 1))};
}

std::string TrimSlashes(std::string s) {
  while (!s.empty() && s.front() == '/') s.erase(0, 1);
  return s;
}

bool ValidContainerName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
          c == '.' || c == '_' || c == '$')) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool HasUriScheme(const std::string& s) {
  size_t colon = s.find(':');
  if (colon == std::string::npos || colon == 0) return false;
  if (!std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (size_t i = 1; i < colon; ++i) {
    char c = s[i];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.')) return false;
  }
  // "name://..." is a URI. Without the "//", only the schemes of storage systems are taken for URIs
  // (a mistyped "az:/container/t" must not become a local directory named "az:"); anything else,
  // such as "run:1/table", is a local path with a colon in it.
  if (s.compare(colon, 3, "://") == 0) return true;
  const std::string scheme = AsciiLower(s.substr(0, colon));
  static const char* const kStorageSchemes[] = {"file", "az", "abfs", "abfss", "adl", "wasb", "wasbs", "http", "https",
                                                "s3", "s3a", "s3n", "gs", "gcs", "hdfs", "test"};
  for (const char* known : kStorageSchemes) {
    if (scheme == known) return true;
  }
  return false;
}

UrlParts SplitUrl(std::string_view url) {
  UrlParts out;
  if (size_t s = url.find("://"); s != std::string_view::npos) {
    out.scheme = std::string(url.substr(0, s));
    url.remove_prefix(s + 3);
  }
  const size_t slash = url.find('/');
  out.host = std::string(url.substr(0, slash));
  if (slash != std::string_view::npos) out.path = std::string(url.substr(slash));
  return out;
}

Result<StorageUri> ParseStorageUri(const std::string& uri) {
  StorageUri out;
  if (uri.empty()) return Status::InvalidArgument("storage URI: empty path");
  if (!HasUriScheme(uri)) {
    out.path = uri;
    return out;
  }
  size_t colon = uri.find(':');
  const std::string scheme = AsciiLower(uri.substr(0, colon));
  if (uri.compare(colon, 3, "://") != 0) return Malformed(uri, "expected '://' after the scheme");
  std::string rest = uri.substr(colon + 3);
  if (scheme == "file") {
    if (rest.empty() || rest[0] != '/') return Malformed(uri, "file URIs must be absolute (file:///path)");
    out.path = rest;
    return out;
  }
  if (scheme == "az" || scheme == "s3") {
    auto [container, path] = SplitFirst(rest);
    if (container.empty()) return Malformed(uri, scheme == "s3" ? "no bucket" : "no container");
    if (!ValidContainerName(container)) return Malformed(uri, fmt::format("'{}' is not a valid container/bucket name", container));
    out.scheme = scheme == "s3" ? StorageScheme::kS3 : StorageScheme::kAzureBlob;
    out.container = container;
    out.path = TrimSlashes(path);
    return out;
  }
  if (scheme == "abfss" || scheme == "abfs") {
    auto [authority, path] = SplitFirst(rest);
    size_t at = authority.find('@');
    if (at == std::string::npos || at == 0) return Malformed(uri, "expected abfss://container@account.dfs.core.windows.net/path");
    std::string host = authority.substr(at + 1);
    size_t dot = host.find('.');
    if (dot == std::string::npos || dot == 0 || host.substr(dot) != ".dfs.core.windows.net") {
      return Malformed(uri, "expected a host <account>.dfs.core.windows.net");
    }
    out.scheme = StorageScheme::kAzureBlob;
    out.container = authority.substr(0, at);
    if (!ValidContainerName(out.container)) return Malformed(uri, "invalid container name");
    out.account = host.substr(0, dot);
    out.path = TrimSlashes(path);
    return out;
  }
  if (scheme == "https") {
    auto [host, rest_path] = SplitFirst(rest);
    size_t dot = host.find('.');
    if (dot == std::string::npos || dot == 0 || host.substr(dot) != ".blob.core.windows.net") {
      return Malformed(uri, "only Azure Blob URLs (https://<account>.blob.core.windows.net/<container>/...) are supported");
    }
    auto [container, path] = SplitFirst(rest_path);
    if (container.empty()) return Malformed(uri, "no container");
    if (!ValidContainerName(container)) return Malformed(uri, "invalid container name");
    out.scheme = StorageScheme::kAzureBlob;
    out.account = host.substr(0, dot);
    out.container = container;
    out.path = TrimSlashes(path);
    return out;
  }
  if (scheme == "test") {
    auto [name, path] = SplitFirst(rest);
    if (name.empty()) return Malformed(uri, "no registered storage name");
    out.scheme = StorageScheme::kRegistered;
    out.container = name;
    out.path = "/" + TrimSlashes(path);
    return out;
  }
  return Malformed(uri, fmt::format("unknown scheme '{}' (known: file, az, abfss, https, s3, test)", scheme));
}

namespace {

// "a//b/" -> "a/b".
std::string CollapseSlashes(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && (out.empty() || out.back() == '/')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

Result<std::string> CanonicalLocation(const std::string& uri) {
  STOKE_ASSIGN_OR_RETURN(StorageUri u, ParseStorageUri(uri));
  std::string scheme;
  switch (u.scheme) {
    case StorageScheme::kLocal: {
      std::error_code ec;
      std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(u.path, ec), ec);
      if (ec) p = std::filesystem::absolute(u.path, ec).lexically_normal();
      std::string out = CollapseSlashes(p.string());
      return out.empty() ? std::string("/") : "/" + out;
    }
    case StorageScheme::kAzureBlob: scheme = "az"; break;
    case StorageScheme::kS3: scheme = "s3"; break;
    case StorageScheme::kRegistered: scheme = "test"; break;
  }
  std::string path = CollapseSlashes(u.path);
  return fmt::format("{}://{}{}{}", scheme, u.container, path.empty() || path[0] == '/' ? "" : "/", path);
}

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) {
    const char* v = ::getenv(name.c_str());
    return v ? std::string(v) : std::string();
  };
}

namespace {

// ScopedStorageRegistration's storages by name.
Mutex registered_mu;
std::map<std::string, Storage*> registered GUARDED_BY(registered_mu);

Result<AzureBlobOptions> AzureOptionsFor(const StorageUri& u, const EnvLookup& env) {
  AzureBlobOptions o;
  o.container = u.container;
  std::string cs = env("AZURE_STORAGE_CONNECTION_STRING");
  if (!cs.empty()) {
    STOKE_ASSIGN_OR_RETURN(AzureConnectionString c, ParseAzureConnectionString(cs));
    o.account = c.account_name;
    o.account_key = c.account_key;
    o.sas_token = c.sas_token;
    o.endpoint = c.blob_endpoint;
  } else {
    o.account = env("AZURE_STORAGE_ACCOUNT");
    o.account_key = env("AZURE_STORAGE_KEY");
    o.sas_token = env("AZURE_STORAGE_SAS_TOKEN");
  }
  if (!u.account.empty()) {
    if (!o.account.empty() && o.account != u.account) {
      return Status::InvalidArgument(fmt::format(
          "storage URI names account '{}' but the credentials are for account '{}'", u.account, o.account));
    }
    o.account = u.account;
  }
  if (o.account.empty()) {
    return Status::InvalidArgument(fmt::format(
        "az://{}: no Azure account; set AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT (with "
        "AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN)",
        u.container));
  }
  return o;
}

Result<S3Options> S3OptionsFor(const StorageUri& u, const EnvLookup& env) {
  S3Options o;
  o.bucket = u.container;
  o.credentials.access_key_id = env("AWS_ACCESS_KEY_ID");
  o.credentials.secret_access_key = env("AWS_SECRET_ACCESS_KEY");
  o.credentials.session_token = env("AWS_SESSION_TOKEN");
  std::string region = env("AWS_REGION");
  if (region.empty()) region = env("AWS_DEFAULT_REGION");
  if (!region.empty()) o.region = region;
  o.endpoint = env("AWS_ENDPOINT_URL");
  if (o.credentials.access_key_id.empty() != o.credentials.secret_access_key.empty()) {
    return Status::InvalidArgument("s3: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither");
  }
  return o;
}

}  // namespace

Result<std::shared_ptr<Storage>> StorageForUri(const std::string& uri, const EnvLookup& env) {
  STOKE_ASSIGN_OR_RETURN(StorageUri u, ParseStorageUri(uri));
  if (u.scheme == StorageScheme::kLocal) {
    return std::shared_ptr<Storage>(&LocalStorage(), [](Storage*) {});  // process-wide, never deleted
  }
  if (u.scheme == StorageScheme::kRegistered) {
    MutexLock lock(&registered_mu);
    auto it = registered.find(u.container);
    if (it == registered.end()) return Status::NotFound(fmt::format("{}: no storage is registered as '{}'", uri, u.container));
    return std::shared_ptr<Storage>(it->second, [](Storage*) {});  // owned by the registrant
  }
  // One Storage (one connection pool) per container, endpoint and credentials, for the process.
  // The key holds the credentials (in memory only, never printed), so that other credentials open
  // another Storage instead of reusing one signed with the first.
  std::string cache_key;
  AzureBlobOptions az;
  S3Options s3;
  if (u.scheme == StorageScheme::kS3) {
    STOKE_ASSIGN_OR_RETURN(s3, S3OptionsFor(u, env));
    cache_key = fmt::format("s3|{}|{}|{}|{}|{}|{}", s3.bucket, s3.endpoint, s3.region, s3.credentials.access_key_id,
                            s3.credentials.secret_access_key, s3.credentials.session_token);
  } else {
    STOKE_ASSIGN_OR_RETURN(az, AzureOptionsFor(u, env));
    cache_key = fmt::format("az|{}|{}|{}|{}|{}", az.account, az.container, az.endpoint, az.account_key, az.sas_token);
  }
  static Mutex mu;
  static std::map<std::string, std::shared_ptr<Storage>> cache GUARDED_BY(mu);
  MutexLock lock(&mu);
  auto it = cache.find(cache_key);
  if (it != cache.end()) return it->second;
  std::shared_ptr<Storage> made;
  if (u.scheme == StorageScheme::kS3) {
    STOKE_ASSIGN_OR_RETURN(made, NewS3Storage(std::move(s3)));
  } else {
    STOKE_ASSIGN_OR_RETURN(made, NewAzureBlobStorage(std::move(az)));
  }
  cache.emplace(cache_key, made);
  return made;
}

Status CreateContainerFor(const std::string& uri, const EnvLookup& env) {
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage, StorageForUri(uri, env));
  ObjectStorage* objects = storage->objects();
  return objects == nullptr ? Status::OK() : objects->client().CreateContainer();
}

Result<StorageLocation> ResolveStorageLocation(const std::string& uri, const EnvLookup& env) {
  STOKE_ASSIGN_OR_RETURN(StorageUri u, ParseStorageUri(uri));
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<Storage> storage, StorageForUri(uri, env));
  return StorageLocation{std::move(storage), u.path};
}

ScopedStorageRegistration::ScopedStorageRegistration(std::string name, Storage& storage) : name_(std::move(name)) {
  MutexLock lock(&registered_mu);
  if (name_.empty() || name_.find('/') != std::string::npos || !registered.emplace(name_, &storage).second) {
    std::fprintf(stderr, "ScopedStorageRegistration: '%s' is empty, has a '/' or is registered already\n", name_.c_str());
    std::abort();
  }
}

ScopedStorageRegistration::~ScopedStorageRegistration() {
  MutexLock lock(&registered_mu);
  registered.erase(name_);
}

std::string ScopedStorageRegistration::Uri(const std::string& path) const { return "test://" + name_ + path; }

}  // namespace stoke
