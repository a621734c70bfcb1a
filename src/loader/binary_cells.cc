// The loader's binary-cell stage (binary_cells.h).
#include "loader/binary_cells.h"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

namespace stoke {

namespace {

static_assert(ByteArrayChunk::kNull == DecodedPage::kNull);

// The general decode of a binary chunk (dictionary-encoded pages, values in a repeated field): its
// levels and values, copied into a DecodedPage of lengths and bytes.
Result<std::shared_ptr<const DecodedPage>> DecodeChunkByLevels(const ParquetReader& reader, int row_group, size_t leaf) {
  STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, reader.ReadColumnChunkLevels(row_group, leaf));
  const auto* values = std::get_if<std::vector<std::string>>(&levels.values);
  if (values == nullptr) return Status::Internal("binary values that are not bytes");
  const auto max_def = static_cast<uint32_t>(reader.columns()[leaf].max_definition_level);
  auto decoded = std::make_shared<DecodedPage>();
  size_t bytes = 0;
  for (const std::string& v : *values) bytes += 4 + v.size();
  if (bytes > UINT32_MAX) return Status::Unsupported(fmt::format("{}: a binary column chunk of more than 4 GiB", reader.path()));
  decoded->body.Reserve(bytes);
  decoded->offsets.reserve(levels.num_levels);
  for (int64_t v_index : ValueIndexOfRows(levels, max_def, static_cast<int64_t>(levels.num_levels))) {
    if (v_index < 0) {
      decoded->offsets.push_back(DecodedPage::kNull);
      continue;
    }
    if (static_cast<size_t>(v_index) >= values->size()) {
      return Status::Corruption(fmt::format("{}: fewer values than levels", reader.path()));
    }
    const std::string& v = (*values)[static_cast<size_t>(v_index)];
    decoded->offsets.push_back(static_cast<uint32_t>(decoded->body.size()));
    const uint32_t length = static_cast<uint32_t>(v.size());
    decoded->body.Append(&length, sizeof(length));
    decoded->body.Append(v.data(), v.size());
  }
  return std::shared_ptr<const DecodedPage>(std::move(decoded));
}

// The pages of a chunk that PagesOf reads one at a time; empty where it is decoded whole.
Result<BinaryCells::Pages> ListPlainPages(const ParquetReader& reader, int row_group, size_t leaf) {
  BinaryCells::Pages pages;
  const LeafColumn& col = reader.columns()[leaf];
  if (col.type != parquet::Type::kByteArray || col.max_repetition_level > 0) return pages;
  auto listed = reader.ListDataPages(row_group, leaf);
  if (!listed.ok()) {
    // Headers that do not walk to the chunk's recorded end (say padding after the last page), or
    // whose rows do not add up: the chunk whole, which stops at the row group's rows, says whether
    // the pages are fine.
    if (listed.status().code() == StatusCode::kCorruption) return pages;
    return listed.status();
  }
  for (const DataPageSpan& p : *listed) {
    if (p.encoding != parquet::Encoding::kPlain) return BinaryCells::Pages{};  // dictionary encoded: the chunk whole
    pages.push_back({static_cast<uint64_t>(p.offset), static_cast<uint64_t>(p.length), p.first_row, p.rows,
                     p.uncompressed_size});
  }
  return pages;
}

std::shared_ptr<const DecodedPage> DecodedOf(ByteArrayChunk&& values) {
  auto decoded = std::make_shared<DecodedPage>();
  decoded->body = std::move(values.body);
  decoded->offsets = std::move(values.offsets);
  return decoded;
}

}  // namespace

Result<std::shared_ptr<const BinaryCells::Pages>> BinaryCells::PagesOf(uint32_t file, const ParquetReader& reader,
                                                                        int row_group, size_t leaf) {
  const auto key = std::make_tuple(file, row_group, leaf);
  {
    MutexLock l(&mu_);
    if (auto it = pages_.find(key); it != pages_.end()) return it->second;
  }
  // Listed outside the lock (it reads the headers); two workers may list a chunk at once.
  STOKE_ASSIGN_OR_RETURN(Pages listed, ListPlainPages(reader, row_group, leaf));
  auto pages = std::make_shared<const Pages>(std::move(listed));
  MutexLock l(&mu_);
  return pages_.emplace(key, std::move(pages)).first->second;
}

Result<std::shared_ptr<const DecodedPage>> BinaryCells::DecodePage(const ParquetReader& reader, size_t leaf,
                                                                   const SlowCells::RowPlace& place, const Page& page) {
  // The page is read into, and decompressed into, buffers of the pool: a page of images is tens of
  // megabytes, and fresh ones cost more in page faults than reading it.
  std::shared_ptr<DecodedPage> decoded = PooledDecodedPage(buffers_, static_cast<size_t>(page.decoded_bytes));
  ByteArrayChunk values;
  values.body = std::move(decoded->body);
  AlignedBuffer stored = buffers_->Take(page.size);
  const Status read = reader.ReadByteArrayPage(place.row_group, leaf, page.offset, page.size, &values, &stored);
  buffers_->Give(std::move(stored));
  decoded->body = std::move(values.body);
  STOKE_RETURN_IF_ERROR(read);
  if (static_cast<int64_t>(values.offsets.size()) != page.rows) {
    return Status::Corruption(fmt::format("{}: row group {}: the page at offset {} holds {} rows, its header says {}",
                                          reader.path(), place.row_group, page.offset, values.offsets.size(), page.rows));
  }
  decoded->offsets = std::move(values.offsets);
  return std::shared_ptr<const DecodedPage>(std::move(decoded));
}

Result<std::shared_ptr<const DecodedPage>> BinaryCells::Rows(size_t leaf, const SlowCells::RowPlace& place,
                                                             int64_t* first_row) {
  const ParquetReader& reader = *place.reader;
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const Pages> pages, PagesOf(place.file, reader, place.row_group, leaf));
  if (!pages->empty()) {
    auto it = std::upper_bound(pages->begin(), pages->end(), place.row_in_group,
                               [](int64_t r, const Page& p) { return r < p.first_row; });
    const Page& page = *(it - 1);
    *first_row = page.first_row;
    return cache_.GetOrLoad(place.file, (uint64_t{1} << 63) | page.offset, [&]() { return DecodePage(reader, leaf, place, page); });
  }
  *first_row = 0;
  const uint64_t key = (uint64_t{leaf} << 32) | static_cast<uint32_t>(place.row_group);
  return cache_.GetOrLoad(place.file, key, [&]() -> Result<std::shared_ptr<const DecodedPage>> {
    ByteArrayChunk values;
    const Status read = reader.ReadByteArrayChunk(place.row_group, leaf, &values);
    if (read.code() == StatusCode::kUnsupported) return DecodeChunkByLevels(reader, place.row_group, leaf);
    STOKE_RETURN_IF_ERROR(read);
    return DecodedOf(std::move(values));
  });
}

Status BinaryCells::ReadCell(const std::string& name, int64_t row, AlignedBuffer* out) {
  STOKE_ASSIGN_OR_RETURN(SlowCells::RowPlace place, readers_.Locate(row));
  STOKE_ASSIGN_OR_RETURN(size_t leaf, FindBinaryLeaf(*place.reader, name));
  int64_t first_row = 0;
  STOKE_ASSIGN_OR_RETURN(std::shared_ptr<const DecodedPage> rows, Rows(leaf, place, &first_row));
  const size_t r = static_cast<size_t>(place.row_in_group - first_row);
  if (r >= rows->offsets.size()) {
    return Status::Corruption(fmt::format("{}: row group {} of column '{}' holds {} rows, not {}", place.reader->path(),
                                          place.row_group, name, rows->offsets.size(), r + 1));
  }
  if (rows->offsets[r] == DecodedPage::kNull) return Status::InvalidArgument("a null cell");
  const ByteView cell = PlainByteArrayAt(rows->body, rows->offsets[r]);
  out->Clear();
  out->Append(cell.data(), cell.size());
  return Status::OK();
}

}  // namespace stoke
