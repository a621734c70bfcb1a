// The HTTP client's retries against real faults: tests/servers/fault_proxy.mjs sits between the
// storage and Azurite/s3rver and injects 503 bursts, connection resets mid-body, truncated bodies
// and delays. Reads must come back byte-equal; exhausted retries must name object and byte range.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/mutex.h"
#include "io/object_storage.h"
#include "io/object_store_testing.h"

namespace stoke {
namespace {

using testing::TestBytes;

class FaultProxyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    STOKE_REQUIRE_TEST_SERVERS();
    testing::TestServer* upstream = testing::SharedServer(GetParam());
    ASSERT_NE(upstream, nullptr);
    proxy_ = testing::TestServer::Start("proxy", std::to_string(upstream->port()));
    ASSERT_NE(proxy_, nullptr) << "could not start the fault proxy";
    container_ = testing::UniqueName("fault");
    storage_ = Make(testing::TestHttpOptions());
    ASSERT_NE(storage_, nullptr);
    const Status created = storage_->client().CreateContainer();
    ASSERT_TRUE(created.ok()) << created.ToString();
    data_ = TestBytes(256 << 10, 7);
    ASSERT_TRUE(WriteFileAtomically(*storage_, "obj/data.bin", AsBytes(data_)).ok());
  }

  std::shared_ptr<ObjectStorage> Make(HttpClientOptions http) {
    Result<std::shared_ptr<ObjectStorage>> s = Status::Internal("unset");
    if (GetParam() == "azurite") {
      AzureBlobOptions o = testing::AzuriteOptions(proxy_->port(), container_);
      o.http = http;
      s = NewAzureBlobStorage(o);
    } else {
      S3Options o = testing::S3rverOptions(proxy_->port(), container_);
      o.http = http;
      s = NewS3Storage(o);
    }
    return s.ok() ? *s : nullptr;
  }

  // Sets the proxy's faults (see fault_proxy.mjs) and checks the answer.
  void SetFaults(const std::string& query) {
    HttpClient client;
    HttpRequest req;
    req.url = proxy_->url() + "/__fault/set?" + query;
    auto r = client.Execute(req);
    ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
  }
  std::string Stats() {
    HttpClient client;
    HttpRequest req;
    req.url = proxy_->url() + "/__fault/stats";
    auto r = client.Execute(req);
    return r.ok() ? r->body : r.status().ToString();
  }

  // Reads [offset, offset+n) and checks the bytes.
  void ExpectRead(Storage& s, uint64_t offset, size_t n) {
    auto f = s.OpenForRead("obj/data.bin");
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    std::string buf(n, '\0');
    Status st = (*f)->ReadAt(offset, MutableByteView(reinterpret_cast<uint8_t*>(buf.data()), n));
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(buf == data_.substr(offset, n)) << "bytes differ";
  }

  std::unique_ptr<testing::TestServer> proxy_;
  std::string container_;
  std::shared_ptr<ObjectStorage> storage_;
  std::string data_;
};

TEST_P(FaultProxyTest, RetriesThrough503Bursts) {
  SetFaults("status503=3");
  ExpectRead(*storage_, 1000, 100000);
  EXPECT_NE(Stats().find("\"injected\":3"), std::string::npos) << Stats();
}

TEST_P(FaultProxyTest, RetriesThroughResetsMidBody) {
  SetFaults("reset=2");
  ExpectRead(*storage_, 0, data_.size());
  EXPECT_NE(Stats().find("\"injected\":2"), std::string::npos) << Stats();
}

TEST_P(FaultProxyTest, RetriesThroughTruncatedBodies) {
  SetFaults("truncate=2");
  ExpectRead(*storage_, 5, 200000);
  EXPECT_NE(Stats().find("\"injected\":2"), std::string::npos) << Stats();
}

TEST_P(FaultProxyTest, DelaysWithinTheTimeoutAreFine) {
  SetFaults("delay_ms=150");
  ExpectRead(*storage_, 77, 777);
}

TEST_P(FaultProxyTest, BatchedReadsRetryEachRangeOnItsOwn) {
  SetFaults("status503=5&reset=3&truncate=3");
  std::vector<std::string> bufs(60, std::string(3000, '\0'));
  std::vector<ByteRangeRead> ranges;
  for (size_t i = 0; i < bufs.size(); ++i) {
    ranges.push_back({i * 4000, MutableByteView(reinterpret_cast<uint8_t*>(bufs[i].data()), bufs[i].size())});
  }
  auto results = storage_->ReadRanges("obj/data.bin", ranges);
  for (size_t i = 0; i < bufs.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].ToString();
    ASSERT_TRUE(bufs[i] == data_.substr(i * 4000, 3000)) << "range " << i;
  }
  EXPECT_NE(Stats().find("\"injected\":11"), std::string::npos) << Stats();
}

TEST_P(FaultProxyTest, WritesRetryThrough503) {
  SetFaults("status503=2&methods=PUT");
  std::string payload = TestBytes(5000, 9);
  ASSERT_TRUE(WriteFileAtomically(*storage_, "obj/written.bin", AsBytes(payload)).ok());
  SetFaults("");
  EXPECT_EQ(*ReadFileToString(*storage_, "obj/written.bin"), payload);
}

// The first PUT commits but its answer is lost; the retry is refused (409/412) and the storage
// recognises its own bytes: put-if-absent succeeded. Another writer's bytes stay AlreadyExists.
TEST_P(FaultProxyTest, PutIfAbsentWhoseAnswerWasLostStillSucceeds) {
  SetFaults("drop=1&methods=PUT");
  Status put = storage_->PutIfAbsent("obj/_delta_log/0.json", AsBytes("commit zero"));
  ASSERT_TRUE(put.ok()) << put.ToString();
  EXPECT_NE(Stats().find("\"injected\":1"), std::string::npos) << Stats();
  EXPECT_EQ(*ReadFileToString(*storage_, "obj/_delta_log/0.json"), "commit zero");
  if (GetParam() == "azurite") {
    SetFaults("drop=1&methods=PUT");
    EXPECT_EQ(storage_->PutIfAbsent("obj/_delta_log/0.json", AsBytes("other writer")).code(),
              StatusCode::kAlreadyExists);
  }
}

TEST_P(FaultProxyTest, ExhaustedRetriesNameObjectAndRange) {
  HttpClientOptions http = testing::TestHttpOptions();
  http.retry.max_attempts = 3;
  auto s = Make(http);
  ASSERT_NE(s, nullptr);
  auto f = s->OpenForRead("obj/data.bin");
  ASSERT_TRUE(f.ok());
  SetFaults("status503=1000");
  uint8_t buf[100];
  Status st = (*f)->ReadAt(100, MutableByteView(buf, 100));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_TRUE(st.retryable());
  const std::string& m = st.message();
  EXPECT_NE(m.find(container_ + "/obj/data.bin"), std::string::npos) << m;
  EXPECT_NE(m.find("bytes 100-199"), std::string::npos) << m;
  EXPECT_NE(m.find("503"), std::string::npos) << m;
  EXPECT_NE(m.find("after 3 attempts"), std::string::npos) << m;

  SetFaults("reset=1000");
  st = (*f)->ReadAt(100, MutableByteView(buf, 100));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bytes 100-199"), std::string::npos) << st.message();
}

TEST_P(FaultProxyTest, TimeoutsAreRetriedThenReported) {
  HttpClientOptions http = testing::TestHttpOptions();
  http.retry.max_attempts = 2;
  http.request_timeout_ms = 200;
  auto s = Make(http);
  ASSERT_NE(s, nullptr);
  auto f = s->OpenForRead("obj/data.bin");
  ASSERT_TRUE(f.ok());
  SetFaults("delay_ms=600");
  uint8_t buf[10];
  Status st = (*f)->ReadAt(0, MutableByteView(buf, 10));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("imeout"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bytes 0-9"), std::string::npos) << st.message();
}

// The threads of this process (/proc/self/status).
int ThreadCount() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

// Asynchronous reads (the loader's) run on the HTTP client's event loop: 200 of them are in flight
// at once with no thread of their own, and each retries through faults on its own; exhausted
// retries name the object and the byte range, as synchronous reads do.
TEST_P(FaultProxyTest, AsyncReadsAreInFlightTogetherOnOneThreadAndRetryOnTheirOwn) {
  auto f = storage_->OpenForRead("obj/data.bin");
  ASSERT_TRUE(f.ok());
  SetFaults("delay_ms=400&status503=5&reset=5");
  constexpr int kReads = 200;
  std::vector<std::string> bufs(kReads, std::string(1000, '\0'));
  Mutex mu;
  CondVar cv;
  int done = 0;
  std::vector<Status> results(kReads);
  const int threads_before = ThreadCount();
  for (int i = 0; i < kReads; ++i) {
    (*f)->ReadAtAsync(i * 1200, MutableByteView(reinterpret_cast<uint8_t*>(bufs[i].data()), 1000), [&, i](Status st) {
      MutexLock lock(&mu);
      results[i] = std::move(st);
      ++done;
      cv.Signal();
    });
  }
  const int threads_during = ThreadCount();
  {
    MutexLock lock(&mu);
    while (done < kReads) cv.Wait(&mu);
  }
  for (int i = 0; i < kReads; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].ToString();
    ASSERT_TRUE(bufs[i] == data_.substr(i * 1200, 1000)) << "read " << i;
  }
  // At most the event loop's thread was added (none when an earlier test of this storage started it).
  EXPECT_LE(threads_during, threads_before + 1);
  const std::string stats = Stats();
  EXPECT_NE(stats.find("\"injected\":10"), std::string::npos) << stats;
  const size_t at = stats.find("\"max_in_flight\":");
  ASSERT_NE(at, std::string::npos) << stats;
  EXPECT_GE(std::atoi(stats.c_str() + at + 16), 150) << stats;

  HttpClientOptions http = testing::TestHttpOptions();
  http.retry.max_attempts = 2;
  auto s = Make(http);
  ASSERT_NE(s, nullptr);
  auto g = s->OpenForRead("obj/data.bin");
  ASSERT_TRUE(g.ok());
  SetFaults("status503=1000");
  uint8_t buf[100];
  Status st;
  {
    MutexLock lock(&mu);
    done = 0;
  }
  (*g)->ReadAtAsync(300, MutableByteView(buf, 100), [&](Status r) {
    MutexLock lock(&mu);
    st = std::move(r);
    done = 1;
    cv.Signal();
  });
  {
    MutexLock lock(&mu);
    while (done == 0) cv.Wait(&mu);
  }
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.retryable());
  EXPECT_NE(st.message().find(container_ + "/obj/data.bin"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("bytes 300-399"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("after 2 attempts"), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(Servers, FaultProxyTest, ::testing::Values("azurite", "s3rver"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace stoke
