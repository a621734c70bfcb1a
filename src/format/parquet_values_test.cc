#include "format/parquet_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/parquet_encoding.h"

namespace stoke {
namespace {

using parquet::Encoding;
using parquet::Type;

LeafColumn Column(Type type, int32_t type_length = 0) {
  LeafColumn c;
  c.name = "c";
  c.type = type;
  c.type_length = type_length;
  return c;
}

TEST(DecodeValues, PlainAndDictionaryValuesAppend) {
  std::string plain;
  const std::vector<int32_t> ints = {3, -1, 7};
  parquet::EncodePlain(std::span<const int32_t>(ints), &plain);
  ValueVector out = std::vector<int32_t>{42};
  ASSERT_TRUE(DecodeValues(Column(Type::kInt32), Encoding::kPlain, AsBytes(plain), 3, nullptr, &out).ok());
  EXPECT_EQ(std::get<std::vector<int32_t>>(out), (std::vector<int32_t>{42, 3, -1, 7}));
  // Dictionary indices: a bit-width byte, then the RLE/bit-packed hybrid.
  std::string indices(1, '\x02');
  parquet::EncodeRleBitPackedHybrid(std::vector<uint32_t>{2, 0, 2}, 2, &indices);
  const ValueVector dict = std::vector<int32_t>{10, 20, 30};
  ValueVector looked_up = std::vector<int32_t>{};
  ASSERT_TRUE(DecodeValues(Column(Type::kInt32), Encoding::kRleDictionary, AsBytes(indices), 3, &dict, &looked_up).ok());
  EXPECT_EQ(std::get<std::vector<int32_t>>(looked_up), (std::vector<int32_t>{30, 10, 30}));
}

TEST(DecodeValues, BadPagesAreCorruptionAndImpossibleEncodingsUnsupported) {
  std::string indices(1, '\x02');
  parquet::EncodeRleBitPackedHybrid(std::vector<uint32_t>{3}, 2, &indices);
  const ValueVector dict = std::vector<int32_t>{10, 20, 30};
  ValueVector out = std::vector<int32_t>{};
  // An index past the dictionary, and a dictionary-encoded page without one.
  EXPECT_EQ(DecodeValues(Column(Type::kInt32), Encoding::kRleDictionary, AsBytes(indices), 1, &dict, &out).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeValues(Column(Type::kInt32), Encoding::kPlainDictionary, AsBytes(indices), 1, nullptr, &out).code(),
            StatusCode::kCorruption);
  // Fewer bytes than the values need.
  EXPECT_EQ(DecodeValues(Column(Type::kInt32), Encoding::kPlain, AsBytes(std::string(5, '\0')), 2, nullptr, &out).code(),
            StatusCode::kCorruption);
  // BYTE_STREAM_SPLIT of booleans cannot exist; RLE is for booleans only.
  ValueVector bools = std::vector<uint8_t>{};
  EXPECT_EQ(DecodeValues(Column(Type::kBoolean), Encoding::kByteStreamSplit, AsBytes(std::string(2, '\0')), 2, nullptr,
                         &bools)
                .code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeValues(Column(Type::kInt32), Encoding::kRle, AsBytes(std::string(8, '\0')), 2, nullptr, &out).code(),
            StatusCode::kUnsupported);
}

}  // namespace
}  // namespace stoke
