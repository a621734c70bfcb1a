#include "format/parquet_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "format/codec.h"
#include "format/parquet_page.h"
#include "format/parquet_encoding.h"
#include "format/parquet_values.h"

namespace stoke {

using parquet::Encoding;
using parquet::PageType;
using parquet::Type;

namespace {

// A Parquet file holds at least its two magics and the footer length: 12 bytes.
Status CheckFileSize(const std::string& path, uint64_t size) {
  if (size >= 12) return Status::OK();
  return Status::Corruption(fmt::format("{}: {} bytes is too short for a Parquet file (at least 12)", path, size));
}

bool IsStringAnnotated(const parquet::SchemaElement& e) {
  if (e.logical_type) {
    auto id = e.logical_type->id;
    if (id == parquet::LogicalTypeId::kString || id == parquet::LogicalTypeId::kJson ||
        id == parquet::LogicalTypeId::kEnum) {
      return true;
    }
  }
  return e.converted_type && (*e.converted_type == parquet::ConvertedType::kUtf8 ||
                              *e.converted_type == parquet::ConvertedType::kJson ||
                              *e.converted_type == parquet::ConvertedType::kEnum);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
Result<std::unique_ptr<ParquetReader>> ParquetReader::Open(Storage& storage, const std::string& path) {
  STOKE_ASSIGN_OR_RETURN(auto file, storage.OpenForRead(path));
  return Open(std::move(file));
}

Result<std::unique_ptr<ParquetReader>> ParquetReader::Open(std::unique_ptr<RandomAccessFile> file) {
  return Open(std::move(file), kDefaultReadAhead);
}

Result<std::unique_ptr<ParquetReader>> ParquetReader::Open(std::unique_ptr<RandomAccessFile> file, uint64_t read_ahead) {
  std::unique_ptr<ParquetReader> r(new ParquetReader(std::move(file)));
  STOKE_RETURN_IF_ERROR(r->ReadFooter(std::max(read_ahead, kDefaultReadAhead)));
  STOKE_RETURN_IF_ERROR(r->BuildColumns());
  STOKE_RETURN_IF_ERROR(r->ValidateRowGroups());
  return r;
}

Result<std::unique_ptr<ParquetReader>> ParquetReader::OpenWithEnds(std::unique_ptr<RandomAccessFile> file,
                                                                  AlignedBuffer tail, ByteView head) {
  std::unique_ptr<ParquetReader> r(new ParquetReader(std::move(file)));
  const uint64_t size = r->file_->size();
  if (tail.size() > size) {
    return Status::InvalidArgument(fmt::format("{}: a tail of {} bytes given for a file of {}", r->path(), tail.size(),
                                               size));
  }
  STOKE_RETURN_IF_ERROR(CheckFileSize(r->path(), size));
  if (tail.size() < 8) {
    return Status::InvalidArgument(fmt::format("{}: a tail of {} bytes given (the trailer alone is 8)", r->path(),
                                               tail.size()));
  }
  r->tail_offset_ = size - tail.size();
  r->tail_ = std::move(tail);
  STOKE_RETURN_IF_ERROR(r->ParseFooter(head));
  STOKE_RETURN_IF_ERROR(r->BuildColumns());
  STOKE_RETURN_IF_ERROR(r->ValidateRowGroups());
  return r;
}

Status ParquetReader::ReadFooter(uint64_t read_ahead) {
  const uint64_t size = file_->size();
  const std::string& path = file_->path();
  STOKE_RETURN_IF_ERROR(CheckFileSize(path, size));
  // The last `read_ahead` bytes (at least 64 KiB; a small file whole) in one read: the footer, and
  // in stoke's files and most others the page indexes before it, which ReadRange then serves from
  // memory.
  const uint64_t tail_size = std::min<uint64_t>(size, read_ahead);
  tail_ = AlignedBuffer(tail_size);
  tail_offset_ = size - tail_size;
  STOKE_RETURN_IF_ERROR(file_->ReadAt(tail_offset_, tail_.mutable_view()));
  return ParseFooter(ByteView());
}

namespace {

Status EncryptedFile(const std::string& path, std::string_view what) {
  return Status::Unsupported(fmt::format(
      "{}: encrypted Parquet file (encrypted {}): stoke does not read Parquet modular encryption", path, what));
}

}  // namespace

Status ParquetReader::ParseFooter(ByteView given_head) {
  const uint64_t size = file_->size();
  const std::string& path = file_->path();
  const uint64_t tail_size = tail_.size();
  // The leading magic: from the tail when it holds it, else read, except on an object store. There,
  // as Arrow and parquet-mr always do, only the trailing magic and the footer are checked: reading
  // the 4 bytes would be a second request per file (opening 360 KB one-sample blobs for the sample
  // index took two GETs each), and the pages, which the footer places after it, carry their own
  // headers and CRCs.
  if (tail_offset_ == 0 || !file_->remote()) {
    uint8_t head[4];
    if (tail_offset_ == 0) {
      std::memcpy(head, tail_.data(), 4);
    } else if (given_head.size() >= 4) {
      std::memcpy(head, given_head.data(), 4);
    } else {
      STOKE_RETURN_IF_ERROR(file_->ReadAt(0, MutableByteView(head, 4)));
    }
    if (std::memcmp(head, "PARE", 4) == 0) return EncryptedFile(path, "footer");
    if (std::memcmp(head, parquet::kMagic, 4) != 0) {
      return Status::Corruption(fmt::format("{}: offset 0: not a Parquet file (no PAR1 magic)", path));
    }
  }
  const AlignedBuffer& tail = tail_;
  const uint8_t* trailer = tail.data() + tail_size - 8;
  if (std::memcmp(trailer + 4, parquet::kMagic, 4) != 0) {
    if (std::memcmp(trailer + 4, "PARE", 4) == 0) return EncryptedFile(path, "footer");
    return Status::Corruption(fmt::format("{}: offset {}: missing PAR1 magic at the end (truncated file?)", path, size - 4));
  }
  uint64_t footer_len = LoadLE<uint32_t>(trailer);
  if (footer_len > size - 12) {
    return Status::Corruption(fmt::format("{}: offset {}: footer length {} exceeds the file ({} bytes)", path, size - 8,
                                          footer_len, size));
  }
  footer_size_ = footer_len;
  uint64_t footer_start = size - 8 - footer_len;
  ByteView footer;
  AlignedBuffer big;
  if (footer_len + 8 <= tail_size) {
    footer = ByteView(tail.data() + tail_size - 8 - footer_len, footer_len);
  } else {
    big.Resize(footer_len);
    STOKE_RETURN_IF_ERROR(file_->ReadAt(footer_start, big.mutable_view()));
    footer = big.view();
  }
  STOKE_RETURN_IF_ERROR(parquet::ParseFileMetaData(footer, "footer of " + path, footer_start, &metadata_));
  if (metadata_.encrypted) return EncryptedFile(path, "columns");
  return Status::OK();
}

Status ParquetReader::BuildColumns() {
  const std::string& path = file_->path();
  const auto& schema = metadata_.schema;
  if (schema.empty()) return Status::Corruption(fmt::format("{}: footer has an empty schema", path));
  // Depth-first walk of the flattened schema tree.
  struct Frame {
    int remaining;
    int16_t def, rep;
    std::string prefix;
    std::vector<int16_t> repeated_defs;  // LeafColumn::repeated_def_levels of the path so far
  };
  std::vector<Frame> stack;
  int root_children = schema[0].num_children.value_or(0);
  if (root_children < 0 || static_cast<size_t>(root_children) > schema.size() - 1) {
    return Status::Corruption(fmt::format("{}: schema root claims {} children but {} elements follow", path,
                                          root_children, schema.size() - 1));
  }
  stack.push_back({root_children, 0, 0, "", {}});
  for (size_t i = 1; i < schema.size(); ++i) {
    while (!stack.empty() && stack.back().remaining == 0) stack.pop_back();
    if (stack.empty()) {
      return Status::Corruption(fmt::format("{}: schema element {} ('{}') belongs to no parent", path, i, schema[i].name));
    }
    Frame& parent = stack.back();
    --parent.remaining;
    const auto& e = schema[i];
    auto rep = e.repetition.value_or(parquet::Repetition::kRequired);
    int16_t def = parent.def + (rep != parquet::Repetition::kRequired ? 1 : 0);
    int16_t reps = parent.rep + (rep == parquet::Repetition::kRepeated ? 1 : 0);
    std::string name = parent.prefix.empty() ? e.name : parent.prefix + "." + e.name;
    std::vector<int16_t> repeated_defs = parent.repeated_defs;
    if (rep == parquet::Repetition::kRepeated) repeated_defs.push_back(def);
    int children = e.num_children.value_or(0);
    if (children > 0 || !e.type) {
      if (children <= 0 || static_cast<size_t>(children) > schema.size() - 1 - i) {
        return Status::Corruption(fmt::format("{}: schema group '{}' has a bad child count {}", path, name, children));
      }
      if (stack.size() > 64) return Status::Corruption(fmt::format("{}: schema nested deeper than 64", path));
      stack.push_back({children, def, reps, name, std::move(repeated_defs)});
      continue;
    }
    LeafColumn col;
    col.name = name;
    col.schema_index = i;
    col.type = *e.type;
    if (static_cast<int32_t>(col.type) < 0 || static_cast<int32_t>(col.type) > 7) {
      return Status::Corruption(fmt::format("{}: column '{}' has unknown physical type {}", path, name,
                                            static_cast<int32_t>(col.type)));
    }
    col.type_length = e.type_length.value_or(0);
    if (col.type == Type::kFixedLenByteArray && col.type_length <= 0) {
      return Status::Corruption(fmt::format("{}: FIXED_LEN_BYTE_ARRAY column '{}' without a positive type_length", path, name));
    }
    col.max_definition_level = def;
    col.max_repetition_level = reps;
    col.repeated_def_levels = std::move(repeated_defs);
    col.is_string = col.type == Type::kByteArray && IsStringAnnotated(e);
    columns_.push_back(std::move(col));
  }
  for (const auto& f : stack) {
    if (f.remaining != 0) return Status::Corruption(fmt::format("{}: schema ends before all children are listed", path));
  }
  for (const auto& kv : metadata_.key_value_metadata) {
    if (!kv.value) continue;
    if (kv.key == kTensorsMetadataKey) {
      STOKE_ASSIGN_OR_RETURN(auto specs, TensorSpecsFromJson(*kv.value, path));
      for (auto& col : columns_) {
        auto it = specs.find(col.name);
        if (it != specs.end() && col.type == Type::kByteArray) col.tensor = it->second;
      }
    } else if (kv.key == kBlobsMetadataKey) {
      STOKE_ASSIGN_OR_RETURN(auto blobs, BlobColumnsFromJson(*kv.value, path));
      for (auto& col : columns_) col.blob = col.type == Type::kByteArray && !col.tensor && blobs.count(col.name) > 0;
    }
  }
  return Status::OK();
}

Status ParquetReader::ValidateRowGroups() {
  const std::string& path = file_->path();
  if (metadata_.num_rows < 0) return Status::Corruption(fmt::format("{}: negative row count", path));
  int64_t rows = 0;
  row_group_starts_.clear();
  for (size_t g = 0; g < metadata_.row_groups.size(); ++g) {
    const auto& rg = metadata_.row_groups[g];
    if (rg.columns.size() != columns_.size()) {
      return Status::Corruption(fmt::format("{}: row group {} has {} column chunks, the schema {} columns", path, g,
                                            rg.columns.size(), columns_.size()));
    }
    if (rg.num_rows < 0 || __builtin_add_overflow(rows, rg.num_rows, &rows)) {
      return Status::Corruption(fmt::format("{}: row group {} has a bad row count {}", path, g, rg.num_rows));
    }
    row_group_starts_.push_back(rows - rg.num_rows);
    for (size_t c = 0; c < columns_.size(); ++c) {
      const auto& cc = rg.columns[c];
      if (cc.encrypted) return EncryptedFile(path, fmt::format("column '{}'", columns_[c].name));
      if (cc.file_path) return Status::Unsupported(fmt::format("{}: column chunk in another file ('{}')", path, *cc.file_path));
      if (!cc.meta_data) return Status::Corruption(fmt::format("{}: row group {} column '{}' has no metadata", path, g, columns_[c].name));
      if (cc.meta_data->type != columns_[c].type) {
        return Status::Corruption(fmt::format("{}: row group {} column '{}' is {} in the chunk but {} in the schema", path, g,
                                              columns_[c].name, parquet::TypeName(cc.meta_data->type),
                                              parquet::TypeName(columns_[c].type)));
      }
      // An empty row group's chunks are never read; writers leave their offsets 0.
      if (rg.num_rows > 0) STOKE_RETURN_IF_ERROR(ChunkRange(static_cast<int>(g), c).status());
    }
  }
  // Where the footer's row count disagrees with its row groups' (some writers leave it 0), the row
  // groups win, as Arrow and DuckDB read such files: num_rows() is their sum.
  row_group_starts_.push_back(rows);
  return Status::OK();
}

std::string ParquetReader::Context(int row_group, size_t column) const {
  return fmt::format("{}: row group {} column '{}'", file_->path(), row_group, columns_[column].name);
}

Result<size_t> ParquetReader::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].name == name) return i;
  }
  return Status::NotFound(fmt::format("{}: no column named '{}'", file_->path(), name));
}

Result<std::pair<int64_t, int64_t>> ParquetReader::ChunkRange(int row_group, size_t column) const {
  const auto& m = *metadata_.row_groups[row_group].columns[column].meta_data;
  int64_t start = m.data_page_offset;
  // Some writers record dictionary_page_offset 0 for "none"; only an offset before the data pages counts.
  if (m.dictionary_page_offset && *m.dictionary_page_offset > 0 && *m.dictionary_page_offset < start) {
    start = *m.dictionary_page_offset;
  }
  int64_t limit = static_cast<int64_t>(DataEnd());
  int64_t end;
  if (start < 4 || m.total_compressed_size < 0 || __builtin_add_overflow(start, m.total_compressed_size, &end) ||
      end > limit) {
    return Status::Corruption(fmt::format("{}: chunk range [{}, +{}) lies outside the data region [4, {})",
                                          Context(row_group, column), start, m.total_compressed_size, limit));
  }
  return std::make_pair(start, end);
}

Result<std::vector<PageInfo>> ParquetReader::ListPages(int row_group, size_t column) const {
  if (metadata_.row_groups[row_group].num_rows == 0) return std::vector<PageInfo>{};
  STOKE_ASSIGN_OR_RETURN(auto range, ChunkRange(row_group, column));
  std::vector<PageInfo> pages;
  const std::string ctx = Context(row_group, column);
  const std::string header_ctx = ctx + " page header";
  // As few reads as the page sizes allow: while pages are small, a window of up to 1 MiB is read and
  // parsed through (a chunk of 4 KiB pages costs one read per 256 pages); after a large page only the
  // next header is read (4 KiB, grown up to 16 MiB for a header with large statistics).
  constexpr int64_t kHeaderRead = 4 << 10, kSmallPage = 64 << 10, kWindow = 1 << 20, kMaxHeaderRead = 16 << 20;
  AlignedBuffer window;
  int64_t win_start = 0, win_size = 0, next_read = kHeaderRead;
  int64_t pos = range.first;
  while (pos < range.second) {
    const bool in_window = pos >= win_start && pos < win_start + win_size;
    PageInfo p;
    size_t consumed = 0;
    Status parsed = Status::Corruption("not read");
    if (in_window) {
      parsed = parquet::ParsePageHeader(window.view().subspan(static_cast<size_t>(pos - win_start)), header_ctx,
                                        static_cast<uint64_t>(pos), &p.header, &consumed);
    }
    if (!parsed.ok()) {
      const bool fresh = in_window && win_start == pos;
      // The header is truly bad when a read starting at it already held the rest of the chunk, or
      // the largest header read.
      if (fresh && (win_start + win_size >= range.second || win_size >= kMaxHeaderRead)) return parsed;
      const int64_t n = std::min(range.second - pos, fresh ? std::min(win_size * 4, kMaxHeaderRead) : next_read);
      window.Resize(static_cast<size_t>(n));
      STOKE_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(pos), window.mutable_view()));
      win_start = pos;
      win_size = n;
      continue;
    }
    if (p.header.compressed_page_size < 0) {
      return Status::Corruption(fmt::format("{}: offset {}: negative compressed_page_size {}", ctx, pos,
                                            p.header.compressed_page_size));
    }
    p.offset = pos;
    p.header_size = static_cast<int64_t>(consumed);
    const int64_t total = p.header_size + p.header.compressed_page_size;
    // A page past the chunk's recorded end but before the footer: see ExtendChunkForPage.
    if (total > range.second - pos && total > static_cast<int64_t>(DataEnd()) - pos) {
      return Status::Corruption(fmt::format("{}: offset {}: page of {} bytes runs past the chunk end {}", ctx, pos,
                                            p.header.compressed_page_size, range.second));
    }
    pages.push_back(std::move(p));
    pos += total;
    next_read = total <= kSmallPage ? kWindow : kHeaderRead;
    if (pages.size() > 10'000'000) return Status::Corruption(ctx + ": more than 10 million pages");
  }
  return pages;
}

Result<std::vector<DataPageSpan>> ParquetReader::ListDataPages(int row_group, size_t column) const {
  STOKE_ASSIGN_OR_RETURN(std::vector<PageInfo> listed, ListPages(row_group, column));
  const int64_t rg_rows = metadata_.row_groups[row_group].num_rows;
  std::vector<DataPageSpan> spans;
  int64_t row = 0;
  for (const PageInfo& p : listed) {
    const parquet::PageHeader& h = p.header;
    DataPageSpan s{.offset = p.offset, .length = p.header_size + h.compressed_page_size, .first_row = row,
                   .uncompressed_size = std::max<int64_t>(h.uncompressed_page_size, 0)};
    if (h.type == PageType::kDataPage && h.data_page_header) {
      s.rows = h.data_page_header->num_values;
      s.encoding = h.data_page_header->encoding;
    } else if (h.type == PageType::kDataPageV2 && h.data_page_header_v2) {
      s.rows = h.data_page_header_v2->num_rows;
      s.encoding = h.data_page_header_v2->encoding;
      s.v2 = true;
    } else {
      continue;  // dictionary and index pages hold no rows
    }
    if (s.rows < 0 || s.rows > rg_rows - row) break;  // counted below as a mismatch
    row += s.rows;
    spans.push_back(s);
  }
  if (row != rg_rows) {
    return Status::Corruption(fmt::format("{}: row group {} column '{}': the data pages hold {} rows, the row group {}",
                                          file_->path(), row_group, columns_[column].name, row, rg_rows));
  }
  return spans;
}

Status ParquetReader::ExtendChunkForPage(int row_group, size_t column, int64_t chunk_start, uint64_t page_offset,
                                         size_t needed, AlignedBuffer* chunk) const {
  // Some old writers recorded a chunk's total_compressed_size short of its last page (PARQUET-816);
  // Arrow, Impala and DuckDB read on into the bytes that follow, as long as they precede the footer.
  const uint64_t limit = DataEnd();
  if (static_cast<uint64_t>(chunk_start) + needed > limit) {
    return Status::Corruption(fmt::format("{}: offset {}: page runs past the chunk end {} and on into the footer at {}",
                                          Context(row_group, column), page_offset,
                                          static_cast<uint64_t>(chunk_start) + chunk->size(), limit));
  }
  const size_t had = chunk->size();
  chunk->Resize(needed);
  return ReadRange(static_cast<uint64_t>(chunk_start) + had, chunk->mutable_view().subspan(had));
}

Status ParquetReader::WalkColumnChunk(int row_group, size_t column, const std::function<bool()>& done,
                                      const DataPageVisitor& visit) const {
  const LeafColumn& col = columns_[column];
  const std::string ctx = Context(row_group, column);
  const auto& meta = *metadata_.row_groups[row_group].columns[column].meta_data;
  if (metadata_.row_groups[row_group].num_rows == 0) return Status::OK();  // nothing to read (see Open)
  if (!CodecSupported(meta.codec)) {
    return Status::Unsupported(fmt::format("{}: codec {}", ctx, parquet::CodecName(meta.codec)));
  }
  STOKE_ASSIGN_OR_RETURN(auto range, ChunkRange(row_group, column));
  AlignedBuffer chunk(static_cast<size_t>(range.second - range.first));
  STOKE_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(range.first), chunk.mutable_view()));

  std::optional<ValueVector> dict;
  AlignedBuffer scratch;
  size_t pos = 0;
  while (pos < chunk.size() && !done()) {
    const uint64_t page_offset = static_cast<uint64_t>(range.first) + pos;
    parquet::PageHeader h;
    size_t consumed = 0;
    STOKE_RETURN_IF_ERROR(
        parquet::ParsePageHeader(chunk.view().subspan(pos), ctx + " page header", page_offset, &h, &consumed));
    if (static_cast<uint64_t>(h.compressed_page_size) > chunk.size() - pos - consumed) {
      STOKE_RETURN_IF_ERROR(ExtendChunkForPage(row_group, column, range.first, page_offset,
                                               pos + consumed + static_cast<size_t>(h.compressed_page_size), &chunk));
    }
    ByteView stored = chunk.view().subspan(pos + consumed, h.compressed_page_size);
    if (h.crc && static_cast<uint32_t>(*h.crc) != Crc32(stored)) {
      return Status::Corruption(fmt::format("{}: offset {}: page CRC mismatch (stored {:08x}, computed {:08x})", ctx,
                                            page_offset, static_cast<uint32_t>(*h.crc), Crc32(stored)));
    }
    Status s;
    switch (h.type) {
      case PageType::kDictionaryPage: {
        if (!h.dictionary_page_header || h.dictionary_page_header->num_values < 0) {
          s = Status::Corruption("dictionary page without a valid dictionary_page_header");
          break;
        }
        auto enc = h.dictionary_page_header->encoding;
        if (enc != Encoding::kPlain && enc != Encoding::kPlainDictionary) {
          s = Status::Unsupported(fmt::format("dictionary page encoding {}", parquet::EncodingName(enc)));
          break;
        }
        s = DecompressBody(meta.codec, stored, h.uncompressed_page_size, &scratch);
        if (!s.ok()) break;
        dict = EmptyValuesFor(col.type);
        s = DecodeValues(col, Encoding::kPlain, scratch.view(), static_cast<size_t>(h.dictionary_page_header->num_values),
                         nullptr, &*dict);
        break;
      }
      case PageType::kDataPage:
      case PageType::kDataPageV2:
        s = visit(h, stored, meta.codec, dict ? &*dict : nullptr, &scratch);
        break;
      case PageType::kIndexPage: break;
      default:
        s = Status::Unsupported(fmt::format("page type {}", static_cast<int32_t>(h.type)));
    }
    if (!s.ok()) return s.WithContext(fmt::format("{}: page at offset {}", ctx, page_offset));
    pos += consumed + h.compressed_page_size;
  }
  return Status::OK();
}

Result<ColumnValues> ParquetReader::ReadColumnChunk(int row_group, size_t column) const {
  if (row_group < 0 || row_group >= num_row_groups() || column >= columns_.size()) {
    return Status::InvalidArgument(fmt::format("{}: no row group {} / column {}", file_->path(), row_group, column));
  }
  const LeafColumn& col = columns_[column];
  const std::string ctx = Context(row_group, column);
  if (col.max_repetition_level > 0) {
    return Status::Unsupported(fmt::format("{}: a list or map column, which has no flat values (read it as nested)", ctx));
  }
  ColumnValues result{EmptyValuesFor(col.type), {}};
  const int64_t expected_rows = metadata_.row_groups[row_group].num_rows;
  STOKE_RETURN_IF_ERROR(WalkColumnChunk(
      row_group, column, [&] { return static_cast<int64_t>(result.num_rows()) >= expected_rows; },
      [&](const parquet::PageHeader& h, ByteView stored, parquet::Codec codec, const ValueVector* dict,
          AlignedBuffer* scratch) {
        return DecodeDataPage(col, codec, h, stored, dict, static_cast<size_t>(expected_rows) - result.num_rows(),
                              scratch, &result);
      }));
  if (static_cast<int64_t>(result.num_rows()) != expected_rows) {
    return Status::Corruption(fmt::format("{}: pages hold {} rows, the row group {}", ctx, result.num_rows(), expected_rows));
  }
  return result;
}

Result<ColumnLevels> ParquetReader::ReadColumnChunkLevels(int row_group, size_t column) const {
  if (row_group < 0 || row_group >= num_row_groups() || column >= columns_.size()) {
    return Status::InvalidArgument(fmt::format("{}: no row group {} / column {}", file_->path(), row_group, column));
  }
  const LeafColumn& col = columns_[column];
  const std::string ctx = Context(row_group, column);
  ColumnLevels result{EmptyValuesFor(col.type), {}, {}, 0};
  const int64_t expected_rows = metadata_.row_groups[row_group].num_rows;
  size_t rows = 0;
  // A repeated column's last record may continue on the next page (older v1 writers), so every page
  // of the chunk is read; a flat one stops at the row group's row count, as ReadColumnChunk does.
  STOKE_RETURN_IF_ERROR(WalkColumnChunk(
      row_group, column,
      [&] { return col.max_repetition_level == 0 && static_cast<int64_t>(rows) >= expected_rows; },
      [&](const parquet::PageHeader& h, ByteView stored, parquet::Codec codec, const ValueVector* dict,
          AlignedBuffer* scratch) {
        return DecodeLeveledDataPage(col, codec, h, stored, dict, static_cast<size_t>(expected_rows) - rows, scratch,
                                     &result, &rows);
      }));
  if (static_cast<int64_t>(rows) != expected_rows) {
    return Status::Corruption(fmt::format("{}: pages hold {} records, the row group {}", ctx, rows, expected_rows));
  }
  return result;
}

namespace {

// The rows of one decoded data page of a flat BYTE_ARRAY column appended to out->offsets: where each
// present value's 4-byte length lies in `page.values`, plus `base`; *used: the bytes its values take.
// `max_rows`: the rows its row group has left.
Status LocateByteArrayRows(const LeafColumn& col, const PageLevels& page, size_t max_rows, size_t base,
                           ByteArrayChunk* out, size_t* used) {
  if (page.encoding != Encoding::kPlain) {
    return Status::Unsupported(fmt::format("values encoded as {}, not PLAIN", parquet::EncodingName(page.encoding)));
  }
  if (page.num_values > max_rows) {
    return Status::Corruption(
        fmt::format("page holds {} values but only {} rows remain in the row group", page.num_values, max_rows));
  }
  if (base > UINT32_MAX) return Status::Unsupported("byte array values beyond 4 GiB");
  std::vector<uint32_t> located;
  STOKE_RETURN_IF_ERROR(
      parquet::LocatePlainByteArray(page.values, PresentValues(col, page), static_cast<uint32_t>(base), &located, used));
  for (size_t i = 0, v = 0; i < page.num_values; ++i) {
    const bool present = page.defs.empty() || page.defs[i] == static_cast<uint32_t>(col.max_definition_level);
    out->offsets.push_back(present ? located[v++] : ByteArrayChunk::kNull);
  }
  return Status::OK();
}

// One data page of a flat BYTE_ARRAY column appended to *out (ReadByteArrayChunk): its values
// section copied to the end of out->body.
Status AppendByteArrayPage(const LeafColumn& col, parquet::Codec codec, const parquet::PageHeader& h, ByteView stored,
                           size_t max_rows, AlignedBuffer* scratch, ByteArrayChunk* out) {
  PageLevels page;
  STOKE_RETURN_IF_ERROR(DecodePageLevels(col, codec, h, stored, scratch, &page));
  size_t used = 0;
  STOKE_RETURN_IF_ERROR(LocateByteArrayRows(col, page, max_rows, out->body.size(), out, &used));
  out->body.Append(page.values.data(), used);
  return Status::OK();
}

}  // namespace

Status ParquetReader::CheckByteArrayColumn(int row_group, size_t column) const {
  if (row_group < 0 || row_group >= num_row_groups() || column >= columns_.size()) {
    return Status::InvalidArgument(fmt::format("{}: no row group {} / column {}", file_->path(), row_group, column));
  }
  const LeafColumn& col = columns_[column];
  if (col.type != Type::kByteArray || col.max_repetition_level > 0) {
    return Status::Unsupported(fmt::format("{}: not a flat BYTE_ARRAY column", Context(row_group, column)));
  }
  return Status::OK();
}

Status ParquetReader::ReadByteArrayChunk(int row_group, size_t column, ByteArrayChunk* out) const {
  STOKE_RETURN_IF_ERROR(CheckByteArrayColumn(row_group, column));
  out->body.Clear();
  out->offsets.clear();
  const auto& meta = metadata_.row_groups[row_group].columns[column].meta_data;
  // The values take about the chunk's uncompressed size; the file's size (and the 4 GiB that offsets
  // address) bound what a lying footer can make this reserve.
  if (meta) {
    const int64_t most = std::min<int64_t>(static_cast<int64_t>(file_->size()), UINT32_MAX);
    out->body.Reserve(static_cast<size_t>(std::clamp<int64_t>(meta->total_uncompressed_size, 0, most)));
  }
  const size_t rows = static_cast<size_t>(metadata_.row_groups[row_group].num_rows);
  STOKE_RETURN_IF_ERROR(WalkColumnChunk(
      row_group, column, [&] { return out->offsets.size() >= rows; },
      [&](const parquet::PageHeader& h, ByteView stored, parquet::Codec codec, const ValueVector*, AlignedBuffer* scratch) {
        return AppendByteArrayPage(columns_[column], codec, h, stored, rows - out->offsets.size(), scratch, out);
      }));
  if (out->offsets.size() != rows) {
    return Status::Corruption(
        fmt::format("{}: pages hold {} rows, the row group {}", Context(row_group, column), out->offsets.size(), rows));
  }
  return Status::OK();
}

Status ParquetReader::ReadByteArrayPage(int row_group, size_t column, uint64_t offset, uint64_t size,
                                        ByteArrayChunk* out, AlignedBuffer* page) const {
  STOKE_RETURN_IF_ERROR(CheckByteArrayColumn(row_group, column));
  out->body.Clear();
  out->offsets.clear();
  const auto& meta = metadata_.row_groups[row_group].columns[column].meta_data;
  if (!meta) return Status::Corruption(fmt::format("{}: no column metadata", Context(row_group, column)));
  if (!CodecSupported(meta->codec)) {
    return Status::Unsupported(fmt::format("{}: codec {}", Context(row_group, column), parquet::CodecName(meta->codec)));
  }
  parquet::PageHeader h;
  AlignedBuffer own_page;
  if (page == nullptr) page = &own_page;
  ByteView stored;
  STOKE_RETURN_IF_ERROR(ReadPageAt(row_group, column, offset, size, &h, page, &stored));
  const std::string at = fmt::format("{}: page at offset {}", Context(row_group, column), offset);
  if (h.type != PageType::kDataPage && h.type != PageType::kDataPageV2) {
    return Status::Corruption(fmt::format("{}: not a data page", at));
  }
  // The body is decompressed (or, stored as it is, copied) into out->body, where the values stay.
  PageLevels levels;
  STOKE_RETURN_IF_ERROR(DecodePageLevels(columns_[column], meta->codec, h, stored, &out->body, &levels).WithContext(at));
  const uint8_t* values = levels.values.data();
  const bool in_body = values >= out->body.data() && values + levels.values.size() <= out->body.data() + out->body.size();
  if (!levels.values.empty() && !in_body) return Status::Internal(fmt::format("{}: values outside the page's body", at));
  const size_t base = levels.values.empty() ? 0 : static_cast<size_t>(values - out->body.data());
  const size_t rows = static_cast<size_t>(metadata_.row_groups[row_group].num_rows);
  size_t used = 0;
  return LocateByteArrayRows(columns_[column], levels, rows, base, out, &used).WithContext(at);
}

Status ParquetReader::ReadPageAt(int row_group, size_t column, uint64_t offset, uint64_t max_bytes,
                                 parquet::PageHeader* header, AlignedBuffer* page, ByteView* stored) const {
  const std::string ctx = Context(row_group, column);
  if (offset >= DataEnd() || max_bytes == 0) return Status::Corruption(fmt::format("{}: page offset {} out of range", ctx, offset));
  page->Resize(static_cast<size_t>(std::min<uint64_t>(max_bytes, DataEnd() - offset)));
  STOKE_RETURN_IF_ERROR(ReadRange(offset, page->mutable_view()));
  size_t consumed = 0;
  STOKE_RETURN_IF_ERROR(parquet::ParsePageHeader(page->view(), ctx + " page header", offset, header, &consumed));
  if (static_cast<uint64_t>(header->compressed_page_size) > page->size() - consumed) {
    return Status::Corruption(fmt::format("{}: page at offset {} runs past its {} bytes", ctx, offset, page->size()));
  }
  *stored = page->view().subspan(consumed, static_cast<size_t>(header->compressed_page_size));
  if (header->crc && static_cast<uint32_t>(*header->crc) != Crc32(*stored)) {
    return Status::Corruption(fmt::format("{}: offset {}: page CRC mismatch (stored {:08x}, computed {:08x})", ctx, offset,
                                          static_cast<uint32_t>(*header->crc), Crc32(*stored)));
  }
  return Status::OK();
}

Result<std::optional<ValueVector>> ParquetReader::ReadDictionary(int row_group, size_t column) const {
  const auto& meta = *metadata_.row_groups[row_group].columns[column].meta_data;
  const int64_t at = meta.dictionary_page_offset.value_or(0);
  if (at <= 0 || at >= meta.data_page_offset) return std::optional<ValueVector>();
  parquet::PageHeader h;
  AlignedBuffer page, body;
  ByteView stored;
  STOKE_RETURN_IF_ERROR(ReadPageAt(row_group, column, static_cast<uint64_t>(at),
                                   static_cast<uint64_t>(meta.data_page_offset - at), &h, &page, &stored));
  if (h.type != PageType::kDictionaryPage || !h.dictionary_page_header || h.dictionary_page_header->num_values < 0) {
    return Status::Corruption(fmt::format("{}: no dictionary page at offset {}", Context(row_group, column), at));
  }
  if (const auto enc = h.dictionary_page_header->encoding; enc != Encoding::kPlain && enc != Encoding::kPlainDictionary) {
    return Status::Unsupported(fmt::format("{}: dictionary page encoding {}", Context(row_group, column), parquet::EncodingName(enc)));
  }
  STOKE_RETURN_IF_ERROR(DecompressBody(meta.codec, stored, h.uncompressed_page_size, &body));
  ValueVector dict = EmptyValuesFor(columns_[column].type);
  STOKE_RETURN_IF_ERROR(DecodeValues(columns_[column], Encoding::kPlain, body.view(),
                                     static_cast<size_t>(h.dictionary_page_header->num_values), nullptr, &dict));
  return std::optional<ValueVector>(std::move(dict));
}

namespace {
// ReadPageLevels keeps its buffers for the thread's next page up to this size.
constexpr size_t kKeptPageBytes = size_t{16} << 20;
}  // namespace

Status ParquetReader::LocateRowPage(int row_group, size_t column, int64_t row, parquet::PageLocation* loc,
                                    int64_t* end) const {
  if (row_group < 0 || row_group >= num_row_groups() || column >= columns_.size()) {
    return Status::InvalidArgument(fmt::format("{}: no row group {} / column {}", file_->path(), row_group, column));
  }
  const auto& meta = *metadata_.row_groups[row_group].columns[column].meta_data;
  if (!CodecSupported(meta.codec)) {
    return Status::Unsupported(fmt::format("{}: codec {}", Context(row_group, column), parquet::CodecName(meta.codec)));
  }
  STOKE_ASSIGN_OR_RETURN(auto oi, CachedOffsetIndex(row_group, column));
  if (!oi || oi->page_locations.empty()) return Status::NotFound(fmt::format("{}: no OffsetIndex", Context(row_group, column)));
  const auto& locs = oi->page_locations;
  auto it = std::upper_bound(locs.begin(), locs.end(), row,
                             [](int64_t r, const parquet::PageLocation& p) { return r < p.first_row_index; });
  if (it == locs.begin()) return Status::Corruption(fmt::format("{}: row {} before the first page", Context(row_group, column), row));
  *loc = *(it - 1);
  *end = it == locs.end() ? metadata_.row_groups[row_group].num_rows : it->first_row_index;
  return Status::OK();
}

// The data page at `loc` (header and stored body) into the thread's kept buffer.
Status ParquetReader::ReadRowPage(int row_group, size_t column, const parquet::PageLocation& loc,
                                  parquet::PageHeader* h, ByteView* stored) const {
  // Kept by the thread for its next page: a fresh megabyte a page cost more in page faults than the
  // page's decoding.
  thread_local AlignedBuffer page;
  if (page.capacity() > kKeptPageBytes) page = AlignedBuffer();  // a rare huge page is not kept
  STOKE_RETURN_IF_ERROR(ReadPageAt(row_group, column, static_cast<uint64_t>(loc.offset),
                                   static_cast<uint64_t>(std::max(loc.compressed_page_size, 0)), h, &page, stored));
  if (h->type != PageType::kDataPage && h->type != PageType::kDataPageV2) {
    return Status::Corruption(fmt::format("{}: the OffsetIndex's page at offset {} is not a data page", Context(row_group, column), loc.offset));
  }
  return Status::OK();
}

Result<ColumnLevels> ParquetReader::ReadRowLevels(int row_group, size_t column, int64_t row, int64_t* first_row) const {
  auto page = ReadPageLevels(row_group, column, row, first_row);
  if (page.ok()) return page;
  *first_row = 0;
  return ReadColumnChunkLevels(row_group, column);
}

Result<ColumnLevels> ParquetReader::ReadPageLevels(int row_group, size_t column, int64_t row, int64_t* first_row) const {
  parquet::PageLocation loc;
  int64_t end = 0;
  STOKE_RETURN_IF_ERROR(LocateRowPage(row_group, column, row, &loc, &end));
  const auto& meta = *metadata_.row_groups[row_group].columns[column].meta_data;
  STOKE_ASSIGN_OR_RETURN(std::optional<ValueVector> dict, ReadDictionary(row_group, column));
  parquet::PageHeader h;
  ByteView stored;
  STOKE_RETURN_IF_ERROR(ReadRowPage(row_group, column, loc, &h, &stored));
  thread_local AlignedBuffer scratch;
  if (scratch.capacity() > kKeptPageBytes) scratch = AlignedBuffer();
  ColumnLevels result{EmptyValuesFor(columns_[column].type), {}, {}, 0};
  size_t rows = 0;
  STOKE_RETURN_IF_ERROR(DecodeLeveledDataPage(columns_[column], meta.codec, h, stored, dict ? &*dict : nullptr,
                                              static_cast<size_t>(end - loc.first_row_index), &scratch, &result, &rows)
                            .WithContext(fmt::format("{}: page at offset {}", Context(row_group, column), loc.offset)));
  if (static_cast<int64_t>(rows) != end - loc.first_row_index) {
    return Status::Corruption(fmt::format("{}: page at offset {} holds {} records, its OffsetIndex entry {}",
                                          Context(row_group, column), loc.offset, rows, end - loc.first_row_index));
  }
  *first_row = loc.first_row_index;
  return result;
}

Result<bool> ParquetReader::ReadDenseListPage(int row_group, size_t column, int64_t row, size_t value_size,
                                              int64_t* first_row, AlignedBuffer* body, DenseListPage* out) const {
  parquet::PageLocation loc;
  int64_t end = 0;
  STOKE_RETURN_IF_ERROR(LocateRowPage(row_group, column, row, &loc, &end));
  parquet::PageHeader h;
  ByteView stored;
  STOKE_RETURN_IF_ERROR(ReadRowPage(row_group, column, loc, &h, &stored));
  const auto& meta = *metadata_.row_groups[row_group].columns[column].meta_data;
  auto dense = ScanDenseListPage(columns_[column], meta.codec, h, stored, value_size, body, out);
  if (!dense.ok()) return dense.status().WithContext(fmt::format("{}: page at offset {}", Context(row_group, column), loc.offset));
  if (!*dense || static_cast<int64_t>(out->row_lengths.size()) != end - loc.first_row_index) return false;
  *first_row = loc.first_row_index;
  return true;
}

Result<ColumnValues> ParquetReader::ReadColumn(size_t column) const {
  if (column >= columns_.size()) return Status::InvalidArgument(fmt::format("no column {}", column));
  ColumnValues all{EmptyValuesFor(columns_[column].type), {}};
  for (int g = 0; g < num_row_groups(); ++g) {
    STOKE_ASSIGN_OR_RETURN(auto part, ReadColumnChunk(g, column));
    AppendColumnValues(&all, std::move(part));
  }
  return all;
}

bool ParquetReader::HoldsRange(uint64_t offset, uint64_t length) const {
  return offset >= tail_offset_ && length <= tail_.size() && offset - tail_offset_ <= tail_.size() - length;
}

Status ParquetReader::ReadRange(uint64_t offset, MutableByteView dst) const {
  if (HoldsRange(offset, dst.size())) {
    if (!dst.empty()) std::memcpy(dst.data(), tail_.data() + (offset - tail_offset_), dst.size());
    return Status::OK();
  }
  return file_->ReadAt(offset, dst);
}

Result<std::optional<parquet::OffsetIndex>> ParquetReader::ReadOffsetIndex(int row_group, size_t column) const {
  const auto& cc = metadata_.row_groups.at(row_group).columns.at(column);
  if (metadata_.row_groups[row_group].num_rows == 0) return std::optional<parquet::OffsetIndex>();  // never read
  if (!cc.offset_index_offset || !cc.offset_index_length) return std::optional<parquet::OffsetIndex>();
  int64_t off = *cc.offset_index_offset, len = *cc.offset_index_length;
  if (off < 4 || len <= 0 || static_cast<uint64_t>(off) + len > file_->size() - 8) {
    return Status::Corruption(fmt::format("{}: OffsetIndex range [{}, +{}) lies outside the file", Context(row_group, column), off, len));
  }
  AlignedBuffer buf(static_cast<size_t>(len));
  STOKE_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(off), buf.mutable_view()));
  parquet::OffsetIndex oi;
  STOKE_RETURN_IF_ERROR(parquet::ParseOffsetIndex(buf.view(), Context(row_group, column) + " OffsetIndex", off, &oi));
  STOKE_ASSIGN_OR_RETURN(auto range, ChunkRange(row_group, column));
  int64_t prev_row = -1;
  for (const auto& p : oi.page_locations) {
    if (p.offset < range.first || p.compressed_page_size <= 0 || p.offset + p.compressed_page_size > range.second ||
        p.first_row_index <= prev_row || p.first_row_index >= metadata_.row_groups[row_group].num_rows) {
      return Status::Corruption(fmt::format("{}: OffsetIndex entry (offset {}, size {}, first row {}) is inconsistent",
                                            Context(row_group, column), p.offset, p.compressed_page_size, p.first_row_index));
    }
    prev_row = p.first_row_index;
  }
  if (!oi.page_locations.empty() && oi.page_locations[0].first_row_index != 0) {
    return Status::Corruption(Context(row_group, column) + ": OffsetIndex does not start at row 0");
  }
  return std::optional<parquet::OffsetIndex>(std::move(oi));
}

Result<std::optional<parquet::ColumnIndex>> ParquetReader::ReadColumnIndex(int row_group, size_t column) const {
  const auto& cc = metadata_.row_groups.at(row_group).columns.at(column);
  if (!cc.column_index_offset || !cc.column_index_length) return std::optional<parquet::ColumnIndex>();
  int64_t off = *cc.column_index_offset, len = *cc.column_index_length;
  if (off < 4 || len <= 0 || static_cast<uint64_t>(off) + len > file_->size() - 8) {
    return Status::Corruption(fmt::format("{}: ColumnIndex range [{}, +{}) lies outside the file", Context(row_group, column), off, len));
  }
  AlignedBuffer buf(static_cast<size_t>(len));
  STOKE_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(off), buf.mutable_view()));
  parquet::ColumnIndex ci;
  STOKE_RETURN_IF_ERROR(parquet::ParseColumnIndex(buf.view(), Context(row_group, column) + " ColumnIndex", off, &ci));
  return std::optional<parquet::ColumnIndex>(std::move(ci));
}

Result<std::shared_ptr<const parquet::OffsetIndex>> ParquetReader::CachedOffsetIndex(int row_group, size_t column) const {
  {
    MutexLock lock(&cache_mu_);
    auto it = offset_index_cache_.find({row_group, column});
    if (it != offset_index_cache_.end()) return it->second;
  }
  STOKE_ASSIGN_OR_RETURN(auto oi, ReadOffsetIndex(row_group, column));
  std::shared_ptr<const parquet::OffsetIndex> p;
  if (oi) p = std::make_shared<const parquet::OffsetIndex>(std::move(*oi));
  MutexLock lock(&cache_mu_);
  auto [it, added] = offset_index_cache_.emplace(std::make_pair(row_group, column), p);
  if (added && p) offset_index_cache_bytes_ += sizeof(parquet::OffsetIndex) + p->page_locations.size() * sizeof(parquet::PageLocation);
  return it->second;  // another thread's, when it cached the same index first
}

uint64_t ParquetReader::memory_bytes() const {
  MutexLock lock(&cache_mu_);
  return tail_.size() + 2 * footer_size_ + offset_index_cache_bytes_;
}

Status ParquetReader::ReadBinaryCell(int64_t row, size_t column, AlignedBuffer* out) const {
  if (column >= columns_.size()) return Status::InvalidArgument(fmt::format("{}: no column {}", file_->path(), column));
  const LeafColumn& col = columns_[column];
  if (col.type != Type::kByteArray && col.type != Type::kFixedLenByteArray) {
    return Status::InvalidArgument(fmt::format("{}: column '{}' is not a byte array column", file_->path(), col.name));
  }
  if (row < 0 || row >= num_rows()) {
    return Status::InvalidArgument(fmt::format("{}: row {} out of range (file has {} rows)", file_->path(), row, num_rows()));
  }
  int g = static_cast<int>(std::upper_bound(row_group_starts_.begin(), row_group_starts_.end() - 1, row) -
                           row_group_starts_.begin()) - 1;
  const int64_t row_in_group = row - row_group_starts_[g];
  const std::string ctx = Context(g, column);
  const auto& meta = *metadata_.row_groups[g].columns[column].meta_data;

  STOKE_ASSIGN_OR_RETURN(auto oi, CachedOffsetIndex(g, column));
  if (oi && !oi->page_locations.empty() && col.max_definition_level == 0 && CodecSupported(meta.codec) &&
      col.type == Type::kByteArray) {
    const auto& locs = oi->page_locations;
    auto it = std::upper_bound(locs.begin(), locs.end(), row_in_group,
                               [](int64_t r, const parquet::PageLocation& p) { return r < p.first_row_index; });
    const parquet::PageLocation& loc = *(it - 1);
    // One positioned read: page header and body together.
    AlignedBuffer page(static_cast<size_t>(loc.compressed_page_size));
    STOKE_RETURN_IF_ERROR(ReadRange(static_cast<uint64_t>(loc.offset), page.mutable_view()));
    parquet::PageHeader h;
    size_t consumed = 0;
    STOKE_RETURN_IF_ERROR(parquet::ParsePageHeader(page.view(), ctx + " page header", loc.offset, &h, &consumed));
    if (consumed + h.compressed_page_size != page.size()) {
      return Status::Corruption(fmt::format("{}: offset {}: page size {} disagrees with the OffsetIndex ({})", ctx,
                                            loc.offset, consumed + h.compressed_page_size, page.size()));
    }
    ByteView stored = page.view().subspan(consumed);
    if (h.crc && static_cast<uint32_t>(*h.crc) != Crc32(stored)) {
      return Status::Corruption(fmt::format("{}: row {}: page at offset {}: CRC mismatch (stored {:08x}, computed {:08x})",
                                            ctx, row, loc.offset, static_cast<uint32_t>(*h.crc), Crc32(stored)));
    }
    if (h.type == PageType::kDataPage && h.data_page_header && h.data_page_header->encoding == Encoding::kPlain) {
      AlignedBuffer body;
      STOKE_RETURN_IF_ERROR(DecompressBody(meta.codec, stored, h.uncompressed_page_size, &body)
                                .WithContext(fmt::format("{}: page at offset {}", ctx, loc.offset)));
      // PLAIN BYTE_ARRAY values: walk the length prefixes to the row.
      size_t pos = 0;
      for (int64_t k = loc.first_row_index;; ++k) {
        if (body.size() - pos < 4) {
          return Status::Corruption(fmt::format("{}: page at offset {}: row {} not in page", ctx, loc.offset, row));
        }
        uint32_t len = LoadLE<uint32_t>(body.data() + pos);
        pos += 4;
        if (len > body.size() - pos) {
          return Status::Corruption(fmt::format("{}: page at offset {}: value length {} runs past the page", ctx, loc.offset, len));
        }
        if (k == row_in_group) {
          out->Clear();
          out->Append(body.data() + pos, len);
          return Status::OK();
        }
        pos += len;
      }
    }
  }
  // General path: decode the column chunk and pick the row.
  STOKE_ASSIGN_OR_RETURN(auto values, ReadColumnChunk(g, column));
  size_t idx = static_cast<size_t>(row_in_group);
  if (!values.defined.empty()) {
    if (!values.defined[idx]) return Status::NotFound(fmt::format("{}: row {} is null", ctx, row));
    idx = static_cast<size_t>(std::count(values.defined.begin(), values.defined.begin() + idx, 1));
  }
  const auto& v = std::get<std::vector<std::string>>(values.values)[idx];
  out->Clear();
  out->Append(v.data(), v.size());
  return Status::OK();
}

}  // namespace stoke
