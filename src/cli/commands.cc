// See commands.h.
#include "cli/commands.h"

#include <fmt/format.h>

#include <cstdio>

namespace stoke::cli {
namespace {

constexpr int kExitError = 1;

}  // namespace

int Fail(const Status& s) {
  std::fprintf(stderr, "stoke: error: %s\n", s.ToString().c_str());
  return kExitError;
}

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

}  // namespace stoke::cli
