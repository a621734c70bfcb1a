// Small text utilities shared by the layers: UTF-8 validation and random identifiers.
#pragma once

#include <string>
#include <string_view>

namespace stoke {

// True when `s` is well-formed UTF-8: no overlong forms, surrogates or code points past U+10FFFF
// (Parquet's STRING and JSON require it).
bool IsValidUtf8(std::string_view s);

// `s` for an error message: well-formed UTF-8 sequences as they are, every other byte as "\xNN".
std::string EscapeNonUtf8(std::string_view s);

// A random RFC 4122 version-4 UUID ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"), for table ids and data
// file names. Thread-safe; distinct across threads and processes.
std::string RandomUuid();

// `s` with ASCII letters lowercased (other bytes kept): for names matched ignoring case.
std::string AsciiLower(std::string_view s);
// Whether `a` and `b` are equal but for the case of ASCII letters (AsciiLower(a) == AsciiLower(b)).
bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b);

}  // namespace stoke
