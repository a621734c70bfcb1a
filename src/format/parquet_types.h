// Parquet's persisted enum values, from apache/parquet-format src/main/thrift/parquet.thrift.
// These numbers are on disk in every Parquet file: never change one.
#pragma once

#include <cstdint>
#include <string_view>

namespace stoke::parquet {

inline constexpr char kMagic[4] = {'P', 'A', 'R', '1'};
inline constexpr int kFooterTrailerSize = 8;  // 4-byte footer length + "PAR1"

enum class Type : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};

enum class ConvertedType : int32_t {
  kUtf8 = 0,
  kMap = 1,
  kMapKeyValue = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kDate = 6,
  kTimeMillis = 7,
  kTimeMicros = 8,
  kTimestampMillis = 9,
  kTimestampMicros = 10,
  kUint8 = 11,
  kUint16 = 12,
  kUint32 = 13,
  kUint64 = 14,
  kInt8 = 15,
  kInt16 = 16,
  kInt32 = 17,
  kInt64 = 18,
  kJson = 19,
  kBson = 20,
  kInterval = 21,
};

enum class Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };

enum class Encoding : int32_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,  // deprecated
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9,
};

enum class Codec : int32_t {
  kUncompressed = 0,
  kSnappy = 1,
  kGzip = 2,
  kLzo = 3,
  kBrotli = 4,
  kLz4 = 5,  // deprecated Hadoop framing: never written
  kZstd = 6,
  kLz4Raw = 7,
};

enum class PageType : int32_t {
  kDataPage = 0,
  kIndexPage = 1,
  kDictionaryPage = 2,
  kDataPageV2 = 3,
};

enum class BoundaryOrder : int32_t { kUnordered = 0, kAscending = 1, kDescending = 2 };

// Field ids of the LogicalType union.
enum class LogicalTypeId : int16_t {
  kNone = 0,
  kString = 1,
  kMap = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kDate = 6,
  kTime = 7,
  kTimestamp = 8,
  kInteger = 10,
  kUnknown = 11,
  kJson = 12,
  kBson = 13,
  kUuid = 14,
  kFloat16 = 15,
};

std::string_view TypeName(Type t);
std::string_view EncodingName(Encoding e);
std::string_view CodecName(Codec c);
std::string_view PageTypeName(PageType t);
std::string_view RepetitionName(Repetition r);

}  // namespace stoke::parquet
