#include "loader/page_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "format/codec.h"
#include "format/parquet_encoding.h"
#include "format/parquet_metadata.h"

namespace stoke {

using parquet::Codec;
using parquet::Encoding;
using parquet::PageType;

namespace {

// Size of a PLAIN BYTE_ARRAY length prefix (parquet Encodings.md: 4-byte little-endian length).
constexpr uint64_t kLengthPrefixBytes = 4;

// The largest body of a page of `rows` values of `value_size` bytes after definition levels of bit
// width 1: the levels' 4-byte length, at most 2 bytes per level (one-value runs), the values.
uint64_t MaxLeveledBody(uint32_t rows, size_t value_size) {
  return kLengthPrefixBytes + 2 * uint64_t{rows} + 8 + uint64_t{rows} * (kLengthPrefixBytes + value_size);
}

// value_size for a blob column's page: values of any length, the body bounded by a caller's limit.
constexpr size_t kVariableSize = SIZE_MAX;

// Steps 1 and 2 of the decoders: parses the header at the start of `head` and checks it against a
// page of `page_size` bytes holding `rows_in_page` values of `value_size` bytes each (or, for
// kVariableSize, of any sizes adding up to at most `max_body` bytes of body).
Status CheckTensorPageHeader(ByteView head, uint64_t page_size, uint32_t rows_in_page, size_t value_size,
                             bool definition_levels, std::string_view context, parquet::PageHeader* h,
                             size_t* header_size, uint64_t max_body = 0) {
  // A static context keeps the happy path allocation-free; the caller's context is added on error.
  static const std::string kHeaderContext = "page header";
  if (Status s = parquet::ParsePageHeader(head, kHeaderContext, 0, h, header_size); !s.ok()) {
    return s.WithContext(context);
  }
  if (h->compressed_page_size < 0 || h->uncompressed_page_size < 0 ||
      *header_size + static_cast<uint64_t>(h->compressed_page_size) != page_size) {
    return Status::Corruption(fmt::format(
        "{}: offset 0: page header ({} bytes) + compressed_page_size {} != the {} bytes read for the page",
        context, *header_size, h->compressed_page_size, page_size));
  }
  if (h->type != PageType::kDataPage) {
    return Status::Unsupported(fmt::format("{}: offset 0: {} where a V1 DATA_PAGE holding one tensor was expected",
                                           context, parquet::PageTypeName(h->type)));
  }
  if (!h->data_page_header) {
    return Status::Corruption(fmt::format("{}: offset 0: DATA_PAGE without a data_page_header", context));
  }
  if (h->data_page_header->encoding != Encoding::kPlain) {
    return Status::Unsupported(fmt::format("{}: offset 0: page encoding {}, expected PLAIN (0)", context,
                                           static_cast<int>(h->data_page_header->encoding)));
  }
  if (h->data_page_header->num_values < 0 || static_cast<uint32_t>(h->data_page_header->num_values) != rows_in_page) {
    return Status::Corruption(fmt::format("{}: offset 0: page has {} values, the OffsetIndex says {} rows", context,
                                          h->data_page_header->num_values, rows_in_page));
  }
  if (value_size == kVariableSize) {
    // A blob page: the body holds a length prefix per value (after levels, if any) and is bounded by
    // the caller's limit, never by what a hostile header claims.
    const uint64_t body = static_cast<uint64_t>(h->uncompressed_page_size);
    if (body < uint64_t{rows_in_page} * kLengthPrefixBytes || body > max_body) {
      return Status::Corruption(fmt::format(
          "{}: offset 0: uncompressed page size {} for {} values of a blob column (at least 4 bytes each, at most {} "
          "bytes in all)", context, body, rows_in_page, max_body));
    }
    if (definition_levels && h->data_page_header->definition_level_encoding != Encoding::kRle) {
      return Status::Unsupported(fmt::format("{}: offset 0: definition level encoding {}, expected RLE (3)", context,
                                             static_cast<int>(h->data_page_header->definition_level_encoding)));
    }
    return Status::OK();
  }
  // Every value of a tensor column has the same size, so the body size is known exactly (or, with
  // definition levels, bounded). This also bounds the scratch allocation by what the caller expects,
  // not by what a hostile header claims.
  const uint64_t values_body = static_cast<uint64_t>(rows_in_page) * (kLengthPrefixBytes + value_size);
  if (!definition_levels) {
    if (static_cast<uint64_t>(h->uncompressed_page_size) != values_body) {
      return Status::Corruption(fmt::format(
          "{}: offset 0: uncompressed page size {}, expected {} rows x (4 + {} tensor bytes) = {} (a page of "
          "another size does not hold this column's tensors)",
          context, h->uncompressed_page_size, rows_in_page, value_size, values_body));
    }
    return Status::OK();
  }
  if (h->data_page_header->definition_level_encoding != Encoding::kRle) {
    return Status::Unsupported(fmt::format("{}: offset 0: definition level encoding {}, expected RLE (3)", context,
                                           static_cast<int>(h->data_page_header->definition_level_encoding)));
  }
  if (static_cast<uint64_t>(h->uncompressed_page_size) > MaxLeveledBody(rows_in_page, value_size) ||
      static_cast<uint64_t>(h->uncompressed_page_size) < kLengthPrefixBytes) {
    return Status::Corruption(fmt::format(
        "{}: offset 0: uncompressed page size {} does not fit {} rows of at most (4 + {} tensor bytes) after "
        "their definition levels",
        context, h->uncompressed_page_size, rows_in_page, value_size));
  }
  return Status::OK();
}

// An uncompressed body must be exactly the header's uncompressed size; the CRC (when the header has
// one and verification is on) covers the stored bytes.
Status CheckStoredBody(ByteView stored, Codec codec, const parquet::PageHeader& h, size_t header_size,
                       const PageDecodeOptions& options, std::string_view context) {
  const uint64_t body_size = static_cast<uint64_t>(h.uncompressed_page_size);
  if (codec == Codec::kUncompressed && stored.size() != body_size) {
    return Status::Corruption(fmt::format("{}: offset {}: uncompressed page stores {} bytes, header says {}", context,
                                          header_size, stored.size(), body_size));
  }
  if (options.verify_crc && h.crc) {
    const uint32_t computed = Crc32(stored);
    if (computed != static_cast<uint32_t>(*h.crc)) {
      return Status::Corruption(fmt::format("{}: offset {}: CRC mismatch over {} body bytes (stored {:08x}, computed {:08x})",
                                            context, header_size, stored.size(), static_cast<uint32_t>(*h.crc), computed));
    }
  }
  return Status::OK();
}

}  // namespace

namespace {

// Steps 1 to 5 of DecodeSampleFromPage and DecodeBlobFromPage: checks the page and finds the row's
// value (in `page` when uncompressed, else in `scratch`). `value_size` as CheckTensorPageHeader's.
Result<ByteView> LocateValue(ByteView page, Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                             bool definition_levels, size_t value_size, uint64_t max_body, AlignedBuffer* scratch,
                             const PageDecodeOptions& options, std::string_view context) {
  if (row_in_page >= rows_in_page) {
    return Status::InvalidArgument(
        fmt::format("{}: row {} of a page of {} rows", context, row_in_page, rows_in_page));
  }
  if (codec != Codec::kUncompressed && !CodecSupported(codec)) {
    return Status::Unsupported(fmt::format("{}: codec {} is not supported", context, static_cast<int>(codec)));
  }
  if (codec != Codec::kUncompressed && scratch == nullptr) {
    return Status::InvalidArgument(fmt::format("{}: a compressed page needs a scratch buffer", context));
  }
  parquet::PageHeader h;
  size_t header_size = 0;
  STOKE_RETURN_IF_ERROR(CheckTensorPageHeader(page, page.size(), rows_in_page, value_size, definition_levels, context,
                                              &h, &header_size, max_body));
  const uint64_t expected_body = static_cast<uint64_t>(h.uncompressed_page_size);
  const ByteView stored = page.subspan(header_size);
  // 3. The stored body's size and CRC.
  STOKE_RETURN_IF_ERROR(CheckStoredBody(stored, codec, h, header_size, options, context));

  // 4. The plain body: in place, or decompressed into scratch.
  ByteView body = stored;
  if (codec != Codec::kUncompressed) {
    scratch->Resize(static_cast<size_t>(expected_body));
    if (Status s = Decompress(codec, stored, scratch->mutable_view()); !s.ok()) {
      return s.WithContext(fmt::format("{}: offset {}", context, header_size));
    }
    body = scratch->view();
  }

  // 5. Walk the length prefixes to the row. Offsets in messages are within the page (header included)
  // for uncompressed pages and within the decompressed body otherwise.
  const std::string_view where = codec == Codec::kUncompressed ? "page offset" : "decompressed body offset";
  const uint64_t base = codec == Codec::kUncompressed ? header_size : 0;
  uint64_t pos = 0;
  uint32_t value = row_in_page;  // the row's position among the page's present values
  if (definition_levels) {
    // An OPTIONAL column (other writers): definition levels of bit width 1 first; the row's value is
    // the one after the present values before it.
    thread_local std::vector<uint32_t> levels;
    levels.resize(rows_in_page);
    size_t consumed = 0;
    if (Status s = parquet::DecodeLengthPrefixedRleBitPackedHybrid(body, 1, rows_in_page, levels.data(), &consumed); !s.ok()) {
      return s.WithContext(fmt::format("{}: {} {}: definition levels", context, where, base));
    }
    if (levels[row_in_page] != 1) {
      return Status::NotFound(fmt::format("{}: row {} in page is null (a {} column needs a value in every row)",
                                          context, row_in_page, value_size == kVariableSize ? "blob" : "tensor"));
    }
    value = static_cast<uint32_t>(std::count(levels.begin(), levels.begin() + row_in_page, 1u));
    pos = consumed;
  }
  for (uint32_t k = 0;; ++k) {
    if (body.size() - pos < kLengthPrefixBytes) {
      return Status::Corruption(fmt::format("{}: {} {}: body ends before the length of row {} in page", context, where,
                                            base + pos, k));
    }
    const uint32_t len = LoadLE<uint32_t>(body.data() + pos);
    pos += kLengthPrefixBytes;
    if (len > body.size() - pos) {
      return Status::Corruption(fmt::format("{}: {} {}: value length {} of row {} in page runs past the body ({} bytes)",
                                            context, where, base + pos - kLengthPrefixBytes, len, k, body.size()));
    }
    if (k == value) {
      if (value_size != kVariableSize && len != value_size) {
        return Status::Corruption(fmt::format("{}: {} {}: row {} in page holds {} bytes, expected the tensor's {}",
                                              context, where, base + pos - kLengthPrefixBytes, k, len, value_size));
      }
      return body.subspan(pos, len);
    }
    pos += len;
  }
}

}  // namespace

Status DecodeSampleFromPage(ByteView page, Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                            bool definition_levels, MutableByteView dest, AlignedBuffer* scratch,
                            const PageDecodeOptions& options, std::string_view context) {
  STOKE_ASSIGN_OR_RETURN(ByteView value, LocateValue(page, codec, row_in_page, rows_in_page, definition_levels,
                                                     dest.size(), 0, scratch, options, context));
  if (!value.empty()) std::memcpy(dest.data(), value.data(), value.size());
  return Status::OK();
}

Result<ByteView> DecodeBlobFromPage(ByteView page, Codec codec, uint32_t row_in_page, uint32_t rows_in_page,
                                    bool definition_levels, uint64_t max_body, AlignedBuffer* scratch,
                                    const PageDecodeOptions& options, std::string_view context) {
  return LocateValue(page, codec, row_in_page, rows_in_page, definition_levels, kVariableSize, max_body, scratch,
                     options, context);
}

// The same for every sample of a column, so kept per thread instead of computed per sample.
uint32_t SplitPrefixCrc(uint32_t len) {
  auto crc_of = [](uint32_t n) {
    uint8_t prefix[kLengthPrefixBytes];
    StoreLE<uint32_t>(prefix, n);
    return Crc32(ByteView(prefix, sizeof(prefix)));
  };
  thread_local uint32_t t_len = 0;
  thread_local uint32_t t_crc = crc_of(0);
  if (len != t_len) {
    t_crc = crc_of(len);
    t_len = len;
  }
  return t_crc;
}

Status CheckSplitSample(ByteView head, ByteView sample, const PageDecodeOptions& options, std::string_view context,
                        std::optional<uint32_t> body_crc) {
  parquet::PageHeader h;
  size_t header_size = 0;
  const uint64_t page_size = uint64_t{head.size()} + sample.size();
  STOKE_RETURN_IF_ERROR(CheckTensorPageHeader(head, page_size, 1, sample.size(), false, context, &h, &header_size));
  // One uncompressed value: the stored body is the 4-byte length prefix and the sample.
  if (head.size() != header_size + kLengthPrefixBytes) {
    return Status::Corruption(fmt::format("{}: offset {}: the page header ends {} bytes before the value (expected 4)",
                                          context, header_size, head.size() - std::min(head.size(), header_size)));
  }
  const uint32_t len = LoadLE<uint32_t>(head.data() + header_size);
  if (len != sample.size()) {
    return Status::Corruption(fmt::format("{}: page offset {}: the value holds {} bytes, expected the tensor's {}",
                                          context, header_size, len, sample.size()));
  }
  if (options.verify_crc && h.crc) {
    const uint32_t computed = body_crc.has_value() ? *body_crc : Crc32(sample, SplitPrefixCrc(len));
    if (computed != static_cast<uint32_t>(*h.crc)) {
      return Status::Corruption(fmt::format("{}: offset {}: CRC mismatch over {} body bytes (stored {:08x}, computed {:08x})",
                                            context, header_size, kLengthPrefixBytes + sample.size(),
                                            static_cast<uint32_t>(*h.crc), computed));
    }
  }
  return Status::OK();
}

}  // namespace stoke

namespace stoke {

Status DecodeWholePage(ByteView page, Codec codec, uint32_t rows_in_page, bool definition_levels, size_t value_size,
                       const PageDecodeOptions& options, std::string_view context, DecodedPage* out) {
  if (codec != Codec::kUncompressed && !CodecSupported(codec)) {
    return Status::Unsupported(fmt::format("{}: codec {} is not supported", context, static_cast<int>(codec)));
  }
  if (rows_in_page == 0) return Status::InvalidArgument(fmt::format("{}: a page of 0 rows", context));
  parquet::PageHeader h;
  size_t header_size = 0;
  STOKE_RETURN_IF_ERROR(CheckTensorPageHeader(page, page.size(), rows_in_page, value_size, definition_levels, context,
                                              &h, &header_size));
  const ByteView stored = page.subspan(header_size);
  const uint64_t body_size = static_cast<uint64_t>(h.uncompressed_page_size);
  STOKE_RETURN_IF_ERROR(CheckStoredBody(stored, codec, h, header_size, options, context));
  if (body_size > std::numeric_limits<uint32_t>::max()) {
    return Status::Unsupported(fmt::format("{}: a page body of {} bytes (at most 4 GiB)", context, body_size));
  }
  out->body.Resize(static_cast<size_t>(body_size));
  if (codec == Codec::kUncompressed) {
    if (body_size > 0) std::memcpy(out->body.data(), stored.data(), static_cast<size_t>(body_size));
  } else if (Status s = Decompress(codec, stored, out->body.mutable_view()); !s.ok()) {
    return s.WithContext(fmt::format("{}: offset {}", context, header_size));
  }
  const ByteView body = out->body.view();
  out->value_size = value_size;
  out->offsets.assign(rows_in_page, DecodedPage::kNull);
  uint64_t pos = 0;
  std::vector<uint32_t> levels;
  if (definition_levels) {
    levels.resize(rows_in_page);
    size_t consumed = 0;
    if (Status s = parquet::DecodeLengthPrefixedRleBitPackedHybrid(body, 1, rows_in_page, levels.data(), &consumed);
        !s.ok()) {
      return s.WithContext(fmt::format("{}: decompressed body offset 0: definition levels", context));
    }
    pos = consumed;
  }
  for (uint32_t row = 0; row < rows_in_page; ++row) {
    if (definition_levels && levels[row] != 1) continue;
    if (body.size() - pos < kLengthPrefixBytes) {
      return Status::Corruption(fmt::format("{}: decompressed body offset {}: body ends before the length of row {} in "
                                            "page", context, pos, row));
    }
    const uint32_t len = LoadLE<uint32_t>(body.data() + pos);
    if (len != value_size) {
      return Status::Corruption(fmt::format("{}: decompressed body offset {}: row {} in page holds {} bytes, expected "
                                            "the tensor's {}", context, pos, row, len, value_size));
    }
    pos += kLengthPrefixBytes;
    if (len > body.size() - pos) {
      return Status::Corruption(fmt::format("{}: decompressed body offset {}: value of row {} in page runs past the "
                                            "body ({} bytes)", context, pos - kLengthPrefixBytes, row, body.size()));
    }
    out->offsets[row] = static_cast<uint32_t>(pos);
    pos += len;
  }
  return Status::OK();
}

}  // namespace stoke
