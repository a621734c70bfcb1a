// Decoding one data page of a column chunk (v1 or v2): decompressing its body, its repetition and
// definition levels, and its values, with the checks every reader of outside bytes needs. Used by
// ParquetReader, which finds the pages (parquet_reader.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_metadata.h"
#include "format/parquet_reader.h"

namespace stoke {

// Upper bound for one page (header + body) and for a decoded page, against hostile sizes.
inline constexpr int64_t kMaxPageBytes = int64_t{1} << 31;
// Values in one data page. Writers stay far below (parquet-mr 20,000 rows per page, Arrow and DuckDB
// about 1 MiB of values); the cap bounds the level buffers when a header lies.
inline constexpr size_t kMaxValuesPerPage = size_t{1} << 26;

// Reads the decompressed bytes of a page body into *out.
Status DecompressBody(parquet::Codec codec, ByteView stored, int64_t uncompressed_size, AlignedBuffer* out);

// The levels and the values section of one data page (v1 or v2), decompressed.
struct PageLevels {
  size_t num_values = 0;  // level entries (rows for a flat column)
  parquet::Encoding encoding = parquet::Encoding::kPlain;
  std::vector<uint32_t> reps;  // empty when the column is not repeated
  std::vector<uint32_t> defs;  // empty when the column is REQUIRED all the way
  ByteView values;             // the encoded values (points into `scratch`)
};

// The sections of one data page (v1 or v2), its body decompressed into `scratch`: the encoded
// repetition and definition levels (v1: each with its 4-byte length prefix, rep first, then def,
// then the values, all in `values`: `prefixed`; v2: unprefixed and uncompressed before the values)
// and the values.
struct PageSections {
  size_t num_values = 0;
  parquet::Encoding encoding = parquet::Encoding::kPlain;
  bool prefixed = false;
  ByteView rep, def, values;
};
Status LocatePageSections(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                          AlignedBuffer* scratch, PageSections* out);

// Decodes the repetition and definition levels of one data page and locates its values.
// `stored` is the page body as stored (after the header). In a v1 page the repetition levels come
// first, then the definition levels, each with its 4-byte length prefix (RLE); in a v2 page both are
// unprefixed and uncompressed before the values. Levels above the column's maxima are corruption.
Status DecodePageLevels(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                        AlignedBuffer* scratch, PageLevels* out);

// A DenseListPage (parquet_reader.h) from one data page: decompresses the page into *body and reads
// its levels run by run. False where the page is not such a page (a level below the maximum
// definition, a repetition level of 2, an encoding other than PLAIN, fewer value bytes than
// num_values * value_size): read it with DecodeLeveledDataPage, which says what is wrong where
// something is. Errors as DecodePageLevels.
Result<bool> ScanDenseListPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h,
                               ByteView stored, size_t value_size, AlignedBuffer* body, DenseListPage* out);

// Number of present values of a page: entries at the maximum definition level.
size_t PresentValues(const LeafColumn& col, const PageLevels& page);

// Decodes the levels and values of one data page of a flat column and appends to `result`.
// `max_values` is the number of rows the row group has left: a flat column's page cannot hold more.
Status DecodeDataPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                      const ValueVector* dict, size_t max_values, AlignedBuffer* scratch, ColumnValues* result);

// Decodes one data page of any column, keeping its levels, and appends to `result`. `max_rows` is
// the number of records the row group has left; a record starts at each repetition level 0.
// The chunk's first level entry must start a record.
Status DecodeLeveledDataPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h,
                             ByteView stored, const ValueVector* dict, size_t max_rows, AlignedBuffer* scratch,
                             ColumnLevels* result, size_t* rows);

}  // namespace stoke
