// Value and level encodings of Parquet data and dictionary pages, as specified in apache/parquet-format
// Encodings.md: PLAIN, the RLE / bit-packed hybrid (levels, dictionary indices, RLE booleans),
// DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT.
//
// Decoders take untrusted bytes: they never read outside `data`, never size an allocation from a count
// they have not checked against the bytes present (except where noted: the RLE / bit-packed hybrid and
// the delta encodings legitimately hold many values in few bytes, so there the caller's `count`, which
// the caller already uses to size its own buffers, bounds the memory), and fail with
// Status::Corruption("<ENCODING>: offset <byte offset in data>: <what was expected>"). Callers add the
// file, column and page. Decoders that fill a vector append to it; on error the vector may hold a
// partial result. Encoders append to `out` and cannot fail.
//
// All functions are thread-compatible (no shared state) and do not retain their arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/function_ref.h"
#include "stoke/status.h"

namespace stoke::parquet {

// Widest value the RLE / bit-packed hybrid carries in stoke: levels and dictionary indices are int32.
inline constexpr int kMaxHybridBitWidth = 32;
// Widest miniblock of DELTA_BINARY_PACKED: a delta of int64 values relative to the block's minimum.
inline constexpr int kMaxDeltaBitWidth = 64;

// ---- RLE / bit-packed hybrid (Encodings.md, "Run Length Encoding / Bit-Packing Hybrid (RLE = 3)") ----

// Decodes exactly `count` values of `bit_width` bits (0..32) from `data`, a sequence of runs without
// the length prefix, into out[0, count). A bit-packed run may hold more values than needed (its last
// group of 8 is padded): the extra values are ignored, and only the bytes that hold needed values must
// be present. Bytes after the run that completes `count` are ignored. Every decoded value is
// < 2^bit_width (a repeated value that is not is corruption).
// REQUIRES: `out` has room for `count` values.
Status DecodeRleBitPackedHybrid(ByteView data, int bit_width, size_t count, uint32_t* out);

// Appends the runs encoding `values` (no length prefix). Like parquet-mr, 8 or more equal values in a
// row become an RLE run (taking first the values needed to fill the pending bit-packed group of 8), the
// rest bit-packed runs of at most 63 groups (a one-byte header); the last group is padded with zeros.
// REQUIRES: 0 <= bit_width <= 32 and every value < 2^bit_width.
void EncodeRleBitPackedHybrid(std::span<const uint32_t> values, int bit_width, std::string* out);

// Reads `count` values of a hybrid stream as DecodeRleBitPackedHybrid does (with the 4-byte length
// prefix when `prefixed`, as DecodeLengthPrefixedRleBitPackedHybrid) without expanding its RLE runs:
// visit(value, n) once per RLE run (n its length) and once per bit-packed value (n = 1), in order.
// *consumed (may be null): the bytes the runs took (the prefix and its length, when prefixed). Errors
// as DecodeRleBitPackedHybrid.
Status VisitRleBitPackedHybridRuns(ByteView data, int bit_width, size_t count, bool prefixed,
                                   FunctionRef<void(uint32_t, size_t)> visit, size_t* consumed);

// The layout of definition and repetition levels in data page v1 and of BOOLEAN pages encoded RLE:
// a 4-byte little-endian length, then that many bytes of hybrid runs. Decodes `count` values as
// DecodeRleBitPackedHybrid does and sets *consumed = 4 + length.
Status DecodeLengthPrefixedRleBitPackedHybrid(ByteView data, int bit_width, size_t count, uint32_t* out,
                                              size_t* consumed);
void EncodeLengthPrefixedRleBitPackedHybrid(std::span<const uint32_t> values, int bit_width, std::string* out);

// The values of a data page encoded RLE_DICTIONARY (or PLAIN_DICTIONARY): one byte holding the bit
// width (0..32), then hybrid runs up to the end of `data`. Decodes `count` indices into out[0, count);
// with count == 0, `data` may be empty. The caller checks the indices against the dictionary size.
Status DecodeDictionaryIndices(ByteView data, size_t count, uint32_t* out);

// BOOLEAN values encoded RLE (data page v2): the length-prefixed layout above with bit width 1.
// Appends `count` values, each 0 or 1, and sets *consumed.
Status DecodeRleBoolean(ByteView data, size_t count, std::vector<uint8_t>* out, size_t* consumed);

// ---- PLAIN (Encodings.md, "Plain: (PLAIN = 0)") ----
// Each decoder appends `count` values and sets *consumed to the bytes they took (trailing bytes are left
// to the caller).

// INT32, INT64, FLOAT, DOUBLE: little-endian, IEEE 754 for floats, back to back.
Status DecodePlain(ByteView data, size_t count, std::vector<int32_t>* out, size_t* consumed);
Status DecodePlain(ByteView data, size_t count, std::vector<int64_t>* out, size_t* consumed);
Status DecodePlain(ByteView data, size_t count, std::vector<float>* out, size_t* consumed);
Status DecodePlain(ByteView data, size_t count, std::vector<double>* out, size_t* consumed);
// BOOLEAN: 1 bit each, LSB first; values are appended as 0 or 1. Takes ceil(count / 8) bytes.
Status DecodePlainBoolean(ByteView data, size_t count, std::vector<uint8_t>* out, size_t* consumed);
// BYTE_ARRAY: a 4-byte little-endian length, then the bytes, for each value.
Status DecodePlainByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed);
// The same values found in place: for each, `base` plus the position of its 4-byte length in `data`,
// appended to *out, with DecodePlainByteArray's checks. Unsupported where base + data.size() does
// not fit 32 bits.
Status LocatePlainByteArray(ByteView data, size_t count, uint32_t base, std::vector<uint32_t>* out, size_t* consumed);
// FIXED_LEN_BYTE_ARRAY: `type_length` bytes each (the schema's type_length; < 1 is corruption).
Status DecodePlainFixedLenByteArray(ByteView data, size_t count, int type_length, std::vector<std::string>* out,
                                    size_t* consumed);

void EncodePlain(std::span<const int32_t> values, std::string* out);
void EncodePlain(std::span<const int64_t> values, std::string* out);
void EncodePlain(std::span<const float> values, std::string* out);
void EncodePlain(std::span<const double> values, std::string* out);
// Nonzero means true.
void EncodePlainBoolean(std::span<const uint8_t> values, std::string* out);
// REQUIRES: every value is shorter than 2^32 bytes.
void EncodePlainByteArray(std::span<const std::string_view> values, std::string* out);
// REQUIRES: every value has the column's type_length.
void EncodePlainFixedLenByteArray(std::span<const std::string_view> values, std::string* out);

// ---- Delta encodings (Encodings.md, DELTA_BINARY_PACKED = 5, DELTA_LENGTH_BYTE_ARRAY = 6,
// DELTA_BYTE_ARRAY = 7) ----
// `count` is the number of values the page holds (non-null values); the encoded total value count must
// equal it. Each decoder appends `count` values and sets *consumed to the bytes up to the end of the
// last miniblock that holds values (or of the concatenated bytes), which is where a following section
// starts. Arithmetic wraps (two's complement), as the spec requires; INT32 values are the low 32 bits.

// Header <block size (multiple of 128)> <miniblocks per block (values per miniblock a multiple of 32)>
// <total value count> <first value (zigzag)>, then blocks <min delta (zigzag)> <one bit width byte per
// miniblock> <miniblocks>. Miniblocks after the last value may be absent and their widths arbitrary.
Status DecodeDeltaBinaryPacked(ByteView data, size_t count, std::vector<int32_t>* out, size_t* consumed);
Status DecodeDeltaBinaryPacked(ByteView data, size_t count, std::vector<int64_t>* out, size_t* consumed);
// Lengths as DELTA_BINARY_PACKED (INT32), then all values' bytes concatenated.
Status DecodeDeltaLengthByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed);
// Prefix lengths as DELTA_BINARY_PACKED, then suffixes as DELTA_LENGTH_BYTE_ARRAY; each value is the
// first <prefix length> bytes of the previous value (empty for the first) followed by its suffix. Used
// for BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY (the caller checks the lengths of the latter). The output can
// be up to count times the longest value.
Status DecodeDeltaByteArray(ByteView data, size_t count, std::vector<std::string>* out, size_t* consumed);

// ---- BYTE_STREAM_SPLIT (Encodings.md, BYTE_STREAM_SPLIT = 9) ----
// K = the value's byte width streams of `count` bytes each: stream k holds byte k of every value.
// `data` must be exactly K * count bytes (the stream stride is the page's value count). Appends `count`
// values.
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<float>* out);
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<double>* out);
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<int32_t>* out);
Status DecodeByteStreamSplit(ByteView data, size_t count, std::vector<int64_t>* out);
// K = type_length (< 1 is corruption).
Status DecodeByteStreamSplitFixedLenByteArray(ByteView data, size_t count, int type_length,
                                              std::vector<std::string>* out);

}  // namespace stoke::parquet
