// Printing rows of Parquet values as an aligned table, CSV, or JSON lines, the way `stoke cat` and
// `stoke query` show them. Binary and tensor cells print as "md5:<hex> len:<bytes>" so any tool can
// compare values; floats print in their shortest round-trip form; JSON has no NaN or infinity, so
// those print as the strings "nan", "inf", "-inf"; invalid UTF-8 becomes U+FFFD in JSON.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "format/parquet_column.h"
#include "stoke/row_format.h"

namespace stoke {

// "md5:<32 hex digits> len:<n>".
std::string BinaryCell(std::string_view bytes);

// Collects rows, then prints them. Not thread-safe.
class RowPrinter {
 public:
  struct Column {
    std::string name;
    parquet::Type type = parquet::Type::kInt64;
    bool is_string = false;  // BYTE_ARRAY printed as text rather than md5
    // Dates and timestamps print in ISO-8601 and decimals exactly (strings in JSON, where a number
    // would lose digits); see format/logical_value.h.
    LogicalType logical = LogicalType::kNone;
    int32_t scale = 0;       // kDecimal
    bool nested = false;     // BYTE_ARRAY holding JSON text (a struct, array or map): as JSON in JSON output
  };
  RowPrinter(std::vector<Column> columns, RowFormat format) : columns_(std::move(columns)), format_(format) {}

  // Appends the cell text of value `index` of `values` (a present value) or null.
  static std::string CellText(const Column& column, const ValueVector& values, size_t index);
  // Adds one row: one cell per column, nullopt for null.
  void AddRow(std::vector<std::optional<std::string>> cells) { rows_.push_back(std::move(cells)); }
  size_t rows() const { return rows_.size(); }
  // Prints everything added (table format ends with a "(N rows)" line, `footer` appended to it).
  void Print(std::ostream& out, const std::string& footer = "") const;

 private:
  bool IsText(size_t c) const;
  std::vector<Column> columns_;
  RowFormat format_;
  std::vector<std::vector<std::optional<std::string>>> rows_;
};

}  // namespace stoke
