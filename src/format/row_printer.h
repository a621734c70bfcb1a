// Parquet values as the text cells of rows (TextRows, stoke/row_format.h), the way `stoke cat` and
// `stoke query` show them, and those rows printed as an aligned table, CSV, or JSON lines. Binary
// and tensor cells become "md5:<hex> len:<bytes>" so any tool can compare values; floats their
// shortest round-trip form; JSON has no NaN or infinity, so those print as the strings "nan", "inf",
// "-inf"; invalid UTF-8 becomes U+FFFD in JSON.
#pragma once

#include <string>
#include <string_view>

#include "format/parquet_column.h"
#include "stoke/row_format.h"

namespace stoke {

// "md5:<32 hex digits> len:<n>".
std::string BinaryCell(std::string_view bytes);

// A column of Parquet values, as its cells print.
struct PrintedColumn {
  std::string name;
  parquet::Type type = parquet::Type::kInt64;
  bool is_string = false;  // BYTE_ARRAY printed as text rather than md5
  // Dates and timestamps print in ISO-8601 and decimals exactly (strings in JSON, where a number
  // would lose digits); see format/logical_value.h.
  LogicalType logical = LogicalType::kNone;
  int32_t scale = 0;       // kDecimal
  bool nested = false;     // BYTE_ARRAY holding JSON text (a struct, array or map): as JSON in JSON output
};

// The text of value `index` of `values` (a present value) of `column`.
std::string CellText(const PrintedColumn& column, const ValueVector& values, size_t index);
// The column as TextRows holds it: its name and the kind of its cells.
TextRows::Column TextColumnOf(const PrintedColumn& column);

}  // namespace stoke
