#include "format/dtype.h"

#include <fmt/format.h>

#include "core/enum_names.h"

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
constexpr EnumNames<ColumnKind, 8> kColumnKinds{{{"scalar", ColumnKind::kScalar},
                                                 {"string", ColumnKind::kString},
                                                 {"binary", ColumnKind::kBinary},
                                                 {"tensor", ColumnKind::kTensor},
                                                 {"date", ColumnKind::kDate},
                                                 {"timestamp", ColumnKind::kTimestamp},
                                                 {"decimal", ColumnKind::kDecimal},
                                                 {"nested", ColumnKind::kNested}}};
}  // namespace

std::string_view ColumnKindName(ColumnKind kind) { return NameIn(kColumnKinds, kind); }
Result<ColumnKind> ParseColumnKind(std::string_view name) { return ParseIn(kColumnKinds, "column kind", name); }

}  // namespace stoke
