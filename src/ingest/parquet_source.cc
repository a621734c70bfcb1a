// Parquet sources (parquet_source.h).
#include "ingest/parquet_source.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "core/buffer_pool.h"
#include "core/log.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "format/image.h"
#include "format/logical_value.h"
#include "format/npy.h"
#include "format/parquet_cells.h"
#include "io/uri.h"
#include "table/parquet_dataset.h"
#include "table/scan.h"

namespace stoke {
namespace {

// How a column of the dataset becomes a column of the table: kept as it is (scalars, and a stoke
// table's tensor and blob columns, whose cells are copied), or re-laid out.
enum class Role { kScalar, kCopy, kArray, kNpy, kImage };

struct ParquetColumn {
  ColumnSpec source;  // the dataset's column
  ColumnSpec out;     // the column written
  Role role = Role::kScalar;
};

// The row range [lo, hi) of row group g that a run [first, first + count) of a file covers.
struct GroupRows {
  int group = 0;
  int64_t lo = 0, hi = 0;
  int64_t first_in_file = 0;  // the row group's first row in the file
};

std::vector<GroupRows> GroupsOf(const ParquetReader& reader, int64_t first, int64_t count) {
  std::vector<GroupRows> out;
  const auto& starts = reader.row_group_starts();
  for (int g = 0; g < reader.num_row_groups(); ++g) {
    const int64_t begin = starts[static_cast<size_t>(g)], end = starts[static_cast<size_t>(g) + 1];
    const int64_t lo = std::max(first, begin), hi = std::min(first + count, end);
    if (lo < hi) out.push_back({g, lo - begin, hi - begin, begin});
  }
  return out;
}

// Reads the dataset's own columns of a run of items into a row group (SourceReader).
class ParquetSourceReader final : public SourceReader {
 public:
  ParquetSourceReader(TableView view, std::vector<ParquetColumn> columns, std::vector<size_t> add_of_file)
      : view_(std::move(view)), columns_(std::move(columns)), add_of_file_(std::move(add_of_file)) {}

  Result<uint64_t> ReadRows(const SourceSet& set, std::span<const SourceItem> items, RowGroupEncoder& enc) const override {
    std::vector<ColumnValues> scalars(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) scalars[c] = ColumnValues{EmptyValuesFor(columns_[c].out.type), {}};
    uint64_t bytes = 0;
    for (size_t begin = 0; begin < items.size();) {
      size_t end = begin + 1;  // a run: consecutive rows of one file
      while (end < items.size() && items[end].file == items[begin].file && items[end].index == items[end - 1].index + 1) ++end;
      STOKE_RETURN_IF_ERROR(ReadRun(set, items[begin].file, items[begin].index, static_cast<int64_t>(end - begin), enc,
                                    &scalars, &bytes));
      begin = end;
    }
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].role == Role::kScalar) {
        STOKE_RETURN_IF_ERROR(enc.SetScalars(set.first_source_column + c, std::move(scalars[c])));
      }
    }
    return bytes;
  }

 private:
  Status ReadRun(const SourceSet& set, uint32_t file, int64_t first, int64_t count, RowGroupEncoder& enc,
                 std::vector<ColumnValues>* scalars, uint64_t* bytes) const {
    const std::string path = set.FilePath(file);
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(*set.storage, path));
    const delta::AddFile& add = view_.snapshot.files[add_of_file_[file]];
    for (const GroupRows& g : GroupsOf(*reader, first, count)) {
      for (size_t c = 0; c < columns_.size(); ++c) {
        const size_t column = set.first_source_column + c;
        switch (columns_[c].role) {
          case Role::kScalar: STOKE_RETURN_IF_ERROR(ReadScalars(*reader, add, g, columns_[c], &(*scalars)[c])); break;
          case Role::kArray: STOKE_RETURN_IF_ERROR(ReadArrays(*reader, g, columns_[c], column, enc, bytes)); break;
          case Role::kCopy:
          case Role::kNpy:
          case Role::kImage: STOKE_RETURN_IF_ERROR(ReadCells(*reader, g, columns_[c], column, enc, bytes)); break;
        }
      }
    }
    return Status::OK();
  }

  Status ReadScalars(const ParquetReader& reader, const delta::AddFile& add, const GroupRows& g, const ParquetColumn& col,
                     ColumnValues* out) const {
    // A nullable column a file lacks (added after it was written) reads as nulls there.
    auto values = ReadRowGroupColumn(view_, add, reader, g.group, col.source);
    if (!values.ok()) return values.status().WithContext(fmt::format("{}: column '{}'", reader.path(), col.source.name));
    std::vector<size_t> rows(static_cast<size_t>(g.hi - g.lo));
    std::iota(rows.begin(), rows.end(), static_cast<size_t>(g.lo));
    AppendColumnValues(out, TakeRows(*values, rows));
    return Status::OK();
  }

  // ReadArrays' fast path: a flat list of plain values whose pages (found through the OffsetIndex)
  // are all dense (ParquetReader::ReadDenseListPage), each row of the right length, copied from each
  // page as it is. False, having appended nothing, where any page is not such a page.
  Result<bool> ReadDenseArrays(const ParquetReader& reader, const GroupRows& g, const ParquetColumn& col,
                               const ArrayLeaf& leaf, size_t column, RowGroupEncoder& enc, uint64_t* bytes) const {
    const std::vector<int64_t>& want = col.out.tensor->shape;
    if (leaf.depth != 1 || want.size() != 1 || !ArrayValuesAreStoredBytes(reader, leaf)) return false;
    const size_t value_size = DTypeSize(leaf.dtype);
    // Every page is checked before any row is appended, so that a page the general path must read
    // leaves nothing half done; the pages' bodies are kept meanwhile.
    struct Page {
      AlignedBuffer body;
      ArrayRows rows;
      int64_t first = 0;  // its first row in the row group
    };
    std::vector<Page> pages;
    // The bodies go back to the pool, for the next group's pages: fresh megabytes cost page faults.
    struct GiveBack {
      BufferPool& pool;
      std::vector<Page>& pages;
      ~GiveBack() {
        for (Page& p : pages) pool.Give(std::move(p.body));
      }
    } give_back{bodies_, pages};
    for (int64_t row = g.lo; row < g.hi;) {
      Page p;
      p.body = bodies_.Take();
      DenseListPage dense;
      // Anything unexpected (no OffsetIndex, one that disagrees with the pages, a row of another
      // shape) is left to the general path, which reads the chunk without the index and names it.
      auto read = reader.ReadDenseListPage(g.group, leaf.leaf, row, value_size, &p.first, &p.body, &dense);
      const int64_t end = p.first + static_cast<int64_t>(dense.row_lengths.size());
      if (!read.ok() || !*read || end <= row || p.first > row || (!pages.empty() && p.first != row)) return false;
      std::vector<int64_t> shape = want;
      FlattenDenseListRows(dense, value_size, &shape, &p.rows);
      if (std::count(p.rows.offsets.begin(), p.rows.offsets.end(), ArrayRows::kNull) > 0) return false;
      row = end;
      pages.push_back(std::move(p));
    }
    for (const Page& p : pages) {
      const int64_t lo = std::max(p.first, g.lo), hi = std::min(p.first + static_cast<int64_t>(p.rows.offsets.size()), g.hi);
      for (int64_t r = lo; r < hi; ++r) {
        const ByteView values(p.body.data() + p.rows.offsets[static_cast<size_t>(r - p.first)], p.rows.value_size);
        STOKE_RETURN_IF_ERROR(enc.AppendTensor(column, values));
        *bytes += p.rows.value_size;
      }
    }
    return true;
  }

  Status ReadArrays(const ParquetReader& reader, const GroupRows& g, const ParquetColumn& col, size_t column,
                    RowGroupEncoder& enc, uint64_t* bytes) const {
    STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(reader, col.source.file_name()));
    const TensorSpec& want = *col.out.tensor;
    if (leaf.dtype != want.dtype) {
      return Status::InvalidArgument(fmt::format("{}: column '{}' holds {} values where the first file holds {}", reader.path(),
                                                 col.source.name, DTypeName(leaf.dtype), DTypeName(want.dtype)));
    }
    STOKE_ASSIGN_OR_RETURN(const bool dense, ReadDenseArrays(reader, g, col, leaf, column, enc, bytes));
    if (dense) return Status::OK();
    STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, reader.ReadColumnChunkLevels(g.group, leaf.leaf));
    AlignedBuffer body;
    STOKE_RETURN_IF_ERROR(AppendArrayValues(reader, leaf, std::move(levels.values), &body));
    std::vector<int64_t> shape = want.shape;
    ArrayRows rows;
    STOKE_RETURN_IF_ERROR(FlattenArrayRows(levels, leaf, &shape, &rows));
    for (int64_t r = g.lo; r < g.hi; ++r) {
      const uint32_t at = static_cast<size_t>(r) < rows.offsets.size() ? rows.offsets[static_cast<size_t>(r)] : ArrayRows::kNull;
      if (at == ArrayRows::kNull) {
        return Status::InvalidArgument(fmt::format(
            "{}: row {} of column '{}' is not an array of shape [{}] (a null, an empty or ragged list, a null element, or "
            "another shape)", reader.path(), g.first_in_file + r, col.source.name, fmt::join(want.shape, ", ")));
      }
      STOKE_RETURN_IF_ERROR(enc.AppendTensor(column, ByteView(body.data() + at, rows.value_size)));
      *bytes += rows.value_size;
    }
    return Status::OK();
  }

  Status ReadCells(const ParquetReader& reader, const GroupRows& g, const ParquetColumn& col, size_t column,
                   RowGroupEncoder& enc, uint64_t* bytes) const {
    STOKE_ASSIGN_OR_RETURN(size_t leaf, FindBinaryLeaf(reader, col.source.file_name()));
    STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, reader.ReadColumnChunkLevels(g.group, leaf));
    const auto* values = std::get_if<std::vector<std::string>>(&levels.values);
    if (values == nullptr) return Status::Internal("binary values that are not bytes");
    const auto index = ValueIndexOfRows(levels, static_cast<uint32_t>(reader.columns()[leaf].max_definition_level), g.hi);
    AlignedBuffer scratch;
    for (int64_t r = g.lo; r < g.hi; ++r) {
      const auto where = [&] { return fmt::format("{}: row {} of column '{}'", reader.path(), g.first_in_file + r, col.source.name); };
      const int64_t v = static_cast<size_t>(r) < index.size() ? index[static_cast<size_t>(r)] : -1;
      if (v < 0 || static_cast<size_t>(v) >= values->size()) return Status::InvalidArgument(fmt::format("{} is null", where()));
      const ByteView cell = AsBytes((*values)[static_cast<size_t>(v)]);
      ByteView data = cell;
      if (col.role == Role::kNpy) {
        auto array = NpyCellData(cell, col.out.tensor->dtype, col.out.tensor->shape, &scratch);
        if (!array.ok()) return array.status().WithContext(where());
        data = *array;
      } else if (col.role == Role::kImage && BinaryCellKindOf(cell) != BinaryCellKind::kImage) {
        return Status::InvalidArgument(fmt::format("{} is not a JPEG or PNG image, as the first row's is", where()));
      }
      STOKE_RETURN_IF_ERROR(enc.AppendTensor(column, data));
      *bytes += data.size();
    }
    return Status::OK();
  }

  const TableView view_;
  const std::vector<ParquetColumn> columns_;
  mutable BufferPool bodies_{64};  // ReadDenseArrays' page bodies
  const std::vector<size_t> add_of_file_;  // SourceSet file -> index in view_.snapshot.files
};

// The first row group (of `reader`) that holds rows, or -1.
int FirstFilledGroup(const ParquetReader& reader) {
  for (int g = 0; g < reader.num_row_groups(); ++g) {
    if (reader.metadata().row_groups[g].num_rows > 0) return g;
  }
  return -1;
}

// The first cell of binary leaf `leaf` in row group `g`, read from the chunk's first data page alone
// when that page is PLAIN (a row group of images is hundreds of megabytes); nullopt where it is not,
// or its first row is null (the caller reads the chunk and says so).
std::optional<std::string> FirstCellOfFirstPage(const ParquetReader& reader, int g, size_t leaf) {
  auto pages = reader.ListDataPages(g, leaf);
  if (!pages.ok() || pages->empty() || pages->front().encoding != parquet::Encoding::kPlain) return std::nullopt;
  ByteArrayChunk page;
  const DataPageSpan& first = pages->front();
  if (!reader.ReadByteArrayPage(g, leaf, static_cast<uint64_t>(first.offset), static_cast<uint64_t>(first.length), &page).ok() ||
      page.offsets.empty() || page.offsets[0] == ByteArrayChunk::kNull) {
    return std::nullopt;
  }
  const ByteView cell = PlainByteArrayAt(page.body, page.offsets[0]);
  return std::string(reinterpret_cast<const char*>(cell.data()), cell.size());
}

// The first cell of a binary column (or of a struct's `bytes`) in `reader`'s first filled row group.
Result<std::string> FirstCell(const ParquetReader& reader, const ColumnSpec& c) {
  STOKE_ASSIGN_OR_RETURN(size_t leaf, FindBinaryLeaf(reader, c.file_name()));
  if (auto cell = FirstCellOfFirstPage(reader, FirstFilledGroup(reader), leaf)) return std::move(*cell);
  STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, reader.ReadColumnChunkLevels(FirstFilledGroup(reader), leaf));
  const auto* values = std::get_if<std::vector<std::string>>(&levels.values);
  const auto index = ValueIndexOfRows(levels, static_cast<uint32_t>(reader.columns()[leaf].max_definition_level), 1);
  if (values == nullptr || index.empty() || index[0] < 0 || values->empty()) {
    return Status::InvalidArgument(fmt::format("{}: the first row of column '{}' is null, and its cell would tell what the "
                                               "column holds", reader.path(), c.name));
  }
  return (*values)[0];
}

Status Refuse(const ColumnSpec& c, std::string_view why) {
  return Status::Unsupported(fmt::format(
      "column '{}' {}: ingest re-lays out scalars, arrays of numbers (as tensors), .npy cells (as tensors) and JPEG/PNG "
      "cells or {{bytes, path}} image structs (as images)", c.name, why));
}

// How column `c` is kept, told from `probe` (a data file with rows) where it holds tensors or images.
Result<ParquetColumn> PlanColumn(const TableView& view, const ColumnSpec& c, const ParquetReader* probe,
                                 std::map<std::string, std::string>* images) {
  ParquetColumn col{c, c, Role::kScalar};
  col.out.physical_name.clear();  // the new table maps no names
  col.out.field_id.reset();
  const bool array = c.nested() && nlohmann::json::parse(c.nested_type, nullptr, false).value("type", "") == "array";
  const bool cells = !view.IsPartitionColumn(c.name) &&
                     ((c.type == parquet::Type::kByteArray && !c.is_string && !c.nested() && !c.paged()) ||
                      (c.nested() && !array && probe != nullptr && FindBinaryLeaf(*probe, c.file_name()).ok()));
  if (c.paged()) {  // a stoke table's tensor or blob column: its cells are copied
    col.role = Role::kCopy;
    return col;
  }
  if (c.logical == LogicalType::kDecimal && c.precision > kMaxInt64DecimalPrecision) {
    return Refuse(c, fmt::format("is a decimal of {} digits (stoke writes at most {})", c.precision, kMaxInt64DecimalPrecision));
  }
  if (probe == nullptr && (array || cells)) {
    return Refuse(c, "has no row to tell its shape or kind from");
  }
  if (array) {
    STOKE_ASSIGN_OR_RETURN(ArrayLeaf leaf, FindArrayLeaf(*probe, c.file_name()));
    int64_t first = 0;  // the first page's first row: 0
    STOKE_ASSIGN_OR_RETURN(ColumnLevels levels, probe->ReadRowLevels(FirstFilledGroup(*probe), leaf.leaf, 0, &first));
    auto shape = ArrayRowShape(levels, leaf, -first);
    if (!shape) return Refuse(c, fmt::format("has no array in the first row of {} to take its shape from", probe->path()));
    col.role = Role::kArray;
    col.out = ColumnSpec{.name = c.name, .type = parquet::Type::kByteArray, .tensor = TensorSpec{leaf.dtype, *shape}};
    return col;
  }
  if (c.nested() && !cells) return Refuse(c, fmt::format("is a {}", SparkTypeName(c)));
  if (!cells) return col;
  STOKE_ASSIGN_OR_RETURN(std::string first, FirstCell(*probe, c));
  const ByteView cell = AsBytes(first);
  switch (BinaryCellKindOf(cell)) {
    case BinaryCellKind::kNpy: {
      STOKE_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(cell, probe->path()));
      col.role = Role::kNpy;
      col.out = ColumnSpec{.name = c.name, .type = parquet::Type::kByteArray, .tensor = TensorSpec{h.dtype, h.shape}};
      return col;
    }
    case BinaryCellKind::kImage: {
      STOKE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(cell, probe->path()));
      col.role = Role::kImage;
      col.out = ColumnSpec{.name = c.name, .type = parquet::Type::kByteArray, .blob = true};
      (*images)[c.name] = std::string(ImageFormatName(info.format));
      return col;
    }
    case BinaryCellKind::kOther: break;
  }
  if (c.nested()) return Refuse(c, "is a struct whose `bytes` hold neither .npy arrays nor images");
  return col;  // other binary values: a binary column
}

}  // namespace

namespace {

// The data files of `view` in path order (the items' order), as a source's listing, with the index
// of each one's add.
Status ListDataFiles(const TableView& view, SourceSet* set, std::vector<size_t>* add_of_file) {
  std::vector<std::pair<std::string, size_t>> paths;
  for (size_t i = 0; i < view.snapshot.files.size(); ++i) {
    const delta::AddFile& add = view.snapshot.files[i];
    auto rel = delta::DecodePath(add.path);
    paths.emplace_back(rel.ok() ? *rel : add.path, i);
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& [rel, i] : paths) {
    const delta::AddFile& add = view.snapshot.files[i];
    set->files.push_back(DirEntry{.name = rel, .size = static_cast<uint64_t>(add.size),
                                  .modification_time_ms = add.modification_time});
    add_of_file->push_back(i);
  }
  return Status::OK();
}

// Every file's row count from its footer (in parallel: small, latency-bound reads) as the items;
// the reader of the first file with rows, for planning the columns.
Result<std::unique_ptr<ParquetReader>> CountRows(const SourceOptions& o, SourceSet* set) {
  const size_t n = set->files.size();
  std::vector<int64_t> rows(n);
  std::vector<std::unique_ptr<ParquetReader>> first(1);
  ThreadPool pool(std::clamp<size_t>(o.threads > 0 ? o.threads : 8, 1, std::max<size_t>(n, 1)));
  STOKE_RETURN_IF_ERROR(ParallelFor(pool, n, [&](size_t i) -> Status {
    STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader,
                           ParquetReader::Open(*set->storage, set->FilePath(static_cast<uint32_t>(i))));
    rows[i] = reader->num_rows();
    return Status::OK();
  }));
  set->item_starts.assign(1, 0);
  for (int64_t r : rows) set->item_starts.push_back(set->item_starts.back() + r);
  for (size_t i = 0; i < n; ++i) {
    if (rows[i] > 0) return ParquetReader::Open(*set->storage, set->FilePath(static_cast<uint32_t>(i)));
  }
  return std::unique_ptr<ParquetReader>();
}

// The options that do not apply to a Parquet source; InvalidArgument naming the first one set.
Status CheckOptions(const SourceOptions& o, std::string_view what) {
  if (!o.labels_csv.empty()) {
    return Status::InvalidArgument(fmt::format("{}: a labels CSV does not apply to the Parquet source '{}': its columns "
                                               "are the labels", what, o.source));
  }
  if (!o.decode_images.empty() || !o.datasets.empty() || o.hdf5_samples != Hdf5Samples::kAuto) {
    return Status::InvalidArgument(fmt::format("{}: `{}` does not apply to the Parquet source '{}'", what,
                                               !o.decode_images.empty() ? "decode" : !o.datasets.empty() ? "datasets" : "hdf5_samples",
                                               o.source));
  }
  return Status::OK();
}

// The table's key-value metadata from the dataset's: class names, Hugging Face features, image
// formats (those of the source table's image columns, and of the columns that became images here).
void CarryMetadata(const TableView& view, const std::map<std::string, std::string>& new_images, SourceSet* set) {
  const auto& config = view.snapshot.metadata.configuration;
  for (const char* key : {kClassesMetadataKey, kHuggingFaceMetadataKey}) {
    if (auto it = config.find(key); it != config.end()) set->metadata[key] = it->second;
  }
  nlohmann::json images = nlohmann::json::object();
  if (auto it = config.find(kImagesMetadataKey); it != config.end()) {
    images = nlohmann::json::parse(it->second, nullptr, false);
    if (!images.is_object()) images = nlohmann::json::object();
  }
  for (const auto& [name, format] : new_images) images[name] = {{"formats", {format}}};
  if (!images.empty()) set->metadata[kImagesMetadataKey] = images.dump();
}

// A column named as one stoke writes (a dataset's own `id`, or a stoke table's `file`) is kept as
// source_<name> (source_source_<name> when that is taken too, and so on).
void RenameClashingColumns(const std::string& source, std::vector<ParquetColumn>* columns) {
  std::vector<std::string> used = {"id", "file", "index", kSourceLocationColumn, kSourceVersionColumn};
  auto is_used = [&](const std::string& name) {
    return std::any_of(used.begin(), used.end(), [&](const std::string& u) { return EqualsIgnoringAsciiCase(u, name); });
  };
  std::vector<ParquetColumn*> clashing;
  for (ParquetColumn& c : *columns) {
    if (is_used(c.out.name)) clashing.push_back(&c);
  }
  for (const ParquetColumn& c : *columns) used.push_back(c.out.name);
  for (ParquetColumn* c : clashing) {
    std::string name = "source_" + c->out.name;
    while (is_used(name)) name = "source_" + name;
    STOKE_LOG(kWarn, "ingest.column_renamed", "source={} column={} as={} note=\"stoke writes a column of that name\"",
              source, c->out.name, name);
    c->out.name = name;
    used.push_back(std::move(name));
  }
}

}  // namespace

Result<SourceSet> PlanParquetSource(const SourceOptions& o, std::string_view what) {
  STOKE_RETURN_IF_ERROR(CheckOptions(o, what));
  auto opened = OpenDatasetView(o.source);
  if (!opened.ok()) return opened.status().WithContext(fmt::format("{}: the Parquet source", what));
  TableView view = std::move(*opened);
  if (HasDeletionVectors(view.snapshot)) {
    return Status::Unsupported(fmt::format("{}: the source table '{}' has deletion vectors; ingest reads tables without "
                                           "them (purge them first, e.g. Delta's REORG TABLE ... APPLY (PURGE))",
                                           what, o.source));
  }
  SourceSet set;
  set.kind = SourceFormat::kParquet;
  set.storage = view.storage;
  set.root = view.dir;
  std::vector<size_t> add_of_file;
  STOKE_RETURN_IF_ERROR(ListDataFiles(view, &set, &add_of_file));
  if (set.files.empty()) return Status::InvalidArgument(fmt::format("{}: the Parquet source '{}' has no data files", what, o.source));
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> probe, CountRows(o, &set));
  std::vector<ParquetColumn> columns;
  std::vector<ColumnSpec> own;
  std::map<std::string, std::string> new_images;
  for (const ColumnSpec& c : view.columns) {
    auto planned = PlanColumn(view, c, probe.get(), &new_images);
    if (!planned.ok()) return planned.status().WithContext(fmt::format("{}: the Parquet source '{}'", what, o.source));
    columns.push_back(std::move(*planned));
  }
  RenameClashingColumns(o.source, &columns);
  // Scalars first, then tensors and blobs, as every source orders its columns.
  std::stable_partition(columns.begin(), columns.end(), [](const ParquetColumn& c) { return c.role == Role::kScalar; });
  int64_t row_bytes = 0;
  for (const ParquetColumn& c : columns) {
    own.push_back(c.out);
    row_bytes += c.out.tensor ? c.out.tensor->num_bytes() : 8;
  }
  uint64_t file_bytes = 0;
  for (const DirEntry& f : set.files) file_bytes += f.size;
  set.sample_bytes = std::max<int64_t>(row_bytes, static_cast<int64_t>(file_bytes / std::max<int64_t>(set.num_items(), 1)));
  if (o.record_locations) {
    set.has_locations = true;
    STOKE_ASSIGN_OR_RETURN(set.location_root, CanonicalLocation(view.location));
  }
  STOKE_RETURN_IF_ERROR(SetColumns(&set, /*has_index=*/true, std::move(own)));
  CarryMetadata(view, new_images, &set);
  set.reader = std::make_shared<ParquetSourceReader>(std::move(view), std::move(columns), std::move(add_of_file));
  return set;
}

}  // namespace stoke
