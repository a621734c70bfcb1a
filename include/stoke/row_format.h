// Rows as text: what `stoke query` (QueryTableRows, table.h) and `stoke cat` (CatParquetRows,
// tools.h) return, and the forms they print in (RowsText); how many rows a listing may hold; how a
// description (`stoke inspect`: InspectTable, InspectParquetFile) is written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/status.h"

namespace stoke {

// The form of a description.
enum class DescriptionFormat {
  kText,  // aligned lines for a reader
  kJson,  // one JSON document
};

// "text" or "json".
std::string_view DescriptionFormatName(DescriptionFormat format);
// The format of that name; InvalidArgument "description format: unknown value ..." otherwise.
Result<DescriptionFormat> ParseDescriptionFormat(std::string_view name);

// The one "no limit" of every `limit` (QueryOptions, CatOptions, TableHistory): a limit of 0 asks
// for nothing, and a negative limit other than this is an error.
inline constexpr int64_t kNoLimit = -1;

// A text form for rows. Binary and tensor cells print as "md5:<hex> len:<bytes>" in every format.
enum class RowFormat {
  kTable,  // aligned columns under a header, then a "(N rows)" line
  kCsv,    // RFC 4180 CSV with a header line
  kJson,   // one JSON object per row and line
};

// "table", "csv" or "json".
std::string_view RowFormatName(RowFormat format);
// The format of that name; InvalidArgument "format: unknown value ..." otherwise.
Result<RowFormat> ParseRowFormat(std::string_view name);

// What a column's cell texts are, which decides how each form prints them.
enum class CellKind {
  kInteger,  // decimal digits (JSON: a number; table: right-aligned)
  kFloat,    // the shortest text that reads back as the same value, or "nan", "inf", "-inf"
             // (JSON: a number, those three as strings; table: right-aligned)
  kBoolean,  // "true" or "false" (JSON: a boolean)
  kText,     // strings, binary cells ("md5:<hex> len:<bytes>"), dates and timestamps in ISO-8601,
             // decimals exactly (JSON: a string; table: left-aligned)
  kJson,     // a struct, list or map as JSON text (JSON: that value)
};

// "integer", "float", "boolean", "text" or "json".
std::string_view CellKindName(CellKind kind);
// The kind of that name; InvalidArgument "cell kind: unknown value ..." otherwise.
Result<CellKind> ParseCellKind(std::string_view name);

// Rows of named columns, every cell as text.
struct TextRows {
  // One column: its name and what its cells are.
  struct Column {
    std::string name;                 // the column's name
    CellKind kind = CellKind::kText;  // what its cells are
  };
  // The columns, in order.
  std::vector<Column> columns;
  // One cell per column in each row, nullopt for a null.
  std::vector<std::vector<std::optional<std::string>>> rows;
};

// `rows` in `format` (see RowFormat), as `stoke query` and `stoke cat` print them. `footer` is added
// to the table form's last line inside its brackets: "(3 rows" + footer + ")"; the other forms
// ignore it. Invalid UTF-8 becomes U+FFFD in JSON.
std::string RowsText(const TextRows& rows, RowFormat format, std::string_view footer = {});

}  // namespace stoke
