// The predicate language of `stoke query DIR --where "..."`: a small, strict SQL-like boolean expression
// over a table's scalar columns, evaluated with SQL's three-valued logic.
//
//   expr      := and_expr (OR and_expr)*
//   and_expr  := not_expr (AND not_expr)*
//   not_expr  := NOT not_expr | '(' expr ')' | predicate
//   predicate := operand cmp_op operand               -- exactly one side a column: `x < 5`, `5 > x`
//              | column [NOT] IN '(' literal (',' literal)* ')'
//              | column [NOT] BETWEEN literal AND literal
//              | column IS [NOT] NULL
//   cmp_op    := '=' | '!=' | '<>' | '<' | '<=' | '>' | '>='
//   operand   := column | literal
//   column    := [A-Za-z_][A-Za-z0-9_.]* (not a keyword) | '"' any bytes, '""' for a quote '"'
//   literal   := -?[0-9]+ (int64) | -?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)? (finite double)
//              | '\'' any bytes, '\'\'' for a quote '\'' | TRUE | FALSE | NULL
//              | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][Z|+hh:mm]'
//
// Dates, timestamps and decimals (Delta's date, timestamp, timestamp_ntz and decimal(p,s)): a date
// column compares with DATE literals and date strings, a timestamp column with TIMESTAMP or DATE
// literals and timestamp strings (without a zone, read as UTC), a decimal column with numbers,
// exactly at the column's scale (`price = 12.50` on decimal(10,2); decimals of more than 18 digits
// are not comparable yet). DATE and TIMESTAMP are keywords only before a string: elsewhere they
// are column names.
//
// Keywords (AND OR NOT IN IS NULL BETWEEN TRUE FALSE) are case-insensitive; column names are not.
// Semantics follow SQL: a comparison with NULL (a null row or a NULL literal) is NULL (unknown); NOT
// NULL is NULL; FALSE AND NULL is FALSE; TRUE OR NULL is TRUE; `x IN (1, NULL)` is TRUE for x = 1 and
// NULL otherwise; `x BETWEEN a AND b` is `x >= a AND x <= b`. WHERE keeps the rows where the predicate
// is TRUE. A floating-point NaN compares as unknown (like NULL) with every literal, so that statistics
// which leave NaN out of min/max (as Parquet's do) stay sound for skipping.
//
// Comparisons: integer and real compare by exact value (an INT64 column against an integer literal
// never goes through double); strings compare bytewise as unsigned bytes, as Parquet statistics do;
// FALSE < TRUE.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "format/parquet_column.h"
#include "stoke/status.h"

namespace stoke {

// A literal of the predicate language or a statistics value. monostate is SQL NULL.
struct Value {
  std::variant<std::monostate, bool, int64_t, double, std::string> v;
  bool operator==(const Value&) const = default;
};

struct PredicateNode;  // private to predicate.cc

// A parsed --where predicate. Immutable after Parse and Bind; Evaluate, MayMatch and ToString may be
// called concurrently from any number of threads. Copies share the parsed tree.
class Predicate {
 public:
  // Input longer than this is rejected: it is user input and the parser allocates per token.
  static constexpr size_t kMaxTextBytes = 64 * 1024;
  // The parsed tree may be at most this deep (a leaf is depth 1), and parentheses plus NOTs may nest
  // at most 2 * kMaxDepth deep in the text (room for the canonical form's extra parentheses): the
  // parser, the evaluator and ToString recurse. `a AND b AND c ...` is one node, not a chain.
  static constexpr int kMaxDepth = 100;

  // Parses `text`. Errors: InvalidArgument "--where: offset N: expected X, found Y" for malformed
  // input, over-long input (or an over-long canonical form, so that Parse(ToString()) always succeeds)
  // or over-deep nesting; Unsupported (with the offset) for well-formed but
  // unsupported comparisons: column against column, literal against literal, a literal before IN,
  // BETWEEN or IS.
  static Result<Predicate> Parse(std::string_view text);

  // Column names referenced, sorted, unique.
  const std::vector<std::string>& columns() const { return columns_; }

  // Checks every referenced column exists in `schema` with a type comparable with the literals it
  // meets: integer/real literals with INT32, INT64, FLOAT, DOUBLE; string literals with BYTE_ARRAY
  // annotated STRING; TRUE/FALSE with BOOLEAN; NULL with any scalar column. Tensor and other binary
  // columns are not comparable (IS [NOT] NULL, not a comparison, accepts any column). Errors are
  // InvalidArgument naming the column (and, for an unknown one, listing the schema's columns).
  Status Bind(const std::vector<ColumnSpec>& schema);

  // Row filter over decoded columns: `columns` maps name -> values (see format/parquet_column.h).
  // Resizes *keep to num_rows and sets (*keep)[i] to 1 where the predicate is TRUE for row i, else 0.
  // REQUIRES: Bind succeeded (else Internal). A missing or null column, or one whose row count is not
  // num_rows or whose `defined` disagrees with its value count, is InvalidArgument.
  Status Evaluate(const std::map<std::string, const ColumnValues*>& columns, size_t num_rows,
                  std::vector<uint8_t>* keep) const;

  // Statistics of one column over a file or row group. min/max bound the non-null, non-NaN values;
  // absent when unknown. null_count absent when unknown.
  struct ColumnStats {
    std::optional<Value> min, max;
    std::optional<int64_t> null_count;
  };
  // Returns false only when no row of a file or row group with these statistics and `num_rows` rows
  // (negative: unknown) can make the predicate TRUE, so the caller may skip it. Conservative: a column
  // missing from `stats`, or stats of a type that does not compare with the literal, count as unknown.
  bool MayMatch(const std::map<std::string, ColumnStats>& stats, int64_t num_rows) const;
  // Returns true only when every one of `num_rows` rows (known, >= 0) with these statistics makes
  // the predicate TRUE, so the caller may count them without reading them. Conservative like
  // MayMatch, and false before a successful Bind: a FLOAT or DOUBLE column may hold NaN, which its
  // statistics do not show, so a comparison on one never decides it.
  bool MustMatch(const std::map<std::string, ColumnStats>& stats, int64_t num_rows) const;

  // Canonical, fully parenthesised form: `((x < 5) AND (NOT ("my col" IN (1, 2))))`
  // (a column is double-quoted when it is a keyword or not a plain identifier). Parse(ToString())
  // gives the same tree (and so the same ToString). `<>` prints as `!=`; `5 > x` as `(x < 5)`;
  // `x NOT IN (..)`, `x NOT BETWEEN ..` and `x IS NOT NULL` print as NOT of the positive form.
  std::string ToString() const;

 private:
  Predicate(std::shared_ptr<const PredicateNode> root, std::vector<std::string> columns)
      : root_(std::move(root)), columns_(std::move(columns)) {}

  std::shared_ptr<const PredicateNode> root_;  // never null: as parsed (ToString prints it)
  // After a successful Bind: root_ with each literal in its column's canonical form (a date's days,
  // a timestamp's microseconds, a decimal's unscaled value), which Evaluate and the skipping use.
  std::shared_ptr<const PredicateNode> bound_root_;
  std::vector<std::string> columns_;
  bool bound_ = false;  // set by a successful Bind
  std::vector<std::string> nan_columns_;  // referenced FLOAT/DOUBLE columns, sorted (set by Bind)
};

}  // namespace stoke
