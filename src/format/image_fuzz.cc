// libFuzzer target: ReadImageInfo on arbitrary bytes returns a Status (or the header's width, height
// and channels); it never crashes or reads past the bytes given.
#include <cstddef>
#include <cstdint>

#include "format/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{4} << 20)) return 0;
  auto info = stoke::ReadImageInfo(stoke::ByteView(data, size), "fuzz.img");
  if (info.ok() && (info->width <= 0 || info->height <= 0 || info->channels < 1 || info->channels > 4)) __builtin_trap();
  return 0;
}
