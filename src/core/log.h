// Structured logging to stderr: one line per event, "time level event key=value ...".
// The level comes from STOKE_LOG_LEVEL (debug, info, warn, error; default warn) and can be set in code.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace stoke {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Thread-safe.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);
// Writes one line; `fields` is already formatted as "key=value key=value".
void LogLine(LogLevel level, std::string_view event, std::string_view fields);

// Usage: STOKE_LOG(kInfo, "convert.file_done", "path={} rows={}", path, rows);
#define STOKE_LOG(level, event, ...)                                                        \
  do {                                                                                      \
    if (::stoke::LogEnabled(::stoke::LogLevel::level))                                      \
      ::stoke::LogLine(::stoke::LogLevel::level, event, ::fmt::format(__VA_ARGS__));        \
  } while (false)

}  // namespace stoke
