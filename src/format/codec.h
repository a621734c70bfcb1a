// Page compression codecs, framed as Parquet specifies (Compression.md): SNAPPY is the raw block
// format, GZIP a gzip member (several concatenated members are read too), LZ4_RAW the LZ4 block
// format, ZSTD a standard frame, BROTLI a brotli stream. The deprecated LZ4 is read in Hadoop's
// framing, or as one raw LZ4 block where that framing does not fit (as Arrow reads it); it and
// BROTLI are never written. LZO is not supported.
#pragma once

#include <string>
#include <string_view>

#include "core/buffer.h"
#include "format/parquet_types.h"
#include "stoke/status.h"

namespace stoke {

// Parses "zstd", "snappy", "lz4_raw" (or "lz4"), "gzip", "none"/"uncompressed" (any case).
Result<parquet::Codec> CodecFromName(std::string_view name);
// Whether pages of `codec` can be decompressed.
bool CodecSupported(parquet::Codec codec);
// Whether stoke writes `codec`: uncompressed, zstd, snappy, lz4_raw and gzip.
bool CodecWritable(parquet::Codec codec);

// Appends the compressed form of `in` to `out`. `level` is the codec's level (ZSTD: 1..19, GZIP:
// 1..9); 0 means the codec's default. Thread-safe.
Status Compress(parquet::Codec codec, ByteView in, int level, AlignedBuffer* out);

// Decompresses `in` into exactly out.size() bytes; anything else (a shorter or longer result, a
// malformed stream) is Corruption. Thread-safe.
Status Decompress(parquet::Codec codec, ByteView in, MutableByteView out);

// CRC-32 (the zlib/gzip polynomial, as Parquet's page CRC) of `data`, continuing from `crc`.
// Uses ISA-L's PCLMUL implementation.
uint32_t Crc32(ByteView data, uint32_t crc = 0);
// The CRC-32 of A followed by B, from crc_a = Crc32(A), crc_b = Crc32(B) and B's length (zlib's
// crc32_combine): lets a CRC be taken in pieces on different threads.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace stoke
