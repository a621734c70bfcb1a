// What a column's values are: its kind (ColumnKind: scalars, strings, bytes or tensors) and the
// element type of its numbers (DType). Batches (loader.h) and query results (table.h) describe their
// columns with both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "stoke/status.h"

namespace stoke {

// Element types of tensors and numeric columns. The names are NumPy's (bfloat16: PyTorch's) and are
// persisted (in `stoke.tensors` metadata): never rename one, only append.
enum class DType : uint8_t {
  kBool,      // one byte, 0 or 1
  kInt8,      // signed integers of 8, 16, 32 and 64 bits
  kInt16,     // int16
  kInt32,     // int32
  kInt64,     // int64
  kUInt8,     // unsigned integers of 8, 16, 32 and 64 bits
  kUInt16,    // uint16
  kUInt32,    // uint32
  kUInt64,    // uint64
  kFloat16,   // IEEE 754 binary16
  kFloat32,   // IEEE 754 binary32
  kFloat64,   // IEEE 754 binary64
  kBFloat16,  // no NumPy equivalent: produced by the loader's cast, never read from .npy
};

// "bool", "int8", ..., "uint64", "float16", "float32", "float64", "bfloat16".
std::string_view DTypeName(DType dtype);
// The DType named `name` (as DTypeName spells it); InvalidArgument listing the names otherwise.
Result<DType> ParseDType(std::string_view name);
// Bytes per element: 1, 2, 4 or 8.
size_t DTypeSize(DType dtype);

// How a column of a batch or a query result holds its rows. Not persisted.
enum class ColumnKind {
  kScalar,  // one element of the column's dtype per row (integers, floats, booleans), in its data buffer
  kString,  // UTF-8 text per row, in its `strings`
  kBinary,  // raw bytes per row, in its `strings` (BYTE_ARRAY without a STRING annotation, INT96);
            // query results only: the loader refuses binary scalar columns
  kTensor,  // one C-order array of the column's dtype and sample shape per row, in its data buffer
  // Query results only (the loader delivers dates as int32 days and timestamps as int64 microseconds):
  kDate,       // int64 days since 1970-01-01 per row, in its data buffer (NumPy's datetime64[D])
  kTimestamp,  // int64 microseconds since 1970-01-01 00:00:00 per row (UTC for Delta's timestamp, none
               // for timestamp_ntz), in its data buffer (NumPy's datetime64[us])
  kDecimal,    // the exact decimal text per row ("-12.50"), in its `strings`
  kNested,     // a struct, array or map per row as JSON text (objects, arrays; leaves as kString's,
               // kDecimal's and ISO-8601 text), in its `strings`
};

// "scalar", "string", "binary", "tensor", "date", "timestamp", "decimal" or "nested".
std::string_view ColumnKindName(ColumnKind kind);
// The kind of that name; InvalidArgument "column kind: unknown value ..." otherwise.
Result<ColumnKind> ParseColumnKind(std::string_view name);

}  // namespace stoke
