// Values of Delta's primitive types beyond plain numbers and strings (LogicalType, parquet_column.h):
// dates, timestamps and decimals, as text and as stored by the writers of Parquet files.
//
// A table column holds each such type in one canonical form (see LogicalType); a file may store it
// otherwise (timestamps as INT64 milliseconds, microseconds or nanoseconds, or as legacy INT96;
// decimals as INT32, INT64, FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY, at a smaller scale after a widening),
// and ConvertToColumnType turns what ParquetReader decoded into the canonical form. The rules are
// those of parquet-format's LogicalTypes.md and of Delta PROTOCOL.md ("Primitive Types", "Type
// Widening"). Dates are proleptic Gregorian, as both specify.
//
// All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "format/parquet_column.h"
#include "format/parquet_metadata.h"
#include "stoke/status.h"

namespace stoke {

inline constexpr int64_t kMicrosPerSecond = 1000000;
inline constexpr int64_t kMicrosPerDay = 86400 * kMicrosPerSecond;
// The largest decimal precision (Delta's and Spark's) and the largest held in an INT64.
inline constexpr int32_t kMaxDecimalPrecision = 38;
inline constexpr int32_t kMaxInt64DecimalPrecision = 18;

// "2024-01-31" for days since 1970-01-01 (a year beyond 0000..9999 prints with its sign and digits).
std::string FormatDate(int64_t days);
// ISO-8601: "2024-01-31T12:00:00Z" (utc) or "2024-01-31T12:00:00" (no time zone), with ".123" or
// ".123456" when the second has a fraction.
std::string FormatTimestamp(int64_t micros, bool utc);
// "-12.50": `unscaled` / 10^scale, exactly, with `scale` digits after the point.
std::string FormatDecimal(__int128 unscaled, int32_t scale);

// "YYYY-MM-DD" (a valid calendar date) as days since 1970-01-01; nullopt otherwise.
std::optional<int64_t> ParseDate(std::string_view text);
// "YYYY-MM-DD", then optionally ' ' or 'T' and "HH:MM[:SS[.fraction]]", then optionally "Z", "UTC"
// or an offset "+HH:MM" / "-HH:MM" / "+HHMM" / "+HH" (subtracted, to give UTC): as microseconds since
// 1970-01-01 00:00:00 (digits below a microsecond are dropped). Delta writes partition values as
// "2024-01-31 12:00:00" and "2024-01-31T12:00:00.000000Z", statistics as "2024-01-31T12:00:00.000Z".
// *fraction_digits (when not null) gets the number of digits after the point (0 without one).
std::optional<int64_t> ParseTimestamp(std::string_view text, int* fraction_digits = nullptr);

// A decimal literal ("-12.5", "3", "1.25e3") at a fixed scale: `floor` is the largest unscaled value
// at that scale that is <= the literal, and `exact` whether it equals the literal.
struct ScaledDecimal {
  __int128 floor = 0;
  bool exact = true;
};
// nullopt for text that is not a decimal number or whose value at `scale` needs more than 38 digits.
std::optional<ScaledDecimal> ParseDecimal(std::string_view text, int32_t scale);

// The unscaled value of row `index` of a decimal column in its canonical form (INT64 values or
// 16-byte big-endian strings).
__int128 DecimalAt(const ValueVector& values, size_t index);
// Microseconds since 1970-01-01 UTC of a legacy INT96 timestamp: nanoseconds of the day (8 bytes)
// and the Julian day (4 bytes), little-endian, combined as Spark combines them (wrapping around 64
// bits, which Spark's own writes of years past about 290,000 rely on); nullopt where the nanoseconds
// are not within a day.
// REQUIRES: bytes.size() == 12.
std::optional<int64_t> Int96Micros(std::string_view bytes);
// The 16-byte big-endian two's complement of `unscaled`: a decimal of more than 18 digits as a table
// column holds it.
std::string DecimalBytes(__int128 unscaled);
// 10^n for n in 0..38.
__int128 PowerOfTen(int32_t n);
// `unscaled` / 10^scale as a double: exact to the double's 53 bits for up to 18 digits, and within
// an ulp of the nearest double at any precision up to 38.
double DecimalToDouble(__int128 unscaled, int32_t scale);

// Converts `values`, decoded from a file column whose schema element is `stored`, into the canonical
// form of the table column `column` (in place). Widenings that Delta's typeWidening allows are
// applied (integers to wider integers, to double or to a decimal; float to double; date to
// timestamp_ntz; a decimal to a larger scale). A stored type that cannot hold the column's values is
// Corruption naming `context` (the file), the column, what is stored and what the schema says.
Status ConvertToColumnType(const parquet::SchemaElement& stored, const ColumnSpec& column, ColumnValues* values,
                           std::string_view context);

// The column a file's leaf holds by its own annotations, in the canonical form of LogicalType (for
// reading a Parquet file without a table: `stoke cat`): DATE, TIMESTAMP (UTC or not, any unit),
// INT96, DECIMAL (precision 1..38) and signed INT(8) and INT(16) get their LogicalType; anything else
// is its physical type as it is. `is_string` is left for the caller.
ColumnSpec ColumnOfStored(const parquet::SchemaElement& stored);

// The Delta/Spark name of a column's type: "date", "timestamp", "decimal(10,2)", "long", ...; for a
// nested column its kind: "struct", "array" or "map".
std::string SparkTypeName(const ColumnSpec& column);

}  // namespace stoke
