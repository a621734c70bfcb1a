// libFuzzer target: a table's invariants and CHECK constraints (RowConstraints::FromMetadata), from
// the bytes of another writer's metadata. The input is a schemaString, then a NUL, then a constraint
// expression: they must give a bound set of rules or an error of the kinds the header names, never
// a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "table/row_constraints.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  stoke::delta::Metadata metadata;
  metadata.schema_string = std::string(input.substr(0, nul));
  if (nul != std::string_view::npos) metadata.configuration["delta.constraints.c"] = std::string(input.substr(nul + 1));
  metadata.partition_columns = {"p"};
  std::vector<stoke::ColumnSpec> columns(3);
  columns[0].name = "x";
  columns[0].type = stoke::parquet::Type::kInt64;
  columns[1].name = "s";
  columns[1].type = stoke::parquet::Type::kByteArray;
  columns[1].is_string = true;
  columns[1].optional = true;
  columns[2].name = "p";
  columns[2].type = stoke::parquet::Type::kInt32;
  auto rules = stoke::RowConstraints::FromMetadata(metadata, columns, metadata.partition_columns, "ingest", "t");
  if (!rules.ok()) {
    const auto code = rules.status().code();
    if (code != stoke::StatusCode::kUnsupported && code != stoke::StatusCode::kCorruption) __builtin_trap();
  }
  return 0;
}
