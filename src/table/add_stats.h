// The statistics of a Delta add action (its "stats" JSON text: numRecords, and minValues, maxValues
// and nullCount per column), read with simdjson. A table of 650,000 one-row files carries as many of
// these texts (about 180 MB); opening, counting and loading it read them all, so they are parsed
// without building a document of nlohmann::json values (simdjson reads them several times faster).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "format/parquet_column.h"
#include "table/predicate.h"

namespace stoke {

// Reads stats texts into the bounds of a fixed list of columns; keys of other columns are ignored.
// Semantics (those of the parsed document, applied in text order): the last of duplicate keys
// wins; a nested value (object or array) where a scalar belongs is unknown; a value whose JSON type
// does not fit the column (a string for an INT64 column, 2.5 for an INT32 one) is unknown; a
// string maximum of 32 bytes or more is dropped (Delta writers truncate string statistics, so it
// may be below the true maximum); tensor and blob columns get no bounds, only their null count.
// Malformed text (not JSON, not an object, trailing bytes, invalid UTF-8) leaves everything unknown.
//
// Not thread-safe: one reader per thread (it holds simdjson's parser and a padded copy buffer).
class AddStatsReader {
 public:
  // `columns` must outlive the reader.
  explicit AddStatsReader(const std::vector<ColumnSpec>& columns);
  ~AddStatsReader();
  AddStatsReader(const AddStatsReader&) = delete;
  AddStatsReader& operator=(const AddStatsReader&) = delete;

  const std::vector<ColumnSpec>& columns() const { return columns_; }

  // The top-level "numRecords": -1 when it is missing, not a non-negative int64, or the text is
  // malformed.
  int64_t NumRecords(std::string_view stats);
  // Fills (*out)[c] for columns()[c] (resized to columns().size(), unknown where the text says
  // nothing) and *num_records as NumRecords does. False when the text is malformed: then every
  // bound is unknown.
  bool Read(std::string_view stats, std::vector<Predicate::ColumnStats>* out, int64_t* num_records);

 private:
  struct Parser;  // simdjson's, kept out of this header
  const std::vector<ColumnSpec>& columns_;
  std::unique_ptr<Parser> parser_;
};

}  // namespace stoke
