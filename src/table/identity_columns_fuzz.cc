// libFuzzer target: a table's identity columns (IdentityColumns, FirstIdentityValue,
// WithHighWaterMark), from the bytes of another writer's schemaString. Every input gives the columns
// or Corruption; each column's next values lie on its step beyond its high-water mark, or are refused
// (Unsupported counting down, InvalidArgument on overflow); a mark set reads back. Never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "table/identity_columns.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  auto columns = stoke::delta::IdentityColumns(schema, "t");
  if (!columns.ok()) {
    if (columns.status().code() != stoke::StatusCode::kCorruption) __builtin_trap();
    return 0;
  }
  for (const auto& c : *columns) {
    const int64_t used = static_cast<int64_t>(size) - 1000;
    auto first = stoke::delta::FirstIdentityValue(c, used, 3, "t");
    if (first.ok()) {
      const __int128 offset = static_cast<__int128>(*first) - c.start;
      if (c.step <= 0 || offset < 0 || offset % c.step != 0 || *first <= used) __builtin_trap();
      if (c.high_water_mark && *first <= *c.high_water_mark) __builtin_trap();
    } else if (first.status().code() != stoke::StatusCode::kUnsupported &&
               first.status().code() != stoke::StatusCode::kInvalidArgument) {
      __builtin_trap();
    }
    const std::string marked = stoke::delta::WithHighWaterMark(schema, c.name, 42);
    auto again = stoke::delta::IdentityColumns(marked, "t");
    if (!again.ok()) __builtin_trap();
  }
  return 0;
}
