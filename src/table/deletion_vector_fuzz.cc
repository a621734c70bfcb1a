// libFuzzer target: deletion-vector bytes from the log and from DV files. The first byte chooses
// the decoder (even: Z85Decode of the rest as text; odd: DecodeRoaringBitmapArray of the rest).
// Beyond "no crash, no sanitizer report, no allocation the input does not account for": Z85 text
// that decodes encodes back to itself; a bitmap that decodes gives ascending, distinct rows below
// 2^63, and the encoder's bitmap of those rows decodes to the same rows.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>

#include "table/deletion_vector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const stoke::ByteView rest(data + 1, size - 1);
  if ((data[0] & 1) == 0) {
    const std::string_view text = stoke::AsChars(rest);
    auto bytes = stoke::delta::Z85Decode(text);
    if (bytes.ok() && (bytes->size() != text.size() / 5 * 4 || stoke::delta::Z85Encode(*bytes) != text))
      __builtin_trap();
    return 0;
  }
  auto rows = stoke::delta::DecodeRoaringBitmapArray(rest, "fuzz");
  if (!rows.ok()) return 0;
  if (rows->size() > stoke::delta::kMaxDeletionVectorRows) __builtin_trap();
  if (std::adjacent_find(rows->begin(), rows->end(), std::greater_equal<uint64_t>()) != rows->end()) __builtin_trap();
  if (!rows->empty() && rows->back() >= (uint64_t{1} << 63)) __builtin_trap();
  const std::string again = stoke::delta::EncodeRoaringBitmapArray(*rows);
  auto decoded = stoke::delta::DecodeRoaringBitmapArray(stoke::AsBytes(again), "re-encoded");
  if (!decoded.ok() || *decoded != *rows) __builtin_trap();
  return 0;
}
