// stoke/table.h: reading a table: rows matching a predicate, as columns (or printed), its versions
// and its description.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "example_support.h"
#include "stoke/table.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));
  STOKE_RETURN_IF_ERROR(example::Expect(stoke::IsTableDirectory(table), "a table"));

  // Rows as columns: scalars and tensors as little-endian bytes, strings as strings.
  stoke::QueryOptions query;
  query.table_dir = table;
  query.where = "label = 1 AND id < 32";  // files and row groups whose statistics exclude it are skipped
  query.select = {"id", "label", "volume"};
  STOKE_ASSIGN_OR_RETURN(stoke::QueryResult result, stoke::QueryTableColumns(query));
  const stoke::QueryColumn& label = result.columns[1];
  for (int64_t row = 0; row < result.report.rows; ++row) {
    int32_t value;
    std::memcpy(&value, label.data.data() + row * sizeof(value), sizeof(value));
    STOKE_RETURN_IF_ERROR(example::Expect(value == 1, "label 1 in every row"));
  }
  const int64_t volume_bytes = 8 * 8 * 4 * 2 * sizeof(float);
  STOKE_RETURN_IF_ERROR(example::Expect(
      static_cast<int64_t>(result.columns[2].data.size()) == result.report.rows * volume_bytes, "a volume per row"));

  // The versions, newest first, and a version's description (here as JSON).
  STOKE_ASSIGN_OR_RETURN(std::vector<stoke::TableVersion> history, stoke::TableHistory(table, /*limit=*/10));
  STOKE_RETURN_IF_ERROR(example::Expect(history.size() == 1 && history[0].operation == "WRITE", "one version"));
  stoke::InspectTableOptions inspect;
  inspect.version = 0;
  inspect.format = stoke::DescriptionFormat::kJson;
  STOKE_ASSIGN_OR_RETURN(std::string description, stoke::InspectTable(table, inspect));
  return example::Expect(description.find("\"rows\": 64") != std::string::npos, "64 rows at version 0");
}

int main() { return example::Run(Example); }
