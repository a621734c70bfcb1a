#include "stoke/status.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "core/enum_names.h"

namespace stoke {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kCorruption: return "corruption";
    case StatusCode::kIOError: return "I/O error";
    case StatusCode::kConflict: return "conflict";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

Result<StatusCode> ParseStatusCode(std::string_view name) {
  // Every code, by the name StatusCodeName gives it (the enum's order is free to change).
  using C = StatusCode;
  static constexpr C kAll[] = {C::kOk,       C::kInvalidArgument, C::kNotFound,      C::kCorruption, C::kIOError,
                               C::kConflict, C::kUnsupported,     C::kAlreadyExists, C::kCancelled,  C::kInternal};
  static const EnumNames<C, std::size(kAll)> kNames = [] {
    EnumNames<C, std::size(kAll)> names;
    for (size_t i = 0; i < std::size(kAll); ++i) names[i] = {StatusCodeName(kAll[i]), kAll[i]};
    return names;
  }();
  return ParseIn(kNames, "status code", name);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

namespace internal {
void DieOfBadResultAccess(const Status& status) {
  std::fprintf(stderr, "stoke: Result::value() on error: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m), retryable_);
}

namespace {

// A parameter's name: [a-z0-9_]+.
bool IsParameterName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::string RenameParameters(std::string_view message,
                             std::span<const std::pair<std::string_view, std::string_view>> names) {
  std::string out;
  out.reserve(message.size());
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('`', at);
    if (open == std::string_view::npos) break;
    const size_t close = message.find('`', open + 1);
    const std::string_view name =
        close == std::string_view::npos ? std::string_view() : message.substr(open + 1, close - open - 1);
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == name; });
    if (!IsParameterName(name) || it == names.end()) {
      // Not a parameter this front end renames (or a backquote of other text, such as a path):
      // keep this backquote and look for a name from the next one on.
      out.append(message.substr(at, open + 1 - at));
      at = open + 1;
      continue;
    }
    out.append(message.substr(at, open - at));
    out.append(it->second);
    at = close + 1;
  }
  out.append(message.substr(std::min(at, message.size())));
  return out;
}

}  // namespace stoke
