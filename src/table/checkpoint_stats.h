// Typed statistics in checkpoints (PROTOCOL.md, "Checkpoints", "Checkpoint Schema"): where the table
// sets delta.checkpoint.writeStatsAsStruct, each add in a checkpoint carries stats_parsed, its
// statistics as a struct (numRecords; tightBounds where the JSON gives it; minValues and maxValues of
// the columns in their own types; nullCount, a long per column), and, when the table is partitioned,
// partitionValues_parsed, its partition values in their own types; both keyed by the columns'
// physical names under column mapping, as the JSON statistics and partition values are.
//
// Bounds are given for top-level columns of the types Delta keeps bounds for (numbers, strings,
// dates, timestamps, decimals of up to 18 digits); nullCount for every top-level column that is not
// nested. A value the JSON statistics do not give, or give in a form that does not convert, is null
// (unknown), as an absent one is.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/parquet_nested.h"
#include "table/delta_log.h"

namespace stoke::delta {

class TypedStats {
 public:
  // For the checkpoint of `snapshot`: nullopt unless the table sets writeStatsAsStruct. Errors as
  // ColumnsFromMetadata's, naming `table`; Unsupported for a partition column whose type stoke's
  // checkpoints do not write (a decimal of more than 18 digits), which partitionValues_parsed must
  // hold.
  static Result<std::optional<TypedStats>> For(const Snapshot& snapshot, std::string_view table);

  // The add struct's fields for them: stats_parsed, and partitionValues_parsed where partitioned.
  const std::vector<SchemaNode>& fields() const { return fields_; }
  // Sets them in `add_json`, the checkpoint row's add object for `add`.
  void AddTo(const AddFile& add, nlohmann::json* add_json) const;

 private:
  struct Column {
    ColumnSpec spec;
    bool bounds = false;  // minValues and maxValues hold it
  };
  std::vector<Column> columns_;     // the data files' columns, in schema order
  bool any_bounds_ = false;         // some column has bounds (minValues and maxValues are in the schema)
  std::vector<ColumnSpec> partitions_;
  std::vector<SchemaNode> fields_;

  // fields_ from columns_ and partitions_: stats_parsed, and partitionValues_parsed where there are
  // partitions.
  void SetFields();
};

// A JSON statistic or partition value (`value`: a number, a string, or for a partition value its
// text) as the JSON form of `column`'s leaf in a checkpoint (an integer for integers, dates as days,
// timestamps as microseconds and decimals unscaled; a number for floats; a string for strings; a
// bool for booleans); null where it does not convert or does not fit (a decimal beyond its precision,
// or given as a JSON number of more than 15 digits, whose digits a double did not keep).
nlohmann::json TypedStatValue(const ColumnSpec& column, const nlohmann::json& value);

}  // namespace stoke::delta
