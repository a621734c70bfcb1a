// The codec a tool is asked to write with (stoke/codec.h): its names, as users type them.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "stoke/codec.h"
#include "core/text.h"

namespace stoke {

Result<Codec> ParseCodec(std::string_view name) {
  const std::string n = AsciiLower(name);
  if (n == "auto") return Codec::kAuto;
  if (n == "zstd") return Codec::kZstd;
  if (n == "lz4_raw" || n == "lz4") return Codec::kLz4Raw;
  if (n == "snappy") return Codec::kSnappy;
  if (n == "gzip") return Codec::kGzip;
  if (n == "uncompressed" || n == "none") return Codec::kUncompressed;
  return Status::InvalidArgument(
      fmt::format("unknown codec '{}' (expected auto, zstd, lz4_raw, snappy, gzip or uncompressed)", name));
}

std::string_view CodecName(Codec codec) {
  switch (codec) {
    case Codec::kAuto: return "auto";
    case Codec::kZstd: return "zstd";
    case Codec::kLz4Raw: return "lz4_raw";
    case Codec::kSnappy: return "snappy";
    case Codec::kGzip: return "gzip";
    case Codec::kUncompressed: return "uncompressed";
  }
  return "unknown";
}

}  // namespace stoke
