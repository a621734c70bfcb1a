// Nested Parquet (structs, lists, maps) as rows of JSON: enough for Delta Lake checkpoints
// (delta-io/delta PROTOCOL.md, "Checkpoint Schema"), written by stoke and read from any writer.
//
// Writing shreds each row into its leaf columns with definition and repetition levels (the Dremel
// algorithm) and writes them through RowGroupEncoder::SetLeveledColumn. Reading assembles records
// back from the levels of every leaf. Lists and maps are written in the standard three-level forms of
// parquet-format LogicalTypes.md ("Nested Types"):
//   <opt|req> group X (LIST) { repeated group list { <opt|req> <element> element; } }
//   <opt|req> group X (MAP) { repeated group key_value { required <key> key; <opt|req> <value> value; } }
// and read in those forms and the legacy ones listed in docs/format.md ("Nested columns").
//
// All functions are thread-compatible; none retains its arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "io/storage.h"

namespace stoke {

// A schema tree (the Parquet schema as nodes, not flattened).
struct SchemaNode {
  std::string name;
  // Of the node itself; for kList and kMap that of the outer group. kRepeated is not written (use
  // kList); SchemaTree never returns it.
  parquet::Repetition repetition = parquet::Repetition::kOptional;
  std::optional<parquet::Type> type;  // leaves only
  bool is_string = false;             // leaf BYTE_ARRAY annotated STRING
  // A leaf's meaning (a date, a timestamp, a decimal, ...), annotated as the flat writer annotates
  // columns (AnnotateLogicalType); precision and scale for kDecimal.
  LogicalType logical = LogicalType::kNone;
  int32_t precision = 0;
  int32_t scale = 0;
  size_t leaf = 0;                    // leaves SchemaTree returns: the reader's column (ParquetReader::columns())
  enum class Kind { kLeaf, kStruct, kList, kMap } kind = Kind::kLeaf;
  // Struct fields; for kList one element node; for kMap the key and value nodes (in that order).
  std::vector<SchemaNode> children;
};

// A leaf node named `name` of `column`'s type: its physical type, STRING annotation and LogicalType
// (precision and scale for decimals).
SchemaNode LeafNode(std::string name, const ColumnSpec& column);
// A struct node of `fields`.
SchemaNode StructNode(std::string name, std::vector<SchemaNode> fields);

// Writes `rows` as one Parquet file at `path`. `root_fields` is a kStruct whose children are the
// top-level columns. Rows are JSON objects (a missing member is null): objects for structs, arrays for
// lists, objects with string keys for maps, null for absent values; integers for INT32/INT64, bools,
// numbers for FLOAT/DOUBLE, strings for BYTE_ARRAY. A value of the wrong JSON type, a null in a
// REQUIRED field or a map key that is not a string leaf is InvalidArgument, naming the row and field.
// Rows are split into row groups of options.row_group_rows and pages of options.scalar_page_rows.
Status WriteNestedParquet(Storage& storage, const std::string& path, const SchemaNode& root_fields,
                          const std::vector<nlohmann::json>& rows, const WriterOptions& options);

// The same, one row at a time: only the rows of the row group being filled are held (shredded into
// their leaf columns), so a checkpoint of 650,000 actions never holds them all as JSON.
class NestedParquetWriter {
 public:
  static Result<std::unique_ptr<NestedParquetWriter>> Create(Storage& storage, const std::string& path,
                                                             const SchemaNode& root_fields, const WriterOptions& options);
  ~NestedParquetWriter();
  // Errors as WriteNestedParquet's; after an error the file is unusable (delete it).
  Status AddRow(const nlohmann::json& row);
  // Writes the last row group, the footer, and closes the file.
  Status Close();

 private:
  struct State;
  explicit NestedParquetWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Reads any Parquet file (flat or nested, stoke's or another engine's) back into rows of JSON objects
// keyed by top-level column, assembling records from the levels. INT64 and INT32 become JSON
// integers, BOOLEAN bools, FLOAT/DOUBLE numbers, BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY strings (an error
// naming the column unless the bytes are valid UTF-8), INT96 ISO-8601 timestamps ("...Z"). Levels that disagree
// between the leaves of one field, or with the row counts, are Corruption.
Result<std::vector<nlohmann::json>> ReadNestedParquet(const ParquetReader& reader);

// The values of the top-level field `name` (a struct, list or map at any depth, or a scalar) in row
// group `row_group`, one JSON value per row, null for a null: structs as objects with their fields
// in the file's order, lists as arrays, maps as objects keyed by the key's text. Leaves read as
// `stoke query` prints scalars, annotations applied (format/logical_value.h): numbers and booleans
// as JSON numbers and booleans (NaN and infinities as "nan", "inf", "-inf"), strings as strings,
// dates, timestamps and decimals as their ISO-8601 or exact text, other binary as
// "md5:<hex> len:<n>". NotFound when the file has no such field; levels that disagree are Corruption.
Result<std::vector<nlohmann::ordered_json>> ReadNestedField(const ParquetReader& reader, int row_group,
                                                            std::string_view name);

// The file's schema as a tree (root: a kStruct named after the schema root), with lists and maps
// recognised in the standard and legacy forms. A bare repeated field becomes a REQUIRED kList of
// REQUIRED elements. Shapes that are neither are Unsupported.
Result<SchemaNode> SchemaTree(const ParquetReader& reader);

}  // namespace stoke
