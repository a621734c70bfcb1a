#include "stoke/status.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

std::string RenameParameters(std::string_view message,
                             std::span<const std::pair<std::string_view, std::string_view>> names) {
  std::string out;
  out.reserve(message.size());
  size_t at = 0;
  while (at < message.size()) {
    const size_t open = message.find('`', at);
    const size_t close = open == std::string_view::npos ? open : message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view name = message.substr(open + 1, close - open - 1);
    const auto it = std::find_if(names.begin(), names.end(), [&](const auto& n) { return n.first == name; });
    out.append(message.substr(at, open - at));
    if (it != names.end()) {
      out.append(it->second);
    } else {
      out.append(message.substr(open, close + 1 - open));
    }
    at = close + 1;
  }
  out.append(message.substr(std::min(at, message.size())));
  return out;
}

}  // namespace stoke
