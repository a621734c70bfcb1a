#include "format/parquet_values.h"

#include <fmt/format.h>

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "format/parquet_encoding.h"

namespace stoke {

using parquet::Encoding;
using parquet::Type;

namespace {

// DecodeValues' encodings, each appending `count` values from `data` to `out`.
Status DecodePlainValues(const LeafColumn& col, ByteView data, size_t count, ValueVector* out) {
  using namespace parquet;  // NOLINT: the decoders
  size_t consumed = 0;
  return std::visit(
      [&](auto& v) -> Status {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, uint8_t>) {
          return DecodePlainBoolean(data, count, &v, &consumed);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (col.type == Type::kByteArray) return DecodePlainByteArray(data, count, &v, &consumed);
          int width = col.type == Type::kInt96 ? 12 : col.type_length;
          return DecodePlainFixedLenByteArray(data, count, width, &v, &consumed);
        } else {
          return DecodePlain(data, count, &v, &consumed);
        }
      },
      *out);
}

Status DecodeDictionaryValues(ByteView data, size_t count, const ValueVector* dict, ValueVector* out) {
  if (dict == nullptr) return Status::Corruption("dictionary-encoded page without a dictionary page");
  std::vector<uint32_t> idx(count);
  STOKE_RETURN_IF_ERROR(parquet::DecodeDictionaryIndices(data, count, idx.data()));
  return std::visit(
      [&](auto& v) -> Status {
        using V = std::decay_t<decltype(v)>;
        const auto& d = std::get<V>(*dict);
        for (uint32_t i : idx) {
          if (i >= d.size()) return Status::Corruption(fmt::format("dictionary index {} out of range ({} entries)", i, d.size()));
          v.push_back(d[i]);
        }
        return Status::OK();
      },
      *out);
}

Status DecodeDeltaByteArrayValues(const LeafColumn& col, ByteView data, size_t count, ValueVector* out) {
  auto& v = std::get<std::vector<std::string>>(*out);
  size_t before = v.size(), consumed = 0;
  STOKE_RETURN_IF_ERROR(parquet::DecodeDeltaByteArray(data, count, &v, &consumed));
  if (col.type != Type::kFixedLenByteArray) return Status::OK();
  for (size_t i = before; i < v.size(); ++i) {
    if (static_cast<int32_t>(v[i].size()) != col.type_length) {
      return Status::Corruption(fmt::format("DELTA_BYTE_ARRAY value of {} bytes in a FIXED_LEN_BYTE_ARRAY({}) column",
                                            v[i].size(), col.type_length));
    }
  }
  return Status::OK();
}

Status DecodeByteStreamSplitValues(const LeafColumn& col, ByteView data, size_t count, ValueVector* out) {
  return std::visit(
      [&](auto& v) -> Status {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if constexpr (std::is_same_v<T, uint8_t>) {
          return Status::Corruption("BYTE_STREAM_SPLIT on a BOOLEAN column");
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (col.type != Type::kFixedLenByteArray) return Status::Corruption("BYTE_STREAM_SPLIT on a BYTE_ARRAY column");
          return parquet::DecodeByteStreamSplitFixedLenByteArray(data, count, col.type_length, &v);
        } else {
          return parquet::DecodeByteStreamSplit(data, count, &v);
        }
      },
      *out);
}

}  // namespace

Status DecodeValues(const LeafColumn& col, Encoding encoding, ByteView data, size_t count, const ValueVector* dict,
                    ValueVector* out) {
  using namespace parquet;  // NOLINT: the decoders
  size_t consumed = 0;
  switch (encoding) {
    case Encoding::kPlain: return DecodePlainValues(col, data, count, out);
    case Encoding::kPlainDictionary:
    case Encoding::kRleDictionary: return DecodeDictionaryValues(data, count, dict, out);
    case Encoding::kRle:
      if (col.type != Type::kBoolean) break;
      return DecodeRleBoolean(data, count, &std::get<std::vector<uint8_t>>(*out), &consumed);
    case Encoding::kDeltaBinaryPacked:
      if (col.type == Type::kInt32) return DecodeDeltaBinaryPacked(data, count, &std::get<std::vector<int32_t>>(*out), &consumed);
      if (col.type == Type::kInt64) return DecodeDeltaBinaryPacked(data, count, &std::get<std::vector<int64_t>>(*out), &consumed);
      break;
    case Encoding::kDeltaLengthByteArray:
      if (col.type != Type::kByteArray) break;
      return DecodeDeltaLengthByteArray(data, count, &std::get<std::vector<std::string>>(*out), &consumed);
    case Encoding::kDeltaByteArray:
      if (col.type != Type::kByteArray && col.type != Type::kFixedLenByteArray) break;
      return DecodeDeltaByteArrayValues(col, data, count, out);
    case Encoding::kByteStreamSplit: return DecodeByteStreamSplitValues(col, data, count, out);
    default: break;
  }
  return Status::Unsupported(fmt::format("encoding {} for a {} column", EncodingName(encoding), TypeName(col.type)));
}

}  // namespace stoke
