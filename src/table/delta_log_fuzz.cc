// Fuzzes the Delta log's parsers: commit files, Spark schemas (also under column mapping) and
// add/remove paths. Beyond "no crash, no exception, no sanitizer report", it checks two properties:
// - SerializeCommit(ParseCommit(x)) is a fixed point: parsing it again gives the same bytes;
// - EncodePath(DecodePath(x)) decodes back to DecodePath(x).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "table/column_mapping.h"
#include "table/delta_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  auto actions = stoke::delta::ParseCommit(input, "fuzz.json");
  if (actions.ok()) {
    std::string once = stoke::delta::SerializeCommit(*actions);
    auto again = stoke::delta::ParseCommit(once, "fuzz-reserialized.json");
    if (!again.ok()) std::abort();
    if (stoke::delta::SerializeCommit(*again) != once) std::abort();
  }

  std::map<std::string, stoke::TensorSpec> tensors{{"volume", stoke::TensorSpec{stoke::DType::kFloat32, {2, 3}}}};
  (void)stoke::delta::SchemaFromSparkJson(input, {});
  auto columns = stoke::delta::SchemaFromSparkJson(input, tensors);
  if (columns.ok()) {
    auto back = stoke::delta::SchemaFromSparkJson(stoke::delta::SchemaToSparkJson(*columns), tensors);
    if (!back.ok() || back->size() != columns->size()) std::abort();
  }

  // The same schema under column mapping: the readers' names, and the writers' for a new column.
  stoke::delta::Snapshot mapped;
  mapped.protocol = stoke::delta::Protocol{2, 5, {}, {}};
  mapped.metadata.schema_string = std::string(input);
  mapped.metadata.configuration = {{"delta.columnMapping.mode", "name"},
                                   {"stoke.tensors", R"({"col-v":{"dtype":"float32","shape":[2]}})"}};
  std::vector<stoke::ColumnSpec> written = {{.name = "volume"}, {.name = "new"}};
  if (stoke::delta::MapColumns(mapped, &written, "fuzz").ok() &&
      (written[1].physical_name.empty() || !written[1].field_id)) {
    std::abort();
  }
  (void)stoke::delta::ColumnsFromSnapshot(mapped, "fuzz");

  auto path = stoke::delta::DecodePath(input);
  if (path.ok()) {
    auto back = stoke::delta::DecodePath(stoke::delta::EncodePath(*path));
    if (!back.ok() || *back != *path) std::abort();
  }
  return 0;
}
