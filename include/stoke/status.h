// Error values for every stoke library function. No exception crosses a library function:
// fallible calls return Status or Result<T>; the CLI and the Python binding convert at their boundary.
//
//   Result<QueryResult> r = QueryTableColumns(options);
//   if (!r.ok()) return r.status();        // or STOKE_ASSIGN_OR_RETURN(QueryResult q, QueryTableColumns(options));
//   for (const QueryColumn& c : r->columns) ...
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace stoke {

// What went wrong, coarsely; the message says the rest. Persisted nowhere; values may be reordered freely.
enum class StatusCode {
  kOk,               // no error
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

// "OK", "invalid argument", "not found", "corruption", "I/O error", "conflict", "unsupported",
// "already exists", "cancelled", "internal error".
std::string_view StatusCodeName(StatusCode code);

// The outcome of an operation: OK, or a code and a message naming the file, offset or row and what
// was expected. Cheap to copy when OK; [[nodiscard]]: a dropped Status is a compile warning.
class [[nodiscard]] Status {
 public:
  // OK.
  Status() = default;
  // An error (or OK with StatusCode::kOk). `retryable` marks I/O errors worth trying again.
  Status(StatusCode code, std::string message, bool retryable = false)
      : code_(code), message_(std::move(message)), retryable_(retryable) {}

  // OK, spelled out.
  static Status OK() { return Status(); }
  // See StatusCode::kInvalidArgument. One factory per code: Status::NotFound("no table at 't'") and so on.
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  // See StatusCode::kNotFound.
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  // See StatusCode::kCorruption.
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  // See StatusCode::kIOError; `retryable` for failures that may pass when tried again.
  static Status IOError(std::string m, bool retryable = false) {
    return {StatusCode::kIOError, std::move(m), retryable};
  }
  // See StatusCode::kConflict.
  static Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
  // See StatusCode::kUnsupported.
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  // See StatusCode::kAlreadyExists.
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  // See StatusCode::kCancelled.
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  // See StatusCode::kInternal.
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  // True when there is no error.
  bool ok() const { return code_ == StatusCode::kOk; }
  // The error's code (kOk when ok()).
  StatusCode code() const { return code_; }
  // The error's message without the code's name ("" when ok()).
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

// A library message names a parameter in backquotes, by its C++ name (which Python's keywords
// share but for a few): "ingest: `shard` needs `mode` append". A front end that names parameters
// otherwise renames them: each `name` ([a-z0-9_]+) that `names` maps (name, replacement) is replaced
// by its replacement, without the backquotes; other text, backquotes in values included, is kept. The CLI maps them to its flags
// ("--shard needs --mode append").
std::string RenameParameters(std::string_view message,
                             std::span<const std::pair<std::string_view, std::string_view>> names);

// Either a value or an error (defined below).
template <typename T>
class Result;

// Used by Result and the macros below; not for callers.
namespace internal {
// Prints "stoke: Result::value() on error: <status>" to stderr and aborts.
[[noreturn]] void DieOfBadResultAccess(const Status& status);
// The Status of a Status or of a Result (the macros accept both).
inline Status ToStatus(const Status& s) { return s; }
// The Status of a Result: OK when it holds a value.
template <typename T>
Status ToStatus(const Result<T>& r) { return r.status(); }
}  // namespace internal

// Either a value or a non-OK Status. Check ok() (or use STOKE_ASSIGN_OR_RETURN) before value():
// value() on an error is a programming error and aborts with the status's message.
template <typename T>
class [[nodiscard]] Result {
 public:
  // A value: `return table;` in a function returning Result<Table>.
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like arrow::Result
  // An error: `return Status::NotFound(...);`. An OK status is no value: it becomes kInternal.
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result built from an OK Status");
  }
  // A value of a type convertible to T (a std::unique_ptr<Derived> for a Result<std::unique_ptr<Base>>).
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U&&, T> && !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  Result(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  // True when the Result holds a value.
  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error, or an OK Status when the Result holds a value.
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  // The value. REQUIRES: ok(). On an error, prints "stoke: Result::value() on error: <status>" to
  // stderr and aborts (a programming error, never an exception whose message is lost).
  T& value() & {
    CheckOk();
    return std::get<T>(v_);
  }
  // As above, read-only.
  const T& value() const& {
    CheckOk();
    return std::get<T>(v_);
  }
  // As above, moving the value out: `T t = std::move(result).value();`.
  T&& value() && {
    CheckOk();
    return std::get<T>(std::move(v_));
  }
  // value(), as with std::optional. REQUIRES: ok().
  T& operator*() & { return value(); }
  // value(), read-only. REQUIRES: ok().
  const T& operator*() const& { return value(); }
  // &value(): `result->field`. REQUIRES: ok().
  T* operator->() { return &value(); }
  // &value(), read-only. REQUIRES: ok().
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    if (!ok()) internal::DieOfBadResultAccess(std::get<Status>(v_));
  }
  std::variant<Status, T> v_;
};

// The code that StatusCodeName calls `name` ("not found"); InvalidArgument "status code: unknown
// value ..." otherwise.
Result<StatusCode> ParseStatusCode(std::string_view name);

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
