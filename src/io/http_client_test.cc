#include "io/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace stoke {
namespace {

TEST(HttpParse, HeaderLines) {
  std::string n, v;
  ASSERT_TRUE(ParseHttpHeaderLine("Content-Length:  42 \r\n", &n, &v));
  EXPECT_EQ(n, "content-length");
  EXPECT_EQ(v, "42");
  ASSERT_TRUE(ParseHttpHeaderLine("x-ms-error-code:BlobNotFound", &n, &v));
  EXPECT_EQ(v, "BlobNotFound");
  ASSERT_TRUE(ParseHttpHeaderLine("Empty:\r\n", &n, &v));
  EXPECT_EQ(v, "");
  for (const char* bad : {"", "\r\n", "HTTP/1.1 200 OK\r\n", "no colon here", ": value", "bad name: x",
                          "na(me: x", "\x01\x02: y"}) {
    EXPECT_FALSE(ParseHttpHeaderLine(bad, &n, &v)) << bad;
  }
}

TEST(HttpParse, StatusLines) {
  EXPECT_EQ(*ParseHttpStatusLine("HTTP/1.1 206 Partial Content\r\n"), 206);
  EXPECT_EQ(*ParseHttpStatusLine("HTTP/2 200"), 200);
  EXPECT_EQ(*ParseHttpStatusLine("HTTP/1.1 503 "), 503);
  for (const char* bad : {"", "HTTP/1.1", "HTTP/1.1 20", "HTTP/1.1 2000 x", "HTTP/1.1 abc OK", "HTTP/1.1 099 x",
                          "HTTP/1.1 600 x", "FTP/1.1 200 OK", "HTTP/1.1200 OK"}) {
    auto r = ParseHttpStatusLine(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(HttpParse, RedactsSecretsInUrls) {
  EXPECT_EQ(RedactUrl("https://a.blob.core.windows.net/c/b?sv=2021&sp=r&sig=abc%2Fdef&se=x"),
            "https://a.blob.core.windows.net/c/b?sv=2021&sp=r&sig=REDACTED&se=x");
  EXPECT_EQ(RedactUrl("http://h/k?X-Amz-Signature=s&X-Amz-Credential=c&X-Amz-Security-Token=t&list-type=2"),
            "http://h/k?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED&X-Amz-Security-Token=REDACTED&list-type=2");
  EXPECT_EQ(RedactUrl("http://h/k"), "http://h/k");
  EXPECT_EQ(RedactUrl("http://h/k?"), "http://h/k?");
}

TEST(HttpParse, ErrorDescriptionsNeverEchoSignatures) {
  HttpResponse r;
  r.status = 403;
  r.body =
      "<?xml version=\"1.0\" encoding=\"utf-8\"?><Error><Code>AuthenticationFailed</Code>"
      "<Message>Server failed to authenticate the request.\nRequestId:1\nTime:2</Message>"
      "<AuthenticationErrorDetail>The MAC signature found in the HTTP request 'SECRETSIG' is not the same as any "
      "computed signature. Server used following string to sign: 'GET...'</AuthenticationErrorDetail></Error>";
  std::string d = DescribeHttpError(r);
  EXPECT_EQ(d, "HTTP 403 (AuthenticationFailed: Server failed to authenticate the request.)");
  r.body = "<Error><Code>SignatureDoesNotMatch</Code><Message>m</Message><SignatureProvided>SECRETSIG</SignatureProvided>"
           "<StringToSign>x</StringToSign></Error>";
  EXPECT_EQ(DescribeHttpError(r).find("SECRETSIG"), std::string::npos);
  r.body = "not xml SECRETSIG";
  EXPECT_EQ(DescribeHttpError(r), "HTTP 403");
  r.body.clear();
  r.headers = {{"x-ms-error-code", "ContainerNotFound"}};
  EXPECT_EQ(HttpErrorCode(r), "ContainerNotFound");
}

TEST(HttpParse, RetryableStatuses) {
  EXPECT_TRUE(IsRetryableHttpStatus(500));
  EXPECT_TRUE(IsRetryableHttpStatus(503));
  EXPECT_TRUE(IsRetryableHttpStatus(429));
  EXPECT_FALSE(IsRetryableHttpStatus(404));
  EXPECT_FALSE(IsRetryableHttpStatus(412));
  HttpRequest req;
  req.headers = {{"x-ms-range", "bytes=10-19"}};
  EXPECT_EQ(RequestRangeForMessages(req), "bytes 10-19");
}

TEST(HttpClient, VerifiesTlsByDefault) { EXPECT_TRUE(HttpClientOptions{}.verify_tls); }

// A port with nothing listening: connection refused, retried, then an error naming method, URL and range.
TEST(HttpClient, RefusedConnectionIsRetriedThenNamed) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  ::close(fd);  // bound then closed: nothing listens there

  HttpClientOptions o;
  o.retry.max_attempts = 3;
  o.retry.initial_backoff_us = 1000;
  HttpClient client(o);
  HttpRequest req;
  req.url = "http://127.0.0.1:" + std::to_string(port) + "/c/blob?sig=SECRET";
  req.headers = {{"Range", "bytes=0-99"}, {"Authorization", "SharedKey a:SECRETAUTH"}};
  auto r = client.Execute(req);
  ASSERT_FALSE(r.ok());
  const std::string& m = r.status().message();
  EXPECT_TRUE(r.status().retryable());
  EXPECT_NE(m.find("HTTP GET http://127.0.0.1:"), std::string::npos) << m;
  EXPECT_NE(m.find("/c/blob"), std::string::npos) << m;
  EXPECT_NE(m.find("bytes 0-99"), std::string::npos) << m;
  EXPECT_NE(m.find("after 3 attempts"), std::string::npos) << m;
  EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
}

}  // namespace
}  // namespace stoke
