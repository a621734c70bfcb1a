// Storage URIs and the resolver from a path or URI to a Storage.
//
//   /data/table, data/table, file:///data/table   local file system
//   az://container/path                           Azure Blob, account from the credentials
//   abfss://container@account.dfs.core.windows.net/path   (read through the Blob endpoint)
//   https://account.blob.core.windows.net/container/path
//   s3://bucket/path                              S3 or an S3-compatible endpoint (AWS_ENDPOINT_URL)
//   test://name/path                              tests and benchmarks: a Storage registered as
//                                                 `name` (ScopedStorageRegistration), path "/path"
//
// Anything else with a scheme ("foo://x", "az:/x", "az://" without a container) is InvalidArgument:
// it never falls back to a local directory named "az:". A relative local path whose first segment
// contains ':' must be written "./a:b".
//
// Credentials come from the environment, read when a Storage is first made for a location:
//   Azure: AZURE_STORAGE_CONNECTION_STRING (AccountName, AccountKey, BlobEndpoint,
//          SharedAccessSignature, UseDevelopmentStorage), or AZURE_STORAGE_ACCOUNT with
//          AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN.
//   S3:    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
//          AWS_DEFAULT_REGION), AWS_ENDPOINT_URL (custom endpoint, path-style addressing).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "io/storage.h"

namespace stoke {

enum class StorageScheme { kLocal, kAzureBlob, kS3, kRegistered };

struct StorageUri {
  StorageScheme scheme = StorageScheme::kLocal;
  std::string account;    // Azure account when the URI names it (abfss://, https://), else ""
  std::string container;  // Azure container or S3 bucket; the registered name; "" for local
  std::string path;       // key prefix within the container (no leading '/'), or the local path,
                          // or the path inside a registered storage (with its leading '/')
};

// Parses a path or URI. Pure; does not look at the environment.
Result<StorageUri> ParseStorageUri(const std::string& uri);

// An endpoint URL in its parts: "http://127.0.0.1:10000/devstoreaccount1" has scheme "http", host
// "127.0.0.1:10000" (the port included) and path "/devstoreaccount1" ("" when there is none). Text
// without "://" is all host and path. Pure.
struct UrlParts {
  std::string scheme;
  std::string host;
  std::string path;
};
UrlParts SplitUrl(std::string_view url);

// True when `s` is to be read as a URI: it starts with a scheme followed by "://" ("xyz://...",
// whether or not stoke knows the scheme), or with the scheme of a storage system and a colon
// ("az:", "s3:", "file:", "https:", ...). Other text before a colon ("run:1/table") is part of a
// local path.
bool HasUriScheme(const std::string& s);

// The location a path or URI names, spelt one way, for recording where data came from: a local path
// made absolute with symbolic links resolved (as far as it exists) and "." and ".." removed;
// az://<container>/<path> for every Azure form (az://, abfss://, https://; the account is not part
// of it); s3://<bucket>/<path>; test://<name>/<path>. Repeated and trailing slashes are dropped.
// InvalidArgument for what ParseStorageUri refuses.
Result<std::string> CanonicalLocation(const std::string& uri);

// Environment lookup, injectable for tests. Returns "" for unset variables.
using EnvLookup = std::function<std::string(const std::string& name)>;
EnvLookup ProcessEnvironment();

// A storage and the path inside it.
struct StorageLocation {
  std::shared_ptr<Storage> storage;
  std::string path;  // pass this to storage's methods
};

// Resolves a path or URI: local paths give LocalStorage() and the path unchanged; object-store URIs
// give a Storage for the container/bucket (shared by every location in it: one connection pool)
// and the key prefix. Code that used LocalStorage() with a path calls this with the path or URI
// and uses the returned pair. Thread-safe.
Result<StorageLocation> ResolveStorageLocation(const std::string& uri, const EnvLookup& env = ProcessEnvironment());

// Creates the container/bucket a URI names when it does not exist (nothing for local paths). Write
// commands (ingest, convert, synth) call it before writing, as a local write creates directories.
Status CreateContainerFor(const std::string& uri, const EnvLookup& env = ProcessEnvironment());

// The Storage for a URI's container/bucket (or the local file system).
Result<std::shared_ptr<Storage>> StorageForUri(const std::string& uri, const EnvLookup& env = ProcessEnvironment());

// For tests and benchmarks only: while it lives, "test://<name>/<path>" resolves to `storage` and
// the path "/<path>", so that operations that take a table path or URI (IngestNpy, OptimizeTable,
// VacuumTable, CheckpointTable, queries, the loader) run unchanged on a wrapper such as
// FaultInjectingStorage over the local file system. It is process-wide state, which is why
// nothing else may use it. Thread-safe. REQUIRES: `storage` outlives this object, `name` is not
// registered already (checked: aborts), and no operation on its URIs is still running when it is
// destroyed.
class ScopedStorageRegistration {
 public:
  ScopedStorageRegistration(std::string name, Storage& storage);
  ~ScopedStorageRegistration();
  ScopedStorageRegistration(const ScopedStorageRegistration&) = delete;
  ScopedStorageRegistration& operator=(const ScopedStorageRegistration&) = delete;

  // The URI of `path` (absolute, starting with '/') in the registered storage.
  std::string Uri(const std::string& path) const;

 private:
  std::string name_;
};

}  // namespace stoke
