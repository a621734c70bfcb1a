// The rules every row a writer adds to a table must keep (PROTOCOL.md, "Column Invariants" and "CHECK
// Constraints"): each column invariant (a top-level field's `delta.invariants` metadata,
// {"expression": {"expression": "<SQL>"}}) and each CHECK constraint (`delta.constraints.<name>` in
// the table's configuration) must evaluate to TRUE for the row; FALSE or NULL is a violation, and
// the write must fail leaving the table as it was.
//
// The SQL expressions are evaluated in stoke's predicate language (table/predicate.h), with Spark's
// `backquoted` names read as "quoted" ones. An expression that language does not express (a
// function call, arithmetic, a comparison of two columns, a partition column, a nested field), or
// whose text Spark reads otherwise (a "double-quoted" string, a backslash escape, adjacent
// literals), cannot be checked: the table then refuses new rows, naming the constraint, before
// anything is written. Two differences remain: a NaN makes a comparison unknown here (a violation),
// where Spark orders NaN above every number; a TIMESTAMP literal without a zone is UTC here, in the
// session's time zone in Spark.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/storage.h"
#include "table/delta_log.h"
#include "table/predicate.h"

namespace stoke {

class RowConstraints {
 public:
  // The constraints of the table whose metadata is `metadata`, for rows of the columns `columns`
  // written partitioned by `partition_columns` (which are not in the data files), each parsed and
  // bound. Unsupported naming `command`, `table`, the constraint and why, for one that cannot be
  // checked; Corruption for a malformed invariant.
  static Result<RowConstraints> FromMetadata(const delta::Metadata& metadata, const std::vector<ColumnSpec>& columns,
                                             const std::vector<std::string>& partition_columns,
                                             std::string_view command, std::string_view table);

  bool empty() const { return rules_.empty(); }
  size_t size() const { return rules_.size(); }

  // OK when every row of the data file at `path` (written with the table's column names, or their
  // physical names under column mapping, the partition columns left out) keeps every constraint. Otherwise InvalidArgument naming the first
  // violating row: its index in the file, its `file` (and `index`) values when the table has those
  // columns (stoke's ingest: the source file), the constraint and its expression.
  Status CheckFile(Storage& storage, const std::string& path) const;

 private:
  struct Rule {
    std::string name;        // "CHECK constraint 'label_ok'" or "invariant of column 'x'"
    std::string expression;  // as the table states it
    Predicate predicate;     // bound to the table's columns
  };
  std::vector<Rule> rules_;
  std::map<std::string, std::string> file_names_;  // a column's name in data files, where not its own (column mapping)
};

}  // namespace stoke
