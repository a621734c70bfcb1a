// CSV as written by spreadsheets, pandas and Python's csv module (RFC 4180): comma-separated,
// fields optionally quoted with "..." and "" for a quote inside, LF or CRLF line ends, a header row.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "stoke/status.h"

namespace stoke {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each has header.size() fields
};

// Parses a whole CSV text. A UTF-8 byte order mark is skipped; blank lines are ignored. Errors are
// Corruption naming `name`, the line and the byte offset: an unterminated quote, a quote inside an
// unquoted field, a row whose field count differs from the header's, an empty or duplicate header name.
Result<CsvTable> ParseCsv(std::string_view text, std::string_view name);

}  // namespace stoke
