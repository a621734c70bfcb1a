// Delta's identity columns (PROTOCOL.md, "Identity Columns"): a column whose metadata declares
// `delta.identity.start` and `delta.identity.step` gets its values from the writer, each
// start + k * step (k >= 0) beyond `delta.identity.highWaterMark`, which the commit then raises to
// the last value generated. Unless `delta.identity.allowExplicitInsert` is true, a writer may not
// supply values of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stoke/status.h"

namespace stoke::delta {

struct IdentityColumn {
  std::string name;
  int64_t start = 1;
  int64_t step = 1;
  std::optional<int64_t> high_water_mark;
  bool allow_explicit_insert = false;
};

// The identity columns among the top-level fields of `schema_string`. Corruption, naming `where`
// and the column, for a start or step that is not a whole number, a step of 0, or a high-water mark
// that is not a whole number.
Result<std::vector<IdentityColumn>> IdentityColumns(std::string_view schema_string, std::string_view where);

// The first of `count` values an append generates, `column.step` apart: the least start + k * step
// (k >= 0) beyond the high-water mark and beyond `used` (the largest value the column holds; -1
// when it holds none, which skips values of a start below 0, still unique), for a positive step. Unsupported for a negative step; InvalidArgument
// when the values would overflow 64 bits. Errors name `where`.
Result<int64_t> FirstIdentityValue(const IdentityColumn& column, int64_t used, int64_t count, std::string_view where);

// `schema_string` with the high-water mark of top-level column `column` set to `value` (other
// fields, and the rest of its metadata, as they were).
std::string WithHighWaterMark(std::string_view schema_string, std::string_view column, int64_t value);

}  // namespace stoke::delta
