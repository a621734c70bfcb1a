// An HTTP/1.1 client on libcurl for the object-store backends: a shared, kept-alive connection
// cache, per-request timeouts, bounded retries with jittered exponential backoff, batches of
// requests run concurrently through one curl multi handle on the caller's thread, and asynchronous
// requests (Submit) run by one event-loop thread per client through its own curl multi handle, so
// that hundreds of requests are in flight without a thread each.
//
// Retried: 5xx and 429 responses, timeouts, refused/reset connections, and bodies shorter than
// their Content-Length (or than the buffer a ranged GET must fill). Not retried: other 4xx (the
// caller maps them to NotFound, AlreadyExists, ...). Error messages name the method, the URL with
// secret query parameters (SAS `sig`, X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token)
// redacted, and the byte range; they never include request headers (Authorization) or bodies.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "core/retry.h"
#include "io/signing.h"
#include "stoke/status.h"

namespace stoke {

struct HttpClientOptions {
  // Whole-request limit per attempt, in milliseconds. Default 30000.
  long request_timeout_ms = 30000;
  // Connection establishment limit, in milliseconds. Default 5000.
  long connect_timeout_ms = 5000;
  // Retries of a failed request (core/retry.h): 5 attempts in all, the first included, with
  // jittered backoff from 50 ms up to 2 s.
  RetryPolicy retry;
  // Verify TLS certificates and host names (HTTPS). Default true; only tests against
  // self-signed servers should turn it off.
  bool verify_tls = true;
  // Requests in flight at once: per ExecuteBatch call, and over all asynchronous requests (Submit)
  // of the client; more wait their turn. Default 256 (the loader's queue depth on object stores).
  size_t max_in_flight = 256;
};

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;             // absolute, already percent-encoded
  KeyValues headers;           // sent as given; a header with an empty value is sent empty
  ByteView body;               // not owned; must outlive the call
  // When not empty, a 2xx response body is written here and must fill it exactly (a ranged GET
  // into the caller's buffer); a shorter body is retried as truncated, a longer one is an error.
  // Not owned. Other responses (errors) go to HttpResponse::body.
  MutableByteView response_buffer;
};

struct HttpResponse {
  long status = 0;
  KeyValues headers;      // names lowercased, values trimmed; from the final response only
  std::string body;       // the body, unless it went to HttpRequest::response_buffer
  uint64_t body_bytes = 0;  // bytes received in the body (wherever they went)
  int attempts = 0;         // attempts it took

  // The value of the first header with this (lowercase) name, or "".
  const std::string& Header(std::string_view lowercase_name) const;
  bool ok() const { return status >= 200 && status < 300; }
};

// Called once with the outcome of an asynchronous request (Execute's result), on the client's
// event-loop thread. It must be quick (it holds up every other request of the client) and must not
// block on another asynchronous request of the same client; it may call Submit, and Execute (which
// runs on the calling thread).
using HttpCallback = std::function<void(Result<HttpResponse>)>;

// Thread-safe: Execute, ExecuteBatch and Submit may be called from many threads at once.
// Connections are pooled across all calls (a libcurl share handle guarded by one mutex per data
// kind). The destructor waits for the asynchronous requests still running (they must not outlive
// the buffers they point to, which is the caller's business).
class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Runs one request with retries. Any final status that is not retryable is returned as a
  // response (the caller interprets 4xx); transport failures and retryable statuses that persist
  // after retry.max_attempts give an IOError (retryable) naming method, URL and byte range.
  Result<HttpResponse> Execute(const HttpRequest& request);
  // Runs the requests concurrently (at most options.max_in_flight at once), each with its own
  // retries; results are in the order of `requests`.
  std::vector<Result<HttpResponse>> ExecuteBatch(const std::vector<HttpRequest>& requests);
  // Runs the request asynchronously, with Execute's retries and errors, and calls `done` with the
  // outcome on the client's event-loop thread (started by the first Submit). Returns at once. The
  // request's body and response_buffer are not owned: they must stay valid until `done` runs.
  void Submit(HttpRequest request, HttpCallback done);

  const HttpClientOptions& options() const { return options_; }

 private:
  struct Share;
  class Engine;
  struct EventLoop;
  void* AcquireHandle() EXCLUDES(pool_mu_);
  void ReleaseHandle(void* handle) EXCLUDES(pool_mu_);
  // The event loop of this process, started on first use (and again in a forked child, whose copy of
  // the parent's loop has no thread).
  EventLoop* Loop() EXCLUDES(loop_mu_);
  void RunLoop(EventLoop* loop);

  HttpClientOptions options_;
  std::unique_ptr<Share> share_;
  Mutex pool_mu_;
  std::vector<void*> pool_ GUARDED_BY(pool_mu_);  // idle easy handles, reused (connections live in share_)
  Mutex loop_mu_;
  EventLoop* loop_ GUARDED_BY(loop_mu_) = nullptr;  // owned; a forked child's stale copy is leaked
};

// --- Pieces exposed for tests --------------------------------------------------------------------

// Parses one response header line as libcurl delivers it ("Name: value\r\n"). Returns false for
// lines that are not headers (the status line, the blank line, garbage); otherwise lowercases the name
// and trims the value.
bool ParseHttpHeaderLine(std::string_view line, std::string* name, std::string* value);
// Parses a status line "HTTP/1.1 206 Partial Content" (or "HTTP/2 200"); InvalidArgument otherwise.
Result<long> ParseHttpStatusLine(std::string_view line);
// The URL with the values of secret query parameters replaced by "REDACTED".
std::string RedactUrl(std::string_view url);
// True when a response with this status should be retried (5xx, 429, 408).
bool IsRetryableHttpStatus(long status);
// "bytes A-B" of a request's Range or x-ms-range header, or "" when it has none.
std::string RequestRangeForMessages(const HttpRequest& request);
// A short description of an error response: "HTTP 404 (BlobNotFound: The specified blob does not
// exist.)". Takes the error code and message from the XML body (Azure, S3) or from the
// x-ms-error-code header; never repeats other parts of the body (servers echo the string to sign
// and our signature there). At most ~300 characters.
std::string DescribeHttpError(const HttpResponse& response);
// The error code from the XML body or x-ms-error-code header ("" when none).
std::string HttpErrorCode(const HttpResponse& response);

}  // namespace stoke
