// The loader's scalar values packed row by row (docs/architecture.md, "Reads out of mappings", who
// copies): one record per table row holding every selected scalar column's value, validity and
// string bytes, so that a batch row's scalars are one or two cache lines of one place instead of a
// random read per column (and two per string). Built once at Open (ScalarColumns::Read); immutable
// after: Gather may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "format/dtype.h"

namespace stoke {

struct ScalarColumn;

// Where a batch's scalar values go: per column, the values (DTypeSize(dtype) bytes a row), the
// strings of a string column, and the validity (left empty when the column has no null).
struct ScalarBatch {
  std::vector<std::vector<uint8_t>>* values;
  std::vector<std::vector<std::string>>* strings;
  std::vector<std::vector<uint8_t>>* valid;
};

class ScalarRows {
 public:
  // A record: the fixed part (per column: its value, or a string's u32 start within the record and
  // u32 length; then a validity byte per nullable column), then the string bytes.
  //
  // Lays the records out for `columns` (their dtypes and kinds), where column k has a null in some
  // row when nullable[k], and reserves `rows` rows holding `string_bytes` bytes of strings.
  void SetLayout(std::span<const ScalarColumn> columns, const std::vector<bool>& nullable, size_t rows,
                 size_t string_bytes);
  // Appends the rows of `part` (the columns of SetLayout, each of `rows` rows as ScalarColumn holds
  // them: values, strings, validity empty when none is null).
  void Append(std::span<const ScalarColumn> part, size_t rows);

  size_t num_rows() const { return rows_; }
  bool nullable(size_t column) const { return fields_[column].nullable; }

  // Copies the values of batch rows [begin, end) (table rows table_rows[begin, end)) into `out`: each
  // column's values, strings and validity sized for the batch. Disjoint ranges of one batch may be
  // gathered by different threads at once.
  void Gather(std::span<const int64_t> table_rows, size_t begin, size_t end, ScalarBatch out) const;

 private:
  struct Field {
    uint32_t offset = 0;        // in the fixed part: the value, or a string's start and length
    uint32_t size = 0;          // the value's bytes (8 for a string's start and length)
    uint32_t valid_offset = 0;  // in the fixed part, when nullable
    bool string = false;
    bool nullable = false;
  };
  const uint8_t* Record(int64_t row) const {
    const size_t r = static_cast<size_t>(row);
    return bytes_.data() + (starts_.empty() ? r * fixed_ : starts_[r]);
  }
  void AppendRow(std::span<const ScalarColumn> part, size_t r);

  std::vector<Field> fields_;
  size_t fixed_ = 0;              // bytes of a record's fixed part
  bool strings_ = false;          // a column is a string: records vary in length (starts_)
  std::vector<uint8_t> bytes_;    // the records, row after row
  std::vector<uint64_t> starts_;  // each record's start in bytes_, when strings_
  size_t rows_ = 0;
};

}  // namespace stoke
