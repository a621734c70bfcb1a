// Request signing for object stores, by our own code over OpenSSL's HMAC-SHA256:
//  - Azure Storage Shared Key (https://learn.microsoft.com/rest/api/storageservices/authorize-with-shared-key),
//  - AWS Signature Version 4 (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html).
// The functions are pure and thread-safe. They return secrets (signatures) only inside the header
// values they build; callers must never log those values.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stoke {

// Header or query parameter pairs, in the order the caller added them. Names compare
// case-insensitively where the protocol says so.
using KeyValues = std::vector<std::pair<std::string, std::string>>;

// --- Azure Shared Key ---------------------------------------------------------------------------
// The string-to-sign of the Blob service (version 2015-02-21 and later: Content-Length is empty
// when zero). `encoded_path` is the URL path as sent (percent-encoded, starting with '/', including
// the account segment on path-style endpoints such as Azurite's); `query` holds decoded pairs.
std::string AzureSharedKeyStringToSign(std::string_view method, std::string_view account, std::string_view encoded_path,
                                       const KeyValues& query, const KeyValues& headers);
// "SharedKey <account>:<base64 HMAC-SHA256 of string_to_sign under the decoded key>".
// REQUIRES: decoded_key is the account key already base64-decoded.
std::string AzureSharedKeyAuthorization(std::string_view account, std::string_view decoded_key,
                                        std::string_view string_to_sign);

// --- AWS Signature Version 4 --------------------------------------------------------------------
struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty when not using temporary credentials
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lowercase hex
  std::string authorization;  // the Authorization header value
};

// Signs a request. `headers` are the headers to sign (every one is signed: include host,
// x-amz-date, x-amz-content-sha256 and, with temporary credentials, x-amz-security-token);
// `encoded_path` is the URL path as sent (S3: each key segment percent-encoded once); `query`
// holds decoded pairs; `amz_date` is "YYYYMMDDTHHMMSSZ"; `payload_sha256_hex` is the hex SHA-256 of
// the body or "UNSIGNED-PAYLOAD".
SigV4Signature SignSigV4(std::string_view method, std::string_view encoded_path, const KeyValues& query,
                         const KeyValues& headers, std::string_view payload_sha256_hex, std::string_view region,
                         std::string_view service, std::string_view amz_date, const AwsCredentials& credentials);

// "YYYYMMDDTHHMMSSZ" for a time in seconds since the epoch (UTC).
std::string AmzDate(int64_t unix_seconds);
// RFC 1123 date, e.g. "Sun, 06 Nov 1994 08:49:37 GMT", as x-ms-date wants.
std::string HttpDate(int64_t unix_seconds);

}  // namespace stoke
