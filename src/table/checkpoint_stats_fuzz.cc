// libFuzzer target: typed checkpoint statistics (TypedStats::AddTo, TypedStatValue) from the bytes of
// another writer's add: its stats JSON and a partition value. Every input gives a stats_parsed whose
// values have their leaves' JSON types (or null), never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <climits>
#include <string>
#include <string_view>

#include "table/checkpoint_stats.h"

namespace {

const stoke::delta::TypedStats& Stats() {
  static const stoke::delta::TypedStats stats = [] {
    stoke::delta::Snapshot s;
    s.metadata.schema_string = R"j({"type":"struct","fields":[
      {"name":"i","type":"integer","nullable":true,"metadata":{}},{"name":"l","type":"long","nullable":true,"metadata":{}},
      {"name":"d","type":"double","nullable":true,"metadata":{}},{"name":"s","type":"string","nullable":true,"metadata":{}},
      {"name":"t","type":"timestamp","nullable":true,"metadata":{}},{"name":"day","type":"date","nullable":true,"metadata":{}},
      {"name":"m","type":"decimal(10,2)","nullable":true,"metadata":{}},{"name":"b","type":"boolean","nullable":true,"metadata":{}},
      {"name":"p","type":"date","nullable":true,"metadata":{}}]})j";
    s.metadata.partition_columns = {"p"};
    s.metadata.configuration["delta.checkpoint.writeStatsAsStruct"] = "true";
    return **stoke::delta::TypedStats::For(s, "fuzz");
  }();
  return stats;
}

bool IsLeafValue(const nlohmann::json& v) { return v.is_null() || v.is_number() || v.is_string() || v.is_boolean(); }

// An INT32 leaf's value (columns i, day and p) fits in 32 bits; every integer in 64. A nullCount
// leaf is a long whatever its column's type (TypedStats::AddTo), so it is held to 64 bits only.
bool FitsItsLeaf(std::string_view group, const std::string& name, const nlohmann::json& v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return false;
  if (group != "nullCount" && (name == "i" || name == "day" || name == "p") && v.is_number_integer()) {
    return v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  stoke::delta::AddFile add;
  add.path = "a.parquet";
  const size_t nul = input.find('\0');
  add.stats = std::string(input.substr(0, nul));
  if (nul != std::string_view::npos) add.partition_values["p"] = std::string(input.substr(nul + 1));
  nlohmann::json row = nlohmann::json::object();
  Stats().AddTo(add, &row);
  if (row.contains("stats_parsed")) {
    for (const char* group : {"minValues", "maxValues", "nullCount"}) {
      if (!row["stats_parsed"].contains(group)) continue;
      for (const auto& [name, v] : row["stats_parsed"][group].items()) {
        if (!IsLeafValue(v) || !FitsItsLeaf(group, name, v)) __builtin_trap();
      }
    }
  }
  const auto& p = row["partitionValues_parsed"]["p"];
  if (!IsLeafValue(p) || !FitsItsLeaf("partitionValues", "p", p)) __builtin_trap();
  return 0;
}
