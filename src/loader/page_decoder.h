// Decoding one sample from one fetched page (docs/format.md, "Pages: one sample, one read").
//
// The fetcher reads exactly the bytes of the page that holds a sample (page header + stored body,
// as listed in the OffsetIndex and located by SampleIndex::Find). DecodeSampleFromPage checks that
// page against stoke's tensor-page convention (V1 DATA_PAGE, PLAIN, REQUIRED BYTE_ARRAY, every value
// the same size), verifies its CRC, decompresses it and copies the sample's bytes into the batch slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_types.h"
#include "stoke/status.h"

namespace stoke {

struct PageDecodeOptions {
  // Compare the CRC-32 of the stored body with PageHeader.crc (when the header has one).
  // Default true. Turning it off saves one pass over the stored bytes; a corrupted page may then
  // fail to decompress or decode to wrong bytes instead of failing with "CRC mismatch".
  bool verify_crc = true;
};

// Decodes row `row_in_page` of the page held in `page` (header followed by the stored body, nothing
// else) into `dest`, which must be exactly the tensor's byte size. `codec` is the column chunk's
// codec; `rows_in_page` is the page's row count from the OffsetIndex. `context` names the file and
// row for error messages ("part-00000.parquet row 1234 column 'image'").
//
// Checks, in order: the header parses and header + compressed_page_size == page.size(); the page is a
// V1 DATA_PAGE, PLAIN, with num_values == rows_in_page and uncompressed_page_size ==
// rows_in_page * (4 + dest.size()) (all values of a tensor column have the same size); the CRC;
// decompression; the row's length prefix. Never reads outside `page` or writes outside `dest`.
//
// Copies: an UNCOMPRESSED body is used in place, so the sample is copied once (page -> dest). A
// compressed body is decompressed into `scratch` and the sample copied once (scratch -> dest).
// `scratch` is grown as needed and never shrunk: once it has reached the largest page size, calls
// do not allocate (except to build an error message).
//
// Errors: InvalidArgument (row_in_page >= rows_in_page, scratch null for a compressed codec),
// Corruption (a page whose sizes do not fit `dest`'s tensor size, truncated or inconsistent page, "CRC mismatch", a bad compressed
// stream, a length prefix that runs past the page), Unsupported (dictionary, index or v2 pages,
// encodings other than PLAIN, codecs stoke does not read). Messages start with `context` and give
// the offset within the page.
//
// Thread-safe as long as `dest` and `scratch` are not shared between concurrent calls.
//
// `definition_levels`: the page is of an OPTIONAL column (max definition level 1, as other writers
// such as DuckDB write binary columns): its body starts with the definition levels (RLE, bit width 1,
// 4-byte length), and the row's value is found among the present values after them. The page's
// uncompressed size is then bounded rather than exact, and a null row is NotFound.
Status DecodeSampleFromPage(ByteView page, parquet::Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                            bool definition_levels, MutableByteView dest, AlignedBuffer* scratch,
                            const PageDecodeOptions& options, std::string_view context);
// A page of a REQUIRED column (stoke's own tensor pages): no definition levels.
inline Status DecodeSampleFromPage(ByteView page, parquet::Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                                   MutableByteView dest, AlignedBuffer* scratch, const PageDecodeOptions& options,
                                   std::string_view context) {
  return DecodeSampleFromPage(page, codec, row_in_page, rows_in_page, false, dest, scratch, options, context);
}

// A blob column's page (docs/format.md, "Blob columns": one encoded image per page in stoke's files):
// the checks of DecodeSampleFromPage with values of any length, the page's uncompressed body at most
// `max_body` bytes (the bound on what a compressed page may make the decoder allocate). Returns row
// `row_in_page`'s value: a view into `page` for an UNCOMPRESSED page (no copy), else into `scratch`
// (grown as needed), valid until either changes. Errors as DecodeSampleFromPage.
Result<ByteView> DecodeBlobFromPage(ByteView page, parquet::Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                                    bool definition_levels, uint64_t max_body, AlignedBuffer* scratch,
                                    const PageDecodeOptions& options, std::string_view context);

// The split read of an UNCOMPRESSED page holding one value: the page's bytes were read in two parts,
// `head` (page header + the value's 4-byte length prefix) into a small buffer and `sample` (the value
// itself, exactly the tensor's size) straight into its batch slot, so the sample is never copied by
// user code. Checks what DecodeSampleFromPage checks for such a page (header, sizes, PLAIN V1 data
// page with one value, the length prefix, and the CRC over prefix + sample unless turned off); the
// caller must only pass pages of an uncompressed column chunk. Errors as DecodeSampleFromPage.
// `body_crc`, when given, is the CRC-32 of the page body (the length prefix for the tensor's size,
// SplitPrefixCrc, then the sample), taken by whoever read or copied the sample, so that the sample
// is not read again.
Status CheckSplitSample(ByteView head, ByteView sample, const PageDecodeOptions& options, std::string_view context,
                        std::optional<uint32_t> body_crc = std::nullopt);

// The CRC-32 of the 4-byte length prefix of a split page's value of `sample_bytes` bytes: a reader
// that takes the CRC of the sample as it copies it starts there (Crc32Copy), and so has the page
// body's CRC for CheckSplitSample.
uint32_t SplitPrefixCrc(uint32_t sample_bytes);

}  // namespace stoke

namespace stoke {

// A whole data page of a tensor column, decompressed once and its values located once, for pages
// that hold many rows (other writers: DuckDB writes a column chunk as one page). Reading a row is
// then a copy out of `body`.
struct DecodedPage {
  static constexpr uint32_t kNull = 0xFFFFFFFFu;
  AlignedBuffer body;             // the page body after decompression (levels, then the values)
  std::vector<uint32_t> offsets;  // per row of the page: where its value starts in `body`, or kNull
  size_t value_size = 0;          // every value's size (the tensor's byte size)
  size_t bytes() const { return body.capacity() + offsets.capacity() * sizeof(uint32_t); }
};

// Checks and decodes the page in `page` (header + stored body) as DecodeSampleFromPage does, for
// all its `rows_in_page` rows at once: header, sizes, CRC, decompression, levels, and every value's
// length prefix (each must be `value_size`). Errors as DecodeSampleFromPage; Corruption names the
// offset and the row within the page.
Status DecodeWholePage(ByteView page, parquet::Codec codec, uint32_t rows_in_page, bool definition_levels,
                       size_t value_size, const PageDecodeOptions& options, std::string_view context, DecodedPage* out);

}  // namespace stoke
