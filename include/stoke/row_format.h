// How rows print as text: `stoke query` (QueryTable, table.h) and `stoke cat` (CatParquetFile,
// tools.h) share the formats and the printer, and how many rows a listing may hold; how a
// description (`stoke inspect`: InspectTable, InspectParquetFile) is written.
#pragma once

#include <cstdint>

namespace stoke {

// The form of a description.
enum class DescriptionFormat {
  kText,  // aligned lines for a reader
  kJson,  // one JSON document
};

// The one "no limit" of every `limit` (QueryOptions, CatOptions, TableHistory): a limit of 0 asks
// for nothing, and a negative limit other than this is an error.
inline constexpr int64_t kNoLimit = -1;

// A text form for rows. Binary and tensor cells print as "md5:<hex> len:<bytes>" in every format.
enum class RowFormat {
  kTable,  // aligned columns under a header, then a "(N rows)" line
  kCsv,    // RFC 4180 CSV with a header line
  kJson,   // one JSON object per row and line
};

}  // namespace stoke
