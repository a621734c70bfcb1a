#include "format/thrift_compact.h"

#include <fmt/format.h>

#include <cstring>

namespace stoke::thrift {
namespace {

std::string_view TypeCodeName(uint8_t t) {
  switch (t) {
    case kStop: return "stop";
    case kBoolTrue:
    case kBoolFalse: return "bool";
    case kByte: return "i8";
    case kI16: return "i16";
    case kI32: return "i32";
    case kI64: return "i64";
    case kDouble: return "double";
    case kBinary: return "binary";
    case kList: return "list";
    case kSet: return "set";
    case kMap: return "map";
    case kStruct: return "struct";
  }
  return "invalid type";
}

}  // namespace

Status CompactReader::Error(std::string_view what) const {
  return Status::Corruption(fmt::format("{}: offset {}: thrift: {}", context_, base_offset_ + pos_, what));
}

Status CompactReader::ReadVarint(uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= data_.size()) return Error("truncated varint");
    uint8_t b = data_[pos_++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return Status::OK();
    }
  }
  return Error("varint longer than 10 bytes");
}

Status CompactReader::ReadZigZag(int64_t* out) {
  uint64_t v;
  STOKE_RETURN_IF_ERROR(ReadVarint(&v));
  *out = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  return Status::OK();
}

Status CompactReader::Expect(uint8_t type, uint8_t expected, std::string_view name) const {
  if (type == expected) return Status::OK();
  return Error(fmt::format("expected {} for {}, found {} (type code {})", TypeCodeName(expected), name,
                           TypeCodeName(type), type));
}

Status CompactReader::ReadStruct(FunctionRef<Status(int16_t, uint8_t)> on_field) {
  if (++depth_ > kMaxDepth) {
    --depth_;
    return Error(fmt::format("structs nested deeper than {}", kMaxDepth));
  }
  int16_t last_id = 0;
  Status result;
  for (;;) {
    if (pos_ >= data_.size()) {
      result = Error("truncated struct (no stop byte)");
      break;
    }
    uint8_t header = data_[pos_++];
    uint8_t type = header & 0x0f;
    if (type == kStop) break;
    if (type > kStruct) {
      --pos_;
      result = Error(fmt::format("invalid field type code {}", type));
      break;
    }
    int16_t id;
    uint8_t delta = header >> 4;
    if (delta != 0) {
      id = static_cast<int16_t>(last_id + delta);
    } else {
      int64_t v;
      result = ReadZigZag(&v);
      if (!result.ok()) break;
      if (v < INT16_MIN || v > INT16_MAX) {
        result = Error("field id out of i16 range");
        break;
      }
      id = static_cast<int16_t>(v);
    }
    last_id = id;
    result = on_field(id, type);
    if (!result.ok()) break;
  }
  --depth_;
  return result;
}

Status CompactReader::ReadBool(uint8_t type, bool* out) {
  if (type != kBoolTrue && type != kBoolFalse) return Expect(type, kBoolTrue, "bool field");
  *out = type == kBoolTrue;
  return Status::OK();
}

Status CompactReader::ReadI8(uint8_t type, int8_t* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kByte, "i8 field"));
  if (pos_ >= data_.size()) return Error("truncated i8");
  *out = static_cast<int8_t>(data_[pos_++]);
  return Status::OK();
}

Status CompactReader::ReadI16(uint8_t type, int16_t* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kI16, "i16 field"));
  int64_t v;
  STOKE_RETURN_IF_ERROR(ReadZigZag(&v));
  if (v < INT16_MIN || v > INT16_MAX) return Error("i16 out of range");
  *out = static_cast<int16_t>(v);
  return Status::OK();
}

Status CompactReader::ReadI32(uint8_t type, int32_t* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kI32, "i32 field"));
  int64_t v;
  STOKE_RETURN_IF_ERROR(ReadZigZag(&v));
  if (v < INT32_MIN || v > INT32_MAX) return Error("i32 out of range");
  *out = static_cast<int32_t>(v);
  return Status::OK();
}

Status CompactReader::ReadI64(uint8_t type, int64_t* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kI64, "i64 field"));
  return ReadZigZag(out);
}

Status CompactReader::ReadDouble(uint8_t type, double* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kDouble, "double field"));
  if (data_.size() - pos_ < 8) return Error("truncated double");
  std::memcpy(out, data_.data() + pos_, 8);
  pos_ += 8;
  return Status::OK();
}

Status CompactReader::ReadBinary(uint8_t type, std::string* out) {
  STOKE_RETURN_IF_ERROR(Expect(type, kBinary, "binary field"));
  uint64_t n;
  STOKE_RETURN_IF_ERROR(ReadVarint(&n));
  if (n > kMaxStringBytes) return Error(fmt::format("binary of {} bytes exceeds the {} byte limit", n, kMaxStringBytes));
  if (n > data_.size() - pos_) {
    return Error(fmt::format("binary of {} bytes runs past the end ({} bytes left)", n, data_.size() - pos_));
  }
  out->assign(reinterpret_cast<const char*>(data_.data() + pos_), n);
  pos_ += n;
  return Status::OK();
}

Status CompactReader::ReadListHeader(uint8_t* elem_type, uint32_t* size) {
  if (pos_ >= data_.size()) return Error("truncated list header");
  uint8_t h = data_[pos_++];
  *elem_type = h & 0x0f;
  uint64_t n = h >> 4;
  if (n == 15) STOKE_RETURN_IF_ERROR(ReadVarint(&n));
  if (*elem_type == kStop || *elem_type > kStruct) return Error(fmt::format("invalid list element type {}", *elem_type));
  if (n > kMaxListElements) return Error(fmt::format("list of {} elements exceeds the {} limit", n, kMaxListElements));
  // Every element takes at least one byte: a size beyond the bytes left is a lie.
  if (n > data_.size() - pos_) return Error(fmt::format("list of {} elements but only {} bytes left", n, data_.size() - pos_));
  *size = static_cast<uint32_t>(n);
  return Status::OK();
}

Status CompactReader::ReadList(uint8_t type, FunctionRef<Status(uint32_t, uint8_t)> on_element) {
  if (type != kList && type != kSet) return Expect(type, kList, "list field");
  uint8_t elem_type;
  uint32_t n;
  STOKE_RETURN_IF_ERROR(ReadListHeader(&elem_type, &n));
  if (++depth_ > kMaxDepth) {
    --depth_;
    return Error(fmt::format("lists nested deeper than {}", kMaxDepth));
  }
  Status s;
  for (uint32_t i = 0; i < n && s.ok(); ++i) s = on_element(i, elem_type);
  --depth_;
  return s;
}

Status CompactReader::ReadI32List(uint8_t type, std::vector<int32_t>* out) {
  out->clear();
  return ReadList(type, [&](uint32_t, uint8_t et) -> Status {
    STOKE_RETURN_IF_ERROR(Expect(et, kI32, "i32 list element"));
    int64_t v;
    STOKE_RETURN_IF_ERROR(ReadZigZag(&v));
    if (v < INT32_MIN || v > INT32_MAX) return Error("i32 out of range");
    out->push_back(static_cast<int32_t>(v));
    return Status::OK();
  });
}

Status CompactReader::ReadI64List(uint8_t type, std::vector<int64_t>* out) {
  out->clear();
  return ReadList(type, [&](uint32_t, uint8_t et) -> Status {
    STOKE_RETURN_IF_ERROR(Expect(et, kI64, "i64 list element"));
    int64_t v;
    STOKE_RETURN_IF_ERROR(ReadZigZag(&v));
    out->push_back(v);
    return Status::OK();
  });
}

Status CompactReader::ReadBinaryList(uint8_t type, std::vector<std::string>* out) {
  out->clear();
  return ReadList(type, [&](uint32_t, uint8_t et) -> Status {
    out->emplace_back();
    return ReadBinary(et, &out->back());
  });
}

Status CompactReader::ReadBoolList(uint8_t type, std::vector<bool>* out) {
  out->clear();
  return ReadList(type, [&](uint32_t, uint8_t et) -> Status {
    if (et != kBoolTrue && et != kBoolFalse) return Expect(et, kBoolTrue, "bool list element");
    if (pos_ >= data_.size()) return Error("truncated bool list");
    // Elements are written as 1 (true) / 2 (false); some writers use 0 for false.
    out->push_back(data_[pos_++] == 1);
    return Status::OK();
  });
}

Status CompactReader::Skip(uint8_t type) { return SkipDepth(type, 0); }

Status CompactReader::SkipDepth(uint8_t type, int depth) {
  if (depth_ + depth > kMaxDepth) return Error(fmt::format("values nested deeper than {}", kMaxDepth));
  uint64_t u;
  switch (type) {
    case kBoolTrue:
    case kBoolFalse: return Status::OK();  // struct field: the value is in the type code
    case kByte:
      if (pos_ >= data_.size()) return Error("truncated i8");
      ++pos_;
      return Status::OK();
    case kI16:
    case kI32:
    case kI64: return ReadVarint(&u);
    case kDouble:
      if (data_.size() - pos_ < 8) return Error("truncated double");
      pos_ += 8;
      return Status::OK();
    case kBinary: {
      STOKE_RETURN_IF_ERROR(ReadVarint(&u));
      if (u > data_.size() - pos_) return Error("binary runs past the end");
      pos_ += u;
      return Status::OK();
    }
    case kList:
    case kSet: {
      uint8_t et;
      uint32_t n;
      STOKE_RETURN_IF_ERROR(ReadListHeader(&et, &n));
      for (uint32_t i = 0; i < n; ++i) {
        if (et == kBoolTrue || et == kBoolFalse) {  // list bools take a byte each
          if (pos_ >= data_.size()) return Error("truncated bool list");
          ++pos_;
        } else {
          STOKE_RETURN_IF_ERROR(SkipDepth(et, depth + 1));
        }
      }
      return Status::OK();
    }
    case kMap: {
      STOKE_RETURN_IF_ERROR(ReadVarint(&u));
      if (u == 0) return Status::OK();
      if (u > data_.size() - pos_) return Error("map size runs past the end");
      if (pos_ >= data_.size()) return Error("truncated map header");
      uint8_t kv = data_[pos_++];
      uint8_t kt = kv >> 4, vt = kv & 0x0f;
      if (kt == kStop || kt > kStruct || vt == kStop || vt > kStruct) return Error("invalid map key/value types");
      for (uint64_t i = 0; i < u; ++i) {
        for (uint8_t t : {kt, vt}) {
          if (t == kBoolTrue || t == kBoolFalse) {
            if (pos_ >= data_.size()) return Error("truncated map");
            ++pos_;
          } else {
            STOKE_RETURN_IF_ERROR(SkipDepth(t, depth + 1));
          }
        }
      }
      return Status::OK();
    }
    case kStruct: {
      depth_ += depth;
      Status s = ReadStruct([&](int16_t, uint8_t t) { return SkipDepth(t, 0); });
      depth_ -= depth;
      return s;
    }
    default: return Error(fmt::format("cannot skip unknown type code {}", type));
  }
}

void CompactWriter::WriteVarint(uint64_t v) {
  while (v >= 0x80) {
    out_->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_->push_back(static_cast<char>(v));
}

void CompactWriter::FieldHeader(int16_t id, uint8_t type) {
  int16_t& last = last_ids_.back();
  int delta = id - last;
  if (delta > 0 && delta <= 15) {
    out_->push_back(static_cast<char>((delta << 4) | type));
  } else {
    out_->push_back(static_cast<char>(type));
    WriteZigZag(id);
  }
  last = id;
}

void CompactWriter::FieldBool(int16_t id, bool v) { FieldHeader(id, v ? kBoolTrue : kBoolFalse); }

void CompactWriter::FieldI8(int16_t id, int8_t v) {
  FieldHeader(id, kByte);
  out_->push_back(static_cast<char>(v));
}

void CompactWriter::FieldI16(int16_t id, int16_t v) {
  FieldHeader(id, kI16);
  WriteZigZag(v);
}

void CompactWriter::FieldI32(int16_t id, int32_t v) {
  FieldHeader(id, kI32);
  WriteZigZag(v);
}

void CompactWriter::FieldI64(int16_t id, int64_t v) {
  FieldHeader(id, kI64);
  WriteZigZag(v);
}

void CompactWriter::FieldDouble(int16_t id, double v) {
  FieldHeader(id, kDouble);
  char b[8];
  std::memcpy(b, &v, 8);
  out_->append(b, 8);
}

void CompactWriter::FieldBinary(int16_t id, std::string_view v) {
  FieldHeader(id, kBinary);
  ElementBinary(v);
}

void CompactWriter::ElementBinary(std::string_view v) {
  WriteVarint(v.size());
  out_->append(v);
}

void CompactWriter::BeginStructField(int16_t id) {
  FieldHeader(id, kStruct);
  last_ids_.push_back(0);
}

void CompactWriter::BeginListField(int16_t id, uint8_t elem_type, size_t size) {
  FieldHeader(id, kList);
  if (size < 15) {
    out_->push_back(static_cast<char>((size << 4) | elem_type));
  } else {
    out_->push_back(static_cast<char>(0xf0 | elem_type));
    WriteVarint(size);
  }
}

void CompactWriter::BeginStruct() { last_ids_.push_back(0); }

void CompactWriter::EndStruct() {
  out_->push_back(static_cast<char>(kStop));
  last_ids_.pop_back();
}

}  // namespace stoke::thrift
