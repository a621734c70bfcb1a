// Amazon S3 (and S3-compatible servers such as s3rver or MinIO) backend: REST API over HttpClient,
// requests signed with AWS Signature Version 4 by our own code.
#pragma once

#include <memory>
#include <string>

#include "io/http_client.h"
#include "io/object_storage.h"
#include "io/signing.h"

namespace stoke {

struct S3Options {
  std::string bucket;                // required
  std::string region = "us-east-1";  // signing region
  // Endpoint without trailing '/', e.g. "http://127.0.0.1:4568". Empty: AWS,
  // "https://s3.<region>.amazonaws.com" with virtual-hosted addressing (bucket in the host name).
  // A custom endpoint uses path-style addressing (endpoint/bucket/key).
  std::string endpoint;
  AwsCredentials credentials;  // empty access key: unsigned (anonymous) requests
  // max-keys of each ListObjectsV2 page; 0 leaves the server default (1000). Tests set it small.
  int list_page_size = 0;
  // Conditional puts answered 409 (another conditional write to the key in progress) are tried
  // again under this policy: 6 attempts in all, the backoff's cap doubling from 20 ms.
  RetryPolicy conflict_retry{.max_attempts = 6, .initial_backoff_us = 20'000, .max_backoff_us = 1'000'000};
  HttpClientOptions http;
  ObjectStorageOptions storage;
};

// A Storage over one bucket. Paths are keys within the bucket. Thread-safe.
Result<std::shared_ptr<ObjectStorage>> NewS3Storage(S3Options options);

// Parses one ListObjectsV2 response (<ListBucketResult>). Corruption, naming `what`, for anything
// that is not a well-formed listing (bad XML, a key without a name, a malformed Size, a truncated
// listing without a continuation token).
Result<ObjectListing> ParseS3Listing(std::string_view body, const std::string& what);

}  // namespace stoke
