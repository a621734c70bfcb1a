// stoke's Parquet writer. Tensor and blob columns are laid out so that one sample is one positioned read:
// each data page holds exactly one row when rows are at least `small_tensor_page_bytes`; smaller
// rows are packed into pages of about that size. Pages are V1 data pages, PLAIN, each compressed on
// its own with a CRC, and listed in the OffsetIndex. Scalar columns get ordinary PLAIN pages with
// statistics and a ColumnIndex. See docs/format.md.
//
// Encoding a row group (RowGroupEncoder) is independent of the file, so several threads can
// encode row groups while one ParquetFileWriter appends them in order.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "core/buffer_pool.h"
#include "format/parquet_column.h"
#include "format/parquet_metadata.h"
#include "io/storage.h"
#include "stoke/codec.h"

namespace stoke {

// Whether a file's footer `created_by` is stoke's writer's ("stoke version <v>").
bool CreatedByStoke(const std::optional<std::string>& created_by);

struct WriterOptions {
  // Codec of the pages. Default ZSTD.
  parquet::Codec codec = parquet::Codec::kZstd;
  // Codec level; 0 = the codec's default (ZSTD 1, GZIP 6).
  int compression_level = 0;
  // Default 0.10. Each column chunk keeps `codec` only if it shrinks the chunk's first pages (up to
  // codec_trial_bytes of page bodies) by at least this fraction; otherwise the chunk is stored
  // UNCOMPRESSED (noisy float tensors compress by a few percent, and decompressing them would make
  // loading CPU-bound). The choice is recorded in the chunk's key-value metadata under
  // kCodecChoiceKey. 0 = always `codec` (what an explicit --codec asks for).
  double min_codec_saving = 0.10;
  int64_t codec_trial_bytes = 1 << 20;  // Default 1 MiB.
  // The choice for a tensor or blob column, whose pages the loader reads one sample at a time
  // (docs/benchmarks.md, "Compression and the loader"). Default 0 and 0: as for the other columns.
  // `stoke`'s tools (SetCodecPolicy with kAuto) set kSampleCodecMinSaving and
  // kSampleCodecMinPageBytes: a chunk keeps `codec` only when its trial pages average at least
  // sample_codec_min_page_bytes of body and shrink by at least sample_codec_min_saving (and by
  // min_codec_saving). Both apply only where a trial runs (min_codec_saving > 0) and only together
  // (sample_codec_min_page_bytes > 0). Smaller reads cost a request each whatever their size, so saved bytes buy
  // nothing, and decoding costs the loader more than the bytes it saves unless they shrink a lot.
  double sample_codec_min_saving = 0;
  int64_t sample_codec_min_page_bytes = 0;
  // Default 0: every tensor (and blob) row is a page of its own, so that reading one sample reads only its bytes
  // (and its page CRC covers exactly them). > 0: rows smaller than this are packed several to a page
  // of about this size (fewer pages for full scans by other readers, at the price of reading the
  // whole page for one sample).
  int64_t small_tensor_page_bytes = 0;
  // Scalar pages end at this many encoded bytes or rows, whichever comes first. Defaults 1 MiB, 20,000.
  int64_t scalar_page_bytes = 1 << 20;
  int64_t scalar_page_rows = 20000;
  // Rows per row group where the writer splits rows itself (WriteNestedParquet). Default 1,000,000,
  // the most an OffsetIndex should list (see docs/format.md).
  int64_t row_group_rows = 1'000'000;
  // Extra key-value metadata for the footer (stoke.tensors and stoke.blobs are always written for
  // tensor and blob columns).
  std::vector<parquet::KeyValue> key_value_metadata;
  // Default true: Close syncs the file (WritableFile::Sync) before closing it. False for writers of
  // many files that make them durable together afterwards (Storage::SyncFiles).
  bool sync_on_close = true;
};

// What `auto` asks of a tensor or blob chunk before it keeps ZSTD (bench/codec_cost.sh on 2 cores,
// zstd against uncompressed samples/s: 60 % saved, 0.15-0.40x warm and 0.70-1.08x cold; 89 %,
// 0.26-0.30x warm and 0.97-1.16x cold; 98 %, 0.67-1.01x warm and 2.7-3.0x cold; see
// docs/benchmarks.md, "Compression and the loader").
inline constexpr double kSampleCodecMinSaving = 0.90;
inline constexpr int64_t kSampleCodecMinPageBytes = int64_t{64} << 10;

// Column-chunk key-value metadata key holding the codec choice as JSON: {"requested", "chosen",
// "trial_bytes", "trial_compressed_bytes", "min_saving"}, and for a tensor or blob chunk under
// sample_codec_min_page_bytes > 0 also "trial_pages" and "min_page_bytes" (see
// WriterOptions::min_codec_saving and sample_codec_min_saving).
inline constexpr std::string_view kCodecChoiceKey = "stoke.codec";
// A recorded choice (the JSON under kCodecChoiceKey) for people: "zstd saved 60.7 % of the first
// 1.0 MiB (4 pages of 256.0 KiB on average); kept when >= 90 % and pages average >= 64.0 KiB".
// Empty when the JSON is not a choice with trial bytes.
std::string CodecChoiceText(std::string_view json_text);

class ChunkPageWriter;

struct EncodedColumnChunk {
  AlignedBuffer bytes;                      // the pages, back to back
  parquet::ColumnMetaData meta;             // offsets relative to the start of `bytes`
  std::vector<parquet::PageLocation> pages; // data pages; offsets relative to the start of `bytes`
  std::optional<parquet::ColumnIndex> column_index;
};

struct EncodedRowGroup {
  int64_t num_rows = 0;
  std::vector<EncodedColumnChunk> columns;
  int64_t byte_size() const;
};

// One leaf column of a nested schema for one row group, shredded into Dremel levels (see
// parquet_nested.h). A record starts at each repetition level 0.
struct LeveledValues {
  ValueVector values;                 // present values only (definition level == max_def), in order
  std::vector<uint32_t> def_levels;   // one per level entry; empty when max_def == 0
  std::vector<uint32_t> rep_levels;   // one per level entry; empty when max_rep == 0
  int16_t max_def = 0;
  int16_t max_rep = 0;
  std::vector<std::string> path_in_schema;  // the leaf's path from the root, e.g. {"add", "tags", "key_value", "key"}
  // Level entries: def_levels.size(), or rep_levels.size(), or values.size() when both are empty.
  size_t num_levels() const;
  // Records: entries at repetition level 0 (all entries when max_rep == 0).
  size_t num_records() const;
};

// Encodes one row group. Not thread-safe; use one per thread.
class RowGroupEncoder {
 public:
  // REQUIRES: `columns`, `options` and `pool` (optional) outlive the encoder. Tensor pages are encoded
  // into buffers taken from `pool`; ParquetFileWriter::WriteRowGroup can give them back.
  RowGroupEncoder(const std::vector<ColumnSpec>& columns, const WriterOptions& options, BufferPool* pool = nullptr);
  ~RowGroupEncoder();

  // Appends the next row of a tensor or blob column (one value per page unless
  // small_tensor_page_bytes packs small ones). For a tensor column bytes.size() must equal the spec's
  // num_bytes(); a blob value may have any size under 2 GiB.
  Status AppendTensor(size_t column, ByteView bytes);
  // Sets all values of a scalar column for this row group (replacing earlier ones).
  Status SetScalars(size_t column, ColumnValues values);
  // Sets all levels and values of a leaf of a nested schema for this row group (replacing earlier
  // ones). The column's ColumnSpec gives the physical type; pages end at record boundaries (a page
  // starts at repetition level 0), their num_values counts level entries and the OffsetIndex's
  // first_row_index counts records. Levels are RLE (repetition levels first in a v1 page). The chunk's
  // statistics hold null_count only (entries below max_def) and it has no ColumnIndex.
  Status SetLeveledColumn(size_t column, LeveledValues leveled);
  // Sizes each fixed-size tensor column's chunk buffer for `rows` more rows (their pages, headers
  // included), so that a row group's chunk is allocated once instead of growing by doubling: at
  // 128 MiB row groups the doubling held the old and the new copy at once, and up to twice the bytes
  // the chunk needed. A hint: a chunk that turns out larger (a codec that expands) still grows.
  void ReserveRows(int64_t rows);
  // Rows appended to tensor or blob column `column` so far.
  int64_t tensor_rows(size_t column) const;
  // Encoded bytes so far (tensor pages; scalars are encoded in Finish).
  int64_t encoded_bytes() const;
  // Encodes what remains and checks that every column has the same number of rows.
  // The encoder is empty afterwards and can be reused.
  Result<EncodedRowGroup> Finish();

 private:
  struct TensorState {
    EncodedColumnChunk chunk;
    int64_t rows = 0;
    int64_t rows_in_open_page = 0;
    int64_t uncompressed_bytes = 0;
    AlignedBuffer open_page;  // uncompressed body of the page being filled
    std::unique_ptr<ChunkPageWriter> pages;  // appends to `chunk`, choosing its codec
  };
  Status FlushTensorPage(size_t column);
  void ResetTensor(size_t column);
  Result<EncodedColumnChunk> EncodeScalarColumn(size_t column, const ColumnValues& values) const;
  Result<EncodedColumnChunk> EncodeLeveledColumn(size_t column, const LeveledValues& leveled) const;

  const std::vector<ColumnSpec>& columns_;
  const WriterOptions& options_;
  BufferPool* pool_;
  std::vector<TensorState> tensors_;                // indexed by column (unused for scalars)
  std::vector<std::optional<ColumnValues>> scalars_; // indexed by column
  std::vector<std::optional<LeveledValues>> leveled_; // indexed by column
};

// Writes one Parquet file. Not thread-safe.
class ParquetFileWriter {
 public:
  static Result<std::unique_ptr<ParquetFileWriter>> Create(Storage& storage, const std::string& path,
                                                            std::vector<ColumnSpec> columns,
                                                            WriterOptions options = {});
  // A file with a nested schema: `schema` is the whole footer schema (root first, depth-first, groups
  // with num_children) and `leaves` its leaf columns in schema order, each named by its dotted path.
  // Row groups come from RowGroupEncoder::SetLeveledColumn. Used by WriteNestedParquet.
  static Result<std::unique_ptr<ParquetFileWriter>> CreateNested(Storage& storage, const std::string& path,
                                                                  std::vector<ColumnSpec> leaves,
                                                                  std::vector<parquet::SchemaElement> schema,
                                                                  WriterOptions options = {});
  ~ParquetFileWriter();

  const std::vector<ColumnSpec>& columns() const { return columns_; }
  const WriterOptions& options() const { return options_; }
  // Appends an encoded row group (from a RowGroupEncoder built with this writer's columns/options).
  // The column buffers go back to `recycle` when given.
  Status WriteRowGroup(EncodedRowGroup row_group, BufferPool* recycle = nullptr);
  // Writes the page indexes and the footer, syncs and closes. The file is complete only after this.
  Status Close();

  uint64_t bytes_written() const { return file_->bytes_written(); }
  int64_t num_rows() const { return metadata_.num_rows; }
  // The footer as written (complete after Close).
  const parquet::FileMetaData& metadata() const { return metadata_; }
  // The OffsetIndex of every column chunk, [row group][column], as written.
  const std::vector<std::vector<parquet::OffsetIndex>>& offset_indexes() const { return offset_indexes_; }
  const std::string& path() const { return file_->path(); }

 private:
  ParquetFileWriter(std::unique_ptr<WritableFile> file, std::vector<ColumnSpec> columns, WriterOptions options);
  static Result<std::unique_ptr<ParquetFileWriter>> Open(Storage& storage, const std::string& path,
                                                          std::vector<ColumnSpec> columns, WriterOptions options,
                                                          std::vector<parquet::SchemaElement> schema);

  std::unique_ptr<WritableFile> file_;
  std::vector<ColumnSpec> columns_;
  WriterOptions options_;
  parquet::FileMetaData metadata_;
  // Page indexes of every row group, written just before the footer.
  std::vector<std::vector<parquet::OffsetIndex>> offset_indexes_;
  std::vector<std::vector<std::optional<parquet::ColumnIndex>>> column_indexes_;
  bool closed_ = false;
};

// Sets options->codec and the choice's thresholds for a tool's codec: kAuto (ZSTD for each column
// chunk that it shrinks by at least 10 %, and for a tensor or blob chunk only where its pages average
// 64 KiB or more and shrink by at least 90 %; UNCOMPRESSED for the others) or one codec for every chunk.
Status SetCodecPolicy(Codec codec, WriterOptions* options);
// As above, the codec named as ParseCodec reads it (a table's configuration "stoke.codec").
Status SetCodecPolicy(std::string_view name, WriterOptions* options);

// Delta metaData.configuration key holding the codec a table was written with ("auto" or a codec
// name), so that OPTIMIZE rewrites files the same way.
inline constexpr char kCodecPolicyKey[] = "stoke.codec";

// True for the physical types the writer writes: BOOLEAN, INT32, INT64, FLOAT, DOUBLE, BYTE_ARRAY.
bool WritableType(parquet::Type type);

// The annotations of a column's LogicalType (c.logical, precision, scale) on its schema element, in
// both of Parquet's forms (the LogicalType union and the older ConvertedType, which readers before
// parquet-format 2.4 know), as Spark writes them; nothing for kNone.
void AnnotateLogicalType(const ColumnSpec& c, parquet::SchemaElement* e);

// Validates a schema: unique non-empty names, tensor and blob columns BYTE_ARRAY and REQUIRED (blobs
// without a STRING annotation), supported types.
Status ValidateColumns(const std::vector<ColumnSpec>& columns);

}  // namespace stoke
