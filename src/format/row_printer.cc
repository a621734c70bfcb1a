#include "format/row_printer.h"

#include <fmt/format.h>
#include <md5.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>
#include <nlohmann/json.hpp>

#include "core/enum_names.h"
#include "format/logical_value.h"

namespace stoke {
namespace {

using parquet::Type;

// The shortest text that reads back as the same value of its own type (float or double).
template <typename T>
std::string FormatFloat(T d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  return fmt::format("{}", d);
}

}  // namespace

std::string BinaryCell(std::string_view bytes) {
  MD5_CTX ctx;
  MD5Init(&ctx);
  MD5Update(&ctx, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  uint8_t digest[MD5_DIGEST_LENGTH];
  MD5Final(digest, &ctx);
  std::string hex;
  for (uint8_t b : digest) hex += fmt::format("{:02x}", b);
  return fmt::format("md5:{} len:{}", hex, bytes.size());
}

std::string CellText(const PrintedColumn& column, const ValueVector& values, size_t index) {
  switch (column.logical) {
    case LogicalType::kDate: return FormatDate(std::get<std::vector<int32_t>>(values)[index]);
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz:
      return FormatTimestamp(std::get<std::vector<int64_t>>(values)[index], column.logical == LogicalType::kTimestamp);
    case LogicalType::kDecimal: return FormatDecimal(DecimalAt(values, index), column.scale);
    default: break;
  }
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          return column.is_string || column.nested ? v[index] : BinaryCell(v[index]);
        } else if constexpr (std::is_same_v<T, uint8_t>) {
          return v[index] ? "true" : "false";
        } else if constexpr (std::is_floating_point_v<T>) {
          return FormatFloat(v[index]);
        } else {
          return fmt::format("{}", v[index]);
        }
      },
      values);
}

TextRows::Column TextColumnOf(const PrintedColumn& column) {
  TextRows::Column c{column.name, CellKind::kText};
  const LogicalType l = column.logical;
  if (column.nested) {
    c.kind = CellKind::kJson;
  } else if (l == LogicalType::kDate || l == LogicalType::kTimestamp || l == LogicalType::kTimestampNtz ||
             l == LogicalType::kDecimal || column.type == Type::kByteArray || column.type == Type::kFixedLenByteArray ||
             column.type == Type::kInt96) {
    c.kind = CellKind::kText;
  } else if (column.type == Type::kBoolean) {
    c.kind = CellKind::kBoolean;
  } else if (column.type == Type::kFloat || column.type == Type::kDouble) {
    c.kind = CellKind::kFloat;
  } else {
    c.kind = CellKind::kInteger;
  }
  return c;
}

namespace {

constexpr EnumNames<RowFormat, 3> kRowFormats{
    {{"table", RowFormat::kTable}, {"csv", RowFormat::kCsv}, {"json", RowFormat::kJson}}};
constexpr EnumNames<DescriptionFormat, 2> kDescriptionFormats{
    {{"text", DescriptionFormat::kText}, {"json", DescriptionFormat::kJson}}};
constexpr EnumNames<CellKind, 5> kCellKinds{{{"integer", CellKind::kInteger},
                                             {"float", CellKind::kFloat},
                                             {"boolean", CellKind::kBoolean},
                                             {"text", CellKind::kText},
                                             {"json", CellKind::kJson}}};

}  // namespace

std::string_view RowFormatName(RowFormat format) { return NameIn(kRowFormats, format); }
Result<RowFormat> ParseRowFormat(std::string_view name) { return ParseIn(kRowFormats, "format", name); }
std::string_view DescriptionFormatName(DescriptionFormat format) { return NameIn(kDescriptionFormats, format); }
Result<DescriptionFormat> ParseDescriptionFormat(std::string_view name) {
  return ParseIn(kDescriptionFormats, "description format", name);
}
std::string_view CellKindName(CellKind kind) { return NameIn(kCellKinds, kind); }
Result<CellKind> ParseCellKind(std::string_view name) { return ParseIn(kCellKinds, "cell kind", name); }

namespace {

// One JSON object per row and line.
void JsonLines(const TextRows& rows, std::string* out) {
  for (const auto& row : rows.rows) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (size_t c = 0; c < rows.columns.size(); ++c) {
      const auto& cell = row[c];
      const TextRows::Column& col = rows.columns[c];
      if (!cell) {
        j[col.name] = nullptr;
      } else if (col.kind == CellKind::kJson) {
        j[col.name] = nlohmann::ordered_json::parse(*cell, nullptr, false);  // stoke's own JSON text
      } else if (col.kind == CellKind::kText || *cell == "nan" || *cell == "inf" || *cell == "-inf") {
        j[col.name] = *cell;
      } else if (col.kind == CellKind::kBoolean) {
        j[col.name] = *cell == "true";
      } else if (col.kind == CellKind::kFloat) {
        j[col.name] = std::strtod(cell->c_str(), nullptr);  // keeps -0.0
      } else {
        j[col.name] = std::strtoll(cell->c_str(), nullptr, 10);
      }
    }
    *out += j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    *out += "\n";
  }
}

// RFC 4180 CSV with a header line.
void Csv(const TextRows& rows, std::string* out) {
  auto quote = [out](const std::string& v) {
    if (v.find_first_of(",\"\n\r") == std::string::npos) {
      *out += v;
      return;
    }
    *out += '"';
    for (char ch : v) *out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    *out += '"';
  };
  for (size_t c = 0; c < rows.columns.size(); ++c) {
    if (c) *out += ',';
    quote(rows.columns[c].name);
  }
  *out += "\n";
  for (const auto& row : rows.rows) {
    for (size_t c = 0; c < rows.columns.size(); ++c) {
      if (c) *out += ',';
      quote(row[c].value_or(""));
    }
    *out += "\n";
  }
}

// Aligned columns under a header (text left, numbers right), then "(N rows<footer>)".
void Table(const TextRows& rows, std::string_view footer, std::string* out) {
  const auto& columns = rows.columns;
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) {
    width[c] = columns[c].name.size();
    for (const auto& row : rows.rows) width[c] = std::max(width[c], row[c] ? row[c]->size() : 4);
  }
  for (size_t c = 0; c < columns.size(); ++c) *out += fmt::format("{}{:<{}}", c ? "  " : "", columns[c].name, width[c]);
  *out += "\n";
  for (const auto& row : rows.rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      const bool left = columns[c].kind == CellKind::kText || columns[c].kind == CellKind::kJson;
      *out += c ? "  " : "";
      *out += fmt::format(fmt::runtime(left ? "{:<{}}" : "{:>{}}"), row[c].value_or("null"), width[c]);
    }
    *out += "\n";
  }
  const size_t n = rows.rows.size();
  *out += fmt::format("({} row{}{})\n", n, n == 1 ? "" : "s", footer);
}

}  // namespace

std::string RowsText(const TextRows& rows, RowFormat format, std::string_view footer) {
  std::string out;
  switch (format) {
    case RowFormat::kJson: JsonLines(rows, &out); break;
    case RowFormat::kCsv: Csv(rows, &out); break;
    case RowFormat::kTable: Table(rows, footer, &out); break;
  }
  return out;
}

}  // namespace stoke
