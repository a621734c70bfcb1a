// stoke/status.h: errors are values. A fallible call returns a Status or a Result<T>; check ok(), or
// pass the error on with STOKE_RETURN_IF_ERROR / STOKE_ASSIGN_OR_RETURN.
#include <cstdio>
#include <string>

#include "example_support.h"
#include "stoke/status.h"
#include "stoke/table.h"

// The number of rows of a table, or the error that kept us from counting them.
stoke::Result<int64_t> CountRows(const std::string& table_dir) {
  stoke::QueryOptions query;
  query.table_dir = table_dir;
  query.count_only = true;
  STOKE_ASSIGN_OR_RETURN(stoke::QueryResult result, stoke::QueryTableColumns(query));
  return result.report.rows;
}

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));
  STOKE_ASSIGN_OR_RETURN(int64_t rows, CountRows(table));
  STOKE_RETURN_IF_ERROR(example::Expect(rows == 64, "64 rows"));

  stoke::Result<int64_t> missing = CountRows(dir + "/no_such_table");
  // The code says what kind of error it is, the message what failed and where.
  STOKE_RETURN_IF_ERROR(example::Expect(!missing.ok(), "an error"));
  STOKE_RETURN_IF_ERROR(example::Expect(missing.status().code() == stoke::StatusCode::kNotFound, "NotFound"));
  std::printf("%s\n", missing.status().ToString().c_str());  // not found: no Delta table at '...'
  // missing.value() would print that and abort: check ok() first.
  return stoke::Status::OK();
}

int main() { return example::Run(Example); }
