// libFuzzer target: arbitrary bytes as a page header. ParsePageHeader (with its fast path for the
// common data page header) and ParsePageHeaderInFull (the general Thrift reader) must agree on every
// input: both fail, or both succeed with the same header and the same length.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/parquet_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string kContext = "fuzz.parquet page header";
  const stoke::ByteView bytes(data, size);
  stoke::parquet::PageHeader fast, full;
  size_t fast_size = 0, full_size = 0;
  const bool fast_ok = stoke::parquet::ParsePageHeader(bytes, kContext, 0, &fast, &fast_size).ok();
  const bool full_ok = stoke::parquet::ParsePageHeaderInFull(bytes, kContext, 0, &full, &full_size).ok();
  if (fast_ok != full_ok) __builtin_trap();
  if (fast_ok && (!(fast == full) || fast_size != full_size)) __builtin_trap();
  return 0;
}
