#include "stoke/status.h"

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

}  // namespace stoke
