#include "format/dtype.h"

#include <fmt/format.h>

namespace stoke {
namespace {
constexpr std::string_view kNames[] = {"bool",   "int8",   "int16",   "int32",   "int64",   "uint8",
                                       "uint16", "uint32", "uint64", "float16", "float32", "float64", "bfloat16"};
constexpr size_t kSizes[] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 2};
}  // namespace

std::string_view DTypeName(DType dtype) { return kNames[static_cast<size_t>(dtype)]; }

std::optional<DType> DTypeOfPhysicalType(parquet::Type type) {
  switch (type) {
    case parquet::Type::kBoolean: return DType::kBool;
    case parquet::Type::kInt32: return DType::kInt32;
    case parquet::Type::kInt64: return DType::kInt64;
    case parquet::Type::kFloat: return DType::kFloat32;
    case parquet::Type::kDouble: return DType::kFloat64;
    default: return std::nullopt;
  }
}

size_t DTypeSize(DType dtype) { return kSizes[static_cast<size_t>(dtype)]; }

Result<DType> ParseDType(std::string_view name) {
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (kNames[i] == name) return static_cast<DType>(i);
  }
  return Status::InvalidArgument(fmt::format("unknown dtype '{}' (expected one of bool, int8..int64, "
                                             "uint8..uint64, float16, float32, float64, bfloat16)", name));
}

namespace {
constexpr std::string_view kColumnKindNames[] = {"scalar", "string",    "binary",  "tensor",
                                                 "date",   "timestamp", "decimal", "nested"};
}  // namespace

std::string_view ColumnKindName(ColumnKind kind) { return kColumnKindNames[static_cast<size_t>(kind)]; }

Result<ColumnKind> ParseColumnKind(std::string_view name) {
  for (size_t i = 0; i < std::size(kColumnKindNames); ++i) {
    if (kColumnKindNames[i] == name) return static_cast<ColumnKind>(i);
  }
  return Status::InvalidArgument(fmt::format(
      "column kind: unknown value '{}' (expected one of scalar, string, binary, tensor, date, timestamp, decimal, "
      "nested)",
      name));
}

}  // namespace stoke
