// Parquet's Thrift metadata structures (parquet.thrift) as plain C++ structs, with their compact
// protocol encoding and decoding. Only the fields stoke reads or writes are kept; unknown fields are
// skipped on read. Field ids are cited next to each member.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_types.h"
#include "stoke/status.h"

namespace stoke::parquet {

struct Statistics {
  std::optional<std::string> max;        // 1 (deprecated: signed comparison)
  std::optional<std::string> min;        // 2 (deprecated)
  std::optional<int64_t> null_count;     // 3
  std::optional<int64_t> distinct_count; // 4
  std::optional<std::string> max_value;  // 5
  std::optional<std::string> min_value;  // 6
};

// The LogicalType union, reduced to what stoke interprets.
struct LogicalType {
  LogicalTypeId id = LogicalTypeId::kNone;
  int8_t int_bit_width = 0;     // INTEGER: IntType.bitWidth
  bool int_signed = true;       // INTEGER: IntType.isSigned
  int32_t decimal_scale = 0;    // DECIMAL
  int32_t decimal_precision = 0;
  bool timestamp_utc = false;   // TIMESTAMP / TIME: isAdjustedToUTC
  int16_t time_unit = 0;        // TIMESTAMP / TIME: TimeUnit field id (1 millis, 2 micros, 3 nanos)
};

struct SchemaElement {
  std::optional<Type> type;                 // 1
  std::optional<int32_t> type_length;       // 2
  std::optional<Repetition> repetition;     // 3
  std::string name;                         // 4
  std::optional<int32_t> num_children;      // 5
  std::optional<ConvertedType> converted_type;  // 6
  std::optional<int32_t> scale;             // 7
  std::optional<int32_t> precision;         // 8
  std::optional<int32_t> field_id;          // 9
  std::optional<LogicalType> logical_type;  // 10
};

struct KeyValue {
  std::string key;                   // 1
  std::optional<std::string> value;  // 2
};

struct ColumnMetaData {
  Type type = Type::kBoolean;               // 1
  std::vector<Encoding> encodings;          // 2
  std::vector<std::string> path_in_schema;  // 3
  Codec codec = Codec::kUncompressed;       // 4
  int64_t num_values = 0;                   // 5
  int64_t total_uncompressed_size = 0;      // 6
  int64_t total_compressed_size = 0;        // 7
  std::vector<KeyValue> key_value_metadata; // 8 (stoke records its codec choice here: see docs/format.md)
  int64_t data_page_offset = 0;             // 9
  std::optional<int64_t> index_page_offset;       // 10
  std::optional<int64_t> dictionary_page_offset;  // 11
  std::optional<Statistics> statistics;           // 12
};

struct ColumnChunk {
  std::optional<std::string> file_path;             // 1
  int64_t file_offset = 0;                          // 2
  std::optional<ColumnMetaData> meta_data;          // 3
  std::optional<int64_t> offset_index_offset;       // 4
  std::optional<int32_t> offset_index_length;       // 5
  std::optional<int64_t> column_index_offset;       // 6
  std::optional<int32_t> column_index_length;       // 7
  bool encrypted = false;                           // 8 or 9 present
};

struct RowGroup {
  std::vector<ColumnChunk> columns;               // 1
  int64_t total_byte_size = 0;                    // 2
  int64_t num_rows = 0;                           // 3
  std::optional<int64_t> file_offset;             // 5
  std::optional<int64_t> total_compressed_size;   // 6
  std::optional<int16_t> ordinal;                 // 7
};

struct FileMetaData {
  int32_t version = 2;                                  // 1
  std::vector<SchemaElement> schema;                    // 2
  int64_t num_rows = 0;                                 // 3
  std::vector<RowGroup> row_groups;                     // 4
  std::vector<KeyValue> key_value_metadata;             // 5
  std::optional<std::string> created_by;                // 6
  // 7: column_orders; stoke writes TypeDefinedOrder for every leaf and reads only whether it is there.
  bool has_column_orders = false;
  bool encrypted = false;                               // 8 encryption_algorithm present
};

struct DataPageHeader {
  int32_t num_values = 0;                          // 1
  Encoding encoding = Encoding::kPlain;            // 2
  Encoding definition_level_encoding = Encoding::kRle;  // 3
  Encoding repetition_level_encoding = Encoding::kRle;  // 4
  friend bool operator==(const DataPageHeader&, const DataPageHeader&) = default;
};

struct DictionaryPageHeader {
  int32_t num_values = 0;                // 1
  Encoding encoding = Encoding::kPlain;  // 2
  bool is_sorted = false;                // 3
  friend bool operator==(const DictionaryPageHeader&, const DictionaryPageHeader&) = default;
};

struct DataPageHeaderV2 {
  int32_t num_values = 0;                      // 1
  int32_t num_nulls = 0;                       // 2
  int32_t num_rows = 0;                        // 3
  Encoding encoding = Encoding::kPlain;        // 4
  int32_t definition_levels_byte_length = 0;   // 5
  int32_t repetition_levels_byte_length = 0;   // 6
  bool is_compressed = true;                   // 7
  friend bool operator==(const DataPageHeaderV2&, const DataPageHeaderV2&) = default;
};

struct PageHeader {
  PageType type = PageType::kDataPage;   // 1
  int32_t uncompressed_page_size = 0;    // 2
  int32_t compressed_page_size = 0;      // 3
  std::optional<int32_t> crc;            // 4: CRC-32 of the stored page body (after compression)
  std::optional<DataPageHeader> data_page_header;              // 5
  std::optional<DictionaryPageHeader> dictionary_page_header;  // 7
  std::optional<DataPageHeaderV2> data_page_header_v2;         // 8
  friend bool operator==(const PageHeader&, const PageHeader&) = default;
};

struct PageLocation {
  int64_t offset = 0;                // 1: file offset of the page header
  int32_t compressed_page_size = 0;  // 2: header + stored body
  int64_t first_row_index = 0;       // 3: relative to the row group
};

struct OffsetIndex {
  std::vector<PageLocation> page_locations;  // 1
};

struct ColumnIndex {
  std::vector<bool> null_pages;            // 1
  std::vector<std::string> min_values;     // 2
  std::vector<std::string> max_values;     // 3
  BoundaryOrder boundary_order = BoundaryOrder::kUnordered;  // 4
  std::vector<int64_t> null_counts;        // 5 (empty when absent)
};

// Encoders append the compact-protocol bytes to `out`.
void SerializeFileMetaData(const FileMetaData& m, std::string* out);
void SerializePageHeader(const PageHeader& h, std::string* out);
void SerializeOffsetIndex(const OffsetIndex& oi, std::string* out);
void SerializeColumnIndex(const ColumnIndex& ci, std::string* out);

// Decoders. `context` names the file and structure for error messages ("footer of a.parquet");
// `base_offset` is the file offset of data[0], so errors give file offsets. `consumed` (when not
// null) receives the number of bytes the structure took.
Status ParseFileMetaData(ByteView data, const std::string& context, uint64_t base_offset, FileMetaData* out);
Status ParsePageHeader(ByteView data, const std::string& context, uint64_t base_offset, PageHeader* out,
                       size_t* consumed);
// ParsePageHeader without its fast path for the common data page header (one read per sample parses
// one): the general Thrift reader for any header. Both give the same result on every input; this one
// is public for the tests and the fuzz target that check so.
Status ParsePageHeaderInFull(ByteView data, const std::string& context, uint64_t base_offset, PageHeader* out,
                             size_t* consumed);
Status ParseOffsetIndex(ByteView data, const std::string& context, uint64_t base_offset, OffsetIndex* out);
Status ParseColumnIndex(ByteView data, const std::string& context, uint64_t base_offset, ColumnIndex* out);

}  // namespace stoke::parquet
