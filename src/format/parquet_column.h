// The column model shared by stoke's Parquet writer and reader: flat columns of scalars or tensors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "format/dtype.h"
#include "format/parquet_types.h"
#include "stoke/status.h"

namespace stoke {

// A fixed-shape tensor stored per row in a BYTE_ARRAY column as raw little-endian C-order bytes.
struct TensorSpec {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  int64_t num_bytes() const;  // product(shape) * DTypeSize(dtype)
  bool operator==(const TensorSpec&) const = default;
};

// What a scalar column's values mean beyond their physical type: Delta's primitive types that are
// not plain booleans, integers, floats, strings or bytes. A table column holds them in one canonical
// form whatever each file stores (format/logical_value.h converts): the physical `type` is that form.
enum class LogicalType : uint8_t {
  kNone,          // the physical type as it is
  kByte,          // INT32 in [-128, 127] (Delta "byte")
  kShort,         // INT32 in [-32768, 32767] ("short")
  kDate,          // INT32: days since 1970-01-01 ("date")
  kTimestamp,     // INT64: microseconds since 1970-01-01 00:00:00 UTC ("timestamp")
  kTimestampNtz,  // INT64: microseconds since 1970-01-01 00:00:00, no time zone ("timestamp_ntz")
  kDecimal,       // INT64 unscaled value (precision <= 18), else FIXED_LEN_BYTE_ARRAY(16) big-endian
                  // two's complement ("decimal(precision,scale)")
};

struct ColumnSpec {
  std::string name;
  parquet::Type type = parquet::Type::kInt64;  // physical type
  LogicalType logical = LogicalType::kNone;    // its meaning (scalar columns only)
  int32_t precision = 0;                       // kDecimal: total digits, 1..38
  int32_t scale = 0;                           // kDecimal: digits after the point, 0..precision
  bool optional = false;                       // OPTIONAL (nullable) instead of REQUIRED
  bool is_string = false;                      // BYTE_ARRAY annotated as STRING (UTF-8)
  std::optional<TensorSpec> tensor;            // BYTE_ARRAY holding one tensor per row
  // BYTE_ARRAY REQUIRED holding one variable-length binary value per row, unchanged (an encoded
  // image): laid out as tensors are, one value per data page listed in the OffsetIndex, statistics
  // with null_count only. Named in the `stoke.blobs` metadata.
  bool blob = false;
  // A struct, array or map column (of any depth): its Delta type as JSON text ({"type":"array",...});
  // empty for other columns. Read whole, one JSON text per row (BYTE_ARRAY values; see ReadNestedField).
  std::string nested_type;
  // Column mapping (Delta's columnMapping, modes name and id): the column's name in data files,
  // statistics and partition values, and its Parquet field id (mode id); empty / nullopt otherwise.
  std::string physical_name;
  std::optional<int32_t> field_id;

  bool nested() const { return !nested_type.empty(); }
  // The name the column has in data files, statistics and partition values.
  const std::string& file_name() const { return physical_name.empty() ? name : physical_name; }
  // Tensor and blob columns: one value per data page, so that reading a row is one positioned read.
  bool paged() const { return tensor.has_value() || blob; }
};

// Values of one column over a run of rows. `values` holds only the present (non-null) values, in row
// order; `defined` has one entry per row (1 = present) or is empty when every row is present.
using ValueVector = std::variant<std::vector<uint8_t>,      // BOOLEAN, as 0/1
                                 std::vector<int32_t>,      // INT32
                                 std::vector<int64_t>,      // INT64
                                 std::vector<float>,        // FLOAT
                                 std::vector<double>,       // DOUBLE
                                 std::vector<std::string>>; // BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY, INT96

struct ColumnValues {
  ValueVector values;
  std::vector<uint8_t> defined;

  size_t num_values() const;  // present values
  size_t num_rows() const { return defined.empty() ? num_values() : defined.size(); }
};

// Appends `src`'s rows to `dst` (same alternative), merging the `defined` vectors.
void AppendColumnValues(ColumnValues* dst, ColumnValues src);

// The rows `rows` (indices into the rows of `src`, any order, repeats allowed) as a new column.
ColumnValues TakeRows(const ColumnValues& src, const std::vector<size_t>& rows);

// An empty ValueVector of the alternative that holds values of physical type `type`.
ValueVector EmptyValuesFor(parquet::Type type);

// The `stoke.tensors` metadata (key-value metadata of the Parquet file and Delta configuration):
// {"volume": {"dtype": "float32", "shape": [30, 30, 10, 10]}}. Columns are named as data files name
// them (ColumnSpec::file_name: physical names under column mapping, which a rename keeps).
inline constexpr char kTensorsMetadataKey[] = "stoke.tensors";
std::string TensorSpecsToJson(const std::vector<ColumnSpec>& columns);
Result<std::map<std::string, TensorSpec>> TensorSpecsFromJson(std::string_view json, std::string_view context);

// The `stoke.blobs` metadata (both places, as stoke.tensors): the blob columns, as a JSON array of
// names: ["image"].
inline constexpr char kBlobsMetadataKey[] = "stoke.blobs";
std::string BlobColumnsToJson(const std::vector<ColumnSpec>& columns);
Result<std::set<std::string>> BlobColumnsFromJson(std::string_view json, std::string_view context);

// Metadata that image sources add (both places): which blob columns hold encoded images and in which
// formats, {"image": {"formats": ["jpeg", "png"]}}, and the class names of an ImageFolder's label
// column, {"label": ["cat", "dog"]} (label i is class i). `stoke optimize` carries both into the
// files it writes.
inline constexpr char kImagesMetadataKey[] = "stoke.images";
inline constexpr char kClassesMetadataKey[] = "stoke.classes";

}  // namespace stoke
