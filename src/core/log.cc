#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "core/mutex.h"

namespace stoke {
namespace {

LogLevel LevelFromEnvironment() {
  const char* v = std::getenv("STOKE_LOG_LEVEL");
  if (v == nullptr) return LogLevel::kWarn;
  if (std::strcmp(v, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(v, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(v, "error") == 0) return LogLevel::kError;
  return LogLevel::kWarn;
}

std::atomic<int>& Level() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnvironment())};
  return level;
}

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void SetLogLevel(LogLevel level) { Level().store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(Level().load()); }
bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= Level().load(std::memory_order_relaxed); }

void LogLine(LogLevel level, std::string_view event, std::string_view fields) {
  static Mutex mu;  // keeps lines from interleaving
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  MutexLock lock(&mu);
  std::fprintf(stderr, "%s.%03dZ %s %.*s %.*s\n", ts, static_cast<int>(ms), LevelName(level),
               static_cast<int>(event.size()), event.data(), static_cast<int>(fields.size()), fields.data());
}

}  // namespace stoke
