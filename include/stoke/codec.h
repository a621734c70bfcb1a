// The page codec a tool writes with: ingest (IngestOptions), convert (ConvertOptions) and optimize
// (OptimizeOptions). The CLI's --codec and the Python keyword `codec` take the names CodecName gives.
#pragma once

#include <string_view>

#include "stoke/status.h"

namespace stoke {

// How data pages are compressed (Parquet's framing of each codec; docs/format.md).
enum class Codec {
  kAuto,          // per column chunk: ZSTD where it saves at least 10 % of the bytes (tensor and blob
                  // columns: at least 90 %, of pages averaging 64 KiB or more), else uncompressed
  kZstd,          // ZSTD for every chunk
  kLz4Raw,        // LZ4_RAW (the LZ4 block format) for every chunk
  kSnappy,        // SNAPPY for every chunk
  kGzip,          // GZIP for every chunk
  kUncompressed,  // no compression
};

// The codec named `name`: "auto", "zstd", "lz4_raw", "snappy", "gzip" or "uncompressed", in any case
// ("lz4" and "none" are accepted for lz4_raw and uncompressed). InvalidArgument otherwise:
// "unknown codec '<name>' (expected auto, zstd, lz4_raw, snappy, gzip or uncompressed)".
Result<Codec> ParseCodec(std::string_view name);

// "auto", "zstd", "lz4_raw", "snappy", "gzip" or "uncompressed": the name ParseCodec reads back, and
// the one a table records as its codec (configuration "stoke.codec").
std::string_view CodecName(Codec codec);

}  // namespace stoke
