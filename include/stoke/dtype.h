// Element types of tensors. The names are NumPy's (bfloat16: PyTorch's) and are persisted (in
// `stoke.tensors` metadata): never rename one, only append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stoke/status.h"

namespace stoke {

enum class DType : uint8_t {
  kBool,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBFloat16,  // no NumPy equivalent: produced by the loader's cast, never read from .npy
};

// "bool", "int8", ..., "uint64", "float16", "float32", "float64", "bfloat16".
std::string_view DTypeName(DType dtype);
Result<DType> DTypeFromName(std::string_view name);
// Bytes per element: 1, 2, 4 or 8.
size_t DTypeSize(DType dtype);

}  // namespace stoke
