// stoke/row_format.h: the text forms of rows that QueryTable (and CatParquetFile) print.
#include <sstream>
#include <string>

#include "example_support.h"
#include "stoke/row_format.h"
#include "stoke/table.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));
  stoke::QueryOptions query;
  query.table_dir = table;
  query.select = {"id", "label"};
  query.where = "id < 3";

  query.format = stoke::RowFormat::kCsv;  // a header line, then one line per row
  std::ostringstream csv;
  STOKE_RETURN_IF_ERROR(stoke::QueryTable(query, csv));
  STOKE_RETURN_IF_ERROR(example::Expect(csv.str().rfind("id,label\n0,", 0) == 0, "CSV with a header"));

  query.format = stoke::RowFormat::kJson;  // one object per line
  std::ostringstream json;
  STOKE_ASSIGN_OR_RETURN(stoke::QueryReport report, stoke::QueryTable(query, json));
  STOKE_RETURN_IF_ERROR(example::Expect(report.rows == 3, "3 rows"));
  return example::Expect(json.str().rfind("{\"id\":0,\"label\":", 0) == 0, "JSON lines");
}

int main() { return example::Run(Example); }
