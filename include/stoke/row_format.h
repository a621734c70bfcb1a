// How rows print as text: `stoke query` (QueryTable, table.h) and `stoke cat` (CatParquetFile,
// tools.h) share the formats and the printer.
#pragma once

namespace stoke {

// A text form for rows. Binary and tensor cells print as "md5:<hex> len:<bytes>" in every format.
enum class RowFormat {
  kTable,  // aligned columns under a header, then a "(N rows)" line
  kCsv,    // RFC 4180 CSV with a header line
  kJson,   // one JSON object per row and line
};

}  // namespace stoke
