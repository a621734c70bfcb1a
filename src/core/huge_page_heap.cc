#include "core/huge_page_heap.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/log.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STOKE_HEAP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define STOKE_HEAP_SANITIZED 1
#endif
#endif

namespace stoke {

namespace {

constexpr char kTunablesEnv[] = "GLIBC_TUNABLES";
// Set for the program started again: "-" when GLIBC_TUNABLES was unset, else "=" and its value.
constexpr char kReexecMarker[] = "STOKE_HUGE_PAGE_HEAP_REEXEC";

std::string ReadThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Puts GLIBC_TUNABLES back as `saved` (a marker's value) says and drops the marker.
void RestoreEnvironment(const std::string& saved) {
  if (!saved.empty() && saved[0] == '=') {
    ::setenv(kTunablesEnv, saved.c_str() + 1, 1);
  } else {
    ::unsetenv(kTunablesEnv);
  }
  ::unsetenv(kReexecMarker);
}

}  // namespace

std::optional<std::string> HugePageHeapTunables(const char* current_tunables, std::string_view thp_enabled,
                                                const char* opt_out) {
  if (opt_out != nullptr && std::string_view(opt_out) == "0") return std::nullopt;
  // The selected mode is the bracketed one; with "never" an advice changes nothing.
  if (thp_enabled.find("[always]") == std::string_view::npos && thp_enabled.find("[madvise]") == std::string_view::npos) {
    return std::nullopt;
  }
  const std::string_view current = current_tunables != nullptr ? current_tunables : "";
  if (current.find("glibc.malloc.hugetlb") != std::string_view::npos ||
      current.find("glibc.malloc.top_pad") != std::string_view::npos) {
    return std::nullopt;
  }
  std::string out(current);
  if (!out.empty()) out += ':';
  out += fmt::format("glibc.malloc.hugetlb=1:glibc.malloc.top_pad={}", kHugePageHeapTopPad);
  return out;
}

void ReexecWithHugePageHeap(char** argv) {
  if (const char* marker = ::getenv(kReexecMarker)) {
    const std::string saved = marker;
    RestoreEnvironment(saved);
    const char* restored = ::getenv(kTunablesEnv);
    STOKE_LOG(kDebug, "heap.huge_pages", "hugetlb=1 top_pad={} caller_tunables=\"{}\"", kHugePageHeapTopPad,
              restored != nullptr ? restored : "(unset)");
    return;
  }
#ifdef STOKE_HEAP_SANITIZED
  (void)argv;
  return;
#else
  const char* current = ::getenv(kTunablesEnv);
  const std::string saved = current != nullptr ? std::string("=") + current : std::string("-");
  std::optional<std::string> tunables = HugePageHeapTunables(current, ReadThpMode(), ::getenv(kHugePageHeapEnv));
  if (!tunables) return;
  ::setenv(kReexecMarker, saved.c_str(), 1);
  ::setenv(kTunablesEnv, tunables->c_str(), 1);
  ::execv("/proc/self/exe", argv);
  const int error = errno;  // still here: go on as started
  RestoreEnvironment(saved);
  STOKE_LOG(kDebug, "heap.reexec_failed", "error=\"{}\"", std::strerror(error));
#endif
}

}  // namespace stoke
