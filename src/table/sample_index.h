// The sample index of a table version: for every row (snapshot order: files in Snapshot::files order,
// rows in file order) and every tensor column, where the page holding that row's tensor lies, so that
// fetching a sample is one positioned read. Blob columns (encoded images, one value per page) are
// indexed as tensor columns are, and listed among tensor_columns(). Built from each data file's footer and OffsetIndexes (or,
// for other writers' files without them, the column chunks' page headers),
// cached inside the table as `_stoke/sample_index/<20-digit version>.idx` and memory-mapped on later
// opens; a new version's index takes the pages of files it shares with the newest older cached
// index from there instead of their footers. The cache layout is specified below (the class comment); it is stoke's own file, under
// `_stoke/`, which Delta readers and `stoke vacuum` ignore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "format/parquet_metadata.h"
#include "format/parquet_types.h"
#include "stoke/status.h"
#include "table/delta_log.h"

namespace stoke {

// Cache file layout (all integers little-endian; every section starts at a multiple of 8):
//
//   header, 128 bytes:
//     0  magic "STKIDX01"                 8 bytes
//     8  format_version u32 (= 2)          12 header_size u32 (= 128)
//     16 table_version i64                 24 num_rows u64
//     32 num_files u32                     36 num_tensor_columns u32
//     40 num_pages u64
//     48 files_offset u64                  56 columns_offset u64
//     64 pages_offset u64                  72 rows_offset u64
//     80 strings_offset u64                88 strings_size u64
//     96 total_size u64 (the file's length)
//     104 commit_size u64                  the size of _delta_log/<version>.json when built
//     112 commit_mtime_ms i64              its modification time (ms), so a table recreated under
//                                          the same path and version never reuses a stale index
//     120 body_crc u32                     CRC-32 (zlib polynomial) of bytes [128, total_size)
//     124 header_crc u32                   CRC-32 of bytes [0, 124)
//   files:   num_files records of 40 bytes:
//            size u64 (data file bytes), first_row u64 (global row of its first row),
//            num_rows u64, path_offset u64 (into strings), path_length u32, reserved u32 (0)
//            the path is relative to the table root (decoded, not URI-encoded)
//   columns: num_tensor_columns records of 32 bytes:
//            first_page u64, num_pages u64, name_offset u64 (into strings), name_length u32, reserved u32
//   pages:   num_pages records of 32 bytes, column after column, each column's pages in row order:
//            offset u64 (file offset of the page header), first_row u64 (global), file u32,
//            length u32 (header + stored body; 0 when flags has kNeedsDecode), num_rows u32, flags u32:
//            bit 0 kNeedsDecode, bit 1 kDefinitionLevels (an OPTIONAL column: the page body starts
//            with definition levels), bits 8..15 the column chunk's compression codec (parquet::Codec;
//            0 when kNeedsDecode), other bits 0
//            A "needs decode" page stands for rows the loader cannot read page by page (other
//            writers' dictionary-encoded or V2 pages, nested or non-binary columns, or a chunk
//            without an OffsetIndex when Options::map_pages is off): the row is read by decoding
//            (ParquetReader::ReadBinaryCell). Other pages come from the chunk's OffsetIndex or, when
//            it has none, from walking its page headers.
//   rows:    num_tensor_columns * num_rows u32 page numbers (column-major: rows[c * num_rows + r]),
//            each naming a page of column c that holds row r
//   strings: path and name bytes
//
// Open validates all of it (sizes against the file length, offsets, every page against its file and
// column, every row entry against its page, both CRCs), so Find never reads out of bounds and never
// answers from a damaged cache; any mismatch rebuilds the index (and rewrites the cache).
class SampleIndex {
 public:
  // One page of a tensor column of a data file while an index is built. `first_row` counts from the
  // file's first row.
  struct PageRecord {
    uint64_t offset = 0;     // file offset of the page header
    uint64_t first_row = 0;
    uint32_t length = 0;     // page header + stored body; 0 for a needs-decode record
    uint32_t num_rows = 0;
    uint32_t flags = 0;      // as in the cache's page records
  };
  // The pages of one data file's tensor columns.
  struct FilePages {
    std::string rel_path;    // relative to the table root, decoded
    uint64_t size = 0;       // the data file's bytes
    uint64_t num_rows = 0;
    std::vector<std::vector<PageRecord>> pages;  // per tensor column, in tensor_columns() order
  };
  // Data files a writer has just written, with the tensor columns their pages are listed for (used
  // only when they are the table's indexed columns, in the same order).
  struct WrittenFiles {
    std::vector<std::string> tensor_columns;
    std::vector<FilePages> files;
  };
  struct Options {
    bool use_cache = true;    // default true: open <table>/_stoke/sample_index/<version>.idx if valid
    bool write_cache = true;  // default true: write the cache after building (skipped, logged once, when
                              // the table directory is not writable)
    // Default true: a column chunk without an OffsetIndex (other writers) gets a page map from its
    // page headers, walked once while building (ParquetReader::ListPages), so that each of its
    // samples is one read too. false: its rows are read by decoding (ParquetReader::ReadBinaryCell).
    bool map_pages = true;
    size_t threads = 0;       // footer-reading threads; 0 = max(4, hardware threads): the reads are
                              // small and latency-bound, so more threads than cores helps on slow storage
    // Files a writer has just written (see PagesOfWrittenFile; default none): a build takes their
    // pages from here instead of reading their footers. Must outlive Open.
    const WrittenFiles* written = nullptr;
    // The snapshot of the version opened, when the caller holds it (default none: the log is read).
    // Must outlive Open.
    const delta::Snapshot* snapshot = nullptr;
    // Default true. false: a build that would have to read a data file's footer (a file neither
    // written nor in an older cached index) stops with NotFound instead, for a writer that indexes
    // the version it committed only when that is cheap.
    bool read_footers = true;
  };

  // The pages of a data file stoke's writer has just written, from what the writer holds: its footer
  // and its OffsetIndexes (offset_indexes[row group][column]), with no read of the file. `tensor_columns`
  // are the table's indexed columns in order (as tensor_columns() lists them); each must be a flat
  // BYTE_ARRAY column of the file. A writer hands these to Open (Options::written) for the version it
  // committed, so that the index is built without reading any footer of its own files.
  static Result<FilePages> PagesOfWrittenFile(std::string rel_path, uint64_t size, const parquet::FileMetaData& footer,
                                              const std::vector<std::vector<parquet::OffsetIndex>>& offset_indexes,
                                              const std::vector<std::string>& tensor_columns);

  struct Location {
    uint32_t file = 0;          // index into the file table (FilePath, file_size)
    uint64_t offset = 0;        // file offset of the page header
    uint32_t length = 0;        // page header + stored body; 0 when needs_decode
    uint32_t row_in_page = 0;   // the row's position among the page's values
    uint32_t rows_in_page = 0;  // values in the page
    int64_t row_in_file = 0;    // the row's position in its file (for ReadBinaryCell)
    bool needs_decode = false;  // read the cell with ParquetReader::ReadBinaryCell (see kNeedsDecode)
    bool definition_levels = false;  // an OPTIONAL column's page: levels before the values
    parquet::Codec codec = parquet::Codec::kUncompressed;  // the page's compression (not needs_decode)
  };

  // The index of `version` (latest when nullopt) of the table at `table_dir`.
  static Result<SampleIndex> Open(const std::string& table_dir, std::optional<int64_t> version, Options options);
  static Result<SampleIndex> Open(const std::string& table_dir, std::optional<int64_t> version = std::nullopt) {
    return Open(table_dir, version, Options{});
  }

  // Checks a cache file's bytes completely (the checks Open makes before trusting a cache).
  // Corruption naming what is wrong; OK when every Find would answer from consistent data.
  static Status ValidateCache(ByteView bytes);
  // The cache file of `version`: "<table_dir>/_stoke/sample_index/<20-digit version>.idx".
  static std::string CachePath(const std::string& table_dir, int64_t version);

  SampleIndex(SampleIndex&&) noexcept;
  SampleIndex& operator=(SampleIndex&&) noexcept;
  ~SampleIndex();

  // Thread-safe: all const methods may be called concurrently; the index is immutable after Open.
  int64_t version() const { return version_; }
  int64_t num_rows() const { return static_cast<int64_t>(num_rows_); }
  // The indexed columns, tensor and blob columns in schema order (partition columns left out), by
  // their names in the data files (ColumnSpec::file_name: physical names under column mapping).
  const std::vector<std::string>& tensor_columns() const { return tensor_columns_; }
  size_t num_files() const { return file_paths_ != nullptr ? file_paths_->size() : 0; }  // 0 when moved from
  // REQUIRES: 0 <= row < num_rows(), tensor_column < tensor_columns().size().
  Location Find(int64_t row, size_t tensor_column) const;
  // Find for each of rows[0..n), into out[0..n): the same answers, with the memory of all n
  // lookups fetched together (a batch's rows are random, and each Find's three dependent loads
  // from a large index missed the cache one after another).
  void FindMany(const int64_t* rows, size_t n, size_t tensor_column, Location* out) const;
  // REQUIRES: file < num_files(). The data file's absolute path and size in bytes.
  const std::string& FilePath(uint32_t file) const { return (*file_paths_)[file]; }
  // Every data file's absolute path, by file index; shared, so a reader of the files can keep the
  // list without a copy.
  const std::shared_ptr<const std::vector<std::string>>& file_paths() const { return file_paths_; }
  uint64_t file_size(uint32_t file) const;
  // REQUIRES: file < num_files(). The file's rows are [file_first_row, + file_num_rows) of the table:
  // files tile the rows in snapshot order.
  int64_t file_first_row(uint32_t file) const;
  int64_t file_num_rows(uint32_t file) const;
  // The file holding table row `row` (files are in row order). REQUIRES: 0 <= row < num_rows().
  uint32_t FileOfRow(int64_t row) const;
  // True when this index was memory-mapped from a valid cache file rather than built.
  bool from_cache() const { return from_cache_; }

 private:
  class Mapping;  // the bytes: a read-only mmap of the cache file, or the built index in memory
  SampleIndex() = default;
  // Sets up the views over validated bytes.
  static Result<SampleIndex> FromBytes(std::unique_ptr<Mapping> bytes, const std::string& table_dir, bool from_cache);

  std::unique_ptr<Mapping> bytes_;
  int64_t version_ = -1;
  uint64_t num_rows_ = 0;
  std::vector<std::string> tensor_columns_;
  std::shared_ptr<const std::vector<std::string>> file_paths_ = std::make_shared<const std::vector<std::string>>();
  const uint8_t* files_ = nullptr;       // views into bytes_
  const uint8_t* pages_ = nullptr;
  const uint8_t* rows_ = nullptr;
  bool from_cache_ = false;
};

}  // namespace stoke
