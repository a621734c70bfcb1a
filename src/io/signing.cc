#include "io/signing.h"

#include "core/text.h"
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "io/crypto.h"

namespace stoke {
namespace {

// Trims leading/trailing whitespace and collapses inner runs of spaces (SigV4 and Shared Key both ask it).
std::string CanonicalHeaderValue(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string HeaderValue(const KeyValues& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (AsciiLower(k) == name) return v;
  }
  return "";
}

}  // namespace

std::string AzureSharedKeyStringToSign(std::string_view method, std::string_view account, std::string_view encoded_path,
                                       const KeyValues& query, const KeyValues& headers) {
  std::string content_length = HeaderValue(headers, "content-length");
  if (content_length == "0") content_length.clear();
  std::string s;
  s += method;
  s += '\n';
  for (std::string_view name : {"content-encoding", "content-language"}) {
    s += HeaderValue(headers, name);
    s += '\n';
  }
  s += content_length;
  s += '\n';
  for (std::string_view name : {"content-md5", "content-type", "date", "if-modified-since", "if-match", "if-none-match",
                                "if-unmodified-since", "range"}) {
    s += HeaderValue(headers, name);
    s += '\n';
  }
  std::map<std::string, std::string> ms;
  for (const auto& [k, v] : headers) {
    std::string lk = AsciiLower(k);
    if (lk.rfind("x-ms-", 0) == 0) ms[lk] = CanonicalHeaderValue(v);
  }
  for (const auto& [k, v] : ms) s += fmt::format("{}:{}\n", k, v);
  s += '/';
  s += account;
  s += encoded_path;
  std::map<std::string, std::vector<std::string>> params;
  for (const auto& [k, v] : query) params[AsciiLower(k)].push_back(v);
  for (auto& [k, values] : params) {
    std::sort(values.begin(), values.end());
    s += fmt::format("\n{}:{}", k, fmt::join(values, ","));
  }
  return s;
}

std::string AzureSharedKeyAuthorization(std::string_view account, std::string_view decoded_key,
                                        std::string_view string_to_sign) {
  return fmt::format("SharedKey {}:{}", account, Base64Encode(HmacSha256(decoded_key, string_to_sign)));
}

SigV4Signature SignSigV4(std::string_view method, std::string_view encoded_path, const KeyValues& query,
                         const KeyValues& headers, std::string_view payload_sha256_hex, std::string_view region,
                         std::string_view service, std::string_view amz_date, const AwsCredentials& credentials) {
  std::vector<std::pair<std::string, std::string>> q;
  for (const auto& [k, v] : query) q.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(q.begin(), q.end());
  std::string canonical_query;
  for (const auto& [k, v] : q) {
    if (!canonical_query.empty()) canonical_query += '&';
    canonical_query += k + "=" + v;
  }
  std::map<std::string, std::string> h;
  for (const auto& [k, v] : headers) {
    std::string& slot = h[AsciiLower(k)];
    if (!slot.empty()) slot += ',';
    slot += CanonicalHeaderValue(v);
  }
  std::string canonical_headers;
  std::string signed_headers;
  for (const auto& [k, v] : h) {
    canonical_headers += k + ":" + v + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += k;
  }
  SigV4Signature out;
  out.canonical_request = fmt::format("{}\n{}\n{}\n{}\n{}\n{}", method, encoded_path.empty() ? "/" : encoded_path,
                                      canonical_query, canonical_headers, signed_headers, payload_sha256_hex);
  std::string date(amz_date.substr(0, 8));
  std::string scope = fmt::format("{}/{}/{}/aws4_request", date, region, service);
  out.string_to_sign =
      fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope, HexEncode(Sha256(out.canonical_request)));
  std::string k = HmacSha256("AWS4" + credentials.secret_access_key, date);
  k = HmacSha256(k, region);
  k = HmacSha256(k, service);
  k = HmacSha256(k, "aws4_request");
  out.signature = HexEncode(HmacSha256(k, out.string_to_sign));
  out.authorization = fmt::format("AWS4-HMAC-SHA256 Credential={}/{},SignedHeaders={},Signature={}",
                                  credentials.access_key_id, scope, signed_headers, out.signature);
  return out;
}

std::string AmzDate(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string HttpDate(int64_t unix_seconds) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm;
  gmtime_r(&t, &tm);
  return fmt::format("{}, {:02d} {} {} {:02d}:{:02d}:{:02d} GMT", kDays[tm.tm_wday], tm.tm_mday, kMonths[tm.tm_mon],
                     tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

}  // namespace stoke
