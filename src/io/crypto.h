// Hashes, MACs and encodings that request signing needs (OpenSSL's libcrypto underneath).
// All functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "stoke/status.h"

namespace stoke {

// Raw 32-byte SHA-256 digest.
std::string Sha256(std::string_view data);
// Raw 32-byte HMAC-SHA256 of `data` under `key`.
std::string HmacSha256(std::string_view key, std::string_view data);
// Lowercase hex of arbitrary bytes.
std::string HexEncode(std::string_view bytes);
// Standard base64 (RFC 4648, with padding).
std::string Base64Encode(std::string_view bytes);
// Decodes standard base64 with padding; InvalidArgument on any other character or a bad length.
// The message never repeats the input (it may be a secret key).
Result<std::string> Base64Decode(std::string_view text);
// RFC 3986 percent-encoding: unreserved characters (A-Z a-z 0-9 - _ . ~) stay; '/' stays when
// keep_slash is true; everything else becomes %XX (uppercase hex).
std::string UriEncode(std::string_view s, bool keep_slash);

}  // namespace stoke
