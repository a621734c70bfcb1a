#include "format/dtype.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(ColumnKinds, EveryNameReadsBackAndOthersAreRefusedByName) {
  for (ColumnKind k : {ColumnKind::kScalar, ColumnKind::kString, ColumnKind::kBinary, ColumnKind::kTensor,
                       ColumnKind::kDate, ColumnKind::kTimestamp, ColumnKind::kDecimal, ColumnKind::kNested}) {
    auto parsed = ParseColumnKind(ColumnKindName(k));
    ASSERT_TRUE(parsed.ok()) << ColumnKindName(k);
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(ColumnKindName(ColumnKind::kTensor), "tensor");
  auto bad = ParseColumnKind("matrix");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("column kind: unknown value 'matrix'"), std::string::npos);
}

TEST(DTypes, EveryNameReadsBack) {
  for (DType d : {DType::kBool, DType::kInt8, DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kInt32, DType::kUInt32,
                  DType::kInt64, DType::kUInt64, DType::kFloat16, DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  EXPECT_FALSE(ParseDType("float128").ok());
}

}  // namespace
}  // namespace stoke
