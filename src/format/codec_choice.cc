// The codec a tool is asked to write with (stoke/codec.h): its names, as users type them, and the
// text of the choice `auto` recorded in a column chunk.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <string>

#include "stoke/codec.h"
#include "core/progress.h"
#include "core/text.h"
#include "format/parquet_writer.h"

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

std::string CodecChoiceText(std::string_view json_text) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "";
  const double raw = j.value("trial_bytes", 0.0), stored = j.value("trial_compressed_bytes", 0.0);
  if (raw <= 0) return "";
  std::string text = fmt::format("{} saved {:.1f} % of the first {}", j.value("requested", "?"),
                                 100.0 * (1.0 - stored / raw), FormatBytes(static_cast<uint64_t>(raw)));
  const double pages = j.value("trial_pages", 0.0), min_page = j.value("min_page_bytes", 0.0);
  if (pages > 0) {
    text += fmt::format(" ({:.0f} page{} of {} on average)", pages, pages == 1 ? "" : "s",
                        FormatBytes(static_cast<uint64_t>(raw / pages)));
  }
  text += fmt::format("; kept when >= {:.0f} %", 100.0 * j.value("min_saving", 0.0));
  if (min_page > 0) text += fmt::format(" and pages average >= {}", FormatBytes(static_cast<uint64_t>(min_page)));
  return text;
}

}  // namespace stoke
