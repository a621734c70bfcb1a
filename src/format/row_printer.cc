#include "format/row_printer.h"

#include <fmt/format.h>
#include <md5.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

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

std::string RowPrinter::CellText(const Column& column, const ValueVector& values, size_t index) {
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

bool RowPrinter::IsText(size_t c) const {
  const LogicalType l = columns_[c].logical;
  if (l == LogicalType::kDate || l == LogicalType::kTimestamp || l == LogicalType::kTimestampNtz ||
      l == LogicalType::kDecimal) {
    return true;
  }
  Type t = columns_[c].type;
  return t == Type::kByteArray || t == Type::kFixedLenByteArray || t == Type::kInt96;
}

void RowPrinter::Print(std::ostream& out, const std::string& footer) const {
  switch (format_) {
    case RowFormat::kJson:
      for (const auto& row : rows_) {
        nlohmann::ordered_json j = nlohmann::ordered_json::object();
        for (size_t c = 0; c < columns_.size(); ++c) {
          const auto& cell = row[c];
          const Column& col = columns_[c];
          if (!cell) {
            j[col.name] = nullptr;
          } else if (col.nested) {
            j[col.name] = nlohmann::ordered_json::parse(*cell, nullptr, false);  // stoke's own JSON text
          } else if (IsText(c) || *cell == "nan" || *cell == "inf" || *cell == "-inf") {
            j[col.name] = *cell;
          } else if (col.type == Type::kBoolean) {
            j[col.name] = *cell == "true";
          } else if (col.type == Type::kFloat || col.type == Type::kDouble) {
            j[col.name] = std::strtod(cell->c_str(), nullptr);  // keeps -0.0
          } else {
            j[col.name] = std::strtoll(cell->c_str(), nullptr, 10);
          }
        }
        out << j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
      }
      break;
    case RowFormat::kCsv: {
      auto quote = [](const std::string& v) {
        if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
        std::string q = "\"";
        for (char ch : v) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
        return q + "\"";
      };
      for (size_t c = 0; c < columns_.size(); ++c) out << (c ? "," : "") << quote(columns_[c].name);
      out << "\n";
      for (const auto& row : rows_) {
        for (size_t c = 0; c < columns_.size(); ++c) out << (c ? "," : "") << quote(row[c].value_or(""));
        out << "\n";
      }
      break;
    }
    case RowFormat::kTable: {
      std::vector<size_t> width(columns_.size());
      for (size_t c = 0; c < columns_.size(); ++c) {
        width[c] = columns_[c].name.size();
        for (const auto& row : rows_) width[c] = std::max(width[c], row[c] ? row[c]->size() : 4);
      }
      for (size_t c = 0; c < columns_.size(); ++c) out << (c ? "  " : "") << fmt::format("{:<{}}", columns_[c].name, width[c]);
      out << "\n";
      for (const auto& row : rows_) {
        for (size_t c = 0; c < columns_.size(); ++c) {
          out << (c ? "  " : "") << fmt::format(fmt::runtime(IsText(c) ? "{:<{}}" : "{:>{}}"), row[c].value_or("null"), width[c]);
        }
        out << "\n";
      }
      out << fmt::format("({} row{}{})\n", rows_.size(), rows_.size() == 1 ? "" : "s", footer);
      break;
    }
  }
}

}  // namespace stoke
