// libFuzzer target: DecodeImage on arbitrary bytes returns a Status or an image whose buffer holds
// exactly width * height * channels bytes; it never crashes, reads past the bytes given or allocates
// past max_bytes. The options (channels, DCT scale, and for every other size a region: the
// scanline decoder's skip and crop) vary with the input's size, so every seed is decoded several
// ways as the fuzzer mutates it.
#include <cstddef>
#include <cstdint>

#include "core/buffer.h"
#include "format/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{4} << 20)) return 0;
  static constexpr int kChannels[] = {1, 3, 4};
  stoke::DecodeImageOptions o;
  o.channels = kChannels[size % 3];
  o.scale_eighths = 1 + static_cast<int>((size / 3) % 8);
  o.max_bytes = int64_t{64} << 20;
  stoke::AlignedBuffer out;
  if ((size / 24) % 2 == 1) {
    // A region from the scaled header size (a region outside the image is an InvalidArgument).
    auto info = stoke::ReadImageInfo(stoke::ByteView(data, size), "fuzz.img");
    if (info.ok()) {
      const int32_t w = stoke::JpegScaledExtent(info->width, o.scale_eighths);
      const int32_t h = stoke::JpegScaledExtent(info->height, o.scale_eighths);
      o.region_left = static_cast<int32_t>(size % 7) % w;
      o.region_top = static_cast<int32_t>(size % 11) % h;
      o.region_width = 1 + (w - o.region_left - 1) / 2;
      o.region_height = 1 + (h - o.region_top - 1) / 3;
    }
  }
  auto image = stoke::DecodeImage(stoke::ByteView(data, size), "fuzz.img", o, &out);
  if (image.ok()) {
    if (image->width <= 0 || image->height <= 0 || image->channels != o.channels) __builtin_trap();
    const uint64_t bytes = uint64_t(image->width) * uint64_t(image->height) * uint64_t(image->channels);
    if (bytes != out.size() || bytes > uint64_t(o.max_bytes)) __builtin_trap();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < out.size(); i += 4096) sink ^= out.data()[i];  // every page written is readable
    (void)sink;
  }
  return 0;
}
