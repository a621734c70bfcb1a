#include "format/parquet_encoding.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <utility>

namespace stoke::parquet {
namespace {

// Room for `more` values after those `out` holds, growing geometrically: a column chunk is decoded one
// page at a time into the same vector, and reserving exactly size + count per page moved every value
// decoded so far again at each page (quadratic in the pages of a chunk).
template <typename T>
void ReserveMore(std::vector<T>* out, size_t more) {
  const size_t needed = out->size() + more;
  if (needed > out->capacity()) out->reserve(std::max(needed, 2 * out->capacity()));
}

constexpr std::string_view kRle = "RLE";
constexpr std::string_view kRleDictionary = "RLE_DICTIONARY";
constexpr std::string_view kPlain = "PLAIN";
constexpr std::string_view kDeltaBinaryPacked = "DELTA_BINARY_PACKED";
constexpr std::string_view kDeltaLengthByteArray = "DELTA_LENGTH_BYTE_ARRAY";
constexpr std::string_view kDeltaByteArray = "DELTA_BYTE_ARRAY";
constexpr std::string_view kByteStreamSplit = "BYTE_STREAM_SPLIT";

// Encodings.md: "<length> := length of the <encoded-data> in bytes stored as 4 bytes little endian".
constexpr size_t kLengthPrefixSize = 4;
// An RLE run pays off from 8 equal values on (parquet-mr's RunLengthBitPackingHybridEncoder).
constexpr size_t kMinRleRunLength = 8;
// Bit-packed runs of at most 63 groups keep the header in one ULEB128 byte, as parquet-mr writes them.
constexpr size_t kMaxBitPackedGroups = 63;
// Encodings.md: "the block size is a multiple of 128"; "the number of values in the miniblock is a
// multiple of 32". Larger blocks than 2^31 - 1 values do not fit the int32 that writers store it in.
constexpr uint64_t kDeltaBlockSizeMultiple = 128;
constexpr uint64_t kDeltaMiniblockSizeMultiple = 32;
constexpr uint64_t kMaxDeltaBlockSize = std::numeric_limits<int32_t>::max();
// Values unpacked per step of a delta miniblock: bounds the scratch buffer whatever the block size.
constexpr size_t kDeltaUnpackChunk = 256;
// A ULEB128 of a 64-bit value takes at most 10 bytes.
constexpr size_t kMaxUleb128Bytes = 10;

template <typename... Args>
Status Corrupt(std::string_view encoding, size_t offset, fmt::format_string<Args...> what, Args&&... args) {
  return Status::Corruption(
      fmt::format("{}: offset {}: {}", encoding, offset, fmt::format(what, std::forward<Args>(args)...)));
}

// Reads the ULEB128 varint at *pos and advances *pos past it. `field` names it in errors.
Status ReadUleb128(ByteView data, size_t* pos, uint64_t* out, std::string_view encoding, std::string_view field) {
  const size_t start = *pos;
  uint64_t value = 0;
  for (size_t i = 0; i < kMaxUleb128Bytes; ++i) {
    if (start + i >= data.size()) {
      return Corrupt(encoding, start, "{}: ULEB128 varint truncated after {} bytes", field, i);
    }
    const uint8_t byte = data[start + i];
    if (i == kMaxUleb128Bytes - 1 && byte > 1) {
      return Corrupt(encoding, start, "{}: ULEB128 varint exceeds 64 bits", field);
    }
    value |= uint64_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) {
      *pos = start + i + 1;
      *out = value;
      return Status::OK();
    }
  }
  return Corrupt(encoding, start, "{}: ULEB128 varint longer than {} bytes", field, kMaxUleb128Bytes);
}

void AppendUleb128(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Zigzag decoding in the unsigned domain: 0, 1, 2, 3 -> 0, -1, 1, -2 as two's complement bits.
uint64_t ZigzagDecode(uint64_t v) { return (v >> 1) ^ (~(v & 1) + 1); }

// ---- Bit unpacking. Encodings.md (RLE section): values are packed from the least significant bit of
// each byte to the most significant bit; DELTA_BINARY_PACKED miniblocks pack the same way. ----

// Bits [kBit, kBit + kBitWidth) of p, LSB first. Reads p[kBit / 8, kBit / 8 + 8], the last byte only
// when the field straddles 8 bytes.
template <int kBitWidth, size_t kBit>
inline uint64_t ExtractBits(const uint8_t* p) {
  constexpr size_t kByte = kBit / 8;
  constexpr size_t kShift = kBit % 8;
  uint64_t v = LoadLE<uint64_t>(p + kByte) >> kShift;
  if constexpr (kShift + kBitWidth > 64) v |= uint64_t{p[kByte + 8]} << (64 - kShift);
  if constexpr (kBitWidth < 64) v &= (uint64_t{1} << kBitWidth) - 1;
  return v;
}

// Unpacks one group of 8 values (kBitWidth bytes). Reads up to kBitWidth + 8 bytes from `in`.
template <typename T, int kBitWidth, size_t... kI>
inline void UnpackGroup(const uint8_t* in, T* out, std::index_sequence<kI...>) {
  ((out[kI] = static_cast<T>(ExtractBits<kBitWidth, kI * kBitWidth>(in))), ...);
}

// Unpacks `n` values of kBitWidth bits from `in`, which holds ceil(n * kBitWidth / 8) bytes; nothing
// past them is read. Groups with 8 readable bytes beyond them load directly, the rest go through a
// zero-padded copy.
template <typename T, int kBitWidth>
void UnpackBits(const uint8_t* in, size_t n, T* out) {
  if constexpr (kBitWidth == 0) {
    std::fill_n(out, n, T{0});
  } else {
    constexpr auto kGroup = std::make_index_sequence<8>{};
    const size_t in_bytes = (n * kBitWidth + 7) / 8;
    size_t i = 0;
    for (; i + 8 <= n && (i / 8 + 1) * kBitWidth + 8 <= in_bytes; i += 8) {
      UnpackGroup<T, kBitWidth>(in + i / 8 * kBitWidth, out + i, kGroup);
    }
    for (; i < n; i += 8) {
      const size_t offset = i / 8 * kBitWidth;
      uint8_t padded[kBitWidth + 9] = {};
      std::memcpy(padded, in + offset, std::min<size_t>(kBitWidth, in_bytes - offset));
      T group[8];
      UnpackGroup<T, kBitWidth>(padded, group, kGroup);
      std::copy_n(group, std::min<size_t>(8, n - i), out + i);
    }
  }
}

template <typename T>
using UnpackFn = void (*)(const uint8_t*, size_t, T*);

template <typename T, size_t... kWidth>
constexpr std::array<UnpackFn<T>, sizeof...(kWidth)> MakeUnpackTable(std::index_sequence<kWidth...>) {
  return {&UnpackBits<T, static_cast<int>(kWidth)>...};
}

// kUnpack<T>[w] unpacks values of w bits, for w in [0, bits of T].
template <typename T>
constexpr auto kUnpack = MakeUnpackTable<T>(std::make_index_sequence<8 * sizeof(T) + 1>{});

// Appends `values` as bit-packed runs of at most kMaxBitPackedGroups groups, padding the last group.
void AppendBitPackedRuns(std::span<const uint32_t> values, int bit_width, std::string* out) {
  while (!values.empty()) {
    const size_t groups = std::min((values.size() + 7) / 8, kMaxBitPackedGroups);
    const size_t n = std::min(values.size(), groups * 8);
    AppendUleb128(uint64_t{groups} << 1 | 1, out);
    const size_t start = out->size();
    out->resize(start + groups * bit_width);
    auto* p = reinterpret_cast<uint8_t*>(out->data() + start);
    uint64_t bits = 0;  // pending bits, fewer than 8 between values
    int pending = 0;
    for (size_t i = 0; i < groups * 8; ++i) {
      bits |= uint64_t{i < n ? values[i] : 0} << pending;
      pending += bit_width;
      for (; pending >= 8; pending -= 8, bits >>= 8) *p++ = static_cast<uint8_t>(bits);
    }
    values = values.subspan(n);
  }
}

void AppendRleRun(uint32_t value, size_t length, int bit_width, std::string* out) {
  AppendUleb128(uint64_t{length} << 1, out);
  for (int b = 0; b < (bit_width + 7) / 8; ++b) out->push_back(static_cast<char>(value >> (8 * b)));
}

Status CheckHybridBitWidth(int bit_width, std::string_view encoding, size_t offset) {
  if (bit_width < 0 || bit_width > kMaxHybridBitWidth) {
    return Corrupt(encoding, offset, "bit width {} is not in [0, {}]", bit_width, kMaxHybridBitWidth);
  }
  return Status::OK();
}

// One run of a hybrid stream: `take` values, bit-packed at data[pos] (packed) or all `value`.
struct HybridRun {
  bool packed = false;
  size_t take = 0;
  size_t pos = 0;
  uint64_t value = 0;
};

// Reads the run at *pos of a stream with `remaining` values still wanted, and moves *pos past it.
// Errors name `encoding` and offsets within `data`. REQUIRES: 0 <= bit_width <= 32.
Status ReadHybridRun(ByteView data, size_t* pos, int bit_width, size_t done, size_t count, std::string_view encoding,
                     HybridRun* run) {
  if (*pos >= data.size()) {
    return Corrupt(encoding, *pos, "data ends after {} of {} values, expected a run header", done, count);
  }
  const size_t run_offset = *pos;
  uint64_t header;
  STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &header, encoding, "run header"));
  const size_t remaining = count - done;
  if (header & 1) {
    const uint64_t groups = header >> 1;
    run->packed = true;
    run->take = groups > remaining / 8 ? remaining : std::min<size_t>(groups * 8, remaining);
    const size_t available = data.size() - *pos;
    if (bit_width > 0 && run->take > available * 8 / bit_width) {
      return Corrupt(encoding, run_offset, "bit-packed run needs {} values of {} bits, only {} bytes remain", run->take,
                     bit_width, available);
    }
    run->pos = *pos;
    *pos += (run->take * bit_width + 7) / 8;
    return Status::OK();
  }
  const size_t value_bytes = (bit_width + 7) / 8;
  if (data.size() - *pos < value_bytes) {
    return Corrupt(encoding, *pos, "RLE run value needs {} bytes, {} remain", value_bytes, data.size() - *pos);
  }
  uint64_t value = 0;
  for (size_t b = 0; b < value_bytes; ++b) value |= uint64_t{data[*pos + b]} << (8 * b);
  if (value > (uint64_t{1} << bit_width) - 1) {
    return Corrupt(encoding, *pos, "RLE run value {} does not fit bit width {}", value, bit_width);
  }
  *pos += value_bytes;
  run->packed = false;
  run->value = value;
  run->take = std::min<uint64_t>(header >> 1, remaining);
  return Status::OK();
}

// The hybrid decoder behind the public entry points. Errors name `encoding` and offsets within `data`.
// REQUIRES: 0 <= bit_width <= min(32, bits of T).
template <typename T>
Status DecodeHybrid(ByteView data, size_t begin, int bit_width, size_t count, T* out, std::string_view encoding) {
  const UnpackFn<T> unpack = kUnpack<T>[bit_width];
  size_t pos = begin;
  size_t done = 0;
  while (done < count) {
    HybridRun run;
    STOKE_RETURN_IF_ERROR(ReadHybridRun(data, &pos, bit_width, done, count, encoding, &run));
    if (run.packed) {
      unpack(data.data() + run.pos, run.take, out + done);
    } else {
      std::fill_n(out + done, run.take, static_cast<T>(run.value));
    }
    done += run.take;
  }
  return Status::OK();
}

// Reads the 4-byte length of the length-prefixed hybrid layout and returns the bytes it covers.
Status ReadLengthPrefix(ByteView data, std::string_view encoding, ByteView* runs) {
  if (data.size() < kLengthPrefixSize) {
    return Corrupt(encoding, 0, "expected a {}-byte length, {} bytes present", kLengthPrefixSize, data.size());
  }
  const uint32_t length = LoadLE<uint32_t>(data.data());
  if (length > data.size() - kLengthPrefixSize) {
    return Corrupt(encoding, 0, "length {} exceeds the {} bytes after it", length, data.size() - kLengthPrefixSize);
  }
  *runs = data.first(kLengthPrefixSize + length);
  return Status::OK();
}

// ---- PLAIN ----

template <typename T>
Status DecodePlainFixed(ByteView data, size_t count, std::vector<T>* out, size_t* consumed) {
  if (count > data.size() / sizeof(T)) {
    return Corrupt(kPlain, 0, "expected {} values of {} bytes, {} bytes present", count, sizeof(T), data.size());
  }
  const size_t old_size = out->size();
  out->resize(old_size + count);
  if (count > 0) std::memcpy(out->data() + old_size, data.data(), count * sizeof(T));
  *consumed = count * sizeof(T);
  return Status::OK();
}

template <typename T>
void EncodePlainFixed(std::span<const T> values, std::string* out) {
  out->append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
}

// ---- Delta encodings ----

// Decodes DELTA_BINARY_PACKED starting at *pos, appending `count` values as T (the low bits of the
// 64-bit wrapping sum) and advancing *pos past the last miniblock that holds values.
template <typename T>
Status DecodeDeltaBinaryPackedAt(ByteView data, size_t* pos, size_t count, std::vector<T>* out) {
  constexpr std::string_view kEnc = kDeltaBinaryPacked;
  const size_t header_offset = *pos;
  uint64_t block_size, miniblocks, total, first;
  STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &block_size, kEnc, "block size"));
  STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &miniblocks, kEnc, "miniblocks per block"));
  STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &total, kEnc, "total value count"));
  STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &first, kEnc, "first value"));
  if (block_size == 0 || block_size % kDeltaBlockSizeMultiple != 0 || block_size > kMaxDeltaBlockSize) {
    return Corrupt(kEnc, header_offset, "block size {} is not a positive multiple of {} up to {}", block_size,
                   kDeltaBlockSizeMultiple, kMaxDeltaBlockSize);
  }
  if (miniblocks == 0 || block_size % miniblocks != 0 || (block_size / miniblocks) % kDeltaMiniblockSizeMultiple != 0) {
    return Corrupt(kEnc, header_offset, "{} miniblocks per block of {} values do not hold a multiple of {} each",
                   miniblocks, block_size, kDeltaMiniblockSizeMultiple);
  }
  if (total != count) {
    return Corrupt(kEnc, header_offset, "header declares {} values, expected {}", total, count);
  }
  if (count == 0) return Status::OK();
  const size_t miniblock_size = block_size / miniblocks;

  uint64_t value = ZigzagDecode(first);
  out->push_back(static_cast<T>(value));
  size_t remaining = count - 1;
  std::array<uint64_t, kDeltaUnpackChunk> deltas;
  while (remaining > 0) {
    uint64_t min_delta;
    STOKE_RETURN_IF_ERROR(ReadUleb128(data, pos, &min_delta, kEnc, "block min delta"));
    min_delta = ZigzagDecode(min_delta);
    if (data.size() - *pos < miniblocks) {
      return Corrupt(kEnc, *pos, "expected {} miniblock bit widths, {} bytes remain", miniblocks, data.size() - *pos);
    }
    const size_t widths_offset = *pos;
    *pos += miniblocks;
    for (size_t m = 0; m < miniblocks && remaining > 0; ++m) {
      const int bit_width = data[widths_offset + m];
      if (bit_width > kMaxDeltaBitWidth) {
        return Corrupt(kEnc, widths_offset + m, "miniblock bit width {} exceeds {}", bit_width, kMaxDeltaBitWidth);
      }
      // Exact: miniblock_size is a multiple of 32. The last miniblock holding values is padded in full.
      const size_t miniblock_bytes = miniblock_size / 8 * bit_width;
      if (data.size() - *pos < miniblock_bytes) {
        return Corrupt(kEnc, *pos, "miniblock of {} values of {} bits needs {} bytes, {} remain", miniblock_size,
                       bit_width, miniblock_bytes, data.size() - *pos);
      }
      const uint8_t* in = data.data() + *pos;
      const size_t n = std::min(miniblock_size, remaining);
      const size_t old_size = out->size();
      out->resize(old_size + n);
      T* dst = out->data() + old_size;
      for (size_t i = 0; i < n; i += kDeltaUnpackChunk) {
        const size_t chunk = std::min(kDeltaUnpackChunk, n - i);
        kUnpack<uint64_t>[bit_width](in + i / 8 * bit_width, chunk, deltas.data());
        for (size_t j = 0; j < chunk; ++j) {
          value += min_delta + deltas[j];
          dst[i + j] = static_cast<T>(value);
        }
      }
      *pos += miniblock_bytes;
      remaining -= n;
    }
  }
  return Status::OK();
}

// Decodes `count` lengths (DELTA_BINARY_PACKED INT32) at *pos and checks that none is negative.
// `encoding` and `section` name the lengths in errors.
Status DecodeLengthsAt(ByteView data, size_t* pos, size_t count, std::string_view encoding, std::string_view section,
                       std::vector<int32_t>* lengths) {
  const size_t offset = *pos;
  STOKE_RETURN_IF_ERROR(
      DecodeDeltaBinaryPackedAt(data, pos, count, lengths).WithContext(fmt::format("{} {}", encoding, section)));
  for (size_t i = 0; i < lengths->size(); ++i) {
    if ((*lengths)[i] < 0) {
      return Corrupt(encoding, offset, "{}: value {} has negative length {}", section, i, (*lengths)[i]);
    }
  }
  return Status::OK();
}

// Checks that the bytes of values with `lengths` are present from `pos` on.
Status CheckValueBytes(ByteView data, size_t pos, std::span<const int32_t> lengths, std::string_view encoding) {
  uint64_t needed = 0;
  for (int32_t length : lengths) needed += static_cast<uint64_t>(length);
  if (needed > data.size() - pos) {
    return Corrupt(encoding, pos, "values need {} bytes, {} remain", needed, data.size() - pos);
  }
  return Status::OK();
}

// ---- BYTE_STREAM_SPLIT ----

Status CheckStreams(ByteView data, size_t count, size_t width) {
  if (count > data.size() / width || count * width != data.size()) {
    return Corrupt(kByteStreamSplit, 0, "expected {} streams of {} bytes, {} bytes present", width, count,
                   data.size());
  }
  return Status::OK();
}

// Interleaves the kWidth streams of `count` bytes in `data` into `count` values at `out`.
template <size_t kWidth>
void JoinStreams(ByteView data, size_t count, uint8_t* out) {
  for (size_t i = 0; i < count; ++i) {
    for (size_t k = 0; k < kWidth; ++k) out[i * kWidth + k] = data[k * count + i];
  }
}

template <typename T>
Status DecodeByteStreamSplitFixed(ByteView data, size_t count, std::vector<T>* out) {
  STOKE_RETURN_IF_ERROR(CheckStreams(data, count, sizeof(T)));
  const size_t old_size = out->size();
  out->resize(old_size + count);
  JoinStreams<sizeof(T)>(data, count, reinterpret_cast<uint8_t*>(out->data() + old_size));
  return Status::OK();
}

}  // namespace

// ---- RLE / bit-packed hybrid ----

Status DecodeRleBitPackedHybrid(ByteView data, int bit_width, size_t count, uint32_t* out) {
  STOKE_RETURN_IF_ERROR(CheckHybridBitWidth(bit_width, kRle, 0));
  return DecodeHybrid(data, 0, bit_width, count, out, kRle);
}

void EncodeRleBitPackedHybrid(std::span<const uint32_t> values, int bit_width, std::string* out) {
  size_t literal_begin = 0;  // values[literal_begin, i) wait to be bit-packed
  size_t i = 0;
  while (i < values.size()) {
    size_t run = 1;
    while (i + run < values.size() && values[i + run] == values[i]) ++run;
    // Bit-packed runs hold whole groups of 8, so the run first completes the pending group.
    const size_t fill = (8 - (i - literal_begin) % 8) % 8;
    if (run >= fill + kMinRleRunLength) {
      AppendBitPackedRuns(values.subspan(literal_begin, i + fill - literal_begin), bit_width, out);
      AppendRleRun(values[i], run - fill, bit_width, out);
      literal_begin = i + run;
    }
    i += run;
  }
  AppendBitPackedRuns(values.subspan(literal_begin), bit_width, out);
}

Status VisitRleBitPackedHybridRuns(ByteView data, int bit_width, size_t count, bool prefixed,
                                   FunctionRef<void(uint32_t, size_t)> visit, size_t* consumed) {
  STOKE_RETURN_IF_ERROR(CheckHybridBitWidth(bit_width, kRle, 0));
  ByteView runs = data;
  if (prefixed) STOKE_RETURN_IF_ERROR(ReadLengthPrefix(data, kRle, &runs));
  const UnpackFn<uint32_t> unpack = kUnpack<uint32_t>[bit_width];
  size_t pos = prefixed ? kLengthPrefixSize : 0;
  size_t done = 0;
  uint32_t group[64];
  while (done < count) {
    HybridRun run;
    STOKE_RETURN_IF_ERROR(ReadHybridRun(runs, &pos, bit_width, done, count, kRle, &run));
    if (!run.packed) {
      if (run.take > 0) visit(static_cast<uint32_t>(run.value), run.take);
      done += run.take;
      continue;
    }
    for (size_t i = 0; i < run.take; i += 64) {  // 64 values are 8 whole bytes at any bit width
      const size_t n = std::min<size_t>(64, run.take - i);
      unpack(runs.data() + run.pos + i / 8 * bit_width, n, group);
      for (size_t k = 0; k < n; ++k) visit(group[k], 1);
    }
    done += run.take;
  }
  if (consumed != nullptr) *consumed = prefixed ? runs.size() : pos;
  return Status::OK();
}

Status DecodeLengthPrefixedRleBitPackedHybrid(ByteView data, int bit_width, size_t count, uint32_t* out,
                                              size_t* consumed) {
  STOKE_RETURN_IF_ERROR(CheckHybridBitWidth(bit_width, kRle, 0));
  ByteView runs;
  STOKE_RETURN_IF_ERROR(ReadLengthPrefix(data, kRle, &runs));
  STOKE_RETURN_IF_ERROR(DecodeHybrid(runs, kLengthPrefixSize, bit_width, count, out, kRle));
  *consumed = runs.size();
  return Status::OK();
}

void EncodeLengthPrefixedRleBitPackedHybrid(std::span<const uint32_t> values, int bit_width, std::string* out) {
  const size_t start = out->size();
  out->append(kLengthPrefixSize, '\0');
  EncodeRleBitPackedHybrid(values, bit_width, out);
  StoreLE(reinterpret_cast<uint8_t*>(out->data() + start),
          static_cast<uint32_t>(out->size() - start - kLengthPrefixSize));
}

Status DecodeDictionaryIndices(ByteView data, size_t count, uint32_t* out) {
  if (count == 0) return Status::OK();
  if (data.empty()) return Corrupt(kRleDictionary, 0, "expected the bit width byte, data is empty");
  STOKE_RETURN_IF_ERROR(CheckHybridBitWidth(data[0], kRleDictionary, 0));
  return DecodeHybrid(data, 1, data[0], count, out, kRleDictionary);
}

Status DecodeRleBoolean(ByteView data, size_t count, std::vector<uint8_t>* out, size_t* consumed) {
  ByteView runs;
  STOKE_RETURN_IF_ERROR(ReadLengthPrefix(data, kRle, &runs));
  const size_t old_size = out->size();
  out->resize(old_size + count);
  STOKE_RETURN_IF_ERROR(DecodeHybrid(runs, kLengthPrefixSize, 1, count, out->data() + old_size, kRle));
  *consumed = runs.size();
  return Status::OK();
}

// ---- PLAIN ----

Status DecodePlain(ByteView data, size_t count, std::vector<int32_t>* out, size_t* consumed) {
  return DecodePlainFixed(data, count, out, consumed);
}
Status DecodePlain(ByteView data, size_t count, std::vector<int64_t>* out, size_t* consumed) {
  return DecodePlainFixed(data, count, out, consumed);
}
Status DecodePlain(ByteView data, size_t count, std::vector<float>* out, size_t* consumed) {
  return DecodePlainFixed(data, count, out, consumed);
}
Status DecodePlain(ByteView data, size_t count, std::vector<double>* out, size_t* consumed) {
  return DecodePlainFixed(data, count, out, consumed);
}

Status DecodePlainBoolean(ByteView data, size_t count, std::vector<uint8_t>* out, size_t* consumed) {
  const size_t bytes = count / 8 + (count % 8 != 0);
  if (bytes > data.size()) {
    return Corrupt(kPlain, 0, "expected {} bytes for {} booleans, {} bytes present", bytes, count, data.size());
  }
  const size_t old_size = out->size();
  out->resize(old_size + count);
  uint8_t* dst = out->data() + old_size;
  for (size_t i = 0; i < count; ++i) dst[i] = (data[i / 8] >> (i % 8)) & 1;
  *consumed = bytes;
  return Status::OK();
}

// Walks `count` PLAIN BYTE_ARRAY values of `data`, calling visit(position of the value's 4-byte
// length, length) for each, with the checks every value needs.
template <typename Visit>
Status WalkPlainByteArray(ByteView data, size_t count, size_t* consumed, Visit&& visit) {
  size_t pos = 0;
  for (size_t i = 0; i < count; ++i) {
    if (data.size() - pos < sizeof(uint32_t)) {
      return Corrupt(kPlain, pos, "value {} of {}: expected a 4-byte length, {} bytes remain", i, count,
                     data.size() - pos);
    }
    const uint32_t length = LoadLE<uint32_t>(data.data() + pos);
    if (length > data.size() - pos - sizeof(uint32_t)) {
      return Corrupt(kPlain, pos, "value {} of {}: length {} exceeds the {} bytes remaining", i, count, length,
                     data.size() - pos - sizeof(uint32_t));
    }
    visit(pos, length);
    pos += sizeof(uint32_t) + length;
  }
  *consumed = pos;
  return Status::OK();
}

Status DecodePlainByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed) {
  // Each value takes at least its 4-byte length, which bounds the reservation by the bytes present.
  ReserveMore(out, std::min(count, data.size() / sizeof(uint32_t)));
  return WalkPlainByteArray(data, count, consumed, [&](size_t pos, uint32_t length) {
    out->emplace_back(reinterpret_cast<const char*>(data.data() + pos + sizeof(uint32_t)), length);
  });
}

Status LocatePlainByteArray(ByteView data, size_t count, uint32_t base, std::vector<uint32_t>* out, size_t* consumed) {
  if (data.size() > UINT32_MAX - base) {
    return Status::Unsupported(fmt::format("byte array values beyond 4 GiB ({} bytes after {})", data.size(), base));
  }
  ReserveMore(out, std::min(count, data.size() / sizeof(uint32_t)));
  return WalkPlainByteArray(data, count, consumed,
                            [&](size_t pos, uint32_t) { out->push_back(base + static_cast<uint32_t>(pos)); });
}

Status DecodePlainFixedLenByteArray(ByteView data, size_t count, int type_length, std::vector<std::string>* out,
                                    size_t* consumed) {
  if (type_length < 1) return Corrupt(kPlain, 0, "FIXED_LEN_BYTE_ARRAY type_length {} is not positive", type_length);
  const size_t width = static_cast<size_t>(type_length);
  if (count > data.size() / width) {
    return Corrupt(kPlain, 0, "expected {} values of {} bytes, {} bytes present", count, width, data.size());
  }
  ReserveMore(out, count);
  for (size_t i = 0; i < count; ++i) out->emplace_back(reinterpret_cast<const char*>(data.data() + i * width), width);
  *consumed = count * width;
  return Status::OK();
}

void EncodePlain(std::span<const int32_t> values, std::string* out) { EncodePlainFixed(values, out); }
void EncodePlain(std::span<const int64_t> values, std::string* out) { EncodePlainFixed(values, out); }
void EncodePlain(std::span<const float> values, std::string* out) { EncodePlainFixed(values, out); }
void EncodePlain(std::span<const double> values, std::string* out) { EncodePlainFixed(values, out); }

void EncodePlainBoolean(std::span<const uint8_t> values, std::string* out) {
  const size_t start = out->size();
  out->append((values.size() + 7) / 8, '\0');
  auto* dst = reinterpret_cast<uint8_t*>(out->data() + start);
  for (size_t i = 0; i < values.size(); ++i) dst[i / 8] |= static_cast<uint8_t>((values[i] != 0) << (i % 8));
}

void EncodePlainByteArray(std::span<const std::string_view> values, std::string* out) {
  for (std::string_view v : values) {
    uint8_t length[sizeof(uint32_t)];
    StoreLE(length, static_cast<uint32_t>(v.size()));
    out->append(reinterpret_cast<const char*>(length), sizeof(length));
    out->append(v);
  }
}

void EncodePlainFixedLenByteArray(std::span<const std::string_view> values, std::string* out) {
  for (std::string_view v : values) out->append(v);
}

// ---- Delta encodings ----

Status DecodeDeltaBinaryPacked(ByteView data, size_t count, std::vector<int32_t>* out, size_t* consumed) {
  size_t pos = 0;
  STOKE_RETURN_IF_ERROR(DecodeDeltaBinaryPackedAt(data, &pos, count, out));
  *consumed = pos;
  return Status::OK();
}

Status DecodeDeltaBinaryPacked(ByteView data, size_t count, std::vector<int64_t>* out, size_t* consumed) {
  size_t pos = 0;
  STOKE_RETURN_IF_ERROR(DecodeDeltaBinaryPackedAt(data, &pos, count, out));
  *consumed = pos;
  return Status::OK();
}

Status DecodeDeltaLengthByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed) {
  size_t pos = 0;
  std::vector<int32_t> lengths;
  STOKE_RETURN_IF_ERROR(DecodeLengthsAt(data, &pos, count, kDeltaLengthByteArray, "lengths", &lengths));
  STOKE_RETURN_IF_ERROR(CheckValueBytes(data, pos, lengths, kDeltaLengthByteArray));
  ReserveMore(out, count);
  for (int32_t length : lengths) {
    out->emplace_back(reinterpret_cast<const char*>(data.data() + pos), static_cast<size_t>(length));
    pos += static_cast<size_t>(length);
  }
  *consumed = pos;
  return Status::OK();
}

Status DecodeDeltaByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed) {
  size_t pos = 0;
  std::vector<int32_t> prefixes;
  std::vector<int32_t> suffixes;
  STOKE_RETURN_IF_ERROR(DecodeLengthsAt(data, &pos, count, kDeltaByteArray, "prefix lengths", &prefixes));
  STOKE_RETURN_IF_ERROR(DecodeLengthsAt(data, &pos, count, kDeltaByteArray, "suffix lengths", &suffixes));
  STOKE_RETURN_IF_ERROR(CheckValueBytes(data, pos, suffixes, kDeltaByteArray));
  const size_t first_index = out->size();
  out->reserve(first_index + count);
  for (size_t i = 0; i < count; ++i) {
    const size_t prefix = static_cast<size_t>(prefixes[i]);
    const size_t suffix = static_cast<size_t>(suffixes[i]);
    const size_t previous_length = i == 0 ? 0 : (*out)[first_index + i - 1].size();
    if (prefix > previous_length) {
      return Status::Corruption(fmt::format("{}: value {}: prefix length {} exceeds the previous value's length {}",
                                            kDeltaByteArray, i, prefix, previous_length));
    }
    std::string value;
    value.reserve(prefix + suffix);
    if (prefix > 0) value.append((*out)[first_index + i - 1], 0, prefix);
    value.append(reinterpret_cast<const char*>(data.data() + pos), suffix);
    pos += suffix;
    out->push_back(std::move(value));
  }
  *consumed = pos;
  return Status::OK();
}

// ---- BYTE_STREAM_SPLIT ----

Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<float>* out) {
  return DecodeByteStreamSplitFixed(data, count, out);
}
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<double>* out) {
  return DecodeByteStreamSplitFixed(data, count, out);
}
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<int32_t>* out) {
  return DecodeByteStreamSplitFixed(data, count, out);
}
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<int64_t>* out) {
  return DecodeByteStreamSplitFixed(data, count, out);
}

Status DecodeByteStreamSplitFixedLenByteArray(ByteView data, size_t count, int type_length,
                                              std::vector<std::string>* out) {
  if (type_length < 1) {
    return Corrupt(kByteStreamSplit, 0, "FIXED_LEN_BYTE_ARRAY type_length {} is not positive", type_length);
  }
  const size_t width = static_cast<size_t>(type_length);
  STOKE_RETURN_IF_ERROR(CheckStreams(data, count, width));
  ReserveMore(out, count);
  for (size_t i = 0; i < count; ++i) {
    std::string& value = out->emplace_back(width, '\0');
    for (size_t k = 0; k < width; ++k) value[k] = static_cast<char>(data[k * count + i]);
  }
  return Status::OK();
}

}  // namespace stoke::parquet
