#include "format/logical_value.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace stoke {
namespace {

TEST(LogicalValue, DatesPrintAndParseInIso8601) {
  EXPECT_EQ(FormatDate(0), "1970-01-01");
  EXPECT_EQ(FormatDate(-1), "1969-12-31");
  EXPECT_EQ(FormatDate(19753), "2024-01-31");
  EXPECT_EQ(FormatDate(-719528), "0000-01-01");
  EXPECT_EQ(FormatDate(-719529), "-0001-12-31");
  EXPECT_EQ(FormatDate(2932897), "+10000-01-01");
  for (int64_t d : {int64_t{-1000000}, int64_t{-719529}, int64_t{-1}, int64_t{0}, int64_t{59}, int64_t{60},
                    int64_t{19753}, int64_t{2932896}, int64_t{2932897}}) {
    auto back = ParseDate(FormatDate(d));
    ASSERT_TRUE(back.has_value()) << FormatDate(d);
    EXPECT_EQ(*back, d);
  }
  EXPECT_EQ(ParseDate("2024-02-29"), 19782);
  for (const char* bad : {"2023-02-29", "2024-13-01", "2024-00-10", "2024-1-01", "24-01-01", "2024-01-01x", "",
                          "2024-01-32", "2024/01/01"}) {
    EXPECT_FALSE(ParseDate(bad).has_value()) << bad;
  }
}

TEST(LogicalValue, TimestampsPrintAndParseInIso8601) {
  EXPECT_EQ(FormatTimestamp(0, true), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatTimestamp(0, false), "1970-01-01T00:00:00");
  EXPECT_EQ(FormatTimestamp(1706702400123000, true), "2024-01-31T12:00:00.123Z");
  EXPECT_EQ(FormatTimestamp(1706702400000001, false), "2024-01-31T12:00:00.000001");
  EXPECT_EQ(FormatTimestamp(-1, true), "1969-12-31T23:59:59.999999Z");
  EXPECT_EQ(ParseTimestamp("2024-01-31 12:00:00"), 1706702400000000);
  EXPECT_EQ(ParseTimestamp("2024-01-31T12:00:00.123Z"), 1706702400123000);
  EXPECT_EQ(ParseTimestamp("2024-01-31T13:30:00+01:30"), 1706702400000000);
  EXPECT_EQ(ParseTimestamp("2024-01-31T04:00:00-0800"), 1706702400000000);
  EXPECT_EQ(ParseTimestamp("2024-01-31"), 1706659200000000);
  EXPECT_EQ(ParseTimestamp("2024-01-31 12:00"), 1706702400000000);
  EXPECT_EQ(ParseTimestamp("1970-01-01 00:00:00.123456789"), 123456);
  int digits = -1;
  EXPECT_EQ(ParseTimestamp("2024-01-31T12:00:00.12Z", &digits), 1706702400120000);
  EXPECT_EQ(digits, 2);
  for (int64_t us : {int64_t{-62135596800000000}, int64_t{-1}, int64_t{0}, int64_t{1706702400123456}}) {
    EXPECT_EQ(ParseTimestamp(FormatTimestamp(us, true)), us) << FormatTimestamp(us, true);
    EXPECT_EQ(ParseTimestamp(FormatTimestamp(us, false)), us);
  }
  for (const char* bad : {"2024-01-31 24:00:00", "2024-01-31T12:60", "2024-01-31T12", "2024-01-31 12:00:00.",
                          "2024-01-31 12:00:00 PST", "2024-01-31X12:00:00", "2024-01-31 12:00:00+1"}) {
    EXPECT_FALSE(ParseTimestamp(bad).has_value()) << bad;
  }
}

TEST(LogicalValue, DecimalsPrintAndParseExactly) {
  EXPECT_EQ(FormatDecimal(1250, 2), "12.50");
  EXPECT_EQ(FormatDecimal(-5, 3), "-0.005");
  EXPECT_EQ(FormatDecimal(0, 2), "0.00");
  EXPECT_EQ(FormatDecimal(42, 0), "42");
  const __int128 max38 = PowerOfTen(38) - 1;
  EXPECT_EQ(FormatDecimal(max38, 0), std::string(38, '9'));
  EXPECT_EQ(FormatDecimal(-max38, 38), "-0." + std::string(38, '9'));

  auto d = ParseDecimal("12.5", 2);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->floor, 1250);
  EXPECT_TRUE(d->exact);
  d = ParseDecimal("12.505", 2);
  EXPECT_EQ(d->floor, 1250);
  EXPECT_FALSE(d->exact);
  d = ParseDecimal("-12.505", 2);
  EXPECT_EQ(d->floor, -1251);  // floor, not truncation
  EXPECT_FALSE(d->exact);
  d = ParseDecimal("1.25e3", 0);
  EXPECT_EQ(d->floor, 1250);
  d = ParseDecimal("125E-2", 2);
  EXPECT_EQ(d->floor, 125);
  d = ParseDecimal(std::string(38, '9'), 0);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->floor, max38);
  EXPECT_FALSE(ParseDecimal(std::string(39, '9'), 0).has_value());
  EXPECT_FALSE(ParseDecimal("1e40", 0).has_value());
  for (const char* bad : {"", "-", ".", "1.2.3", "1e", "abc", "1,5", "0x10"}) {
    EXPECT_FALSE(ParseDecimal(bad, 2).has_value()) << bad;
  }
}

parquet::SchemaElement Element(parquet::Type type, std::optional<parquet::LogicalType> logical = std::nullopt) {
  parquet::SchemaElement e;
  e.type = type;
  e.logical_type = logical;
  return e;
}

ColumnSpec Column(parquet::Type type, LogicalType logical, int32_t precision = 0, int32_t scale = 0) {
  ColumnSpec c;
  c.name = "c";
  c.type = type;
  c.logical = logical;
  c.precision = precision;
  c.scale = scale;
  return c;
}

TEST(LogicalValue, TimestampsOfEveryStorageBecomeMicros) {
  const ColumnSpec ts = Column(parquet::Type::kInt64, LogicalType::kTimestamp);
  auto unit = [](int16_t u) {
    return parquet::LogicalType{.id = parquet::LogicalTypeId::kTimestamp, .timestamp_utc = true, .time_unit = u};
  };
  ColumnValues millis{std::vector<int64_t>{1706702400123, -1}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kInt64, unit(1)), ts, &millis, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(millis.values), (std::vector<int64_t>{1706702400123000, -1000}));
  ColumnValues nanos{std::vector<int64_t>{1706702400123456789, -1}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kInt64, unit(3)), ts, &nanos, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(nanos.values), (std::vector<int64_t>{1706702400123456, -1}));
  parquet::SchemaElement legacy = Element(parquet::Type::kInt64);
  legacy.converted_type = parquet::ConvertedType::kTimestampMillis;
  ColumnValues converted{std::vector<int64_t>{2}, {}};
  ASSERT_TRUE(ConvertToColumnType(legacy, ts, &converted, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(converted.values)[0], 2000);
  // INT96: nanoseconds of the day, then the Julian day (2440589 is 1970-01-02).
  std::string int96(12, '\0');
  const int64_t nanos_of_day = 3600LL * 1000000000LL + 5000;
  const int32_t julian = 2440589;
  std::memcpy(int96.data(), &nanos_of_day, 8);
  std::memcpy(int96.data() + 8, &julian, 4);
  ColumnValues legacy96{std::vector<std::string>{int96}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kInt96), ts, &legacy96, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(legacy96.values)[0], kMicrosPerDay + 3600LL * 1000000 + 5);
  // Spark writes 290000-12-30T23:00:00Z with a wrapped-around (negative) Julian day and reads it back
  // by wrapping again: Julian micros = micros + 2440588 days, wrapped to int64.
  const int64_t far_future = 9089380393200000000;  // days_from_civil(290000, 12, 30) days + 23 h
  const uint64_t wrapped = static_cast<uint64_t>(far_future) + 2440588ULL * static_cast<uint64_t>(kMicrosPerDay);
  const int64_t julian_micros = static_cast<int64_t>(wrapped);
  const int64_t days = julian_micros / kMicrosPerDay, rest_nanos = (julian_micros % kMicrosPerDay) * 1000;
  const int32_t spark_julian = static_cast<int32_t>(days);
  std::memcpy(int96.data(), &rest_nanos, 8);
  std::memcpy(int96.data() + 8, &spark_julian, 4);
  EXPECT_EQ(Int96Micros(int96), far_future);
  const int64_t not_a_time = kMicrosPerDay * 1000;  // a whole day of nanoseconds
  std::memcpy(int96.data(), &not_a_time, 8);
  EXPECT_EQ(Int96Micros(int96), std::nullopt);
  // A date widened to timestamp_ntz (typeWidening) is midnight; a string is no timestamp.
  ColumnValues dates{std::vector<int32_t>{1}, {}};
  auto date = Element(parquet::Type::kInt32, parquet::LogicalType{.id = parquet::LogicalTypeId::kDate});
  ASSERT_TRUE(ConvertToColumnType(date, Column(parquet::Type::kInt64, LogicalType::kTimestampNtz), &dates, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(dates.values)[0], kMicrosPerDay);
  ColumnValues text{std::vector<std::string>{"x"}, {}};
  Status st = ConvertToColumnType(Element(parquet::Type::kByteArray), ts, &text, "part-0.parquet");
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("part-0.parquet"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("timestamp"), std::string::npos) << st.message();
}

TEST(LogicalValue, DecimalsAsDoublesAreWithinAnUlpAtEveryPrecision) {
  EXPECT_EQ(DecimalToDouble(-567800, 5), -5.678);
  EXPECT_EQ(DecimalToDouble(1250, 2), 12.5);
  EXPECT_EQ(DecimalToDouble(0, 38), 0.0);
  EXPECT_EQ(DecimalToDouble(7, 0), 7.0);
  const __int128 max38 = PowerOfTen(38) - 1;  // 38 nines
  EXPECT_DOUBLE_EQ(DecimalToDouble(max38, 0), 1e38);
  EXPECT_DOUBLE_EQ(DecimalToDouble(-max38, 38), -1.0);
  EXPECT_DOUBLE_EQ(DecimalToDouble(PowerOfTen(30) + 5, 10), 1e20);
  EXPECT_DOUBLE_EQ(DecimalToDouble(INT64_MIN, 18), -9.223372036854775808);
}

TEST(LogicalValue, DecimalsOfEveryStorageTakeTheColumnsScale) {
  const ColumnSpec small = Column(parquet::Type::kInt64, LogicalType::kDecimal, 10, 2);
  const ColumnSpec wide = Column(parquet::Type::kFixedLenByteArray, LogicalType::kDecimal, 38, 4);
  auto decimal = [](parquet::Type t, int32_t scale, int32_t precision) {
    return Element(t, parquet::LogicalType{.id = parquet::LogicalTypeId::kDecimal, .decimal_scale = scale,
                                           .decimal_precision = precision});
  };
  ColumnValues i32{std::vector<int32_t>{1250, -5}, {}};
  ASSERT_TRUE(ConvertToColumnType(decimal(parquet::Type::kInt32, 2, 9), small, &i32, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(i32.values), (std::vector<int64_t>{1250, -5}));
  // Big-endian two's complement of any width up to 16 bytes; a smaller stored scale is widened.
  ColumnValues flba{std::vector<std::string>{std::string("\x04\xe2", 2), std::string("\xff\xfb", 2)}, {}};
  ASSERT_TRUE(ConvertToColumnType(decimal(parquet::Type::kFixedLenByteArray, 1, 4), small, &flba, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(flba.values), (std::vector<int64_t>{12500, -50}));
  ColumnValues i64{std::vector<int64_t>{-125}, {}};
  ASSERT_TRUE(ConvertToColumnType(decimal(parquet::Type::kInt64, 2, 18), wide, &i64, "f").ok());
  EXPECT_EQ(FormatDecimal(DecimalAt(i64.values, 0), 4), "-1.2500");
  // An integer widened to a decimal (typeWidening); a larger stored scale or too many digits is not.
  ColumnValues ints{std::vector<int32_t>{7}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kInt32), small, &ints, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(ints.values)[0], 700);
  ColumnValues finer{std::vector<int64_t>{1}, {}};
  EXPECT_EQ(ConvertToColumnType(decimal(parquet::Type::kInt64, 3, 10), small, &finer, "f").code(), StatusCode::kCorruption);
  ColumnValues huge{std::vector<int64_t>{int64_t{1} << 40}, {}};
  EXPECT_EQ(ConvertToColumnType(decimal(parquet::Type::kInt64, 0, 18), small, &huge, "f").code(), StatusCode::kCorruption);
  ColumnValues too_long{std::vector<std::string>{std::string(17, '\x01')}, {}};
  EXPECT_EQ(ConvertToColumnType(decimal(parquet::Type::kByteArray, 2, 38), wide, &too_long, "f").code(),
            StatusCode::kCorruption);
}

TEST(LogicalValue, PlainColumnsWidenAsTypeWideningAllows) {
  ColumnValues ints{std::vector<int32_t>{-3}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kInt32), Column(parquet::Type::kInt64, LogicalType::kNone),
                                  &ints, "f").ok());
  EXPECT_EQ(std::get<std::vector<int64_t>>(ints.values)[0], -3);
  ColumnValues floats{std::vector<float>{1.5f}, {}};
  ASSERT_TRUE(ConvertToColumnType(Element(parquet::Type::kFloat), Column(parquet::Type::kDouble, LogicalType::kNone),
                                  &floats, "f").ok());
  EXPECT_EQ(std::get<std::vector<double>>(floats.values)[0], 1.5);
  ColumnValues longs{std::vector<int64_t>{1}, {}};
  EXPECT_EQ(ConvertToColumnType(Element(parquet::Type::kInt64), Column(parquet::Type::kInt32, LogicalType::kNone),
                                &longs, "f").code(),
            StatusCode::kCorruption);
}

}  // namespace
TEST(LogicalValue, Float16ColumnsReadAsFloat) {
  parquet::SchemaElement e = Element(parquet::Type::kFixedLenByteArray, parquet::LogicalType{.id = parquet::LogicalTypeId::kFloat16});
  e.type_length = 2;
  const ColumnSpec spec = ColumnOfStored(e);
  EXPECT_EQ(spec.type, parquet::Type::kFloat);
  ColumnValues values{std::vector<std::string>{std::string("\x00\x3c", 2), std::string("\x00\xbc", 2)}, {}};
  ASSERT_TRUE(ConvertToColumnType(e, spec, &values, "f").ok());
  EXPECT_EQ(std::get<std::vector<float>>(values.values), (std::vector<float>{1.0f, -1.0f}));
  ColumnValues bad{std::vector<std::string>{std::string("\x00", 1)}, {}};
  EXPECT_FALSE(ConvertToColumnType(e, spec, &bad, "f").ok());
}

}  // namespace stoke
