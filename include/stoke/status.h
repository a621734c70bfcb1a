// Error values for every stoke library function. No exception crosses a library function:
// fallible calls return Status or Result<T>; the CLI and the Python binding convert at their boundary.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace stoke {

// Persisted nowhere; values may be reordered freely.
enum class StatusCode {
  kOk,
  kInvalidArgument,  // the caller passed something malformed (options, paths, a CLI flag)
  kNotFound,         // a file, column or row that does not exist
  kCorruption,       // bytes on storage do not parse as the format says they must
  kIOError,          // the operating system refused or failed an operation
  kConflict,         // a concurrent writer won a race
  kUnsupported,      // a valid input uses a feature stoke does not implement
  kAlreadyExists,    // a put-if-absent found the target present
  kCancelled,        // the work was stopped on request
  kInternal,         // a broken invariant inside stoke
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message, bool retryable = false)
      : code_(code), message_(std::move(message)), retryable_(retryable) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m, bool retryable = false) {
    return {StatusCode::kIOError, std::move(m), retryable};
  }
  static Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // True for I/O errors that may succeed when tried again (EINTR-like, throttling, timeouts).
  bool retryable() const { return retryable_; }
  // "<code name>: <message>", or "OK".
  std::string ToString() const;
  // The same status with "<context>: " put before the message (no-op when OK).
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  bool retryable_ = false;
};

namespace internal {
// Prints "stoke: value() of an error result: <status>" to stderr and aborts.
[[noreturn]] void DieOfBadResultAccess(const Status& status);
}  // namespace internal

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like arrow::Result
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result built from an OK Status");
  }
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> && !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  Result(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  // REQUIRES: ok(). On an error, prints the status to stderr and aborts (a programming error,
  // never an exception whose message is lost).
  T& value() & {
    CheckOk();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CheckOk();
    return std::get<T>(v_);
  }
  T&& value() && {
    CheckOk();
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!ok()) internal::DieOfBadResultAccess(std::get<Status>(v_));
  }
  std::variant<Status, T> v_;
};

namespace internal {
inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const Result<T>& r) { return r.status(); }
}  // namespace internal

}  // namespace stoke

#define STOKE_CONCAT_INNER(a, b) a##b
#define STOKE_CONCAT(a, b) STOKE_CONCAT_INNER(a, b)

// Returns the error from the enclosing function when `expr` (a Status or Result) is not OK.
#define STOKE_RETURN_IF_ERROR(expr)                                            \
  do {                                                                         \
    ::stoke::Status stoke_status_ = ::stoke::internal::ToStatus((expr));       \
    if (!stoke_status_.ok()) return stoke_status_;                             \
  } while (false)

#define STOKE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// `lhs = value of rexpr`, or return its error. lhs may declare a variable: STOKE_ASSIGN_OR_RETURN(auto x, F());
#define STOKE_ASSIGN_OR_RETURN(lhs, rexpr) \
  STOKE_ASSIGN_OR_RETURN_IMPL(STOKE_CONCAT(stoke_result_, __LINE__), lhs, rexpr)
