// stoke's Parquet reader: our own files fully, and flat columns of files written by other tools
// (DuckDB, pyarrow, Spark: dictionary and RLE encodings, DELTA_* and BYTE_STREAM_SPLIT, data pages
// v1 and v2, SNAPPY/GZIP/ZSTD/LZ4_RAW). Anything else is a clear Unsupported error, never a wrong
// answer. Every offset and length read from the file is checked before use.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/mutex.h"
#include "format/parquet_column.h"
#include "format/parquet_metadata.h"
#include "io/storage.h"

namespace stoke {

// A leaf column of the file's schema.
struct LeafColumn {
  std::string name;               // dotted path, e.g. "volume" or "a.b"
  size_t schema_index = 0;        // index of its SchemaElement
  parquet::Type type = parquet::Type::kInt64;
  int32_t type_length = 0;        // FIXED_LEN_BYTE_ARRAY width
  int16_t max_definition_level = 0;
  int16_t max_repetition_level = 0;
  // The definition level of each repeated node on its path, outermost first (max_repetition_level of
  // them): an entry whose definition level reaches the j-th has an element in the list at depth j.
  std::vector<int16_t> repeated_def_levels;
  bool is_string = false;         // STRING / UTF8 / JSON / ENUM annotation
  std::optional<TensorSpec> tensor;  // from stoke.tensors metadata
  bool blob = false;                 // named in stoke.blobs metadata (a BYTE_ARRAY column)
};

// One page as found by walking a column chunk.
struct PageInfo {
  int64_t offset = 0;        // file offset of the page header
  int64_t header_size = 0;
  parquet::PageHeader header;
};

// The levels and values of one leaf column chunk (any column: flat or nested).
struct ColumnLevels {
  ValueVector values;                // present values (definition level at the maximum), in order
  std::vector<uint32_t> def_levels;  // one per level entry; empty when max_definition_level == 0
  std::vector<uint32_t> rep_levels;  // one per level entry; empty when max_repetition_level == 0
  size_t num_levels = 0;             // level entries (values + nulls + empty lists)
};

// A data page of a list column (one repetition level) in which every row is a non-empty list of
// present values, PLAIN-encoded: what the loader copies rows out of, its levels never expanded.
struct DenseListPage {
  std::vector<uint32_t> row_lengths;  // values per row, in order
  size_t num_values = 0;
  size_t values_offset = 0;           // where the values start in the decompressed body
};

// A data page of a column chunk as its header describes it (ParquetReader::ListDataPages).
struct DataPageSpan {
  int64_t offset = 0;             // file offset of its header
  int64_t length = 0;             // header and stored body
  int64_t first_row = 0;          // in the row group
  int64_t rows = 0;               // v1: num_values (a flat column's rows); v2: num_rows
  int64_t uncompressed_size = 0;  // of the body
  bool v2 = false;
  parquet::Encoding encoding = parquet::Encoding::kPlain;  // of its values
};

// A flat BYTE_ARRAY column chunk as its PLAIN pages hold it (ParquetReader::ReadByteArrayChunk).
struct ByteArrayChunk {
  static constexpr uint32_t kNull = 0xFFFFFFFFu;
  // The pages' value sections, decompressed, one after another (ReadByteArrayPage: the page's
  // decompressed body).
  AlignedBuffer body;
  std::vector<uint32_t> offsets;  // per row: where its value's 4-byte length lies in `body`, or kNull
};

// The value whose 4-byte length lies at `offset` of `body`, where ByteArrayChunk::offsets (and the
// loader's decoded binary pages) point: the reader checked that both lie inside it.
inline ByteView PlainByteArrayAt(const AlignedBuffer& body, uint32_t offset) {
  uint32_t length = 0;
  std::memcpy(&length, body.data() + offset, sizeof(length));
  return ByteView(body.data() + offset + sizeof(length), length);
}

// Thread-safe after Open: all const methods may be called concurrently.
class ParquetReader {
 public:
  static Result<std::unique_ptr<ParquetReader>> Open(std::unique_ptr<RandomAccessFile> file);
  static Result<std::unique_ptr<ParquetReader>> Open(Storage& storage, const std::string& path);
  // Reads the file's last `read_ahead` bytes with the footer (at least the default 64 KiB), and
  // serves every later read that lies in them from memory: a file no larger than `read_ahead` is
  // read once, whole (one request on an object store), for a reader that will read all of it.
  static Result<std::unique_ptr<ParquetReader>> Open(std::unique_ptr<RandomAccessFile> file, uint64_t read_ahead);
  // How many of a file's last bytes Open reads with the footer.
  static constexpr uint64_t kDefaultReadAhead = 64 << 10;
  // Open with the file's ends already read (Storage::ReadFileEnds), reading nothing to open: `tail`
  // holds the file's last tail.size() bytes (at least its footer and trailer; with the default read
  // ahead, min(size, kDefaultReadAhead) of them), served from memory as Open's read ahead is, and
  // `head` its first 4 bytes, checked for the magic where `tail` does not start at offset 0 (empty:
  // read then, except on object stores, as Open does).
  static Result<std::unique_ptr<ParquetReader>> OpenWithEnds(std::unique_ptr<RandomAccessFile> file, AlignedBuffer tail,
                                                             ByteView head);

  const std::string& path() const { return file_->path(); }
  uint64_t file_size() const { return file_->size(); }
  uint64_t footer_size() const { return footer_size_; }
  const parquet::FileMetaData& metadata() const { return metadata_; }
  const std::vector<LeafColumn>& columns() const { return columns_; }
  // The rows of all row groups (the footer's own count is not trusted: some writers leave it 0).
  int64_t num_rows() const { return row_group_starts_.empty() ? 0 : row_group_starts_.back(); }
  int num_row_groups() const { return static_cast<int>(metadata_.row_groups.size()); }
  // First row (file-global) of each row group, plus num_rows at the end.
  const std::vector<int64_t>& row_group_starts() const { return row_group_starts_; }
  Result<size_t> FindColumn(std::string_view name) const;

  // Decodes a whole column chunk / a whole column (all row groups).
  Result<ColumnValues> ReadColumnChunk(int row_group, size_t column) const;
  // Flat columns only: a repeated column is Unsupported here (see ReadColumnChunkLevels).
  Result<ColumnValues> ReadColumn(size_t column) const;
  // Decodes a whole column chunk of any column with its repetition and definition levels. The row
  // group's row count is the number of records (entries at repetition level 0); the first entry of a
  // repeated column must be at level 0. Levels are checked against the column's maxima.
  Result<ColumnLevels> ReadColumnChunkLevels(int row_group, size_t column) const;
  // The levels of the one data page of a column chunk that holds row `row` of the row group (counted
  // from its first row), found through the chunk's OffsetIndex: reads that page and the chunk's
  // dictionary page, when it has one, and nothing else. *first_row is the page's first row. NotFound
  // when the chunk has no OffsetIndex (then read the chunk whole).
  Result<ColumnLevels> ReadPageLevels(int row_group, size_t column, int64_t row, int64_t* first_row) const;
  // ReadPageLevels, or where it fails (no OffsetIndex, one the pages disagree with) the levels of the
  // whole chunk, *first_row 0.
  Result<ColumnLevels> ReadRowLevels(int row_group, size_t column, int64_t row, int64_t* first_row) const;

  // The page of a list column holding `row`, found as ReadPageLevels finds it, when it is a dense
  // list page (format/parquet_page.h, ScanDenseListPage; values of value_size bytes): its body
  // decompressed into *body, *first_row its first row. False where it is not one, or its rows
  // disagree with the OffsetIndex (ReadPageLevels reads it then, and says what is wrong); NotFound
  // without an OffsetIndex.
  Result<bool> ReadDenseListPage(int row_group, size_t column, int64_t row, size_t value_size, int64_t* first_row,
                                 AlignedBuffer* body, DenseListPage* out) const;

  // A flat BYTE_ARRAY column chunk's values without a copy each: every PLAIN data page's values
  // section, decompressed, appended to out->body as it is (per present value a 4-byte length, then
  // its bytes), and per row where its value lies. Unsupported for a column that is repeated or not
  // BYTE_ARRAY, a page whose values are not PLAIN (dictionary-encoded: read the chunk's levels and
  // values instead), or values beyond 4 GiB; other errors as ReadColumnChunk.
  Status ReadByteArrayChunk(int row_group, size_t column, ByteArrayChunk* out) const;
  // The same for the one data page of the chunk at file offset `offset`, of `size` bytes with its
  // header (as ListPages found it): out->offsets has a row per value of the page, and out->body is
  // the page's decompressed body (v1: levels and values; v2: the values), the offsets pointing into
  // it. The page is read into *page (null: a buffer of its own); both buffers' capacity is reused.
  Status ReadByteArrayPage(int row_group, size_t column, uint64_t offset, uint64_t size, ByteArrayChunk* out,
                           AlignedBuffer* page = nullptr) const;

  // The data pages of a flat column chunk, from its page headers (ListPages; dictionary and index
  // pages left out), each with the rows its header counts. Corruption where a count is negative or
  // the counts do not add up to the row group's rows.
  Result<std::vector<DataPageSpan>> ListDataPages(int row_group, size_t column) const;
  // Walks the page headers of a column chunk (dictionary and data pages).
  Result<std::vector<PageInfo>> ListPages(int row_group, size_t column) const;
  // The page indexes of a column chunk, when the file has them.
  Result<std::optional<parquet::OffsetIndex>> ReadOffsetIndex(int row_group, size_t column) const;
  Result<std::optional<parquet::ColumnIndex>> ReadColumnIndex(int row_group, size_t column) const;
  // ReadOffsetIndex, kept by the reader once read (null when the chunk has none).
  Result<std::shared_ptr<const parquet::OffsetIndex>> CachedOffsetIndex(int row_group, size_t column) const
      EXCLUDES(cache_mu_);

  // Reads the value of a BYTE_ARRAY column at file-global `row` into `out` (replacing its contents).
  // With an OffsetIndex and a non-dictionary page this is one positioned read of the page holding the
  // row; otherwise the column chunk is decoded. A null cell is NotFound.
  Status ReadBinaryCell(int64_t row, size_t column, AlignedBuffer* out) const;
  // Whether the bytes [offset, offset + length) of the file lie in the tail read with the footer, so
  // that reading them (a column chunk, a page index, a cell) reads nothing from the file.
  bool HoldsRange(uint64_t offset, uint64_t length) const;
  // The memory this reader holds, roughly: the bytes read with the footer (the whole of a file read
  // whole), its decoded metadata (counted as twice the footer's encoded size) and the OffsetIndexes
  // it has decoded so far (ReadBinaryCell keeps them: it grows as cells are read). For caches of open
  // readers that keep to a byte budget.
  uint64_t memory_bytes() const EXCLUDES(cache_mu_);

 private:
  explicit ParquetReader(std::unique_ptr<RandomAccessFile> file) : file_(std::move(file)) {}
  Status ReadFooter(uint64_t read_ahead);
  // ReadFooter's checks and decoding, of the tail_ at tail_offset_; `head`: the first 4 bytes, when
  // the caller has them.
  Status ParseFooter(ByteView head);
  // Bytes of the file at `offset`: from the tail ReadFooter read when they lie in it, else read.
  Status ReadRange(uint64_t offset, MutableByteView dst) const;
  Status BuildColumns();
  Status ValidateRowGroups();
  // InvalidArgument for a row group or column out of range; Unsupported unless the column is a flat
  // BYTE_ARRAY column (ReadByteArrayChunk).
  Status CheckByteArrayColumn(int row_group, size_t column) const;
  // The byte range [start, end) of a column chunk's pages.
  Result<std::pair<int64_t, int64_t>> ChunkRange(int row_group, size_t column) const;
  // Where the data region ends: the footer's first byte (column chunks and their pages lie before).
  uint64_t DataEnd() const { return file_->size() - footer_size_ - 8; }
  std::string Context(int row_group, size_t column) const;
  // Reads a column chunk and walks its pages, decoding dictionary pages itself and handing each data
  // page to `visit` (header, stored body, codec, dictionary or null, scratch buffer). Stops at the
  // chunk end or when `done()` turns true before a page.
  using DataPageVisitor = std::function<Status(const parquet::PageHeader&, ByteView, parquet::Codec,
                                               const ValueVector*, AlignedBuffer*)>;
  // Grows `chunk` (the bytes from chunk_start) to `needed` bytes, for a page that runs past the
  // chunk's recorded end but not into the footer; Corruption where it would.
  Status ExtendChunkForPage(int row_group, size_t column, int64_t chunk_start, uint64_t page_offset, size_t needed,
                            AlignedBuffer* chunk) const;
  Status WalkColumnChunk(int row_group, size_t column, const std::function<bool()>& done,
                         const DataPageVisitor& visit) const;
  // The page (header and stored body, CRC checked) of a column chunk at `offset`, of at most
  // `max_bytes` bytes in all.
  Status ReadPageAt(int row_group, size_t column, uint64_t offset, uint64_t max_bytes, parquet::PageHeader* header,
                    AlignedBuffer* page, ByteView* stored) const;
  // The OffsetIndex entry of the page holding `row` of a chunk and the row after that page's last.
  Status LocateRowPage(int row_group, size_t column, int64_t row, parquet::PageLocation* loc, int64_t* end) const;
  // The data page at `loc` (CRC checked) into the calling thread's kept buffer.
  Status ReadRowPage(int row_group, size_t column, const parquet::PageLocation& loc, parquet::PageHeader* h,
                     ByteView* stored) const;
  // The chunk's dictionary, decoded; nullopt when the chunk has none.
  Result<std::optional<ValueVector>> ReadDictionary(int row_group, size_t column) const;

  std::unique_ptr<RandomAccessFile> file_;
  parquet::FileMetaData metadata_;
  uint64_t footer_size_ = 0;
  AlignedBuffer tail_;        // the file's last min(size, read ahead) bytes, read with the footer
  uint64_t tail_offset_ = 0;  // where they start
  std::vector<LeafColumn> columns_;
  std::vector<int64_t> row_group_starts_;
  mutable Mutex cache_mu_;
  mutable std::map<std::pair<int, size_t>, std::shared_ptr<const parquet::OffsetIndex>> offset_index_cache_
      GUARDED_BY(cache_mu_);
  mutable uint64_t offset_index_cache_bytes_ GUARDED_BY(cache_mu_) = 0;
};

}  // namespace stoke
