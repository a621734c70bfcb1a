// libFuzzer target: the labels CSV parser.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "format/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = stoke::ParseCsv(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.csv");
  if (t.ok()) {
    for (const auto& row : t->rows) {
      if (row.size() != t->header.size()) __builtin_trap();
    }
  }
  return 0;
}
