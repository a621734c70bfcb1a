#include "table/sample_index.h"

#include "io/uri.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/cpus.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "format/codec.h"
#include "format/parquet_reader.h"
#include "io/local_files.h"
#include "io/mapped_file.h"
#include "io/storage.h"
#include "table/delta_log.h"
#include "table/scan.h"

namespace stoke {
namespace {

// The cache format (see sample_index.h). Frozen: a change of layout takes a new format version and
// a new magic, and old caches are then rebuilt.
constexpr char kMagic[8] = {'S', 'T', 'K', 'I', 'D', 'X', '0', '1'};
constexpr uint32_t kFormatVersion = 2;  // 2: page flags carry the codec
constexpr size_t kHeaderSize = 128;
constexpr size_t kFileRecordSize = 40;
constexpr size_t kColumnRecordSize = 32;
constexpr size_t kPageRecordSize = 32;
constexpr uint32_t kNeedsDecode = 1;  // page flag: rows read through ParquetReader::ReadBinaryCell
constexpr uint32_t kCodecShift = 8;   // page flags bits 8..15: the column chunk's parquet::Codec
constexpr uint32_t kDefinitionLevels = 2;  // page flag: an OPTIONAL column; the page body starts with levels
constexpr uint32_t kKnownFlags = kNeedsDecode | kDefinitionLevels | (0xFFu << kCodecShift);

// Header field offsets.
constexpr size_t kOffFormatVersion = 8, kOffHeaderSize = 12, kOffTableVersion = 16, kOffNumRows = 24,
                 kOffNumFiles = 32, kOffNumColumns = 36, kOffNumPages = 40, kOffFiles = 48, kOffColumns = 56,
                 kOffPages = 64, kOffRows = 72, kOffStrings = 80, kOffStringsSize = 88, kOffTotalSize = 96,
                 kOffCommitSize = 104, kOffCommitMtime = 112, kOffBodyCrc = 120, kOffHeaderCrc = 124;

constexpr uint64_t Align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

// One page (or one needs-decode row group) of one tensor column, and one file's, while building.
using BuiltPage = SampleIndex::PageRecord;
using BuiltFile = SampleIndex::FilePages;

// The commit file's identity, recorded so that a table recreated at the same path never reuses an
// index of its predecessor. Zeros when the commit file is gone (log cleaned up after a checkpoint).
struct CommitStamp {
  uint64_t size = 0;
  int64_t mtime_ms = 0;
};

CommitStamp StampOf(Storage& storage, const std::string& table_dir, int64_t version) {
  delta::DeltaLog log(storage, table_dir);
  auto st = storage.Stat(log.CommitPath(version));
  if (!st.ok()) return {};
  return {st->size, st->modification_time_ms};
}

// Appends the rows [first_row, first_row + num_rows) of a chunk as read through the reader (merged
// with a needs-decode record just before it).
void AppendNeedsDecode(std::vector<BuiltPage>& pages, uint64_t first_row, uint64_t num_rows) {
  if (!pages.empty() && (pages.back().flags & kNeedsDecode) && pages.back().first_row + pages.back().num_rows == first_row &&
      uint64_t{pages.back().num_rows} + num_rows <= std::numeric_limits<uint32_t>::max()) {
    pages.back().num_rows += static_cast<uint32_t>(num_rows);
    return;
  }
  pages.push_back({.offset = 0, .first_row = first_row, .length = 0, .num_rows = static_cast<uint32_t>(num_rows),
                   .flags = kNeedsDecode});
}

// The page map of a column chunk whose OffsetIndex is missing (or that has a dictionary), from its
// page headers (ParquetReader::ListPages: one read per window of small pages, one per large page).
// PLAIN V1 data pages become page records the loader reads alone; other data pages (dictionary
// encoded, V2, other encodings) become needs-decode rows.
Status MapChunkPages(const ParquetReader& reader, int g, size_t column, uint64_t rg_first, uint32_t flags,
                     std::vector<BuiltPage>& pages) {
  STOKE_ASSIGN_OR_RETURN(std::vector<DataPageSpan> listed, reader.ListDataPages(g, column));
  for (const DataPageSpan& p : listed) {
    if (p.rows == 0) continue;
    const uint64_t first = rg_first + static_cast<uint64_t>(p.first_row), rows = static_cast<uint64_t>(p.rows);
    if (!p.v2 && p.encoding == parquet::Encoding::kPlain && static_cast<uint64_t>(p.length) <= UINT32_MAX) {
      pages.push_back({.offset = static_cast<uint64_t>(p.offset), .first_row = first,
                       .length = static_cast<uint32_t>(p.length), .num_rows = static_cast<uint32_t>(rows), .flags = flags});
    } else {
      AppendNeedsDecode(pages, first, rows);
    }
  }
  return Status::OK();
}

// The pages an OffsetIndex lists for a row group's chunk of `rg_rows` rows starting at file row
// `rg_first`. REQUIRES: the entries' first rows increase from 0 and stay below rg_rows.
void AppendOffsetIndexPages(const std::vector<parquet::PageLocation>& locs, uint64_t rg_first, int64_t rg_rows,
                            uint32_t flags, std::vector<BuiltPage>& pages) {
  for (size_t k = 0; k < locs.size(); ++k) {
    const int64_t first = locs[k].first_row_index;
    const int64_t end = k + 1 < locs.size() ? locs[k + 1].first_row_index : rg_rows;
    pages.push_back({.offset = static_cast<uint64_t>(locs[k].offset),
                     .first_row = rg_first + static_cast<uint64_t>(first),
                     .length = static_cast<uint32_t>(locs[k].compressed_page_size),
                     .num_rows = static_cast<uint32_t>(end - first), .flags = flags});
  }
}

// The table a build reads: its storage, its path there, and the snapshot (the caller's, or one read).
struct IndexedTable {
  std::shared_ptr<Storage> storage;
  std::string dir;
  const delta::Snapshot* snapshot = nullptr;
  std::vector<ColumnSpec> columns;
  std::string FilePath(const delta::AddFile& add) const {
    auto rel = delta::DecodePath(add.path);
    return JoinPath(dir, rel.ok() ? *rel : add.path);
  }
};

// The pages of the data file `reader` reads (at `path`).
Status MapFilePages(const ParquetReader* reader, const std::string& path, const std::vector<std::string>& tensor_columns,
                    bool map_pages, BuiltFile* out) {
  out->size = reader->file_size();
  out->num_rows = static_cast<uint64_t>(reader->num_rows());
  const auto& starts = reader->row_group_starts();
  out->pages.resize(tensor_columns.size());
  for (size_t c = 0; c < tensor_columns.size(); ++c) {
    auto idx = reader->FindColumn(tensor_columns[c]);
    if (!idx.ok()) {
      return Status::NotFound(fmt::format("{}: column '{}' is not in the data file", path, tensor_columns[c]));
    }
    const LeafColumn& col = reader->columns()[*idx];
    // Pages the loader can read alone: flat BYTE_ARRAY (REQUIRED, or OPTIONAL as other writers write
    // binary columns: definition levels in the page), PLAIN V1 data pages, in a codec stoke
    // decompresses. Anything else is decoded through the reader.
    const bool flat = col.type == parquet::Type::kByteArray && col.max_definition_level <= 1 &&
                      col.max_repetition_level == 0;
    const uint32_t level_flag = col.max_definition_level == 1 ? kDefinitionLevels : 0;
    auto& pages = out->pages[c];
    for (int g = 0; g < reader->num_row_groups(); ++g) {
      const int64_t rg_rows = starts[g + 1] - starts[g];
      if (rg_rows <= 0) continue;
      if (rg_rows > std::numeric_limits<uint32_t>::max()) {
        return Status::Unsupported(fmt::format("{}: row group {} has {} rows (the sample index holds at most 2^32-1 per "
                                               "row group)", path, g, rg_rows));
      }
      const uint64_t rg_first = static_cast<uint64_t>(starts[g]);
      const auto& cc = reader->metadata().row_groups[g].columns[*idx];
      if (!flat || !cc.meta_data || !CodecSupported(cc.meta_data->codec)) {
        AppendNeedsDecode(pages, rg_first, static_cast<uint64_t>(rg_rows));
        continue;
      }
      const uint32_t flags = level_flag | static_cast<uint32_t>(cc.meta_data->codec) << kCodecShift;
      std::optional<parquet::OffsetIndex> oi;
      // With a dictionary some pages may be dictionary encoded: only their headers tell which.
      if (!cc.meta_data->dictionary_page_offset) {
        STOKE_ASSIGN_OR_RETURN(oi, reader->ReadOffsetIndex(g, *idx));
      }
      if (!oi || oi->page_locations.empty()) {
        if (map_pages) {
          STOKE_RETURN_IF_ERROR(MapChunkPages(*reader, g, *idx, rg_first, flags, pages));
        } else {
          AppendNeedsDecode(pages, rg_first, static_cast<uint64_t>(rg_rows));
        }
        continue;
      }
      // ReadOffsetIndex checked the entries: inside the chunk, sizes > 0, first rows increasing from 0.
      AppendOffsetIndexPages(oi->page_locations, rg_first, rg_rows, flags, pages);
    }
  }
  return Status::OK();
}

std::string RelativePath(const delta::AddFile& add) {
  auto rel = delta::DecodePath(add.path);
  return rel.ok() ? *rel : add.path;
}

Status ReadFilePages(const IndexedTable& view, const delta::AddFile& add, const std::vector<std::string>& tensor_columns,
                     bool map_pages, BuiltFile* out) {
  out->rel_path = RelativePath(add);
  const std::string path = view.FilePath(add);
  // The size comes from the log: on object stores, no HEAD per data file.
  STOKE_ASSIGN_OR_RETURN(auto file, view.storage->OpenForReadWithSize(path, static_cast<uint64_t>(add.size)));
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(std::move(file)));
  return MapFilePages(reader.get(), path, tensor_columns, map_pages, out);
}

// Files whose footers are read in one Storage::ReadFileEnds batch (on local disks, one system call).
constexpr size_t kFooterBatch = 64;

// ReadFilePages of the files adds[todo[k]], their ends read in one batch where the storage can. A
// file whose batched read or decoding fails is read again alone, which gives its error.
Status ReadFilePagesBatch(const IndexedTable& view, const std::vector<delta::AddFile>& adds,
                          const std::vector<size_t>& todo, const std::vector<std::string>& tensor_columns,
                          bool map_pages, std::vector<BuiltFile>& read) {
  std::vector<FileEnds> ends;
  ends.reserve(todo.size());
  std::vector<size_t> batched;  // indexes into `todo` of the files in `ends`
  for (size_t k = 0; k < todo.size(); ++k) {
    const delta::AddFile& add = adds[todo[k]];
    if (add.size < 12) continue;  // not a Parquet file's size: read alone, which says so
    FileEnds& e = ends.emplace_back();
    e.path = view.FilePath(add);
    e.size = static_cast<uint64_t>(add.size);
    e.tail_bytes = std::min(e.size, ParquetReader::kDefaultReadAhead);
    e.head_bytes = e.size > e.tail_bytes ? 4 : 0;
    batched.push_back(k);
  }
  std::vector<bool> done(todo.size(), false);
  if (!ends.empty() && view.storage->ReadFileEnds(ends).ok()) {
    const bool remote = view.storage->remote();
    for (size_t j = 0; j < ends.size(); ++j) {
      FileEnds& e = ends[j];
      if (!e.status.ok()) continue;
      BuiltFile& out = read[todo[batched[j]]];
      auto reader = ParquetReader::OpenWithEnds(OpenOnFirstRead(view.storage, e.path, e.size, remote),
                                                std::move(e.tail), e.head.view());
      if (!reader.ok()) continue;
      out.rel_path = RelativePath(adds[todo[batched[j]]]);
      if (MapFilePages(reader->get(), e.path, tensor_columns, map_pages, &out).ok()) {
        done[batched[j]] = true;
      } else {
        out = BuiltFile{};
      }
    }
  }
  for (size_t k = 0; k < todo.size(); ++k) {
    if (!done[k]) STOKE_RETURN_IF_ERROR(ReadFilePages(view, adds[todo[k]], tensor_columns, map_pages, &read[todo[k]]));
  }
  return Status::OK();
}

// Serializes the built index in the cache layout.
// Where each section of a cache file of `files` and `tensor_columns` goes (see the class comment).
struct CacheLayout {
  uint64_t num_rows = 0, num_pages = 0, strings_size = 0;
  uint64_t files_off = 0, columns_off = 0, pages_off = 0, rows_off = 0, strings_off = 0, total = 0;
};

Result<CacheLayout> LayoutOf(const std::vector<std::string>& tensor_columns, const std::vector<const BuiltFile*>& files) {
  CacheLayout l;
  for (const BuiltFile* f : files) {
    l.num_rows += f->num_rows;
    l.strings_size += f->rel_path.size();
    for (const auto& p : f->pages) l.num_pages += p.size();
  }
  for (const auto& n : tensor_columns) l.strings_size += n.size();
  if (files.size() > std::numeric_limits<uint32_t>::max() || l.num_pages > std::numeric_limits<uint32_t>::max()) {
    return Status::Unsupported(fmt::format("sample index: {} files and {} pages exceed the format's 2^32-1 limit",
                                           files.size(), l.num_pages));
  }
  l.files_off = kHeaderSize;
  l.columns_off = l.files_off + kFileRecordSize * files.size();
  l.pages_off = l.columns_off + kColumnRecordSize * tensor_columns.size();
  l.rows_off = l.pages_off + kPageRecordSize * l.num_pages;
  l.strings_off = Align8(l.rows_off + 4 * tensor_columns.size() * l.num_rows);
  l.total = l.strings_off + l.strings_size;
  return l;
}

// The header's fields but its CRCs.
void WriteHeader(uint8_t* b, int64_t version, CommitStamp stamp, size_t num_files, size_t num_columns,
                 const CacheLayout& l) {
  std::memcpy(b, kMagic, sizeof(kMagic));
  StoreLE<uint32_t>(b + kOffFormatVersion, kFormatVersion);
  StoreLE<uint32_t>(b + kOffHeaderSize, kHeaderSize);
  StoreLE<int64_t>(b + kOffTableVersion, version);
  StoreLE<uint64_t>(b + kOffNumRows, l.num_rows);
  StoreLE<uint32_t>(b + kOffNumFiles, static_cast<uint32_t>(num_files));
  StoreLE<uint32_t>(b + kOffNumColumns, static_cast<uint32_t>(num_columns));
  StoreLE<uint64_t>(b + kOffNumPages, l.num_pages);
  StoreLE<uint64_t>(b + kOffFiles, l.files_off);
  StoreLE<uint64_t>(b + kOffColumns, l.columns_off);
  StoreLE<uint64_t>(b + kOffPages, l.pages_off);
  StoreLE<uint64_t>(b + kOffRows, l.rows_off);
  StoreLE<uint64_t>(b + kOffStrings, l.strings_off);
  StoreLE<uint64_t>(b + kOffStringsSize, l.strings_size);
  StoreLE<uint64_t>(b + kOffTotalSize, l.total);
  StoreLE<uint64_t>(b + kOffCommitSize, stamp.size);
  StoreLE<int64_t>(b + kOffCommitMtime, stamp.mtime_ms);
}

Result<std::string> Serialize(int64_t version, CommitStamp stamp, const std::vector<std::string>& tensor_columns,
                              const std::vector<const BuiltFile*>& files) {
  const size_t ncols = tensor_columns.size();
  STOKE_ASSIGN_OR_RETURN(const CacheLayout layout, LayoutOf(tensor_columns, files));
  const uint64_t num_rows = layout.num_rows, files_off = layout.files_off, columns_off = layout.columns_off;
  const uint64_t pages_off = layout.pages_off, rows_off = layout.rows_off, strings_off = layout.strings_off;
  const uint64_t total = layout.total;
  std::string out(total, '\0');
  auto* b = reinterpret_cast<uint8_t*>(out.data());
  WriteHeader(b, version, stamp, files.size(), ncols, layout);

  uint64_t str_pos = 0;
  auto put_string = [&](const std::string& s) {
    std::memcpy(b + strings_off + str_pos, s.data(), s.size());
    uint64_t at = str_pos;
    str_pos += s.size();
    return at;
  };
  std::vector<uint64_t> file_first_row(files.size());
  uint64_t row = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    uint8_t* r = b + files_off + kFileRecordSize * i;
    file_first_row[i] = row;
    StoreLE<uint64_t>(r, files[i]->size);
    StoreLE<uint64_t>(r + 8, row);
    StoreLE<uint64_t>(r + 16, files[i]->num_rows);
    StoreLE<uint64_t>(r + 24, put_string(files[i]->rel_path));
    StoreLE<uint32_t>(r + 32, static_cast<uint32_t>(files[i]->rel_path.size()));
    row += files[i]->num_rows;
  }
  uint64_t page = 0;
  for (size_t c = 0; c < ncols; ++c) {
    uint8_t* cr = b + columns_off + kColumnRecordSize * c;
    const uint64_t first_page = page;
    uint8_t* rows = b + rows_off + 4 * c * num_rows;
    for (size_t i = 0; i < files.size(); ++i) {
      for (const BuiltPage& p : files[i]->pages[c]) {
        uint8_t* pr = b + pages_off + kPageRecordSize * page;
        const uint64_t global_first = file_first_row[i] + p.first_row;
        StoreLE<uint64_t>(pr, p.offset);
        StoreLE<uint64_t>(pr + 8, global_first);
        StoreLE<uint32_t>(pr + 16, static_cast<uint32_t>(i));
        StoreLE<uint32_t>(pr + 20, p.length);
        StoreLE<uint32_t>(pr + 24, p.num_rows);
        StoreLE<uint32_t>(pr + 28, p.flags);
        for (uint64_t r = global_first; r < global_first + p.num_rows && r < num_rows; ++r) {
          StoreLE<uint32_t>(rows + 4 * r, static_cast<uint32_t>(page));
        }
        ++page;
      }
    }
    StoreLE<uint64_t>(cr, first_page);
    StoreLE<uint64_t>(cr + 8, page - first_page);
    StoreLE<uint64_t>(cr + 16, put_string(tensor_columns[c]));
    StoreLE<uint32_t>(cr + 24, static_cast<uint32_t>(tensor_columns[c].size()));
  }
  StoreLE<uint32_t>(b + kOffBodyCrc, Crc32(ByteView(b + kHeaderSize, total - kHeaderSize)));
  StoreLE<uint32_t>(b + kOffHeaderCrc, Crc32(ByteView(b, kOffHeaderCrc)));
  return out;
}

uint32_t U32(ByteView b, uint64_t at) { return LoadLE<uint32_t>(b.data() + at); }
uint64_t U64(ByteView b, uint64_t at) { return LoadLE<uint64_t>(b.data() + at); }
// A path or column name of a validated cache: `len` bytes at `off` in its strings section.
std::string CacheString(ByteView b, uint64_t off, uint32_t len) {
  return std::string(reinterpret_cast<const char*>(b.data() + U64(b, kOffStrings) + off), len);
}
// The directory of a table's sample index caches.
std::string CacheDir(const std::string& table_path) { return JoinPath(table_path, "_stoke/sample_index"); }

// The files of a valid index of an older version (`older`, passed ValidateCache) with their pages,
// by path relative to the table, when it has the same tensor columns (empty otherwise), except files
// with rows left to the decode path. Data files are
// immutable (the Delta protocol), so a file of the same path and size has the same pages.
std::unordered_map<std::string, BuiltFile> ReusableFiles(ByteView older, const std::vector<std::string>& tensor_columns) {
  std::unordered_map<std::string, BuiltFile> out;
  const uint64_t num_files = U32(older, kOffNumFiles), ncols = U32(older, kOffNumColumns);
  const uint64_t columns_off = U64(older, kOffColumns), pages_off = U64(older, kOffPages);
  auto string_at = [&](uint64_t off, uint32_t len) { return CacheString(older, off, len); };
  if (ncols != tensor_columns.size()) return out;
  for (uint64_t c = 0; c < ncols; ++c) {
    const uint64_t r = columns_off + kColumnRecordSize * c;
    if (string_at(U64(older, r + 16), U32(older, r + 24)) != tensor_columns[c]) return out;
  }
  std::vector<BuiltFile> files(num_files);
  std::vector<uint64_t> first_rows(num_files);
  for (uint64_t i = 0; i < num_files; ++i) {
    const uint64_t r = kHeaderSize + kFileRecordSize * i;
    files[i].size = U64(older, r);
    first_rows[i] = U64(older, r + 8);
    files[i].num_rows = U64(older, r + 16);
    files[i].rel_path = string_at(U64(older, r + 24), U32(older, r + 32));
    files[i].pages.resize(ncols);
  }
  for (uint64_t c = 0; c < ncols; ++c) {
    const uint64_t r = columns_off + kColumnRecordSize * c;
    const uint64_t first_page = U64(older, r), n = U64(older, r + 8);
    for (uint64_t p = first_page; p < first_page + n; ++p) {
      const uint64_t pr = pages_off + kPageRecordSize * p;
      const uint32_t file = U32(older, pr + 16);
      files[file].pages[c].push_back({.offset = U64(older, pr), .first_row = U64(older, pr + 8) - first_rows[file],
                                      .length = U32(older, pr + 20), .num_rows = U32(older, pr + 24),
                                      .flags = U32(older, pr + 28)});
    }
  }
  out.reserve(files.size());
  for (BuiltFile& f : files) {
    // Rows left to the decode path are read again: this build may map them (a newer stoke's page
    // maps, or Options::map_pages set where the older index was built without it).
    const bool needs_decode = std::any_of(f.pages.begin(), f.pages.end(), [](const std::vector<BuiltPage>& col) {
      return std::any_of(col.begin(), col.end(), [](const BuiltPage& p) { return (p.flags & kNeedsDecode) != 0; });
    });
    if (needs_decode) continue;
    std::string key = f.rel_path;
    out.emplace(std::move(key), std::move(f));
  }
  return out;
}

// `older`: a validated index of an older version of the table, or empty: its files' pages are
// reused, and only the other files' footers are read.
Result<std::string> BuildIndexBytes(const std::string& table_dir, int64_t version, CommitStamp stamp,
                                    const SampleIndex::Options& options, ByteView older,
                                    std::vector<std::string>* tensor_columns, size_t* reused) {
  IndexedTable view;
  std::optional<TableView> opened;  // when the caller holds no snapshot of this version
  if (options.snapshot != nullptr && options.snapshot->version == version) {
    STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(table_dir));
    view.storage = std::move(where.storage);
    view.dir = std::move(where.path);
    view.snapshot = options.snapshot;
    STOKE_ASSIGN_OR_RETURN(view.columns, delta::ColumnsFromSnapshot(*options.snapshot, table_dir));
  } else {
    STOKE_ASSIGN_OR_RETURN(opened, OpenTableView(table_dir, version));
    view.storage = opened->storage;
    view.dir = opened->dir;
    view.snapshot = &opened->snapshot;
    view.columns = opened->columns;
  }
  const auto& partitions = view.snapshot->metadata.partition_columns;
  tensor_columns->clear();
  for (const auto& col : view.columns) {
    // Blob columns (encoded images) are laid out as tensors are: indexed page per row alike.
    if (col.paged() && std::find(partitions.begin(), partitions.end(), col.name) == partitions.end()) {
      tensor_columns->push_back(col.file_name());  // its name in the data files
    }
  }
  const auto& adds = view.snapshot->files;
  size_t threads = options.threads;
  if (threads == 0) threads = std::max<size_t>(4, AvailableCpus());
  threads = std::max<size_t>(1, std::min(threads, adds.size()));
  // Pages known without reading a footer: of files a writer has just written, then of files an
  // older index holds. By decoded path; a file of the same path and size has the same pages.
  std::unordered_map<std::string, BuiltFile> reusable;
  if (!older.empty()) reusable = ReusableFiles(older, *tensor_columns);
  std::unordered_map<std::string_view, const BuiltFile*> known;
  known.reserve(reusable.size() + (options.written != nullptr ? options.written->files.size() : 0));
  if (options.written != nullptr && options.written->tensor_columns == *tensor_columns) {
    for (const BuiltFile& f : options.written->files) known.emplace(f.rel_path, &f);
  }
  for (const auto& [path, f] : reusable) known.emplace(path, &f);
  std::vector<const BuiltFile*> files(adds.size(), nullptr);
  // The files whose footers were read (none may be, for a writer indexing what it wrote: 47 MB of
  // empty entries at 650,000 files).
  std::vector<BuiltFile> read(options.read_footers ? adds.size() : 0);
  std::atomic<size_t> reused_files{0};
  // Whether the footers are read in batches (an empty batch asks the storage: local disks can),
  // else one file per task (object stores, whose reads overlap across the pool's threads).
  const bool batches = view.storage->ReadFileEnds({}).ok();
  const size_t per_task = batches ? kFooterBatch : 1;
  ThreadPool pool(threads);
  STOKE_RETURN_IF_ERROR(ParallelFor(pool, (adds.size() + per_task - 1) / per_task, [&](size_t task) -> Status {
    std::vector<size_t> todo;
    for (size_t i = task * per_task; i < std::min(adds.size(), (task + 1) * per_task); ++i) {
      if (!known.empty()) {
        auto rel = delta::DecodePath(adds[i].path);
        auto it = known.find(rel.ok() ? std::string_view(*rel) : std::string_view(adds[i].path));
        if (it != known.end() && adds[i].size >= 0 && it->second->size == static_cast<uint64_t>(adds[i].size)) {
          files[i] = it->second;
          ++reused_files;
          continue;
        }
      }
      if (!options.read_footers) {
        return Status::NotFound(fmt::format("{}: not indexed yet (its footer would be read)", view.FilePath(adds[i])));
      }
      files[i] = &read[i];
      todo.push_back(i);
    }
    if (todo.empty()) return Status::OK();
    if (!batches) return ReadFilePages(view, adds[todo[0]], *tensor_columns, options.map_pages, &read[todo[0]]);
    return ReadFilePagesBatch(view, adds, todo, *tensor_columns, options.map_pages, read);
  }));
  *reused = reused_files;
  return Serialize(version, stamp, *tensor_columns, files);
}

// a * b + c without overflow, or nullopt.
std::optional<uint64_t> MulAdd(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t m;
  if (__builtin_mul_overflow(a, b, &m)) return std::nullopt;
  uint64_t s;
  if (__builtin_add_overflow(m, c, &s)) return std::nullopt;
  return s;
}

std::atomic<bool> g_logged_unwritable{false};

// The version of a cache file name ("<20 digits>.idx"), or -1.
int64_t CacheFileVersion(const std::string& name) {
  int64_t version = -1;
  if (name.size() != 24 || name.compare(20, 4, ".idx") != 0 ||
      std::from_chars(name.data(), name.data() + 20, version).ptr != name.data() + 20) {
    return -1;
  }
  return version;
}

// Deletes the caches of versions older than `version`, except the newest kKeptOlderCaches of them
// (a table opened at every version would otherwise keep one index per version: ~50 MB each at
// 650,000 files). A reader that has one mapped keeps its mapping; one about to read it rebuilds.
constexpr size_t kKeptOlderCaches = 2;
void PruneOlderCaches(Storage& fs, const std::string& table_path, int64_t version) {
  const std::string dir = CacheDir(table_path);
  auto names = fs.ListNames(dir);
  if (!names.ok()) return;
  std::vector<std::string> older;
  for (const std::string& name : *names) {
    const int64_t v = CacheFileVersion(name);
    if (v >= 0 && v < version) older.push_back(name);
  }
  // ListNames is sorted, and the 20-digit names sort as their versions.
  if (older.size() <= kKeptOlderCaches) return;
  for (size_t i = 0; i + kKeptOlderCaches < older.size(); ++i) {
    Status d = fs.Delete(JoinPath(dir, older[i]));
    if (!d.ok() && d.code() != StatusCode::kNotFound) {
      STOKE_LOG(kInfo, "sample_index.prune_failed", "path={} error=\"{}\"", JoinPath(dir, older[i]), d.ToString());
    }
  }
}

}  // namespace

// The bytes of an index: a read-only mapping of a cache file, or a buffer built in memory.
class SampleIndex::Mapping {
 public:
  // NotFound when the file does not exist; Corruption when it is too short to hold a header.
  static Result<std::unique_ptr<Mapping>> MapFile(const std::string& path) {
    auto mapped = MappedFile::Open(path);
    if (mapped.status().code() == StatusCode::kNotFound) return Status::NotFound(path + ": no sample index cache");
    STOKE_RETURN_IF_ERROR(mapped.status());
    if (mapped->bytes().size() < kHeaderSize) {
      return Status::Corruption(fmt::format("{}: {} bytes, shorter than the {}-byte header", path, mapped->bytes().size(),
                                            kHeaderSize));
    }
    auto m = std::unique_ptr<Mapping>(new Mapping());
    m->mapped_.emplace(std::move(*mapped));
    return m;
  }
  static std::unique_ptr<Mapping> Own(std::string bytes) {
    auto m = std::unique_ptr<Mapping>(new Mapping());
    m->owned_ = std::move(bytes);
    return m;
  }
  ByteView view() const { return mapped_ ? mapped_->bytes() : AsBytes(owned_); }

 private:
  Mapping() = default;
  std::optional<MappedFile> mapped_;
  std::string owned_;
};

SampleIndex::SampleIndex(SampleIndex&&) noexcept = default;
SampleIndex& SampleIndex::operator=(SampleIndex&&) noexcept = default;
SampleIndex::~SampleIndex() = default;

std::string SampleIndex::CachePath(const std::string& table_dir, int64_t version) {
  return JoinPath(CacheDir(table_dir), fmt::format("{:020d}.idx", version));
}

namespace {

// What is wrong with a page record of the cache (its flags, and its byte range in file `file` of
// `file_size` bytes), or "" when nothing is.
std::string PageRecordProblem(uint32_t flags, uint64_t offset, uint32_t length, uint32_t file, uint64_t file_size) {
  if ((flags & ~kKnownFlags) != 0) return fmt::format("unknown flags {:#x}", flags);
  if (!(flags & kNeedsDecode) && !CodecSupported(static_cast<parquet::Codec>((flags >> kCodecShift) & 0xFF))) {
    return fmt::format("codec {} is not one stoke reads", (flags >> kCodecShift) & 0xFF);
  }
  if ((flags & kNeedsDecode) && flags != kNeedsDecode) return fmt::format("a needs-decode page with other flags {:#x}", flags);
  if ((flags & kNeedsDecode) ? (length != 0 || offset != 0)
                             : (length == 0 || offset > file_size || length > file_size - offset)) {
    return fmt::format("range [{}, +{}) does not fit file {} ({} bytes)", offset, length, file, file_size);
  }
  return "";
}

}  // namespace

Status SampleIndex::ValidateCache(ByteView b) {
  auto bad = [](std::string what) { return Status::Corruption("sample index cache: " + what); };
  if (b.size() < kHeaderSize) return bad(fmt::format("{} bytes, shorter than the {}-byte header", b.size(), kHeaderSize));
  if (std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0) return bad("bad magic (expected STKIDX01)");
  if (U32(b, kOffFormatVersion) != kFormatVersion) {
    return bad(fmt::format("format version {} (expected {})", U32(b, kOffFormatVersion), kFormatVersion));
  }
  if (U32(b, kOffHeaderCrc) != Crc32(b.subspan(0, kOffHeaderCrc))) return bad("header CRC mismatch");
  if (U32(b, kOffHeaderSize) != kHeaderSize) return bad(fmt::format("header size {}", U32(b, kOffHeaderSize)));
  if (U64(b, kOffTotalSize) != b.size()) {
    return bad(fmt::format("header says {} bytes, the file has {}", U64(b, kOffTotalSize), b.size()));
  }
  if (static_cast<int64_t>(U64(b, kOffTableVersion)) < 0) return bad("negative table version");
  const uint64_t num_rows = U64(b, kOffNumRows), num_files = U32(b, kOffNumFiles), ncols = U32(b, kOffNumColumns),
                 num_pages = U64(b, kOffNumPages), strings_size = U64(b, kOffStringsSize);
  // The layout is canonical: each section follows the previous one, so checking the offsets against
  // the counts checks every size against the file length.
  const auto columns_off = MulAdd(kFileRecordSize, num_files, kHeaderSize);
  const auto pages_off = columns_off ? MulAdd(kColumnRecordSize, ncols, *columns_off) : std::nullopt;
  const auto rows_off = pages_off ? MulAdd(kPageRecordSize, num_pages, *pages_off) : std::nullopt;
  const auto rows_end = rows_off ? MulAdd(4 * ncols, num_rows, *rows_off) : std::nullopt;
  if (!rows_end || *rows_end > b.size()) return bad("section sizes exceed the file");
  const uint64_t strings_off = Align8(*rows_end);
  if (U64(b, kOffFiles) != kHeaderSize || U64(b, kOffColumns) != *columns_off || U64(b, kOffPages) != *pages_off ||
      U64(b, kOffRows) != *rows_off || U64(b, kOffStrings) != strings_off || strings_off > b.size() ||
      strings_size != b.size() - strings_off) {
    return bad("section offsets disagree with the counts and the file length");
  }
  if (U32(b, kOffBodyCrc) != Crc32(b.subspan(kHeaderSize))) return bad("body CRC mismatch");

  auto string_ok = [&](uint64_t off, uint64_t len) { return len > 0 && off <= strings_size && len <= strings_size - off; };
  uint64_t row = 0;
  for (uint64_t i = 0; i < num_files; ++i) {
    const uint64_t r = kHeaderSize + kFileRecordSize * i;
    if (U64(b, r + 8) != row) return bad(fmt::format("file {}: first row {} (expected {})", i, U64(b, r + 8), row));
    const uint64_t n = U64(b, r + 16);
    if (n > num_rows - row) return bad(fmt::format("file {}: {} rows run past the index's {}", i, n, num_rows));
    row += n;
    if (!string_ok(U64(b, r + 24), U32(b, r + 32)) || U32(b, r + 36) != 0) return bad(fmt::format("file {}: bad path", i));
  }
  if (row != num_rows) return bad(fmt::format("files hold {} rows, the header says {}", row, num_rows));

  uint64_t page = 0;
  for (uint64_t c = 0; c < ncols; ++c) {
    const uint64_t cr = *columns_off + kColumnRecordSize * c;
    const uint64_t first_page = U64(b, cr), n_pages = U64(b, cr + 8);
    if (first_page != page || n_pages > num_pages - page) return bad(fmt::format("column {}: bad page range", c));
    if (!string_ok(U64(b, cr + 16), U32(b, cr + 24)) || U32(b, cr + 28) != 0) return bad(fmt::format("column {}: bad name", c));
    // The column's pages tile [0, num_rows) in order, each inside its file; each row entry names the
    // page that holds the row.
    uint64_t next_row = 0;
    const uint64_t rows_base = *rows_off + 4 * c * num_rows;
    for (; page < first_page + n_pages; ++page) {
      const uint64_t pr = *pages_off + kPageRecordSize * page;
      const uint64_t offset = U64(b, pr), first = U64(b, pr + 8);
      const uint32_t file = U32(b, pr + 16), length = U32(b, pr + 20), n = U32(b, pr + 24), flags = U32(b, pr + 28);
      if (file >= num_files) return bad(fmt::format("page {}: file {} out of range", page, file));
      const uint64_t fr = kHeaderSize + kFileRecordSize * file;
      const uint64_t file_first = U64(b, fr + 8), file_rows = U64(b, fr + 16), file_size = U64(b, fr);
      if (first != next_row || n == 0 || first < file_first || first - file_first > file_rows ||
          n > file_rows - (first - file_first)) {
        return bad(fmt::format("page {}: rows [{}, +{}) out of place (expected first row {})", page, first, n, next_row));
      }
      if (std::string why = PageRecordProblem(flags, offset, length, file, file_size); !why.empty()) {
        return bad(fmt::format("page {}: {}", page, why));
      }
      for (uint64_t r = first; r < first + n; ++r) {
        if (U32(b, rows_base + 4 * r) != page) return bad(fmt::format("column {} row {}: page entry is not {}", c, r, page));
      }
      next_row = first + n;
    }
    if (next_row != num_rows) return bad(fmt::format("column {}: pages cover {} of {} rows", c, next_row, num_rows));
  }
  if (page != num_pages) return bad(fmt::format("columns hold {} pages, the header says {}", page, num_pages));
  return Status::OK();
}

Result<SampleIndex> SampleIndex::FromBytes(std::unique_ptr<Mapping> bytes, const std::string& table_dir,
                                           bool from_cache) {
  // REQUIRES: ValidateCache(bytes->view()) is OK.
  SampleIndex s;
  ByteView b = bytes->view();
  s.version_ = static_cast<int64_t>(U64(b, kOffTableVersion));
  s.num_rows_ = U64(b, kOffNumRows);
  const uint64_t num_files = U32(b, kOffNumFiles), ncols = U32(b, kOffNumColumns);
  auto string_at = [&](uint64_t off, uint32_t len) { return CacheString(b, off, len); };
  s.files_ = b.data() + kHeaderSize;
  std::vector<std::string> paths;
  paths.reserve(num_files);
  for (uint64_t i = 0; i < num_files; ++i) {
    const uint8_t* r = s.files_ + kFileRecordSize * i;
    paths.push_back(JoinPath(table_dir, string_at(LoadLE<uint64_t>(r + 24), LoadLE<uint32_t>(r + 32))));
  }
  s.file_paths_ = std::make_shared<const std::vector<std::string>>(std::move(paths));
  const uint8_t* cols = b.data() + U64(b, kOffColumns);
  for (uint64_t c = 0; c < ncols; ++c) {
    const uint8_t* r = cols + kColumnRecordSize * c;
    s.tensor_columns_.push_back(string_at(LoadLE<uint64_t>(r + 16), LoadLE<uint32_t>(r + 24)));
  }
  s.pages_ = b.data() + U64(b, kOffPages);
  s.rows_ = b.data() + U64(b, kOffRows);
  s.from_cache_ = from_cache;
  s.bytes_ = std::move(bytes);
  return s;
}

Result<SampleIndex> SampleIndex::Open(const std::string& table_dir, std::optional<int64_t> version, Options options) {
  int64_t v = 0;
  if (version) {
    v = *version;
    if (v < 0) return Status::InvalidArgument(fmt::format("{}: version {} is negative", table_dir, v));
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(table_dir));
  Storage& fs = *where.storage;
  if (!version) {
    delta::DeltaLog log(fs, where.path);
    STOKE_ASSIGN_OR_RETURN(v, log.LatestVersion());
    if (v < 0) return Status::NotFound(table_dir + ": no Delta table here (no commit in _delta_log)");
  }
  const CommitStamp stamp = StampOf(fs, where.path, v);
  const std::string cache_path = CachePath(where.path, v);

  // Local caches are memory-mapped; elsewhere the cache is read whole (on an object store, one GET).
  auto load_cache = [&](const std::string& path) -> Result<std::unique_ptr<Mapping>> {
    if (fs.local_files()) return Mapping::MapFile(path);
    STOKE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(fs, path));
    return Mapping::Own(std::move(bytes));
  };
  std::unique_ptr<Mapping> older;  // the newest valid index of an older version, for its files' pages
  if (options.use_cache) {
    auto mapped = load_cache(cache_path);
    Status why = mapped.status();
    if (mapped.ok()) {
      ByteView b = (*mapped)->view();
      why = ValidateCache(b);
      if (why.ok() && (static_cast<int64_t>(U64(b, kOffTableVersion)) != v || U64(b, kOffCommitSize) != stamp.size ||
                       static_cast<int64_t>(U64(b, kOffCommitMtime)) != stamp.mtime_ms)) {
        why = Status::Corruption(fmt::format("sample index cache: built for another table version or commit file "
                                             "(version {}, expected {})", static_cast<int64_t>(U64(b, kOffTableVersion)), v));
      }
      if (why.ok()) return FromBytes(std::move(*mapped), table_dir, /*from_cache=*/true);
    }
    if (why.code() != StatusCode::kNotFound) {
      STOKE_LOG(kInfo, "sample_index.cache_rejected", "path={} reason=\"{}\"", cache_path, why.ToString());
    }
    // After an append (or any commit), the files the previous version's index already holds are not
    // read again: only the new files' footers are.
    auto names = fs.ListNames(CacheDir(where.path));
    if (names.ok()) {
      for (auto it = names->rbegin(); it != names->rend() && older == nullptr; ++it) {
        const std::string& name = *it;
        const int64_t older_version = CacheFileVersion(name);
        if (older_version < 0 || older_version >= v) continue;
        auto m = load_cache(JoinPath(CacheDir(where.path), name));
        if (m.ok() && ValidateCache((*m)->view()).ok()) older = std::move(*m);
      }
    }
  }

  std::vector<std::string> tensor_columns;
  size_t reused = 0;
  STOKE_ASSIGN_OR_RETURN(std::string bytes,
                         BuildIndexBytes(table_dir, v, stamp, options, older ? older->view() : ByteView(),
                                         &tensor_columns, &reused));
  if (older != nullptr) {
    STOKE_LOG(kInfo, "sample_index.incremental", "table={} version={} reused_files={}", table_dir, v, reused);
  }
  older.reset();
  // The builder's output goes through the same checks as a cache: a bug there is an error, not a bad read.
  if (Status s = ValidateCache(AsBytes(bytes)); !s.ok()) {
    return Status::Internal(fmt::format("{}: built sample index fails validation: {}", table_dir, s.ToString()));
  }
  if (options.write_cache) {
    Status w = fs.CreateDirectories(CacheDir(where.path));
    if (w.ok()) w = WriteFileAtomically(fs, cache_path, AsBytes(bytes));
    if (!w.ok() && !g_logged_unwritable.exchange(true)) {
      STOKE_LOG(kWarn, "sample_index.cache_unwritable", "path={} error=\"{}\" (indexes are built on every open)",
                cache_path, w.ToString());
    }
    if (w.ok()) PruneOlderCaches(fs, where.path, v);
  }
  return FromBytes(Mapping::Own(std::move(bytes)), table_dir, /*from_cache=*/false);
}

Result<SampleIndex::FilePages> SampleIndex::PagesOfWrittenFile(std::string rel_path, uint64_t size,
                                                               const parquet::FileMetaData& footer,
                                                               const std::vector<std::vector<parquet::OffsetIndex>>& offset_indexes,
                                                               const std::vector<std::string>& tensor_columns) {
  FilePages out;
  out.size = size;
  out.num_rows = footer.num_rows >= 0 ? static_cast<uint64_t>(footer.num_rows) : 0;
  out.pages.resize(tensor_columns.size());
  auto unexpected = [&](std::string_view what) {
    return Status::InvalidArgument(fmt::format("{}: {} (not a file as stoke's writer writes it)", rel_path, what));
  };
  // The writer's files are flat: schema[0] is the root, schema[1 + k] the k-th column.
  if (footer.schema.empty() || offset_indexes.size() != footer.row_groups.size()) return unexpected("no page indexes");
  for (size_t c = 0; c < tensor_columns.size(); ++c) {
    size_t column = footer.schema.size();
    for (size_t k = 1; k < footer.schema.size(); ++k) {
      if (footer.schema[k].name == tensor_columns[c]) column = k - 1;
    }
    if (column == footer.schema.size()) return unexpected(fmt::format("no column '{}'", tensor_columns[c]));
    uint64_t rg_first = 0;
    for (size_t g = 0; g < footer.row_groups.size(); ++g) {
      const auto& rg = footer.row_groups[g];
      if (column >= rg.columns.size() || !rg.columns[column].meta_data || column >= offset_indexes[g].size() ||
          rg.num_rows < 0) {
        return unexpected(fmt::format("row group {} column '{}' has no metadata or OffsetIndex", g, tensor_columns[c]));
      }
      const uint32_t flags = static_cast<uint32_t>(rg.columns[column].meta_data->codec) << kCodecShift;
      if (rg.num_rows > 0) AppendOffsetIndexPages(offset_indexes[g][column].page_locations, rg_first, rg.num_rows, flags, out.pages[c]);
      rg_first += static_cast<uint64_t>(rg.num_rows);
    }
  }
  out.rel_path = std::move(rel_path);
  return out;
}

SampleIndex::Location SampleIndex::Find(int64_t row, size_t tensor_column) const {
  const uint64_t r = static_cast<uint64_t>(row);
  const uint32_t page = LoadLE<uint32_t>(rows_ + 4 * (tensor_column * num_rows_ + r));
  const uint8_t* p = pages_ + kPageRecordSize * page;
  Location loc;
  loc.offset = LoadLE<uint64_t>(p);
  const uint64_t first = LoadLE<uint64_t>(p + 8);
  loc.file = LoadLE<uint32_t>(p + 16);
  loc.length = LoadLE<uint32_t>(p + 20);
  loc.rows_in_page = LoadLE<uint32_t>(p + 24);
  const uint32_t flags = LoadLE<uint32_t>(p + 28);
  loc.needs_decode = (flags & kNeedsDecode) != 0;
  loc.definition_levels = (flags & kDefinitionLevels) != 0;
  loc.codec = static_cast<parquet::Codec>((flags >> kCodecShift) & 0xFF);
  loc.row_in_page = static_cast<uint32_t>(r - first);
  loc.row_in_file = static_cast<int64_t>(r - LoadLE<uint64_t>(files_ + kFileRecordSize * loc.file + 8));
  return loc;
}

void SampleIndex::FindMany(const int64_t* rows, size_t n, size_t tensor_column, Location* out) const {
  const uint8_t* row_pages = rows_ + 4 * tensor_column * num_rows_;
  // Three rounds of prefetches (row entries, then their page records, then the pages' file
  // records), each for the whole batch, so that the cache misses overlap.
  for (size_t i = 0; i < n; ++i) __builtin_prefetch(row_pages + 4 * static_cast<uint64_t>(rows[i]));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t page = LoadLE<uint32_t>(row_pages + 4 * static_cast<uint64_t>(rows[i]));
    out[i].file = page;  // the page number, until the last round
    __builtin_prefetch(pages_ + kPageRecordSize * page);
  }
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = pages_ + kPageRecordSize * out[i].file;
    __builtin_prefetch(files_ + kFileRecordSize * LoadLE<uint32_t>(p + 16) + 8);
  }
  for (size_t i = 0; i < n; ++i) out[i] = Find(rows[i], tensor_column);
}

uint64_t SampleIndex::file_size(uint32_t file) const { return LoadLE<uint64_t>(files_ + kFileRecordSize * file); }
int64_t SampleIndex::file_first_row(uint32_t file) const {
  return static_cast<int64_t>(LoadLE<uint64_t>(files_ + kFileRecordSize * file + 8));
}
int64_t SampleIndex::file_num_rows(uint32_t file) const {
  return static_cast<int64_t>(LoadLE<uint64_t>(files_ + kFileRecordSize * file + 16));
}

uint32_t SampleIndex::FileOfRow(int64_t row) const {
  uint32_t lo = 0, hi = static_cast<uint32_t>(num_files());
  while (hi - lo > 1) {  // the last file whose first row is at most `row`
    const uint32_t mid = lo + (hi - lo) / 2;
    if (file_first_row(mid) <= row) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace stoke
