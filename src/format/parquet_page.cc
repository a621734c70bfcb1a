// Decoding one data page of a column chunk (parquet_page.h).
#include "format/parquet_page.h"

#include <fmt/format.h>

#include "format/codec.h"
#include "format/parquet_encoding.h"
#include "format/parquet_values.h"

namespace stoke {

using parquet::Encoding;
using parquet::PageType;

namespace {

int BitWidth(int64_t max_level) {
  int w = 0;
  while ((int64_t{1} << w) <= max_level) ++w;
  return w;
}

}  // namespace

// Reads the decompressed bytes of a page body.
Status DecompressBody(parquet::Codec codec, ByteView stored, int64_t uncompressed_size, AlignedBuffer* out) {
  if (uncompressed_size < 0 || uncompressed_size > kMaxPageBytes) {
    return Status::Corruption(fmt::format("page claims {} uncompressed bytes", uncompressed_size));
  }
  // No bytes at all stand for no bytes, whatever the codec: writers leave the values section of a v2
  // page with only nulls empty rather than compress nothing.
  if (codec == parquet::Codec::kUncompressed || (stored.empty() && uncompressed_size == 0)) {
    if (static_cast<int64_t>(stored.size()) != uncompressed_size) {
      return Status::Corruption(fmt::format("uncompressed page holds {} bytes, header says {}", stored.size(), uncompressed_size));
    }
    out->Clear();
    out->Append(stored);
    return Status::OK();
  }
  // A compressed body cannot expand beyond what its codec allows; a few thousand times covers the
  // best case of every codec but brotli (zstd's is about 32768:1 only for long runs), so cap the
  // allocation at that. Brotli reaches hundreds of thousands to one (Arrow's test of a 1 GiB string
  // is 1,627 bytes): 2^20 to one for it.
  const int64_t max_ratio = codec == parquet::Codec::kBrotli ? int64_t{1} << 20 : 40000;
  if (uncompressed_size > static_cast<int64_t>(stored.size()) * max_ratio + 1024) {
    return Status::Corruption(fmt::format("page claims {} uncompressed bytes from {} stored bytes", uncompressed_size,
                                          stored.size()));
  }
  out->Resize(static_cast<size_t>(uncompressed_size));
  return Decompress(codec, stored, out->mutable_view());
}

// The sections of one data page (parquet_page.h): in a v1 page the repetition levels come first,
// then the definition levels, each with its 4-byte length prefix (RLE), all in the decompressed body;
// in a v2 page both are unprefixed and uncompressed before the values.
Status LocatePageSections(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                          AlignedBuffer* scratch, PageSections* out) {
  if (h.type == PageType::kDataPage) {
    if (!h.data_page_header) return Status::Corruption("DATA_PAGE without data_page_header");
    const auto& d = *h.data_page_header;
    if (d.num_values < 0) return Status::Corruption("negative num_values");
    out->num_values = static_cast<size_t>(d.num_values);
    out->encoding = d.encoding;
    if (col.max_definition_level > 0 && d.definition_level_encoding != Encoding::kRle) {
      return Status::Unsupported(fmt::format("definition level encoding {}", EncodingName(d.definition_level_encoding)));
    }
    if (col.max_repetition_level > 0 && d.repetition_level_encoding != Encoding::kRle) {
      return Status::Unsupported(fmt::format("repetition level encoding {}", EncodingName(d.repetition_level_encoding)));
    }
    STOKE_RETURN_IF_ERROR(DecompressBody(codec, stored, h.uncompressed_page_size, scratch));
    out->rep = out->def = out->values = scratch->view();
    out->prefixed = true;
  } else {
    if (!h.data_page_header_v2) return Status::Corruption("DATA_PAGE_V2 without data_page_header_v2");
    const auto& d = *h.data_page_header_v2;
    if (d.num_values < 0 || d.num_nulls < 0 || d.definition_levels_byte_length < 0 ||
        d.repetition_levels_byte_length < 0) {
      return Status::Corruption("negative count in DataPageHeaderV2");
    }
    out->num_values = static_cast<size_t>(d.num_values);
    out->encoding = d.encoding;
    size_t levels = static_cast<size_t>(d.definition_levels_byte_length) + d.repetition_levels_byte_length;
    if (levels > stored.size() || static_cast<int64_t>(levels) > h.uncompressed_page_size) {
      return Status::Corruption(fmt::format("v2 levels of {} bytes exceed the page", levels));
    }
    // v2 levels are never compressed; the values section is, unless is_compressed is false.
    out->rep = stored.subspan(0, d.repetition_levels_byte_length);
    out->def = stored.subspan(d.repetition_levels_byte_length, d.definition_levels_byte_length);
    ByteView values_stored = stored.subspan(levels);
    int64_t values_size = h.uncompressed_page_size - static_cast<int64_t>(levels);
    STOKE_RETURN_IF_ERROR(
        DecompressBody(d.is_compressed ? codec : parquet::Codec::kUncompressed, values_stored, values_size, scratch));
    out->values = scratch->view();
    out->prefixed = false;
  }
  if (out->num_values > kMaxValuesPerPage) {
    return Status::Unsupported(
        fmt::format("page of {} values (stoke reads at most {} per page)", out->num_values, kMaxValuesPerPage));
  }
  return Status::OK();
}

Status DecodePageLevels(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                        AlignedBuffer* scratch, PageLevels* out) {
  PageSections sections;
  STOKE_RETURN_IF_ERROR(LocatePageSections(col, codec, h, stored, scratch, &sections));
  out->num_values = sections.num_values;
  out->encoding = sections.encoding;
  const size_t n = out->num_values;
  size_t used = 0;  // v1: bytes taken by the prefixed level sections
  auto decode = [&](ByteView bytes, int16_t max, const char* what, std::vector<uint32_t>* levels) -> Status {
    const int width = BitWidth(max);
    levels->resize(n);
    if (sections.prefixed) {
      size_t consumed = 0;
      STOKE_RETURN_IF_ERROR(parquet::DecodeLengthPrefixedRleBitPackedHybrid(bytes.subspan(used), width, n,
                                                                            levels->data(), &consumed));
      used += consumed;
    } else {
      STOKE_RETURN_IF_ERROR(parquet::DecodeRleBitPackedHybrid(bytes, width, n, levels->data()));
    }
    for (uint32_t l : *levels) {
      if (l > static_cast<uint32_t>(max)) {
        return Status::Corruption(fmt::format("{} level {} above the maximum {}", what, l, max));
      }
    }
    return Status::OK();
  };
  out->reps.clear();
  out->defs.clear();
  if (col.max_repetition_level > 0) {
    STOKE_RETURN_IF_ERROR(decode(sections.rep, col.max_repetition_level, "repetition", &out->reps));
  }
  if (col.max_definition_level > 0) {
    STOKE_RETURN_IF_ERROR(decode(sections.def, col.max_definition_level, "definition", &out->defs));
  }
  out->values = sections.prefixed ? sections.values.subspan(used) : sections.values;
  return Status::OK();
}

namespace {

// The row lengths of a list page's repetition levels (one level of nesting: 0 starts a row, 1
// continues it), read run by run. False when a level is above 1 or the first does not start a row.
Result<bool> ListRowLengths(ByteView bytes, size_t n, bool prefixed, std::vector<uint32_t>* lengths, size_t* used) {
  lengths->clear();
  bool dense = true;
  auto visit = [&](uint32_t level, size_t count) {
    if (level == 0) {
      lengths->insert(lengths->end(), count, 1);
    } else if (level == 1 && !lengths->empty()) {
      lengths->back() += static_cast<uint32_t>(count);
    } else {
      dense = false;
    }
  };
  size_t consumed = 0;
  STOKE_RETURN_IF_ERROR(parquet::VisitRleBitPackedHybridRuns(prefixed ? bytes.subspan(*used) : bytes, 1, n, prefixed,
                                                             visit, &consumed));
  if (prefixed) *used += consumed;
  return dense;
}

// True when all n definition levels are `max`, read run by run.
Result<bool> AllDefined(ByteView bytes, size_t n, int16_t max, bool prefixed, size_t* used) {
  bool all = true;
  auto visit = [&](uint32_t level, size_t) { all = all && level == static_cast<uint32_t>(max); };
  size_t consumed = 0;
  STOKE_RETURN_IF_ERROR(parquet::VisitRleBitPackedHybridRuns(prefixed ? bytes.subspan(*used) : bytes, BitWidth(max), n,
                                                             prefixed, visit, &consumed));
  if (prefixed) *used += consumed;
  return all;
}

}  // namespace

Result<bool> ScanDenseListPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h,
                               ByteView stored, size_t value_size, AlignedBuffer* body, DenseListPage* out) {
  if (col.max_repetition_level != 1) return false;
  PageSections sections;
  STOKE_RETURN_IF_ERROR(LocatePageSections(col, codec, h, stored, body, &sections));
  if (sections.encoding != parquet::Encoding::kPlain) return false;
  const size_t n = sections.num_values;
  size_t used = 0;
  STOKE_ASSIGN_OR_RETURN(const bool rows_dense, ListRowLengths(sections.rep, n, sections.prefixed, &out->row_lengths, &used));
  if (!rows_dense) return false;
  if (col.max_definition_level > 0) {
    STOKE_ASSIGN_OR_RETURN(const bool defined, AllDefined(sections.def, n, col.max_definition_level, sections.prefixed,
                                                          &used));
    if (!defined) return false;
  }
  const ByteView values = sections.prefixed ? sections.values.subspan(used) : sections.values;
  if (values.size() / value_size < n) return false;  // the general path says what is wrong
  out->num_values = n;
  out->values_offset = static_cast<size_t>(values.data() - body->data());
  return true;
}

// Number of present values of a page: entries at the maximum definition level.
size_t PresentValues(const LeafColumn& col, const PageLevels& page) {
  if (col.max_definition_level == 0) return page.num_values;
  size_t present = 0;
  for (uint32_t d : page.defs) present += d == static_cast<uint32_t>(col.max_definition_level);
  return present;
}

// Decodes the levels and values of one data page of a flat column and appends to `result`.
// `max_values` is the number of rows the row group has left: a flat column's page cannot hold more.
Status DecodeDataPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                      const ValueVector* dict, size_t max_values, AlignedBuffer* scratch, ColumnValues* result) {
  PageLevels page;
  STOKE_RETURN_IF_ERROR(DecodePageLevels(col, codec, h, stored, scratch, &page));
  if (page.num_values > max_values) {
    return Status::Corruption(
        fmt::format("page holds {} values but only {} rows remain in the row group", page.num_values, max_values));
  }
  if (col.max_definition_level > 0) {
    if (result->defined.empty() && result->num_values() > 0) result->defined.assign(result->num_values(), 1);
    for (uint32_t d : page.defs) result->defined.push_back(d == static_cast<uint32_t>(col.max_definition_level));
  } else if (!result->defined.empty()) {
    result->defined.insert(result->defined.end(), page.num_values, 1);
  }
  return DecodeValues(col, page.encoding, page.values, PresentValues(col, page), dict, &result->values);
}

// Decodes one data page of any column, keeping its levels, and appends to `result`. `max_rows` is
// the number of records the row group has left; a record starts at each repetition level 0.
// The chunk's first level entry must start a record.
Status DecodeLeveledDataPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h,
                             ByteView stored, const ValueVector* dict, size_t max_rows, AlignedBuffer* scratch,
                             ColumnLevels* result, size_t* rows) {
  PageLevels page;
  STOKE_RETURN_IF_ERROR(DecodePageLevels(col, codec, h, stored, scratch, &page));
  size_t records = page.num_values;
  if (col.max_repetition_level > 0) {
    records = 0;
    for (uint32_t r : page.reps) records += r == 0;
    if (result->num_levels == 0 && page.num_values > 0 && page.reps[0] != 0) {
      return Status::Corruption(fmt::format("repeated column starts with repetition level {}, not 0", page.reps[0]));
    }
  }
  if (records > max_rows) {
    return Status::Corruption(fmt::format("page holds {} records but only {} rows remain in the row group", records,
                                          max_rows));
  }
  *rows += records;
  const size_t present = PresentValues(col, page);  // before the levels move
  if (result->num_levels == 0) {  // the first page: its levels are the result's (no copy)
    result->def_levels = std::move(page.defs);
    result->rep_levels = std::move(page.reps);
  } else {
    result->def_levels.insert(result->def_levels.end(), page.defs.begin(), page.defs.end());
    result->rep_levels.insert(result->rep_levels.end(), page.reps.begin(), page.reps.end());
  }
  result->num_levels += page.num_values;
  return DecodeValues(col, page.encoding, page.values, present, dict, &result->values);
}

}  // namespace stoke
