#include "io/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "core/text.h"
#include "core/log.h"
#include "io/xml.h"

namespace stoke {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool IsRetryableCurlCode(CURLcode rc) {
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

bool HasHeader(const KeyValues& headers, std::string_view lowercase_name) {
  for (const auto& [k, v] : headers) {
    if (AsciiLower(k) == lowercase_name) return true;
  }
  return false;
}

curl_slist* BuildHeaderList(const HttpRequest& req) {
  curl_slist* list = nullptr;
  for (const auto& [k, v] : req.headers) {
    // "Name;" sends an empty header; "Name:" would remove it.
    std::string line = v.empty() ? k + ";" : k + ": " + v;
    list = curl_slist_append(list, line.c_str());
  }
  // libcurl adds these on its own for bodies; both would break signatures or add a round trip.
  if (!HasHeader(req.headers, "expect")) list = curl_slist_append(list, "Expect:");
  if (!HasHeader(req.headers, "content-type")) list = curl_slist_append(list, "Content-Type:");
  return list;
}

// One request's state across its attempts.
struct Transfer {
  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() { curl_slist_free_all(headers); }

  HttpRequest owned;  // Submit: the request (ExecuteBatch points `req` at the caller's)
  const HttpRequest* req = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  HttpResponse resp;
  bool overflow = false;
  int attempt = 0;
  Clock::time_point not_before;
  char errbuf[CURL_ERROR_SIZE] = {0};
  HttpCallback done;  // Submit: told the outcome
  size_t index = 0;   // ExecuteBatch: the request's place in the batch
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.substr(0, 5) == "HTTP/") {
    auto status = ParseHttpStatusLine(line);
    if (status.ok()) {
      // A new response (after 100 Continue or a redirect): forget what came before.
      t->resp.status = *status;
      t->resp.headers.clear();
    }
    return size * n;
  }
  std::string name, value;
  if (ParseHttpHeaderLine(line, &name, &value)) t->resp.headers.emplace_back(std::move(name), std::move(value));
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  MutableByteView dst = t->req->response_buffer;
  if (!dst.empty() && t->resp.ok()) {
    if (t->resp.body_bytes + len > dst.size()) {
      t->overflow = true;
      return 0;  // aborts the transfer with CURLE_WRITE_ERROR
    }
    std::memcpy(dst.data() + t->resp.body_bytes, data, len);
  } else {
    t->resp.body.append(data, len);
  }
  t->resp.body_bytes += len;
  return len;
}

}  // namespace

// The libcurl share handle: connections, DNS and TLS sessions pooled across every handle.
struct HttpClient::Share {
  CURLSH* sh = nullptr;
  Mutex mu[CURL_LOCK_DATA_LAST];  // one per curl_lock_data kind; guards that kind in sh

  // libcurl takes a kind's lock in one callback and releases it in another, so no scope holds it and
  // the analysis cannot pair them; libcurl's share protocol does.
  static void Lock(CURL*, curl_lock_data data, curl_lock_access, void* user) NO_THREAD_SAFETY_ANALYSIS {
    static_cast<Share*>(user)->mu[data].Lock();
  }
  static void Unlock(CURL*, curl_lock_data data, void* user) NO_THREAD_SAFETY_ANALYSIS {
    static_cast<Share*>(user)->mu[data].Unlock();
  }

  Share() {
    sh = curl_share_init();
    curl_share_setopt(sh, CURLSHOPT_LOCKFUNC, &Share::Lock);
    curl_share_setopt(sh, CURLSHOPT_UNLOCKFUNC, &Share::Unlock);
    curl_share_setopt(sh, CURLSHOPT_USERDATA, this);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  }
  ~Share() { curl_share_cleanup(sh); }
};

// Runs transfers through one curl multi handle on one thread (ExecuteBatch's caller, or the event
// loop's thread): starts them, at most max_in_flight at once, retries failed attempts after their
// backoff, and hands each finished transfer with its outcome to `finish`. Only Wakeup may be called
// from another thread.
class HttpClient::Engine {
 public:
  using Finish = std::function<void(Transfer*, Result<HttpResponse>)>;
  Engine(HttpClient* client, Finish finish) : client_(client), finish_(std::move(finish)), multi_(curl_multi_init()) {}
  ~Engine() { curl_multi_cleanup(multi_); }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a transfer (request and header list set) to start at the next Step.
  void Add(Transfer* t) { waiting_.push_back(t); }
  bool idle() const { return waiting_.empty() && in_flight_ == 0; }
  // Starts what may start, moves the transfers along, finishes those done; returns at once when
  // one finished, else waits up to max_wait_ms for network activity, the end of a backoff, or Wakeup.
  void Step(int max_wait_ms);
  // Ends Step's wait early. Thread-safe (curl_multi_wakeup).
  void Wakeup() { curl_multi_wakeup(multi_); }

 private:
  void Start(Transfer* t);
  // Decides what a finished attempt means: a result (passed to finish_), or a retry (back to waiting_).
  void Complete(Transfer* t, CURLcode rc);
  std::string Describe(const Transfer& t, std::string_view cause) const;

  HttpClient* const client_;
  const Finish finish_;
  CURLM* const multi_;
  std::vector<Transfer*> waiting_;  // not started yet, or backing off until not_before; in order
  size_t in_flight_ = 0;
};

void HttpClient::Engine::Start(Transfer* t) {
  const HttpRequest& req = *t->req;
  const HttpClientOptions& o = client_->options_;
  ++t->attempt;
  t->resp = HttpResponse();
  t->overflow = false;
  t->errbuf[0] = 0;
  t->easy = static_cast<CURL*>(client_->AcquireHandle());
  CURL* e = t->easy;
  curl_easy_reset(e);
  curl_easy_setopt(e, CURLOPT_SHARE, client_->share_->sh);
  curl_easy_setopt(e, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o.request_timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o.connect_timeout_ms);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, o.verify_tls ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, o.verify_tls ? 2L : 0L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_PRIVATE, t);
  if (req.method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (req.method == "GET") {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else if (req.method == "PUT" || req.method == "POST") {
    static const char kEmpty[] = "";
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, req.body.empty() ? kEmpty : reinterpret_cast<const char*>(req.body.data()));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  } else {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  curl_multi_add_handle(multi_, e);
  ++in_flight_;
}

std::string HttpClient::Engine::Describe(const Transfer& t, std::string_view cause) const {
  std::string range = RequestRangeForMessages(*t.req);
  return fmt::format("HTTP {} {}{}: {} (after {} attempt{})", t.req->method, RedactUrl(t.req->url),
                     range.empty() ? "" : " (" + range + ")", cause, t.attempt, t.attempt == 1 ? "" : "s");
}

void HttpClient::Engine::Complete(Transfer* t, CURLcode rc) {
  curl_multi_remove_handle(multi_, t->easy);
  --in_flight_;
  long status = 0;
  curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 0) t->resp.status = status;
  client_->ReleaseHandle(t->easy);
  t->easy = nullptr;
  const HttpRequest& req = *t->req;
  bool retry = false;
  std::string cause;
  if (rc != CURLE_OK) {
    if (t->overflow) {
      cause = fmt::format("response body longer than the {} bytes requested", req.response_buffer.size());
    } else {
      cause = fmt::format("{}{}{}", curl_easy_strerror(rc), t->errbuf[0] ? ": " : "", t->errbuf);
      retry = IsRetryableCurlCode(rc);
    }
  } else if (IsRetryableHttpStatus(t->resp.status)) {
    cause = DescribeHttpError(t->resp);
    retry = true;
  } else if (t->resp.ok() && req.method != "HEAD") {
    const std::string& cl = t->resp.Header("content-length");
    if (!req.response_buffer.empty() && t->resp.body_bytes != req.response_buffer.size()) {
      cause = fmt::format("truncated body: received {} of {} bytes", t->resp.body_bytes, req.response_buffer.size());
      retry = true;
    } else if (!cl.empty() && cl != std::to_string(t->resp.body_bytes)) {
      cause = fmt::format("truncated body: received {} of {} bytes (Content-Length)", t->resp.body_bytes, cl);
      retry = true;
    }
  }
  if (cause.empty()) {
    t->resp.attempts = t->attempt;
    finish_(t, std::move(t->resp));
    return;
  }
  const HttpClientOptions& o = client_->options_;
  if (retry && o.retry.AllowsAnother(t->attempt)) {
    const int64_t wait_us = o.retry.BackoffMicros(t->attempt);
    STOKE_LOG(kDebug, "http.retry", "method={} url={} attempt={} wait_ms={} cause=\"{}\"", req.method,
              RedactUrl(req.url), t->attempt, wait_us / 1000, cause);
    t->not_before = Clock::now() + std::chrono::microseconds(wait_us);
    waiting_.push_back(t);
    return;
  }
  finish_(t, Status::IOError(Describe(*t, cause), retry));
}

void HttpClient::Engine::Step(int max_wait_ms) {
  const size_t limit = client_->options_.max_in_flight;
  const auto now = Clock::now();
  size_t kept = 0;
  for (Transfer* t : waiting_) {
    if (in_flight_ < limit && t->not_before <= now) {
      Start(t);
    } else {
      waiting_[kept++] = t;
    }
  }
  waiting_.resize(kept);
  int running = 0;
  curl_multi_perform(multi_, &running);
  int queued = 0;
  bool completed = false;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    Complete(t, msg->data.result);
    completed = true;
  }
  // A transfer finished (or was queued for a retry): the caller may have what it waits for, so
  // return at once rather than wait for sockets that may have nothing more to say (a lone request
  // would otherwise take max_wait_ms longer: a one-blob-at-a-time reader did 10 GETs/s).
  if (completed) return;
  int timeout_ms = max_wait_ms;
  if (in_flight_ < limit) {
    auto next_ready = Clock::time_point::max();
    for (const Transfer* t : waiting_) next_ready = std::min(next_ready, t->not_before);
    if (next_ready != Clock::time_point::max()) {
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(next_ready - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(until, 0, max_wait_ms));
    }
  }
  // Also waits (for Wakeup or the timeout) when nothing is in flight.
  if (timeout_ms > 0) curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
}

// The asynchronous requests' loop: an Engine driven by its own thread, fed by Submit.
struct HttpClient::EventLoop {
  explicit EventLoop(HttpClient* client)
      : engine(client, [](Transfer* t, Result<HttpResponse> r) {
          HttpCallback done = std::move(t->done);
          delete t;
          done(std::move(r));
        }) {}
  Engine engine;  // the loop thread's alone (Wakeup excepted)
  Mutex mu;
  std::vector<Transfer*> incoming GUARDED_BY(mu);  // submitted, not yet given to the engine
  bool stop GUARDED_BY(mu) = false;                // the client is being destroyed
  const pid_t pid = ::getpid();                    // the process whose thread runs it
  std::thread thread;
};

HttpClient::EventLoop* HttpClient::Loop() {
  MutexLock lock(&loop_mu_);
  if (loop_ != nullptr && loop_->pid == ::getpid()) return loop_;
  // None yet, or the parent's in a forked child, where its thread does not exist: that one is leaked
  // (its state belongs to the parent's threads).
  loop_ = new EventLoop(this);
  loop_->thread = std::thread([this, loop = loop_] { RunLoop(loop); });
  return loop_;
}

void HttpClient::RunLoop(EventLoop* loop) {
  std::vector<Transfer*> taken;
  for (;;) {
    bool stop;
    {
      MutexLock lock(&loop->mu);
      taken.swap(loop->incoming);
      stop = loop->stop;
    }
    for (Transfer* t : taken) loop->engine.Add(t);
    taken.clear();
    if (stop && loop->engine.idle()) return;
    // Submit's Wakeup ends the wait at once, whenever it comes after the swap above.
    loop->engine.Step(1000);
  }
}

void HttpClient::Submit(HttpRequest request, HttpCallback done) {
  auto t = std::make_unique<Transfer>();
  t->owned = std::move(request);
  t->req = &t->owned;
  t->headers = BuildHeaderList(t->owned);
  t->done = std::move(done);
  EventLoop* loop = Loop();
  {
    MutexLock lock(&loop->mu);
    loop->incoming.push_back(t.release());
  }
  loop->engine.Wakeup();
}

const std::string& HttpResponse::Header(std::string_view lowercase_name) const {
  static const std::string kEmpty;
  for (const auto& [k, v] : headers) {
    if (k == lowercase_name) return v;
  }
  return kEmpty;
}

HttpClient::HttpClient(HttpClientOptions options) : options_(options) {
  GlobalInitOnce();
  if (options_.retry.max_attempts < 1) options_.retry.max_attempts = 1;
  if (options_.max_in_flight < 1) options_.max_in_flight = 1;
  share_ = std::make_unique<Share>();
}

HttpClient::~HttpClient() {
  EventLoop* loop = nullptr;
  {
    MutexLock lock(&loop_mu_);
    std::swap(loop, loop_);
  }
  if (loop != nullptr && loop->pid == ::getpid()) {
    {
      MutexLock lock(&loop->mu);
      loop->stop = true;
    }
    loop->engine.Wakeup();
    loop->thread.join();  // after the requests still running finish
    delete loop;
  }
  // Easy handles after the multi handle, and before the share they reference.
  for (void* h : pool_) curl_easy_cleanup(static_cast<CURL*>(h));
  pool_.clear();
}

void* HttpClient::AcquireHandle() {
  {
    MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      void* h = pool_.back();
      pool_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::ReleaseHandle(void* handle) {
  MutexLock lock(&pool_mu_);
  pool_.push_back(handle);
}

Result<HttpResponse> HttpClient::Execute(const HttpRequest& request) {
  std::vector<HttpRequest> one;
  one.push_back(request);
  return std::move(ExecuteBatch(one)[0]);
}

std::vector<Result<HttpResponse>> HttpClient::ExecuteBatch(const std::vector<HttpRequest>& requests) {
  const size_t n = requests.size();
  std::vector<Result<HttpResponse>> results(n, Result<HttpResponse>(Status::Internal("request not run")));
  if (n == 0) return results;
  size_t finished = 0;
  Engine engine(this, [&](Transfer* t, Result<HttpResponse> r) {
    results[t->index] = std::move(r);
    ++finished;
  });
  std::vector<Transfer> ts(n);
  for (size_t i = 0; i < n; ++i) {
    ts[i].req = &requests[i];
    ts[i].headers = BuildHeaderList(requests[i]);
    ts[i].index = i;
    engine.Add(&ts[i]);
  }
  while (finished < n) engine.Step(100);
  return results;
}

bool ParseHttpHeaderLine(std::string_view line, std::string* name, std::string* value) {
  line = Trim(line);
  if (line.empty() || line.substr(0, 5) == "HTTP/") return false;
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view n = line.substr(0, colon);
  for (char c : n) {
    // RFC 9110 token characters only.
    unsigned char u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos)) return false;
  }
  *name = AsciiLower(n);
  *value = std::string(Trim(line.substr(colon + 1)));
  return true;
}

Result<long> ParseHttpStatusLine(std::string_view line) {
  line = Trim(line);
  auto bad = [&] {
    return Status::InvalidArgument(fmt::format("malformed HTTP status line '{}'", line.substr(0, 80)));
  };
  if (line.substr(0, 5) != "HTTP/") return bad();
  size_t sp = line.find(' ');
  if (sp == std::string_view::npos || line.size() < sp + 4) return bad();
  std::string_view code = line.substr(sp + 1, 3);
  if (line.size() > sp + 4 && line[sp + 4] != ' ') return bad();
  long v = 0;
  for (char c : code) {
    if (c < '0' || c > '9') return bad();
    v = v * 10 + (c - '0');
  }
  if (v < 100 || v > 599) return bad();
  return v;
}

std::string RedactUrl(std::string_view url) {
  size_t q = url.find('?');
  if (q == std::string_view::npos) return std::string(url);
  std::string out(url.substr(0, q + 1));
  std::string_view rest = url.substr(q + 1);
  bool first = true;
  while (true) {
    size_t amp = rest.find('&');
    std::string_view param = rest.substr(0, amp);
    size_t eq = param.find('=');
    std::string key = AsciiLower(param.substr(0, eq));
    if (!first) out += '&';
    first = false;
    if (eq != std::string_view::npos &&
        (key == "sig" || key == "x-amz-signature" || key == "x-amz-credential" || key == "x-amz-security-token")) {
      out += std::string(param.substr(0, eq + 1)) + "REDACTED";
    } else {
      out += param;
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

bool IsRetryableHttpStatus(long status) { return status >= 500 || status == 429 || status == 408; }

std::string RequestRangeForMessages(const HttpRequest& request) {
  for (const auto& [k, v] : request.headers) {
    std::string lk = AsciiLower(k);
    if (lk == "range" || lk == "x-ms-range") {
      std::string_view r = v;
      if (r.substr(0, 6) == "bytes=") r.remove_prefix(6);
      return "bytes " + std::string(r);
    }
  }
  return "";
}

std::string HttpErrorCode(const HttpResponse& response) {
  if (!response.body.empty()) {
    auto doc = ParseXml(response.body, "error response");
    if (doc.ok() && !doc->ChildText("Code").empty()) return doc->ChildText("Code");
  }
  return response.Header("x-ms-error-code");
}

std::string DescribeHttpError(const HttpResponse& response) {
  std::string code = HttpErrorCode(response);
  std::string message;
  if (!response.body.empty()) {
    auto doc = ParseXml(response.body, "error response");
    if (doc.ok()) message = doc->ChildText("Message");
  }
  // Azure appends "RequestId:...\nTime:..." lines; keep the first line.
  message = std::string(Trim(message.substr(0, message.find('\n'))));
  if (message.size() > 240) message = message.substr(0, 240) + "...";
  if (code.empty() && message.empty()) return fmt::format("HTTP {}", response.status);
  if (message.empty()) return fmt::format("HTTP {} ({})", response.status, code);
  return fmt::format("HTTP {} ({}: {})", response.status, code, message);
}

}  // namespace stoke
