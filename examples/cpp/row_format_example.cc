// stoke/row_format.h: rows as text cells (TextRows), and the forms `stoke query` and `stoke cat`
// print them in.
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
  STOKE_ASSIGN_OR_RETURN(stoke::QueryRows result, stoke::QueryTableRows(query));
  const stoke::TextRows& rows = result.rows;
  STOKE_RETURN_IF_ERROR(example::Expect(rows.rows.size() == 3 && rows.rows[0][0] == "0", "3 rows, as text"));
  STOKE_RETURN_IF_ERROR(example::Expect(rows.columns[0].kind == stoke::CellKind::kInteger, "id is an integer"));

  STOKE_ASSIGN_OR_RETURN(stoke::RowFormat csv, stoke::ParseRowFormat("csv"));  // as --format csv
  const std::string text = stoke::RowsText(rows, csv);
  STOKE_RETURN_IF_ERROR(example::Expect(text.rfind("id,label\n0,", 0) == 0, "CSV with a header"));
  const std::string json = stoke::RowsText(rows, stoke::RowFormat::kJson);  // one object per line
  STOKE_RETURN_IF_ERROR(example::Expect(json.rfind("{\"id\":0,\"label\":", 0) == 0, "JSON lines"));
  const std::string printed = stoke::QueryRowsText(result, stoke::RowFormat::kTable);  // as `stoke query`
  return example::Expect(printed.find("(3 rows; scanned") != std::string::npos, "a table, then what was scanned");
}

int main() { return example::Run(Example); }
