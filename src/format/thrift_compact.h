// The Thrift compact protocol (apache/thrift doc/specs/thrift-compact-protocol.md), as much as
// Parquet's metadata needs: structs, lists, binary, bool, i8/i16/i32/i64, double; maps and sets are
// skipped when read. The reader is hardened against hostile input: every length is checked
// against the bytes present and nesting depth is bounded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/function_ref.h"
#include "stoke/status.h"

namespace stoke::thrift {

// Compact protocol type codes (persisted).
enum TypeCode : uint8_t {
  kStop = 0,
  kBoolTrue = 1,
  kBoolFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

// Reads one buffer. Not thread-safe. Errors are Corruption naming `context` (e.g. "footer of
// f.parquet") and the byte offset `base_offset + position` where the problem lies.
class CompactReader {
 public:
  static constexpr int kMaxDepth = 64;
  // Arrow's limits, so that what we accept every common reader accepts too.
  static constexpr uint64_t kMaxStringBytes = 100u << 20;
  static constexpr uint64_t kMaxListElements = 10'000'000;

  CompactReader(ByteView data, std::string context, uint64_t base_offset = 0)
      : data_(data), context_(std::move(context)), base_offset_(base_offset) {}

  size_t position() const { return pos_; }

  // Reads a struct: calls on_field(id, type) for each field; on_field must consume the value
  // (with the Read* calls below, or Skip(type)). Missing-required-field checks are the caller's.
  Status ReadStruct(FunctionRef<Status(int16_t id, uint8_t type)> on_field);

  // Field values; `type` is the field's wire type, checked against the expected one. A bool
  // struct field has no value byte: its type code (1 true, 2 false) is the value.
  Status ReadBool(uint8_t type, bool* out);
  Status ReadI8(uint8_t type, int8_t* out);
  Status ReadI16(uint8_t type, int16_t* out);
  Status ReadI32(uint8_t type, int32_t* out);
  Status ReadI64(uint8_t type, int64_t* out);
  Status ReadDouble(uint8_t type, double* out);
  Status ReadBinary(uint8_t type, std::string* out);
  // Reads a list header and calls on_element(index, elem_type) `size` times.
  Status ReadList(uint8_t type, FunctionRef<Status(uint32_t index, uint8_t elem_type)> on_element);
  // Convenience for lists of scalars.
  Status ReadI32List(uint8_t type, std::vector<int32_t>* out);
  Status ReadI64List(uint8_t type, std::vector<int64_t>* out);
  Status ReadBinaryList(uint8_t type, std::vector<std::string>* out);
  Status ReadBoolList(uint8_t type, std::vector<bool>* out);
  // Skips a value of the given wire type (any nesting, bounded by kMaxDepth).
  Status Skip(uint8_t type);

  // An error at the current position.
  Status Error(std::string_view what) const;

 private:
  Status ReadVarint(uint64_t* out);
  Status ReadZigZag(int64_t* out);
  Status ReadListHeader(uint8_t* elem_type, uint32_t* size);
  Status Expect(uint8_t type, uint8_t expected, std::string_view name) const;
  Status SkipDepth(uint8_t type, int depth);

  ByteView data_;
  std::string context_;
  uint64_t base_offset_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Appends to a string. Not thread-safe.
class CompactWriter {
 public:
  explicit CompactWriter(std::string* out) : out_(out) {}

  void FieldBool(int16_t id, bool v);
  void FieldI8(int16_t id, int8_t v);
  void FieldI16(int16_t id, int16_t v);
  void FieldI32(int16_t id, int32_t v);
  void FieldI64(int16_t id, int64_t v);
  void FieldDouble(int16_t id, double v);
  void FieldBinary(int16_t id, std::string_view v);
  // A struct field: BeginStructField, its fields, EndStruct.
  void BeginStructField(int16_t id);
  // A list field; then write `size` elements with the Element* calls (struct elements with
  // BeginStruct/EndStruct).
  void BeginListField(int16_t id, uint8_t elem_type, size_t size);
  void ElementI32(int32_t v) { WriteZigZag(v); }
  void ElementI64(int64_t v) { WriteZigZag(v); }
  void ElementBinary(std::string_view v);
  void ElementBool(bool v) { out_->push_back(v ? 1 : 2); }
  void BeginStruct();  // a struct as a list element or the top-level struct
  void EndStruct();    // writes the stop byte

 private:
  void FieldHeader(int16_t id, uint8_t type);
  void WriteVarint(uint64_t v);
  void WriteZigZag(int64_t v) { WriteVarint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }

  std::string* out_;
  std::vector<int16_t> last_ids_;  // last field id per open struct
};

}  // namespace stoke::thrift
