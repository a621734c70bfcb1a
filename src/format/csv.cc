#include "format/csv.h"

#include <fmt/format.h>

#include <set>

namespace stoke {

Result<CsvTable> ParseCsv(std::string_view text, std::string_view name) {
  size_t pos = 0;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") pos = 3;
  size_t line = 1;
  auto error = [&](size_t at, std::string_view what) {
    return Status::Corruption(fmt::format("{}: line {}, offset {}: {}", name, line, at, what));
  };
  std::vector<std::vector<std::string>> records;
  while (pos < text.size()) {
    std::vector<std::string> fields;
    std::string field;
    bool blank = true;
    for (;;) {
      // One field.
      if (pos < text.size() && text[pos] == '"') {
        blank = false;
        size_t open = pos++;
        for (;;) {
          if (pos >= text.size()) return error(open, "unterminated quoted field");
          char c = text[pos++];
          if (c == '"') {
            if (pos < text.size() && text[pos] == '"') {
              field.push_back('"');
              ++pos;
            } else {
              break;
            }
          } else {
            if (c == '\n') ++line;
            field.push_back(c);
          }
        }
        if (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') {
          return error(pos, "unexpected character after a closing quote");
        }
      } else {
        while (pos < text.size() && text[pos] != ',' && text[pos] != '\n' && text[pos] != '\r') {
          if (text[pos] == '"') return error(pos, "quote inside an unquoted field");
          field.push_back(text[pos++]);
        }
        if (!field.empty()) blank = false;
      }
      fields.push_back(std::move(field));
      field.clear();
      if (pos < text.size() && text[pos] == ',') {
        blank = false;
        ++pos;
        continue;
      }
      break;
    }
    // End of record.
    if (pos < text.size() && text[pos] == '\r') ++pos;
    if (pos < text.size() && text[pos] == '\n') ++pos;
    if (!blank) {
      if (!records.empty() && fields.size() != records[0].size()) {
        return error(pos, fmt::format("row has {} fields, the header {}", fields.size(), records[0].size()));
      }
      records.push_back(std::move(fields));
    }
    ++line;
  }
  if (records.empty()) return Status::Corruption(fmt::format("{}: empty CSV (no header row)", name));
  CsvTable t;
  t.header = std::move(records[0]);
  std::set<std::string> seen;
  for (const auto& h : t.header) {
    if (h.empty()) return Status::Corruption(fmt::format("{}: line 1: empty column name in the header", name));
    if (!seen.insert(h).second) return Status::Corruption(fmt::format("{}: line 1: duplicate column '{}'", name, h));
  }
  t.rows.assign(std::make_move_iterator(records.begin() + 1), std::make_move_iterator(records.end()));
  return t;
}

}  // namespace stoke
