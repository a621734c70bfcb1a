#include "format/parquet_types.h"

namespace stoke::parquet {

std::string_view TypeName(Type t) {
  switch (t) {
    case Type::kBoolean: return "BOOLEAN";
    case Type::kInt32: return "INT32";
    case Type::kInt64: return "INT64";
    case Type::kInt96: return "INT96";
    case Type::kFloat: return "FLOAT";
    case Type::kDouble: return "DOUBLE";
    case Type::kByteArray: return "BYTE_ARRAY";
    case Type::kFixedLenByteArray: return "FIXED_LEN_BYTE_ARRAY";
  }
  return "UNKNOWN_TYPE";
}

std::string_view EncodingName(Encoding e) {
  switch (e) {
    case Encoding::kPlain: return "PLAIN";
    case Encoding::kPlainDictionary: return "PLAIN_DICTIONARY";
    case Encoding::kRle: return "RLE";
    case Encoding::kBitPacked: return "BIT_PACKED";
    case Encoding::kDeltaBinaryPacked: return "DELTA_BINARY_PACKED";
    case Encoding::kDeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::kDeltaByteArray: return "DELTA_BYTE_ARRAY";
    case Encoding::kRleDictionary: return "RLE_DICTIONARY";
    case Encoding::kByteStreamSplit: return "BYTE_STREAM_SPLIT";
  }
  return "UNKNOWN_ENCODING";
}

std::string_view CodecName(Codec c) {
  switch (c) {
    case Codec::kUncompressed: return "UNCOMPRESSED";
    case Codec::kSnappy: return "SNAPPY";
    case Codec::kGzip: return "GZIP";
    case Codec::kLzo: return "LZO";
    case Codec::kBrotli: return "BROTLI";
    case Codec::kLz4: return "LZ4";
    case Codec::kZstd: return "ZSTD";
    case Codec::kLz4Raw: return "LZ4_RAW";
  }
  return "UNKNOWN_CODEC";
}

std::string_view PageTypeName(PageType t) {
  switch (t) {
    case PageType::kDataPage: return "DATA_PAGE";
    case PageType::kIndexPage: return "INDEX_PAGE";
    case PageType::kDictionaryPage: return "DICTIONARY_PAGE";
    case PageType::kDataPageV2: return "DATA_PAGE_V2";
  }
  return "UNKNOWN_PAGE_TYPE";
}

std::string_view RepetitionName(Repetition r) {
  switch (r) {
    case Repetition::kRequired: return "REQUIRED";
    case Repetition::kOptional: return "OPTIONAL";
    case Repetition::kRepeated: return "REPEATED";
  }
  return "UNKNOWN_REPETITION";
}

}  // namespace stoke::parquet
