// libFuzzer target: a read-cache entry (header and data) from arbitrary bytes, as a reader meets a
// file in a shared cache directory. Parsing and verifying return a Status; they never crash or read
// out of bounds, and what passes holds consistent sizes.
#include <cstddef>
#include <cstdint>

#include "io/read_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{4} << 20)) return 0;
  const stoke::ByteView bytes(data, size);
  const uint32_t declared = stoke::ReadCacheDeclaredHeaderSize(bytes);
  auto header = stoke::ParseReadCacheEntryHeader(bytes, "fuzz entry");
  if (!header.ok()) return 0;
  if (header->header_size != declared || header->header_size > size) __builtin_trap();
  if (header->chunk_crcs.size() != (uint64_t{header->data_length} + header->chunk_bytes - 1) / header->chunk_bytes) {
    __builtin_trap();
  }
  // Verify the data that follows from every chunk a reader might start at.
  const stoke::ByteView body = bytes.subspan(header->header_size);
  for (uint32_t c = 0; c < header->chunk_crcs.size() && c < 64; ++c) {
    const uint64_t from = uint64_t{c} * header->chunk_bytes;
    if (from > body.size()) break;
    (void)stoke::VerifyReadCacheChunks(*header, c, body.subspan(static_cast<size_t>(from)), "fuzz entry");
  }
  return 0;
}
