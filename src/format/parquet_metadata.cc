#include "format/parquet_metadata.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "format/thrift_compact.h"

namespace stoke::parquet {

using thrift::CompactReader;
using thrift::CompactWriter;

// ---------------------------------------------------------------------------------------------
// Encoding
namespace {

void WriteStatistics(CompactWriter& w, const Statistics& s) {
  if (s.max) w.FieldBinary(1, *s.max);
  if (s.min) w.FieldBinary(2, *s.min);
  if (s.null_count) w.FieldI64(3, *s.null_count);
  if (s.distinct_count) w.FieldI64(4, *s.distinct_count);
  if (s.max_value) w.FieldBinary(5, *s.max_value);
  if (s.min_value) w.FieldBinary(6, *s.min_value);
  w.EndStruct();
}

void WriteLogicalType(CompactWriter& w, const LogicalType& t) {
  w.BeginStructField(static_cast<int16_t>(t.id));
  switch (t.id) {
    case LogicalTypeId::kInteger:
      w.FieldI8(1, t.int_bit_width);
      w.FieldBool(2, t.int_signed);
      break;
    case LogicalTypeId::kDecimal:
      w.FieldI32(1, t.decimal_scale);
      w.FieldI32(2, t.decimal_precision);
      break;
    case LogicalTypeId::kTimestamp:
    case LogicalTypeId::kTime:
      w.FieldBool(1, t.timestamp_utc);
      w.BeginStructField(2);
      w.BeginStructField(t.time_unit);
      w.EndStruct();
      w.EndStruct();
      break;
    default: break;  // empty structs (StringType, DateType, ...)
  }
  w.EndStruct();
  w.EndStruct();
}

void WriteSchemaElement(CompactWriter& w, const SchemaElement& e) {
  w.BeginStruct();
  if (e.type) w.FieldI32(1, static_cast<int32_t>(*e.type));
  if (e.type_length) w.FieldI32(2, *e.type_length);
  if (e.repetition) w.FieldI32(3, static_cast<int32_t>(*e.repetition));
  w.FieldBinary(4, e.name);
  if (e.num_children) w.FieldI32(5, *e.num_children);
  if (e.converted_type) w.FieldI32(6, static_cast<int32_t>(*e.converted_type));
  if (e.scale) w.FieldI32(7, *e.scale);
  if (e.precision) w.FieldI32(8, *e.precision);
  if (e.field_id) w.FieldI32(9, *e.field_id);
  if (e.logical_type && e.logical_type->id != LogicalTypeId::kNone) {
    w.BeginStructField(10);
    WriteLogicalType(w, *e.logical_type);
  }
  w.EndStruct();
}

// A list<KeyValue> field; nothing when empty (the field is optional wherever Parquet has one).
void WriteKeyValues(CompactWriter& w, int16_t field, const std::vector<KeyValue>& kvs) {
  if (kvs.empty()) return;
  w.BeginListField(field, thrift::kStruct, kvs.size());
  for (const auto& kv : kvs) {
    w.BeginStruct();
    w.FieldBinary(1, kv.key);
    if (kv.value) w.FieldBinary(2, *kv.value);
    w.EndStruct();
  }
}

void WriteColumnMetaData(CompactWriter& w, const ColumnMetaData& m) {
  w.FieldI32(1, static_cast<int32_t>(m.type));
  w.BeginListField(2, thrift::kI32, m.encodings.size());
  for (Encoding e : m.encodings) w.ElementI32(static_cast<int32_t>(e));
  w.BeginListField(3, thrift::kBinary, m.path_in_schema.size());
  for (const auto& p : m.path_in_schema) w.ElementBinary(p);
  w.FieldI32(4, static_cast<int32_t>(m.codec));
  w.FieldI64(5, m.num_values);
  w.FieldI64(6, m.total_uncompressed_size);
  w.FieldI64(7, m.total_compressed_size);
  WriteKeyValues(w, 8, m.key_value_metadata);
  w.FieldI64(9, m.data_page_offset);
  if (m.index_page_offset) w.FieldI64(10, *m.index_page_offset);
  if (m.dictionary_page_offset) w.FieldI64(11, *m.dictionary_page_offset);
  if (m.statistics) {
    w.BeginStructField(12);
    WriteStatistics(w, *m.statistics);
  }
  w.EndStruct();
}

void WriteColumnChunk(CompactWriter& w, const ColumnChunk& c) {
  w.BeginStruct();
  if (c.file_path) w.FieldBinary(1, *c.file_path);
  w.FieldI64(2, c.file_offset);
  if (c.meta_data) {
    w.BeginStructField(3);
    WriteColumnMetaData(w, *c.meta_data);
  }
  if (c.offset_index_offset) w.FieldI64(4, *c.offset_index_offset);
  if (c.offset_index_length) w.FieldI32(5, *c.offset_index_length);
  if (c.column_index_offset) w.FieldI64(6, *c.column_index_offset);
  if (c.column_index_length) w.FieldI32(7, *c.column_index_length);
  w.EndStruct();
}

void WriteRowGroup(CompactWriter& w, const RowGroup& rg) {
  w.BeginStruct();
  w.BeginListField(1, thrift::kStruct, rg.columns.size());
  for (const auto& c : rg.columns) WriteColumnChunk(w, c);
  w.FieldI64(2, rg.total_byte_size);
  w.FieldI64(3, rg.num_rows);
  if (rg.file_offset) w.FieldI64(5, *rg.file_offset);
  if (rg.total_compressed_size) w.FieldI64(6, *rg.total_compressed_size);
  if (rg.ordinal) w.FieldI16(7, *rg.ordinal);
  w.EndStruct();
}

}  // namespace

void SerializeFileMetaData(const FileMetaData& m, std::string* out) {
  CompactWriter w(out);
  w.BeginStruct();
  w.FieldI32(1, m.version);
  w.BeginListField(2, thrift::kStruct, m.schema.size());
  for (const auto& e : m.schema) WriteSchemaElement(w, e);
  w.FieldI64(3, m.num_rows);
  w.BeginListField(4, thrift::kStruct, m.row_groups.size());
  for (const auto& rg : m.row_groups) WriteRowGroup(w, rg);
  WriteKeyValues(w, 5, m.key_value_metadata);
  if (m.created_by) w.FieldBinary(6, *m.created_by);
  if (m.has_column_orders) {
    // One ColumnOrder per leaf column, each the TypeDefinedOrder (field 1, an empty struct).
    size_t leaves = 0;
    for (const auto& e : m.schema) leaves += e.num_children.value_or(0) == 0 && e.type.has_value();
    w.BeginListField(7, thrift::kStruct, leaves);
    for (size_t i = 0; i < leaves; ++i) {
      w.BeginStruct();
      w.BeginStructField(1);
      w.EndStruct();
      w.EndStruct();
    }
  }
  w.EndStruct();
}

void SerializePageHeader(const PageHeader& h, std::string* out) {
  CompactWriter w(out);
  w.BeginStruct();
  w.FieldI32(1, static_cast<int32_t>(h.type));
  w.FieldI32(2, h.uncompressed_page_size);
  w.FieldI32(3, h.compressed_page_size);
  if (h.crc) w.FieldI32(4, *h.crc);
  if (h.data_page_header) {
    const auto& d = *h.data_page_header;
    w.BeginStructField(5);
    w.FieldI32(1, d.num_values);
    w.FieldI32(2, static_cast<int32_t>(d.encoding));
    w.FieldI32(3, static_cast<int32_t>(d.definition_level_encoding));
    w.FieldI32(4, static_cast<int32_t>(d.repetition_level_encoding));
    w.EndStruct();
  }
  if (h.dictionary_page_header) {
    const auto& d = *h.dictionary_page_header;
    w.BeginStructField(7);
    w.FieldI32(1, d.num_values);
    w.FieldI32(2, static_cast<int32_t>(d.encoding));
    w.FieldBool(3, d.is_sorted);
    w.EndStruct();
  }
  if (h.data_page_header_v2) {
    const auto& d = *h.data_page_header_v2;
    w.BeginStructField(8);
    w.FieldI32(1, d.num_values);
    w.FieldI32(2, d.num_nulls);
    w.FieldI32(3, d.num_rows);
    w.FieldI32(4, static_cast<int32_t>(d.encoding));
    w.FieldI32(5, d.definition_levels_byte_length);
    w.FieldI32(6, d.repetition_levels_byte_length);
    w.FieldBool(7, d.is_compressed);
    w.EndStruct();
  }
  w.EndStruct();
}

void SerializeOffsetIndex(const OffsetIndex& oi, std::string* out) {
  CompactWriter w(out);
  w.BeginStruct();
  w.BeginListField(1, thrift::kStruct, oi.page_locations.size());
  for (const auto& p : oi.page_locations) {
    w.BeginStruct();
    w.FieldI64(1, p.offset);
    w.FieldI32(2, p.compressed_page_size);
    w.FieldI64(3, p.first_row_index);
    w.EndStruct();
  }
  w.EndStruct();
}

void SerializeColumnIndex(const ColumnIndex& ci, std::string* out) {
  CompactWriter w(out);
  w.BeginStruct();
  w.BeginListField(1, thrift::kBoolTrue, ci.null_pages.size());
  for (bool b : ci.null_pages) w.ElementBool(b);
  w.BeginListField(2, thrift::kBinary, ci.min_values.size());
  for (const auto& v : ci.min_values) w.ElementBinary(v);
  w.BeginListField(3, thrift::kBinary, ci.max_values.size());
  for (const auto& v : ci.max_values) w.ElementBinary(v);
  w.FieldI32(4, static_cast<int32_t>(ci.boundary_order));
  if (!ci.null_counts.empty()) {
    w.BeginListField(5, thrift::kI64, ci.null_counts.size());
    for (int64_t n : ci.null_counts) w.ElementI64(n);
  }
  w.EndStruct();
}

// ---------------------------------------------------------------------------------------------
// Decoding
namespace {

// Tracks required fields of one struct.
class Required {
 public:
  // At most kMaxFields fields (a struct with more would need a larger array: checked in Saw's loop).
  static constexpr size_t kMaxFields = 12;
  Required(const char* struct_name, std::initializer_list<std::pair<int16_t, const char*>> fields)
      : struct_name_(struct_name), num_fields_(std::min(fields.size(), kMaxFields)) {
    std::copy_n(fields.begin(), num_fields_, fields_.begin());
  }
  void Saw(int16_t id) {
    for (size_t i = 0; i < num_fields_; ++i) {
      if (fields_[i].first == id) seen_ |= 1u << i;
    }
  }
  Status Check(const CompactReader& r) const {
    for (size_t i = 0; i < num_fields_; ++i) {
      if (!(seen_ & (1u << i))) {
        return r.Error(fmt::format("{} lacks required field '{}' ({})", struct_name_, fields_[i].second,
                                   fields_[i].first));
      }
    }
    return Status::OK();
  }

 private:
  const char* struct_name_;
  // A fixed array, not a vector: one is made per struct decoded (tens per footer).
  std::array<std::pair<int16_t, const char*>, kMaxFields> fields_{};
  size_t num_fields_;
  uint32_t seen_ = 0;
};

template <typename E>
Status ReadEnum(CompactReader& r, uint8_t type, E* out) {
  int32_t v = 0;
  STOKE_RETURN_IF_ERROR(r.ReadI32(type, &v));
  *out = static_cast<E>(v);
  return Status::OK();
}

template <typename E>
Status ReadOptEnum(CompactReader& r, uint8_t type, std::optional<E>* out) {
  E v{};
  STOKE_RETURN_IF_ERROR(ReadEnum(r, type, &v));
  *out = v;
  return Status::OK();
}

template <typename T>
Status ReadOpt(Status (CompactReader::*read)(uint8_t, T*), CompactReader& r, uint8_t type, std::optional<T>* out) {
  T v{};
  STOKE_RETURN_IF_ERROR((r.*read)(type, &v));
  *out = std::move(v);
  return Status::OK();
}

Status ExpectStruct(CompactReader& r, uint8_t type, const char* name) {
  if (type == thrift::kStruct) return Status::OK();
  return r.Error(fmt::format("expected struct for {}, found type code {}", name, type));
}

Status ReadStatistics(CompactReader& r, Statistics* s) {
  return r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    switch (id) {
      case 1: return ReadOpt(&CompactReader::ReadBinary, r, t, &s->max);
      case 2: return ReadOpt(&CompactReader::ReadBinary, r, t, &s->min);
      case 3: return ReadOpt(&CompactReader::ReadI64, r, t, &s->null_count);
      case 4: return ReadOpt(&CompactReader::ReadI64, r, t, &s->distinct_count);
      case 5: return ReadOpt(&CompactReader::ReadBinary, r, t, &s->max_value);
      case 6: return ReadOpt(&CompactReader::ReadBinary, r, t, &s->min_value);
      default: return r.Skip(t);
    }
  });
}

Status ReadTimeUnit(CompactReader& r, int16_t* unit) {
  return r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    *unit = id;
    return r.Skip(t);
  });
}

Status ReadLogicalType(CompactReader& r, LogicalType* lt) {
  return r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    lt->id = static_cast<LogicalTypeId>(id);
    if (t != thrift::kStruct) return r.Skip(t);
    switch (lt->id) {
      case LogicalTypeId::kInteger:
        return r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          if (f == 1) return r.ReadI8(ft, &lt->int_bit_width);
          if (f == 2) return r.ReadBool(ft, &lt->int_signed);
          return r.Skip(ft);
        });
      case LogicalTypeId::kDecimal:
        return r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          if (f == 1) return r.ReadI32(ft, &lt->decimal_scale);
          if (f == 2) return r.ReadI32(ft, &lt->decimal_precision);
          return r.Skip(ft);
        });
      case LogicalTypeId::kTimestamp:
      case LogicalTypeId::kTime:
        return r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          if (f == 1) return r.ReadBool(ft, &lt->timestamp_utc);
          if (f == 2 && ft == thrift::kStruct) return ReadTimeUnit(r, &lt->time_unit);
          return r.Skip(ft);
        });
      default: return r.Skip(t);
    }
  });
}

Status ReadSchemaElement(CompactReader& r, SchemaElement* e) {
  Required req("SchemaElement", {{4, "name"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return ReadOptEnum(r, t, &e->type);
      case 2: return ReadOpt(&CompactReader::ReadI32, r, t, &e->type_length);
      case 3: return ReadOptEnum(r, t, &e->repetition);
      case 4: return r.ReadBinary(t, &e->name);
      case 5: return ReadOpt(&CompactReader::ReadI32, r, t, &e->num_children);
      case 6: return ReadOptEnum(r, t, &e->converted_type);
      case 7: return ReadOpt(&CompactReader::ReadI32, r, t, &e->scale);
      case 8: return ReadOpt(&CompactReader::ReadI32, r, t, &e->precision);
      case 9: return ReadOpt(&CompactReader::ReadI32, r, t, &e->field_id);
      case 10:
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "SchemaElement.logicalType"));
        e->logical_type.emplace();
        return ReadLogicalType(r, &*e->logical_type);
      default: return r.Skip(t);
    }
  }));
  return req.Check(r);
}

Status ReadKeyValues(CompactReader& r, uint8_t t, std::vector<KeyValue>* out) {
  return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
    STOKE_RETURN_IF_ERROR(ExpectStruct(r, et, "KeyValue"));
    KeyValue kv;
    Required kreq("KeyValue", {{1, "key"}});
    STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
      kreq.Saw(f);
      if (f == 1) return r.ReadBinary(ft, &kv.key);
      if (f == 2) return ReadOpt(&CompactReader::ReadBinary, r, ft, &kv.value);
      return r.Skip(ft);
    }));
    STOKE_RETURN_IF_ERROR(kreq.Check(r));
    out->push_back(std::move(kv));
    return Status::OK();
  });
}

Status ReadColumnMetaData(CompactReader& r, ColumnMetaData* m) {
  Required req("ColumnMetaData", {{1, "type"},
                                  {2, "encodings"},
                                  {3, "path_in_schema"},
                                  {4, "codec"},
                                  {5, "num_values"},
                                  {6, "total_uncompressed_size"},
                                  {7, "total_compressed_size"},
                                  {9, "data_page_offset"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return ReadEnum(r, t, &m->type);
      case 2:
        m->encodings.clear();
        return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
          int32_t e = 0;
          STOKE_RETURN_IF_ERROR(r.ReadI32(et, &e));
          m->encodings.push_back(static_cast<Encoding>(e));
          return Status::OK();
        });
      case 3: return r.ReadBinaryList(t, &m->path_in_schema);
      case 4: return ReadEnum(r, t, &m->codec);
      case 5: return r.ReadI64(t, &m->num_values);
      case 6: return r.ReadI64(t, &m->total_uncompressed_size);
      case 7: return r.ReadI64(t, &m->total_compressed_size);
      case 8: return ReadKeyValues(r, t, &m->key_value_metadata);
      case 9: return r.ReadI64(t, &m->data_page_offset);
      case 10: return ReadOpt(&CompactReader::ReadI64, r, t, &m->index_page_offset);
      case 11: return ReadOpt(&CompactReader::ReadI64, r, t, &m->dictionary_page_offset);
      case 12:
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "ColumnMetaData.statistics"));
        m->statistics.emplace();
        return ReadStatistics(r, &*m->statistics);
      default: return r.Skip(t);
    }
  }));
  return req.Check(r);
}

Status ReadColumnChunk(CompactReader& r, ColumnChunk* c) {
  Required req("ColumnChunk", {{2, "file_offset"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return ReadOpt(&CompactReader::ReadBinary, r, t, &c->file_path);
      case 2: return r.ReadI64(t, &c->file_offset);
      case 3:
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "ColumnChunk.meta_data"));
        c->meta_data.emplace();
        return ReadColumnMetaData(r, &*c->meta_data);
      case 4: return ReadOpt(&CompactReader::ReadI64, r, t, &c->offset_index_offset);
      case 5: return ReadOpt(&CompactReader::ReadI32, r, t, &c->offset_index_length);
      case 6: return ReadOpt(&CompactReader::ReadI64, r, t, &c->column_index_offset);
      case 7: return ReadOpt(&CompactReader::ReadI32, r, t, &c->column_index_length);
      case 8:
      case 9: c->encrypted = true; return r.Skip(t);
      default: return r.Skip(t);
    }
  }));
  return req.Check(r);
}

Status ReadRowGroup(CompactReader& r, RowGroup* rg) {
  Required req("RowGroup", {{1, "columns"}, {2, "total_byte_size"}, {3, "num_rows"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1:
        rg->columns.clear();
        return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
          STOKE_RETURN_IF_ERROR(ExpectStruct(r, et, "RowGroup.columns element"));
          rg->columns.emplace_back();
          return ReadColumnChunk(r, &rg->columns.back());
        });
      case 2: return r.ReadI64(t, &rg->total_byte_size);
      case 3: return r.ReadI64(t, &rg->num_rows);
      case 5: return ReadOpt(&CompactReader::ReadI64, r, t, &rg->file_offset);
      case 6: return ReadOpt(&CompactReader::ReadI64, r, t, &rg->total_compressed_size);
      case 7: return ReadOpt(&CompactReader::ReadI16, r, t, &rg->ordinal);
      default: return r.Skip(t);
    }
  }));
  return req.Check(r);
}

}  // namespace

Status ParseFileMetaData(ByteView data, const std::string& context, uint64_t base_offset, FileMetaData* m) {
  CompactReader r(data, context, base_offset);
  *m = FileMetaData();
  Required req("FileMetaData", {{1, "version"}, {2, "schema"}, {3, "num_rows"}, {4, "row_groups"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return r.ReadI32(t, &m->version);
      case 2:
        return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
          STOKE_RETURN_IF_ERROR(ExpectStruct(r, et, "FileMetaData.schema element"));
          m->schema.emplace_back();
          return ReadSchemaElement(r, &m->schema.back());
        });
      case 3: return r.ReadI64(t, &m->num_rows);
      case 4:
        return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
          STOKE_RETURN_IF_ERROR(ExpectStruct(r, et, "FileMetaData.row_groups element"));
          m->row_groups.emplace_back();
          return ReadRowGroup(r, &m->row_groups.back());
        });
      case 5: return ReadKeyValues(r, t, &m->key_value_metadata);
      case 6: return ReadOpt(&CompactReader::ReadBinary, r, t, &m->created_by);
      case 7: m->has_column_orders = true; return r.Skip(t);
      case 8: m->encrypted = true; return r.Skip(t);
      default: return r.Skip(t);
    }
  }));
  return req.Check(r);
}

namespace {

// A canonical i32 field value: a zigzag varint of at most 5 bytes whose value is an i32. False
// otherwise (then the general parser decides, and reports what is wrong).
bool ReadCanonicalI32(ByteView data, size_t* pos, int32_t* out) {
  // The position is kept in a register and stored once: through *pos, each byte waited for the
  // store of the previous one's position.
  size_t at = *pos;
  uint64_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    if (at >= data.size()) return false;
    const uint8_t b = data[at++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      const int64_t z = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
      if (z < INT32_MIN || z > INT32_MAX) return false;
      *out = static_cast<int32_t>(z);
      *pos = at;
      return true;
    }
  }
  return false;
}

// The data page header as stoke and most writers encode it, read without the general parser's
// per-field dispatch (it is parsed once per sample read): fields 1-3 and the optional crc (4) as
// i32s, then data_page_header (5) of its four i32 fields, each field header one byte (id delta and
// type), and nothing else. False for any other bytes, which ParsePageHeader then reads in full;
// where it returns true, *h and *consumed are what the general parser gives (tested against it).
bool ParseCanonicalDataPageHeader(ByteView data, PageHeader* h, size_t* consumed) {
  constexpr uint8_t kNextI32 = 0x10 | thrift::kI32;       // the next field id, an i32
  constexpr uint8_t kNextStruct = 0x10 | thrift::kStruct;  // the next field id, a struct
  size_t pos = 0;
  int32_t v[8];
  auto field = [&](uint8_t header, int32_t* out) {
    return pos < data.size() && data[pos++] == header && ReadCanonicalI32(data, &pos, out);
  };
  if (!field(kNextI32, &v[0]) || !field(kNextI32, &v[1]) || !field(kNextI32, &v[2])) return false;
  if (pos >= data.size()) return false;
  const bool has_crc = data[pos] == kNextI32;
  if (has_crc && !field(kNextI32, &v[3])) return false;
  if (pos >= data.size() || data[pos++] != (has_crc ? kNextStruct : kNextStruct + 0x10)) return false;
  for (int i = 4; i < 8; ++i) {
    if (!field(kNextI32, &v[i])) return false;
  }
  if (data.size() - pos < 2 || data[pos] != thrift::kStop || data[pos + 1] != thrift::kStop) return false;
  if (v[1] < 0 || v[2] < 0) return false;  // the general parser's error
  *h = PageHeader();
  h->type = static_cast<PageType>(v[0]);
  h->uncompressed_page_size = v[1];
  h->compressed_page_size = v[2];
  if (has_crc) h->crc = v[3];
  h->data_page_header = DataPageHeader{v[4], static_cast<Encoding>(v[5]), static_cast<Encoding>(v[6]),
                                       static_cast<Encoding>(v[7])};
  if (consumed) *consumed = pos + 2;
  return true;
}

}  // namespace

Status ParsePageHeader(ByteView data, const std::string& context, uint64_t base_offset, PageHeader* h,
                       size_t* consumed) {
  if (ParseCanonicalDataPageHeader(data, h, consumed)) return Status::OK();
  return ParsePageHeaderInFull(data, context, base_offset, h, consumed);
}

Status ParsePageHeaderInFull(ByteView data, const std::string& context, uint64_t base_offset, PageHeader* h,
                             size_t* consumed) {
  CompactReader r(data, context, base_offset);
  *h = PageHeader();
  Required req("PageHeader", {{1, "type"}, {2, "uncompressed_page_size"}, {3, "compressed_page_size"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return ReadEnum(r, t, &h->type);
      case 2: return r.ReadI32(t, &h->uncompressed_page_size);
      case 3: return r.ReadI32(t, &h->compressed_page_size);
      case 4: return ReadOpt(&CompactReader::ReadI32, r, t, &h->crc);
      case 5: {
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "PageHeader.data_page_header"));
        auto& d = h->data_page_header.emplace();
        Required dreq("DataPageHeader", {{1, "num_values"}, {2, "encoding"}, {3, "definition_level_encoding"},
                                         {4, "repetition_level_encoding"}});
        STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          dreq.Saw(f);
          switch (f) {
            case 1: return r.ReadI32(ft, &d.num_values);
            case 2: return ReadEnum(r, ft, &d.encoding);
            case 3: return ReadEnum(r, ft, &d.definition_level_encoding);
            case 4: return ReadEnum(r, ft, &d.repetition_level_encoding);
            default: return r.Skip(ft);
          }
        }));
        return dreq.Check(r);
      }
      case 7: {
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "PageHeader.dictionary_page_header"));
        auto& d = h->dictionary_page_header.emplace();
        Required dreq("DictionaryPageHeader", {{1, "num_values"}, {2, "encoding"}});
        STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          dreq.Saw(f);
          switch (f) {
            case 1: return r.ReadI32(ft, &d.num_values);
            case 2: return ReadEnum(r, ft, &d.encoding);
            case 3: return r.ReadBool(ft, &d.is_sorted);
            default: return r.Skip(ft);
          }
        }));
        return dreq.Check(r);
      }
      case 8: {
        STOKE_RETURN_IF_ERROR(ExpectStruct(r, t, "PageHeader.data_page_header_v2"));
        auto& d = h->data_page_header_v2.emplace();
        Required dreq("DataPageHeaderV2", {{1, "num_values"},
                                           {2, "num_nulls"},
                                           {3, "num_rows"},
                                           {4, "encoding"},
                                           {5, "definition_levels_byte_length"},
                                           {6, "repetition_levels_byte_length"}});
        STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
          dreq.Saw(f);
          switch (f) {
            case 1: return r.ReadI32(ft, &d.num_values);
            case 2: return r.ReadI32(ft, &d.num_nulls);
            case 3: return r.ReadI32(ft, &d.num_rows);
            case 4: return ReadEnum(r, ft, &d.encoding);
            case 5: return r.ReadI32(ft, &d.definition_levels_byte_length);
            case 6: return r.ReadI32(ft, &d.repetition_levels_byte_length);
            case 7: return r.ReadBool(ft, &d.is_compressed);
            default: return r.Skip(ft);
          }
        }));
        return dreq.Check(r);
      }
      default: return r.Skip(t);
    }
  }));
  STOKE_RETURN_IF_ERROR(req.Check(r));
  if (h->compressed_page_size < 0 || h->uncompressed_page_size < 0) {
    return r.Error(fmt::format("negative page size (compressed {}, uncompressed {})", h->compressed_page_size,
                               h->uncompressed_page_size));
  }
  if (consumed) *consumed = r.position();
  return Status::OK();
}

Status ParseOffsetIndex(ByteView data, const std::string& context, uint64_t base_offset, OffsetIndex* oi) {
  CompactReader r(data, context, base_offset);
  *oi = OffsetIndex();
  Required req("OffsetIndex", {{1, "page_locations"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    if (id != 1) return r.Skip(t);
    return r.ReadList(t, [&](uint32_t, uint8_t et) -> Status {
      STOKE_RETURN_IF_ERROR(ExpectStruct(r, et, "PageLocation"));
      PageLocation p;
      Required preq("PageLocation", {{1, "offset"}, {2, "compressed_page_size"}, {3, "first_row_index"}});
      STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t f, uint8_t ft) -> Status {
        preq.Saw(f);
        switch (f) {
          case 1: return r.ReadI64(ft, &p.offset);
          case 2: return r.ReadI32(ft, &p.compressed_page_size);
          case 3: return r.ReadI64(ft, &p.first_row_index);
          default: return r.Skip(ft);
        }
      }));
      STOKE_RETURN_IF_ERROR(preq.Check(r));
      oi->page_locations.push_back(p);
      return Status::OK();
    });
  }));
  return req.Check(r);
}

Status ParseColumnIndex(ByteView data, const std::string& context, uint64_t base_offset, ColumnIndex* ci) {
  CompactReader r(data, context, base_offset);
  *ci = ColumnIndex();
  Required req("ColumnIndex", {{1, "null_pages"}, {2, "min_values"}, {3, "max_values"}, {4, "boundary_order"}});
  STOKE_RETURN_IF_ERROR(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
    req.Saw(id);
    switch (id) {
      case 1: return r.ReadBoolList(t, &ci->null_pages);
      case 2: return r.ReadBinaryList(t, &ci->min_values);
      case 3: return r.ReadBinaryList(t, &ci->max_values);
      case 4: return ReadEnum(r, t, &ci->boundary_order);
      case 5: return r.ReadI64List(t, &ci->null_counts);
      default: return r.Skip(t);
    }
  }));
  STOKE_RETURN_IF_ERROR(req.Check(r));
  size_t n = ci->null_pages.size();
  if (ci->min_values.size() != n || ci->max_values.size() != n || (!ci->null_counts.empty() && ci->null_counts.size() != n)) {
    return r.Error("ColumnIndex lists have different lengths");
  }
  return Status::OK();
}

}  // namespace stoke::parquet
