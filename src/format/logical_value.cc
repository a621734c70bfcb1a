#include "format/logical_value.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/small_float.h"

namespace stoke {
namespace {

using parquet::Type;

// Days since 1970-01-01 of a proleptic Gregorian date, and back (H. Hinnant's "chrono-Compatible
// Low-Level Date Algorithms", exact for every int64 day count used here).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

struct Civil {
  int64_t year;
  unsigned month, day;
};

Civil CivilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  Civil c;
  c.day = doy - (153 * mp + 2) / 5 + 1;
  c.month = mp < 10 ? mp + 3 : mp - 9;
  c.year = static_cast<int64_t>(yoe) + era * 400 + (c.month <= 2);
  return c;
}

bool IsLeap(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Reads exactly `n` digits at text[*pos] as a number.
std::optional<int64_t> Digits(std::string_view text, size_t* pos, size_t n) {
  if (text.size() - *pos < n) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = text[*pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  return v;
}

bool Consume(std::string_view text, size_t* pos, char c) {
  if (*pos < text.size() && text[*pos] == c) {
    ++*pos;
    return true;
  }
  return false;
}

// "YYYY-MM-DD" at text[*pos] (a year of 4 digits, or of more after a sign).
std::optional<int64_t> DateAt(std::string_view text, size_t* pos) {
  bool negative = false;
  size_t year_digits = 4;
  if (*pos < text.size() && (text[*pos] == '-' || text[*pos] == '+')) {
    negative = text[(*pos)++] == '-';
    year_digits = 0;
    while (*pos + year_digits < text.size() && text[*pos + year_digits] >= '0' && text[*pos + year_digits] <= '9') {
      ++year_digits;
    }
    if (year_digits < 4 || year_digits > 9) return std::nullopt;
  }
  auto y = Digits(text, pos, year_digits);
  if (!y || !Consume(text, pos, '-')) return std::nullopt;
  auto m = Digits(text, pos, 2);
  if (!m || !Consume(text, pos, '-')) return std::nullopt;
  auto d = Digits(text, pos, 2);
  const int64_t year = negative ? -*y : *y;
  if (!d || *m < 1 || *m > 12 || *d < 1 || *d > DaysInMonth(year, static_cast<unsigned>(*m))) return std::nullopt;
  return DaysFromCivil(year, static_cast<unsigned>(*m), static_cast<unsigned>(*d));
}

// "HH:MM[:SS[.fraction]]" at text[*pos], as microseconds into the day.
std::optional<int64_t> TimeAt(std::string_view text, size_t* pos, int* fraction_digits) {
  auto h = Digits(text, pos, 2);
  if (!h || *h > 23 || !Consume(text, pos, ':')) return std::nullopt;
  auto m = Digits(text, pos, 2);
  if (!m || *m > 59) return std::nullopt;
  int64_t s = 0, micros = 0;
  if (Consume(text, pos, ':')) {
    auto sec = Digits(text, pos, 2);
    if (!sec || *sec > 59) return std::nullopt;
    s = *sec;
    if (Consume(text, pos, '.')) {
      int digits = 0;
      while (*pos < text.size() && text[*pos] >= '0' && text[*pos] <= '9') {
        if (digits < 6) micros = micros * 10 + (text[*pos] - '0');
        ++digits;
        ++*pos;
      }
      if (digits == 0 || digits > 9) return std::nullopt;
      for (int i = digits; i < 6; ++i) micros *= 10;
      *fraction_digits = digits;
    }
  }
  return (*h * 3600 + *m * 60 + s) * kMicrosPerSecond + micros;
}

// "", "Z", "UTC", "+HH:MM", "+HHMM", "+HH" (or '-') at text[*pos] to the end: the offset in microseconds.
std::optional<int64_t> ZoneAt(std::string_view text, size_t* pos) {
  std::string_view rest = text.substr(*pos);
  if (rest.empty() || rest == "Z" || rest == " UTC" || rest == "UTC") return 0;
  if (rest[0] != '+' && rest[0] != '-') return std::nullopt;
  const int64_t sign = rest[0] == '-' ? -1 : 1;
  size_t p = *pos + 1;
  auto h = Digits(text, &p, 2);
  if (!h || *h > 18) return std::nullopt;
  int64_t m = 0;
  if (p < text.size()) {
    Consume(text, &p, ':');
    auto mm = Digits(text, &p, 2);
    if (!mm || *mm > 59 || p != text.size()) return std::nullopt;
    m = *mm;
  }
  return sign * (*h * 3600 + m * 60) * kMicrosPerSecond;
}

std::string UnsignedDigits(unsigned __int128 v) {
  char buf[48];
  size_t n = 0;
  do {
    buf[n++] = static_cast<char>('0' + static_cast<int>(v % 10));
    v /= 10;
  } while (v != 0);
  std::reverse(buf, buf + n);
  return std::string(buf, n);
}

}  // namespace

std::optional<int64_t> Int96Micros(std::string_view bytes) {
  constexpr int64_t kUnixEpochJulianDay = 2440588;
  constexpr int64_t kNanosPerDay = kMicrosPerDay * 1000;
  int64_t nanos = 0;
  int32_t julian = 0;
  std::memcpy(&nanos, bytes.data(), 8);
  std::memcpy(&julian, bytes.data() + 8, 4);
  if (nanos <= -kNanosPerDay || nanos >= kNanosPerDay) return std::nullopt;  // not a time of day
  // Spark's arithmetic, which wraps around 64 bits: it writes a timestamp past about the year 290,000
  // as a negative Julian day (micros + the epoch's Julian micros overflowed), and reads it back with
  // the same wrap-around. Done in unsigned arithmetic, where wrapping is defined.
  const uint64_t julian_micros = static_cast<uint64_t>(int64_t{julian}) * static_cast<uint64_t>(kMicrosPerDay) +
                                 static_cast<uint64_t>(nanos / 1000);
  return static_cast<int64_t>(julian_micros - static_cast<uint64_t>(kUnixEpochJulianDay * kMicrosPerDay));
}

std::string DecimalBytes(__int128 unscaled) {
  std::string b(16, '\0');
  for (int i = 15; i >= 0; --i, unscaled >>= 8) b[static_cast<size_t>(i)] = static_cast<char>(unscaled & 0xff);
  return b;
}

__int128 PowerOfTen(int32_t n) {
  __int128 p = 1;
  for (int32_t i = 0; i < n; ++i) p *= 10;
  return p;
}

double DecimalToDouble(__int128 unscaled, int32_t scale) {
  // long double (64-bit mantissa) holds any int64 exactly and 10^scale to 64 bits: one rounding to
  // it, one to double.
  return static_cast<double>(static_cast<long double>(unscaled) / static_cast<long double>(PowerOfTen(scale)));
}

std::string FormatDate(int64_t days) {
  const Civil c = CivilFromDays(days);
  if (c.year >= 0 && c.year <= 9999) return fmt::format("{:04}-{:02}-{:02}", c.year, c.month, c.day);
  return fmt::format("{}{:04}-{:02}-{:02}", c.year < 0 ? '-' : '+', c.year < 0 ? -c.year : c.year, c.month, c.day);
}

std::string FormatTimestamp(int64_t micros, bool utc) {
  int64_t days = micros / kMicrosPerDay;
  int64_t rem = micros % kMicrosPerDay;
  if (rem < 0) {
    rem += kMicrosPerDay;
    --days;
  }
  const int64_t seconds = rem / kMicrosPerSecond, fraction = rem % kMicrosPerSecond;
  std::string out = fmt::format("{}T{:02}:{:02}:{:02}", FormatDate(days), seconds / 3600, seconds / 60 % 60, seconds % 60);
  if (fraction % 1000 == 0 && fraction != 0) out += fmt::format(".{:03}", fraction / 1000);
  if (fraction % 1000 != 0) out += fmt::format(".{:06}", fraction);
  if (utc) out += 'Z';
  return out;
}

std::string FormatDecimal(__int128 unscaled, int32_t scale) {
  const bool negative = unscaled < 0;
  const auto magnitude = negative ? static_cast<unsigned __int128>(0) - static_cast<unsigned __int128>(unscaled)
                                  : static_cast<unsigned __int128>(unscaled);
  std::string digits = UnsignedDigits(magnitude);
  const auto s = static_cast<size_t>(std::max(scale, 0));
  if (digits.size() <= s) digits.insert(0, s + 1 - digits.size(), '0');
  if (s > 0) digits.insert(digits.size() - s, 1, '.');
  return negative ? "-" + digits : digits;
}

std::optional<int64_t> ParseDate(std::string_view text) {
  size_t pos = 0;
  auto days = DateAt(text, &pos);
  if (!days || pos != text.size()) return std::nullopt;
  return days;
}

std::optional<int64_t> ParseTimestamp(std::string_view text, int* fraction_digits) {
  int digits = 0;
  if (fraction_digits != nullptr) *fraction_digits = 0;
  size_t pos = 0;
  auto days = DateAt(text, &pos);
  if (!days) return std::nullopt;
  int64_t time = 0;
  if (pos < text.size() && (text[pos] == ' ' || text[pos] == 'T')) {
    ++pos;
    auto t = TimeAt(text, &pos, &digits);
    if (!t) return std::nullopt;
    time = *t;
  }
  auto zone = ZoneAt(text, &pos);
  if (!zone) return std::nullopt;
  if (fraction_digits != nullptr) *fraction_digits = digits;
  // |days| <= 10^9 * 366, so this stays far inside int64.
  return *days * kMicrosPerDay + time - *zone;
}

std::optional<ScaledDecimal> ParseDecimal(std::string_view text, int32_t scale) {
  size_t pos = 0;
  const bool negative = pos < text.size() && text[pos] == '-';
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) ++pos;
  unsigned __int128 mantissa = 0;
  int significant = 0, exponent = 0, digits = 0;
  bool point = false;
  for (; pos < text.size(); ++pos) {
    const char c = text[pos];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    ++digits;
    if (point) --exponent;
    if (mantissa == 0 && c == '0') continue;
    if (++significant > kMaxDecimalPrecision) return std::nullopt;
    mantissa = mantissa * 10 + static_cast<unsigned>(c - '0');
  }
  if (digits == 0) return std::nullopt;
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    size_t p = pos + 1;
    bool negative_exponent = false;
    if (p < text.size() && (text[p] == '-' || text[p] == '+')) negative_exponent = text[p++] == '-';
    const size_t n = text.size() - std::min(p, text.size());
    if (n == 0 || n > 4) return std::nullopt;  // an exponent beyond 9999 has no decimal of 38 digits
    auto e = Digits(text, &p, n);
    if (!e) return std::nullopt;
    exponent += static_cast<int>(negative_exponent ? -*e : *e);
    pos = p;
  }
  if (pos != text.size()) return std::nullopt;
  const int shift = exponent + scale;  // unscaled = mantissa * 10^shift
  ScaledDecimal out;
  unsigned __int128 q = mantissa, r = 0;
  if (shift >= 0) {
    if (mantissa != 0 && significant + shift > kMaxDecimalPrecision) return std::nullopt;
    q = mantissa * static_cast<unsigned __int128>(PowerOfTen(shift));
  } else if (-shift > kMaxDecimalPrecision) {
    q = 0;
    r = mantissa;
  } else {
    const auto p = static_cast<unsigned __int128>(PowerOfTen(-shift));
    q = mantissa / p;
    r = mantissa % p;
  }
  out.exact = r == 0;
  out.floor = negative ? -static_cast<__int128>(q) - (r != 0 ? 1 : 0) : static_cast<__int128>(q);
  return out;
}

__int128 DecimalAt(const ValueVector& values, size_t index) {
  if (auto* ints = std::get_if<std::vector<int64_t>>(&values)) return (*ints)[index];
  if (auto* ints = std::get_if<std::vector<int32_t>>(&values)) return (*ints)[index];
  const std::string& bytes = std::get<std::vector<std::string>>(values)[index];
  if (bytes.empty()) return 0;
  // Big-endian two's complement of up to 16 bytes, sign-extended.
  __int128 v = static_cast<int8_t>(bytes[0]) < 0 ? -1 : 0;
  for (char c : bytes) v = static_cast<__int128>(static_cast<unsigned __int128>(v) << 8) | static_cast<uint8_t>(c);
  return v;
}

std::string SparkTypeName(const ColumnSpec& c) {
  if (c.nested()) {
    auto type = nlohmann::json::parse(c.nested_type, nullptr, false);
    return type.is_object() && type.contains("type") && type["type"].is_string() ? type["type"].get<std::string>()
                                                                                 : "nested";
  }
  switch (c.logical) {
    case LogicalType::kByte: return "byte";
    case LogicalType::kShort: return "short";
    case LogicalType::kDate: return "date";
    case LogicalType::kTimestamp: return "timestamp";
    case LogicalType::kTimestampNtz: return "timestamp_ntz";
    case LogicalType::kDecimal: return fmt::format("decimal({},{})", c.precision, c.scale);
    case LogicalType::kNone: break;
  }
  switch (c.type) {
    case Type::kBoolean: return "boolean";
    case Type::kInt32: return "integer";
    case Type::kInt64: return "long";
    case Type::kFloat: return "float";
    case Type::kDouble: return "double";
    case Type::kByteArray: return (c.is_string && !c.tensor) ? "string" : "binary";
    default: return "binary";  // INT96 / FIXED_LEN_BYTE_ARRAY: stoke never writes them
  }
}

// ---------------------------------------------------------------------------------------------
// Stored values to a column's canonical form.
namespace {

// What a file column's schema element says of its values.
struct Stored {
  Type type = Type::kInt64;
  bool date = false;
  bool decimal = false;
  int32_t decimal_scale = 0;
  int64_t timestamp_unit = 0;  // INT64 timestamps: 1000 (millis), 1 (micros), -1000 (nanos); 0: none
  bool float16 = false;        // FIXED_LEN_BYTE_ARRAY(2) annotated FLOAT16
};

Stored DescribeStored(const parquet::SchemaElement& e) {
  Stored s;
  s.type = e.type.value_or(Type::kInt64);
  using parquet::ConvertedType;
  using parquet::LogicalTypeId;
  const LogicalTypeId id = e.logical_type ? e.logical_type->id : LogicalTypeId::kNone;
  const auto converted = e.converted_type;
  s.date = id == LogicalTypeId::kDate || converted == ConvertedType::kDate;
  s.float16 = id == LogicalTypeId::kFloat16 && s.type == Type::kFixedLenByteArray && e.type_length == 2;
  if (id == LogicalTypeId::kDecimal || converted == ConvertedType::kDecimal) {
    s.decimal = true;
    s.decimal_scale = id == LogicalTypeId::kDecimal ? e.logical_type->decimal_scale : e.scale.value_or(0);
  }
  if (id == LogicalTypeId::kTimestamp) {
    const int16_t unit = e.logical_type->time_unit;
    s.timestamp_unit = unit == 1 ? 1000 : (unit == 3 ? -1000 : 1);
  } else if (converted == ConvertedType::kTimestampMillis) {
    s.timestamp_unit = 1000;
  } else if (converted == ConvertedType::kTimestampMicros) {
    s.timestamp_unit = 1;
  }
  return s;
}

std::string StoredName(const Stored& s) {
  std::string name(parquet::TypeName(s.type));
  if (s.date) name += " (DATE)";
  if (s.decimal) name += fmt::format(" (DECIMAL, scale {})", s.decimal_scale);
  if (s.timestamp_unit != 0) name += " (TIMESTAMP)";
  if (s.float16) name += " (FLOAT16)";
  return name;
}

// The Corruption for a stored type that cannot hold the column's values, built only when it is
// returned: conversions run for every column chunk a scan reads.
struct Mismatch {
  const Stored& stored;
  const ColumnSpec& column;
  std::string_view context;
  Status operator()(std::string_view detail = {}) const {
    return Status::Corruption(fmt::format("{}: column '{}' is stored as {}, which cannot hold the table's type {}{}",
                                          context, column.name, StoredName(stored), SparkTypeName(column), detail));
  }
};

template <typename To, typename From, typename F>
std::vector<To> MapValues(const std::vector<From>& from, F f) {
  std::vector<To> out;
  out.reserve(from.size());
  for (const From& x : from) out.push_back(f(x));
  return out;
}

// Timestamps stored as INT64 or INT96 to microseconds.
Status ToMicros(const Stored& s, ValueVector* values, const Mismatch& bad) {
  if (s.type == Type::kInt96) {
    auto& v = std::get<std::vector<std::string>>(*values);
    std::vector<int64_t> micros;
    micros.reserve(v.size());
    for (const std::string& b : v) {
      if (b.size() != 12) return bad(" (an INT96 value that is not 12 bytes)");
      auto us = Int96Micros(b);
      if (!us) return bad(" (an INT96 value whose nanoseconds are not within a day)");
      micros.push_back(*us);
    }
    *values = std::move(micros);
    return Status::OK();
  }
  if (s.type == Type::kInt32 && s.date) {  // a date widened to timestamp_ntz: midnight
    std::vector<int64_t> micros;
    for (int32_t d : std::get<std::vector<int32_t>>(*values)) {
      int64_t us = 0;
      if (__builtin_mul_overflow(int64_t{d}, kMicrosPerDay, &us)) {
        return bad(" (a date beyond the range of timestamps)");
      }
      micros.push_back(us);
    }
    *values = std::move(micros);
    return Status::OK();
  }
  if (s.type != Type::kInt64 || s.decimal) return bad();
  auto& v = std::get<std::vector<int64_t>>(*values);
  if (s.timestamp_unit == 1000) {
    for (int64_t& x : v) {
      if (__builtin_mul_overflow(x, int64_t{1000}, &x)) {
        return bad(" (a millisecond value beyond the range of microseconds)");
      }
    }
  } else if (s.timestamp_unit == -1000) {
    for (int64_t& x : v) x = x / 1000 - (x % 1000 < 0 ? 1 : 0);  // floor: nanoseconds before 1970 too
  }
  return Status::OK();
}

// Decimals (and integers, widened to decimals) to the column's canonical form at its scale.
Status ToDecimal(const Stored& s, const ColumnSpec& column, ValueVector* values, const Mismatch& bad) {
  const int32_t stored_scale = s.decimal ? s.decimal_scale : 0;
  const bool integer = s.type == Type::kInt32 || s.type == Type::kInt64;
  if ((!s.decimal && !integer) || stored_scale > column.scale || s.date || s.timestamp_unit != 0) {
    return bad();
  }
  const __int128 factor = PowerOfTen(column.scale - stored_scale);
  const __int128 limit = PowerOfTen(column.precision);
  const size_t n = std::visit([](const auto& v) { return v.size(); }, *values);
  std::vector<__int128> unscaled(n);
  for (size_t i = 0; i < n; ++i) {
    if (auto* strings = std::get_if<std::vector<std::string>>(values); strings && (*strings)[i].size() > 16) {
      return bad(fmt::format(" (a decimal of {} bytes)", (*strings)[i].size()));
    }
    // |stored| * factor < 10^precision, checked before the product can overflow (both powers of ten:
    // the quotient is exact).
    const __int128 stored = DecimalAt(*values, i);
    const __int128 bound = limit / factor;
    if (stored != 0 && (stored >= bound || stored <= -bound)) {
      return bad(fmt::format(" (the value {} has more than {} digits)",
                                                  FormatDecimal(stored, stored_scale), column.precision));
    }
    unscaled[i] = stored * factor;
  }
  if (column.type == Type::kInt64) {
    *values = MapValues<int64_t>(unscaled, [](__int128 x) { return static_cast<int64_t>(x); });
    return Status::OK();
  }
  *values = MapValues<std::string>(unscaled, DecimalBytes);
  return Status::OK();
}

// Plain numbers: the stored type as it is, or widened (int32 to int64; float and integers to double).
// FLOAT16 values (2 bytes, little-endian) to float or double.
Status FromFloat16(const ColumnSpec& column, ValueVector* values, const Mismatch& bad) {
  auto* halves = std::get_if<std::vector<std::string>>(values);
  if (halves == nullptr || (column.type != Type::kFloat && column.type != Type::kDouble)) return bad();
  std::vector<float> floats;
  floats.reserve(halves->size());
  for (const std::string& h : *halves) {
    if (h.size() != 2) return bad(" (a FLOAT16 value that is not 2 bytes)");
    floats.push_back(Float16BitsToFloat32(static_cast<uint16_t>(static_cast<uint8_t>(h[0]) | (static_cast<uint8_t>(h[1]) << 8))));
  }
  if (column.type == Type::kFloat) {
    *values = std::move(floats);
  } else {
    *values = MapValues<double>(floats, [](float x) { return static_cast<double>(x); });
  }
  return Status::OK();
}

Status ToPlain(const Stored& s, const ColumnSpec& column, ValueVector* values, const Mismatch& bad) {
  if (s.float16) return FromFloat16(column, values, bad);
  if (s.type == column.type && !s.decimal && !s.date && s.timestamp_unit == 0) return Status::OK();
  if (column.type == Type::kByteArray && s.type == Type::kFixedLenByteArray && !column.is_string) return Status::OK();
  if (s.decimal || s.date || s.timestamp_unit != 0) return bad();
  auto widen = [&](auto to) -> Status {
    using To = decltype(to);
    std::visit(
        [&](const auto& v) {
          using From = typename std::decay_t<decltype(v)>::value_type;
          if constexpr (std::is_arithmetic_v<From> && !std::is_same_v<From, uint8_t>) {
            *values = MapValues<To>(v, [](From x) { return static_cast<To>(x); });
          }
        },
        *values);
    return Status::OK();
  };
  if (column.type == Type::kInt64 && s.type == Type::kInt32) return widen(int64_t{});
  if (column.type == Type::kDouble &&
      (s.type == Type::kFloat || s.type == Type::kInt32 || s.type == Type::kInt64)) {
    return widen(double{});
  }
  return bad();
}

}  // namespace

ColumnSpec ColumnOfStored(const parquet::SchemaElement& stored) {
  const Stored s = DescribeStored(stored);
  ColumnSpec c;
  c.name = stored.name;
  c.type = s.type;
  const auto& logical = stored.logical_type;
  if (s.float16) {
    c.type = Type::kFloat;  // read as float32, which holds every FLOAT16 value exactly
  } else if (s.date && s.type == Type::kInt32) {
    c.logical = LogicalType::kDate;
  } else if (s.decimal) {
    const int32_t precision =
        logical && logical->id == parquet::LogicalTypeId::kDecimal ? logical->decimal_precision : stored.precision.value_or(0);
    if (precision < 1 || precision > kMaxDecimalPrecision || s.decimal_scale < 0 || s.decimal_scale > precision) return c;
    c.logical = LogicalType::kDecimal;
    c.precision = precision;
    c.scale = s.decimal_scale;
    c.type = precision <= kMaxInt64DecimalPrecision ? Type::kInt64 : Type::kFixedLenByteArray;
  } else if (s.type == Type::kInt96 || (s.type == Type::kInt64 && s.timestamp_unit != 0)) {
    // Converted types and INT96 imply UTC; the LogicalType says.
    const bool utc = !(logical && logical->id == parquet::LogicalTypeId::kTimestamp) || logical->timestamp_utc;
    c.logical = utc ? LogicalType::kTimestamp : LogicalType::kTimestampNtz;
    c.type = Type::kInt64;
  } else if (s.type == Type::kInt32 && logical && logical->id == parquet::LogicalTypeId::kInteger && logical->int_signed &&
             (logical->int_bit_width == 8 || logical->int_bit_width == 16)) {
    c.logical = logical->int_bit_width == 8 ? LogicalType::kByte : LogicalType::kShort;
  }
  return c;
}

Status ConvertToColumnType(const parquet::SchemaElement& stored, const ColumnSpec& column, ColumnValues* values,
                           std::string_view context) {
  const Stored s = DescribeStored(stored);
  const Mismatch bad{s, column, context};
  switch (column.logical) {
    case LogicalType::kNone:
      return ToPlain(s, column, &values->values, bad);
    case LogicalType::kByte:
    case LogicalType::kShort:
      if (s.type != Type::kInt32 || s.decimal || s.date) return bad();
      return Status::OK();
    case LogicalType::kDate:
      if (s.type != Type::kInt32 || s.decimal) return bad();
      return Status::OK();
    case LogicalType::kTimestamp:
    case LogicalType::kTimestampNtz:
      if (s.date && column.logical == LogicalType::kTimestamp) return bad();
      return ToMicros(s, &values->values, bad);
    case LogicalType::kDecimal:
      return ToDecimal(s, column, &values->values, bad);
  }
  return bad();
}

}  // namespace stoke
