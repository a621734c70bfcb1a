// The words of an enum, read both ways: one table of (word, value) pairs per enum, for the public
// Parse<Enum>/<Enum>Name pairs (docs/cpp-api.md, "Enums, with names").
#pragma once

#include <fmt/format.h>

#include <array>
#include <string>
#include <string_view>
#include <utility>

#include "stoke/status.h"

namespace stoke {

template <typename E, size_t N>
using EnumNames = std::array<std::pair<std::string_view, E>, N>;

// The word of `value` in `names`; "unknown" where the table lacks it.
template <typename E, size_t N>
std::string_view NameIn(const EnumNames<E, N>& names, E value) {
  for (const auto& [name, e] : names) {
    if (e == value) return name;
  }
  return "unknown";
}

// The value named `text` in `names`; InvalidArgument "<what>: unknown value '<text>' (expected one
// of <the words>)" otherwise.
template <typename E, size_t N>
Result<E> ParseIn(const EnumNames<E, N>& names, std::string_view what, std::string_view text) {
  std::string choices;
  for (const auto& [name, e] : names) {
    if (name == text) return e;
    choices += choices.empty() ? "" : ", ";
    choices += name;
  }
  return Status::InvalidArgument(fmt::format("{}: unknown value '{}' (expected one of {})", what, text, choices));
}

}  // namespace stoke
