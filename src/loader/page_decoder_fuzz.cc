// libFuzzer target: arbitrary bytes as one fetched page (with and without definition levels, one
// row or the whole page). Byte 0 picks the codec, bytes 1..2 the
// expected tensor size, byte 3 the row and the page's row count; the rest is the page (header +
// body). DecodeSampleFromPage must fail cleanly or succeed, never read past the page or write past
// the destination, and never allocate more than the caller's sizes allow. The same bytes, split
// `dest_size` bytes from the end (a split read's head and sample), go through CheckSplitSample.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "loader/page_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  static constexpr stoke::parquet::Codec kCodecs[] = {
      stoke::parquet::Codec::kUncompressed, stoke::parquet::Codec::kSnappy, stoke::parquet::Codec::kGzip,
      stoke::parquet::Codec::kZstd,         stoke::parquet::Codec::kLz4Raw, stoke::parquet::Codec::kLz4,
      stoke::parquet::Codec::kBrotli};
  const stoke::parquet::Codec codec = kCodecs[data[0] % (sizeof(kCodecs) / sizeof(kCodecs[0]))];
  const size_t dest_size = static_cast<size_t>(data[1]) | static_cast<size_t>(data[2] & 0x3f) << 8;
  const uint32_t rows_in_page = 1 + (data[3] & 0x0f);
  const uint32_t row_in_page = (data[3] >> 4) % (rows_in_page + 1);  // sometimes out of range
  // Exactly-sized heap copies, so ASan sees any read or write past either end.
  std::vector<uint8_t> page(data + 4, data + size);
  std::vector<uint8_t> dest(dest_size);
  stoke::AlignedBuffer scratch;
  for (bool verify : {true, false}) {
    for (bool levels : {false, true}) {
      (void)stoke::DecodeSampleFromPage(stoke::ByteView(page.data(), page.size()), codec, row_in_page, rows_in_page,
                                        levels, stoke::MutableByteView(dest.data(), dest.size()), &scratch,
                                        stoke::PageDecodeOptions{.verify_crc = verify}, "fuzz.parquet row 0");
      stoke::DecodedPage whole;
      if (stoke::DecodeWholePage(stoke::ByteView(page.data(), page.size()), codec, rows_in_page, levels, dest_size,
                                 stoke::PageDecodeOptions{.verify_crc = verify}, "fuzz.parquet", &whole)
              .ok()) {
        // Every located value lies inside the body.
        for (uint32_t at : whole.offsets) {
          if (at != stoke::DecodedPage::kNull && (at > whole.body.size() || whole.body.size() - at < dest_size)) {
            __builtin_trap();
          }
        }
      }
    }
  }
  if (dest_size <= page.size()) {
    // Separate exact copies of the two parts, as a split read leaves them in two places.
    std::vector<uint8_t> head(page.begin(), page.end() - static_cast<std::ptrdiff_t>(dest_size));
    std::vector<uint8_t> sample(page.end() - static_cast<std::ptrdiff_t>(dest_size), page.end());
    for (bool verify : {true, false}) {
      (void)stoke::CheckSplitSample(stoke::ByteView(head.data(), head.size()), stoke::ByteView(sample.data(), sample.size()),
                                    stoke::PageDecodeOptions{.verify_crc = verify}, "fuzz.parquet row 0");
    }
  }
  return 0;
}
