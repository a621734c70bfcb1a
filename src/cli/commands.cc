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

std::vector<std::string> ColumnList(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}


}  // namespace stoke::cli
