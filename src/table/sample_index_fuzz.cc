// Fuzzes the sample index cache validator: arbitrary bytes given as a cache file. Beyond "no crash,
// no sanitizer report", a cache that validates must answer every Find inside its own bounds (a row's
// page holds the row, the page's file is in the file table) — the property Open relies on to map a
// cache instead of rebuilding. Each input is also tried with both CRCs recomputed, so that mutations
// reach the structural checks behind them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/buffer.h"
#include "format/codec.h"
#include "table/sample_index.h"

namespace {

void CheckInput(const uint8_t* data, size_t size) {
  stoke::ByteView bytes(data, size);
  if (!stoke::SampleIndex::ValidateCache(bytes).ok()) return;
  // A valid cache: walk it the way Find does, from the documented layout, and check each answer.
  auto u32 = [&](uint64_t at) { return stoke::LoadLE<uint32_t>(data + at); };
  auto u64 = [&](uint64_t at) { return stoke::LoadLE<uint64_t>(data + at); };
  const uint64_t num_rows = u64(24), num_files = u32(32), ncols = u32(36), num_pages = u64(40);
  const uint64_t pages_off = u64(64), rows_off = u64(72);
  for (uint64_t c = 0; c < ncols; ++c) {
    for (uint64_t r = 0; r < num_rows; ++r) {
      const uint32_t page = u32(rows_off + 4 * (c * num_rows + r));
      if (page >= num_pages) std::abort();
      const uint64_t p = pages_off + 32 * uint64_t{page};
      const uint64_t first = u64(p + 8), n = u32(p + 24);
      if (u32(p + 16) >= num_files || r < first || r - first >= n) std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckInput(data, size);
  if (size >= 128) {
    // Body CRC at 120 (over [128, size)), header CRC at 124 (over [0, 124)); see sample_index.h.
    std::string fixed(reinterpret_cast<const char*>(data), size);
    auto* b = reinterpret_cast<uint8_t*>(fixed.data());
    stoke::StoreLE<uint32_t>(b + 120, stoke::Crc32(stoke::ByteView(b + 128, size - 128)));
    stoke::StoreLE<uint32_t>(b + 124, stoke::Crc32(stoke::ByteView(b, 124)));
    CheckInput(b, size);
  }
  return 0;
}
