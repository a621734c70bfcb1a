// libFuzzer target: add-action statistics (the "stats" JSON of the Delta log) read by AddStatsReader.
// Beyond "no crash, no sanitizer report": the record count Read gives is NumRecords's, a text Read
// accepts is JSON that nlohmann::json accepts too (simdjson is the stricter of the two: it refuses
// integers beyond 64 bits), and a second read of the same text gives the same bounds.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "table/add_stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<stoke::ColumnSpec> columns = [] {
    std::vector<stoke::ColumnSpec> c(4);
    c[0].name = "id";
    c[1].name = "file";
    c[1].type = stoke::parquet::Type::kByteArray;
    c[1].is_string = true;
    c[2].name = "x";
    c[2].type = stoke::parquet::Type::kDouble;
    c[3].name = "ok";
    c[3].type = stoke::parquet::Type::kBoolean;
    return c;
  }();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  stoke::AddStatsReader reader(columns);
  std::vector<stoke::Predicate::ColumnStats> first, second;
  int64_t records = -2, again = -2;
  const bool ok = reader.Read(text, &first, &records);
  if (first.size() != columns.size() || records < -1) __builtin_trap();
  if (reader.NumRecords(text) != records) __builtin_trap();
  if (ok && nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded()) __builtin_trap();
  if (reader.Read(text, &second, &again) != ok || again != records) __builtin_trap();
  for (size_t c = 0; c < columns.size(); ++c) {
    if (!(first[c].min == second[c].min) || !(first[c].max == second[c].max) || first[c].null_count != second[c].null_count) {
      __builtin_trap();
    }
  }
  return 0;
}
