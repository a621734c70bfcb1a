#include "io/signing.h"

#include <gtest/gtest.h>

#include "io/crypto.h"

namespace stoke {
namespace {

TEST(Crypto, HashesAndEncodings) {
  EXPECT_EQ(HexEncode(Sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // RFC 4231 test case 2.
  EXPECT_EQ(HexEncode(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(*Base64Decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(*Base64Decode(""), "");
  EXPECT_EQ(UriEncode("a b/c~d$", false), "a%20b%2Fc~d%24");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
}

TEST(Crypto, Base64DecodeRejectsBadInput) {
  for (const char* bad : {"Zm9", "Zm9v!A==", "Zm=v", "====", "Z===", "Zm9vYmE=Zm9v", "Zm9vY\nE="}) {
    auto r = Base64Decode(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().message().find(bad), std::string::npos) << "echoes its input";
    }
  }
}

// AWS's published example "GET Object" (Amazon S3 API reference, "Signature calculations for the
// Authorization header", examplebucket/test.txt, bytes 0-9).
TEST(SigV4, MatchesAwsGetObjectExample) {
  AwsCredentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ""};
  const std::string empty_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  KeyValues headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                       {"Range", "bytes=0-9"},
                       {"x-amz-content-sha256", empty_hash},
                       {"x-amz-date", "20130524T000000Z"}};
  SigV4Signature s = SignSigV4("GET", "/test.txt", {}, headers, empty_hash, "us-east-1", "s3", "20130524T000000Z", c);
  EXPECT_EQ(s.canonical_request,
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n" +
                empty_hash);
  EXPECT_EQ(s.string_to_sign,
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(s.signature, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(s.authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

// AWS SigV4 test suite, get-vanilla-query-order-key-case: query parameters are sorted.
TEST(SigV4, MatchesTestSuiteQueryOrder) {
  AwsCredentials c{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", ""};
  KeyValues headers = {{"Host", "example.amazonaws.com"}, {"X-Amz-Date", "20150830T123600Z"}};
  KeyValues query = {{"Param2", "value2"}, {"Param1", "value1"}};
  SigV4Signature s = SignSigV4("GET", "/", query, headers,
                               "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "us-east-1",
                               "service", "20150830T123600Z", c);
  EXPECT_NE(s.canonical_request.find("\nParam1=value1&Param2=value2\n"), std::string::npos);
  EXPECT_EQ(s.signature, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
}

TEST(SigV4, SessionTokenIsSignedWhenGiven) {
  AwsCredentials c{"AKID", "secret", "TOKEN"};
  KeyValues headers = {{"host", "h"}, {"x-amz-date", "20240101T000000Z"}, {"x-amz-security-token", "TOKEN"}};
  SigV4Signature s = SignSigV4("GET", "/k", {}, headers, "UNSIGNED-PAYLOAD", "eu-west-1", "s3", "20240101T000000Z", c);
  EXPECT_NE(s.authorization.find("SignedHeaders=host;x-amz-date;x-amz-security-token,"), std::string::npos);
  EXPECT_EQ(s.authorization.find("secret"), std::string::npos);
}

// Hand-checked against the Shared Key documentation: 12 standard header lines (Content-Length empty
// when 0), x-ms-* headers sorted and lowercased, then /account/path and sorted lowercase query parameters.
TEST(AzureSharedKey, StringToSignFollowsTheDocumentedLayout) {
  KeyValues headers = {{"x-ms-version", "2021-08-06"},
                       {"x-ms-date", "Fri, 26 Jun 2015 23:39:12 GMT"},
                       {"Content-Length", "0"},
                       {"If-None-Match", "*"},
                       {"x-ms-blob-type", "BlockBlob"}};
  KeyValues query = {{"restype", "container"}, {"comp", "list"}, {"prefix", "a b"}};
  std::string sts = AzureSharedKeyStringToSign("PUT", "myaccount", "/myaccount/mycontainer", query, headers);
  EXPECT_EQ(sts,
            "PUT\n"
            "\n"    // Content-Encoding
            "\n"    // Content-Language
            "\n"    // Content-Length (0 -> empty)
            "\n"    // Content-MD5
            "\n"    // Content-Type
            "\n"    // Date
            "\n"    // If-Modified-Since
            "\n"    // If-Match
            "*\n"   // If-None-Match
            "\n"    // If-Unmodified-Since
            "\n"    // Range
            "x-ms-blob-type:BlockBlob\n"
            "x-ms-date:Fri, 26 Jun 2015 23:39:12 GMT\n"
            "x-ms-version:2021-08-06\n"
            "/myaccount/myaccount/mycontainer\n"
            "comp:list\n"
            "prefix:a b\n"
            "restype:container");
  std::string auth = AzureSharedKeyAuthorization("myaccount", "key-bytes", sts);
  EXPECT_EQ(auth.rfind("SharedKey myaccount:", 0), 0u);
  EXPECT_EQ(auth, "SharedKey myaccount:" + Base64Encode(HmacSha256("key-bytes", sts)));
}

TEST(Dates, FormatsForHeaders) {
  EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z");
  EXPECT_EQ(HttpDate(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
}

}  // namespace
}  // namespace stoke
