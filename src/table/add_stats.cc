#include "table/add_stats.h"

#include <simdjson.h>

#include <cmath>
#include <string>
#include <unordered_map>

#include "format/logical_value.h"

namespace stoke {
namespace {

namespace dom = simdjson::dom;

// Delta writers truncate string statistics (Spark to 32 characters): a truncated minimum is still a
// lower bound, but a truncated maximum is below the true one. String maxima that long are dropped.
constexpr size_t kStringStatTruncation = 32;

// A non-negative int64 count, else -1.
int64_t Count(dom::element v) {
  int64_t n = 0;
  if (v.get_int64().get(n) != simdjson::SUCCESS || n < 0) return -1;
  return n;
}

// Dates, timestamps and decimals as Delta writes them in statistics: "2024-01-31",
// "2024-01-31T12:00:00.123Z" (truncated to milliseconds: a maximum is raised by what the truncation may
// have dropped), and JSON numbers (used only where a double holds every value of the decimal exactly).
std::optional<Value> LogicalStatValue(const ColumnSpec& col, dom::element v, bool is_max) {
  std::string_view s;
  switch (col.logical) {
    case LogicalType::kDate:
      if (v.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
      if (auto days = ParseDate(s)) return Value{*days};
      return std::nullopt;
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz: {
      if (v.get_string().get(s) != simdjson::SUCCESS) return std::nullopt;
      int fraction_digits = 0;
      auto micros = ParseTimestamp(s, &fraction_digits);
      if (!micros) return std::nullopt;
      // Written with d digits after the point, the true value may lie up to 10^(6-d) - 1 micros above.
      if (is_max && fraction_digits < 6) *micros += static_cast<int64_t>(PowerOfTen(6 - fraction_digits)) - 1;
      return Value{*micros};
    }
    case LogicalType::kDecimal: {
      constexpr int32_t kExactInDouble = 15;  // decimal digits a double always holds
      double d = 0;
      if (col.precision > kExactInDouble || !v.is_number() || v.get_double().get(d) != simdjson::SUCCESS) {
        return std::nullopt;
      }
      const double scaled = d * static_cast<double>(PowerOfTen(col.scale));
      if (!(std::fabs(scaled) < 1e15)) return std::nullopt;  // beyond the column's digits (or NaN): no bound
      return Value{static_cast<int64_t>(std::llround(scaled))};
    }
    default: return std::nullopt;
  }
}

std::optional<Value> StatValue(const ColumnSpec& col, dom::element v, bool is_max) {
  if (col.paged()) return std::nullopt;
  if (col.logical != LogicalType::kNone && col.logical != LogicalType::kByte && col.logical != LogicalType::kShort) {
    return LogicalStatValue(col, v, is_max);
  }
  switch (col.type) {
    case parquet::Type::kBoolean: {
      bool b = false;
      if (v.get_bool().get(b) == simdjson::SUCCESS) return Value{b};
      break;
    }
    case parquet::Type::kInt32:
    case parquet::Type::kInt64: {
      int64_t i = 0;
      if (v.get_int64().get(i) == simdjson::SUCCESS) return Value{i};
      break;
    }
    case parquet::Type::kFloat:
    case parquet::Type::kDouble: {
      double d = 0;
      if (v.is_number() && v.get_double().get(d) == simdjson::SUCCESS) return Value{d};
      break;
    }
    case parquet::Type::kByteArray: {
      std::string_view s;
      if (col.is_string && v.get_string().get(s) == simdjson::SUCCESS) {
        if (is_max && s.size() >= kStringStatTruncation) return std::nullopt;
        return Value{std::string(s)};
      }
      break;
    }
    default: break;
  }
  return std::nullopt;
}

}  // namespace

struct AddStatsReader::Parser {
  dom::parser parser;
  std::string padded;  // the text, then SIMDJSON_PADDING bytes, as simdjson reads past the end
  std::unordered_map<std::string_view, size_t> index;  // column name -> position in columns_

  // The document's root object; false when the text is malformed or not an object.
  bool Parse(std::string_view text, dom::object* root) {
    padded.assign(text);
    padded.append(simdjson::SIMDJSON_PADDING, '\0');
    dom::element doc;
    if (parser.parse(padded.data(), text.size(), /*realloc_if_needed=*/false).get(doc) != simdjson::SUCCESS) return false;
    return doc.get_object().get(*root) == simdjson::SUCCESS;
  }
};

AddStatsReader::AddStatsReader(const std::vector<ColumnSpec>& columns) : columns_(columns), parser_(std::make_unique<Parser>()) {
  // Statistics name columns as data files do (by physical name under column mapping).
  for (size_t c = 0; c < columns_.size(); ++c) parser_->index.emplace(columns_[c].file_name(), c);  // the first of equal names
}

AddStatsReader::~AddStatsReader() = default;

int64_t AddStatsReader::NumRecords(std::string_view stats) {
  dom::object root;
  if (!parser_->Parse(stats, &root)) return -1;
  int64_t records = -1;
  for (dom::key_value_pair field : root) {
    if (field.key == "numRecords") records = Count(field.value);
  }
  return records;
}

bool AddStatsReader::Read(std::string_view stats, std::vector<Predicate::ColumnStats>* out, int64_t* num_records) {
  out->assign(columns_.size(), Predicate::ColumnStats{});
  *num_records = -1;
  dom::object root;
  if (!parser_->Parse(stats, &root)) return false;
  enum Section { kMin, kMax, kNulls };
  for (dom::key_value_pair field : root) {
    Section section;
    if (field.key == "numRecords") {
      *num_records = Count(field.value);
      continue;
    } else if (field.key == "minValues") {
      section = kMin;
    } else if (field.key == "maxValues") {
      section = kMax;
    } else if (field.key == "nullCount") {
      section = kNulls;
    } else {
      continue;
    }
    dom::object values;
    if (field.value.get_object().get(values) != simdjson::SUCCESS) continue;  // not an object: says nothing
    for (dom::key_value_pair entry : values) {
      auto it = parser_->index.find(entry.key);
      if (it == parser_->index.end()) continue;
      Predicate::ColumnStats& s = (*out)[it->second];
      const ColumnSpec& col = columns_[it->second];
      switch (section) {
        case kMin: s.min = StatValue(col, entry.value, false); break;
        case kMax: s.max = StatValue(col, entry.value, true); break;
        case kNulls: {
          int64_t n = 0;
          s.null_count = entry.value.get_int64().get(n) == simdjson::SUCCESS ? std::optional<int64_t>(n) : std::nullopt;
          break;
        }
      }
    }
  }
  return true;
}

}  // namespace stoke
