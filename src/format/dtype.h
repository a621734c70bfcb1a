// Element types of tensors: the enum is public (stoke/dtype.h), as loader batches carry it.
#pragma once

#include <optional>

#include "format/parquet_types.h"
#include "stoke/dtype.h"

namespace stoke {

// The dtype a number of Parquet physical type `type` is held as: BOOLEAN bool, INT32 int32, INT64
// int64, FLOAT float32, DOUBLE float64; nullopt for the byte types (and INT96).
std::optional<DType> DTypeOfPhysicalType(parquet::Type type);

}  // namespace stoke
