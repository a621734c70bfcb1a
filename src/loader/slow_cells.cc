// The loader's slow-path stage (slow_cells.h).
#include "loader/slow_cells.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "io/uri.h"
#include "loader/page_decoder.h"

namespace stoke {

Status SlowCells::ReadCell(const std::string& column, size_t cell_bytes, bool any_size,
                           const SampleIndex::Location& loc, AlignedBuffer* out) {
  if (loc.needs_decode) return ReadUnindexedCell(column, cell_bytes, any_size, loc, out);
  return ReadCachedPageCell(cell_bytes, loc, out);
}

Result<std::shared_ptr<const ParquetReader>> SlowCells::ReaderOf(uint32_t file) {
  {
    MutexLock l(&mu_);
    for (Reader& r : readers_) {
      if (r.file == file) {
        r.last_use = ++clock_;
        return r.reader;
      }
    }
  }
  // Opened outside the lock (it reads the footer); two workers may open the same file at once, and
  // only one of the readers is kept.
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_.FilePath(file)));
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> opened_file,
                         where.storage->OpenForReadWithSize(where.path, index_.file_size(file)));
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> opened, ParquetReader::Open(std::move(opened_file)));
  std::shared_ptr<const ParquetReader> reader = std::move(opened);
  MutexLock l(&mu_);
  auto same = std::find_if(readers_.begin(), readers_.end(), [&](const Reader& r) { return r.file == file; });
  if (same != readers_.end()) return reader;
  Reader entry{file, ++clock_, reader};
  if (readers_.size() < kMaxSlowPathReaders) {
    readers_.push_back(std::move(entry));
  } else {  // drop the least recently used (its users, if any, keep it alive until they finish)
    *std::min_element(readers_.begin(), readers_.end(),
                      [](const Reader& a, const Reader& b) { return a.last_use < b.last_use; }) = std::move(entry);
  }
  return reader;
}

Result<SlowCells::RowPlace> SlowCells::Locate(int64_t row) {
  if (row < 0 || row >= index_.num_rows()) return Status::Internal(fmt::format("table row {} out of range", row));
  RowPlace p;
  p.file = index_.FileOfRow(row);
  p.row_in_file = row - index_.file_first_row(p.file);
  STOKE_ASSIGN_OR_RETURN(p.reader, ReaderOf(p.file));
  const auto& starts = p.reader->row_group_starts();
  auto g = std::upper_bound(starts.begin(), starts.end() - 1, p.row_in_file);
  p.row_group = static_cast<int>(g - starts.begin()) - 1;
  if (p.row_group < 0 || p.row_in_file >= starts.back()) {
    return Status::Corruption(fmt::format("{}: row {} beyond the file's {} rows", p.reader->path(), p.row_in_file, starts.back()));
  }
  p.row_in_group = p.row_in_file - starts[static_cast<size_t>(p.row_group)];
  return p;
}

Status SlowCells::ReadUnindexedCell(const std::string& column, size_t cell_bytes, bool any_size,
                                    const SampleIndex::Location& loc, AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const ParquetReader> reader, ReaderOf(loc.file));
  STOKE_ASSIGN_OR_RETURN(size_t col, reader->FindColumn(column));
  STOKE_RETURN_IF_ERROR(reader->ReadBinaryCell(loc.row_in_file, col, out));
  if (!any_size && out->size() != cell_bytes) {
    return Status::Corruption(
        fmt::format("the cell holds {} bytes, the column's tensor needs {}", out->size(), cell_bytes));
  }
  bytes_read_ += static_cast<int64_t>(out->size());
  cells_decoded_ += 1;
  return Status::OK();
}

Status SlowCells::ReadCachedPageCell(size_t cell_bytes, const SampleIndex::Location& loc, AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(
      std::shared_ptr<const DecodedPage> page,
      page_cache_.GetOrLoad(loc.file, loc.offset, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
        STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(index_.FilePath(loc.file)));
        STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                               where.storage->OpenForReadWithSize(where.path, index_.file_size(loc.file)));
        AlignedBuffer bytes(loc.length);
        STOKE_RETURN_IF_ERROR(file->ReadAt(loc.offset, bytes.mutable_view()));
        bytes_read_ += loc.length;
        auto decoded = std::make_shared<DecodedPage>();
        PageDecodeOptions po;
        po.verify_crc = verify_crc_;
        STOKE_RETURN_IF_ERROR(DecodeWholePage(bytes.view(), loc.codec, loc.rows_in_page, loc.definition_levels,
                                              cell_bytes, po, fmt::format("page at offset {}", loc.offset),
                                              decoded.get()));
        return std::shared_ptr<const DecodedPage>(std::move(decoded));
      }));
  if (page->value_size != cell_bytes || loc.row_in_page >= page->offsets.size()) {
    return Status::Internal(fmt::format("page at offset {}: cached for another column's layout", loc.offset));
  }
  const uint32_t at = page->offsets[loc.row_in_page];
  if (at == DecodedPage::kNull) {
    return Status::NotFound(fmt::format("row {} of the page at offset {} is null (a tensor column needs a value in "
                                        "every row)", loc.row_in_page, loc.offset));
  }
  out->Resize(cell_bytes);
  if (cell_bytes > 0) std::memcpy(out->data(), page->body.data() + at, cell_bytes);
  return Status::OK();
}

}  // namespace stoke
