// Azure Blob Storage backend (Blob REST API over HttpClient, Shared Key or SAS authorisation).
// Works against Azure and Azurite (path-style endpoint http://127.0.0.1:PORT/devstoreaccount1).
#pragma once

#include <memory>
#include <string>

#include "io/http_client.h"
#include "io/object_storage.h"

namespace stoke {

// x-ms-version sent with every request. 2021-08-06 is supported by Azure and by Azurite 3.x.
inline constexpr const char* kAzureApiVersion = "2021-08-06";

struct AzureBlobOptions {
  // Blob service endpoint without trailing '/': "https://<account>.blob.core.windows.net", or a
  // path-style emulator endpoint "http://127.0.0.1:10000/devstoreaccount1". Default: from account.
  std::string endpoint;
  std::string account;      // storage account name; required
  std::string account_key;  // base64 account key (Shared Key); empty when using a SAS token or anonymous access
  std::string sas_token;    // SAS query string without the leading '?'; used when account_key is empty
  std::string container;    // required
  // maxresults of each List Blobs page; 0 leaves the server default (5000). Tests set it small.
  int list_page_size = 0;
  HttpClientOptions http;
  ObjectStorageOptions storage;
};

// A Storage over one container. Paths are blob names within the container. InvalidArgument when
// the options are incomplete or the key is not base64. Thread-safe.
Result<std::shared_ptr<ObjectStorage>> NewAzureBlobStorage(AzureBlobOptions options);

// The fields of an Azure Storage connection string ("Key=Value;Key=Value", keys case-insensitive).
struct AzureConnectionString {
  std::string account_name;
  std::string account_key;
  std::string blob_endpoint;  // BlobEndpoint, or built from DefaultEndpointsProtocol + EndpointSuffix
  std::string sas_token;      // SharedAccessSignature
};
// InvalidArgument for malformed strings (missing '=', empty keys, UseDevelopmentStorage
// without support, no account); the message names the offending key, never a value of AccountKey
// or SharedAccessSignature.
Result<AzureConnectionString> ParseAzureConnectionString(std::string_view text);

// Parses one List Blobs response (<EnumerationResults>). Corruption, naming `what`, for anything
// that is not a well-formed listing (bad XML, a blob without a name, a malformed Content-Length).
Result<ObjectListing> ParseAzureBlobListing(std::string_view body, const std::string& what);

}  // namespace stoke
