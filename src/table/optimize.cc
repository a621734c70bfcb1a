// `stoke optimize`: bin-packing compaction of a table's small files (and of files not in stoke's
// one-sample-per-page layout) into files of about the target size, committed as one OPTIMIZE
// (removes and adds with dataChange=false). Bins are rewritten in parallel, one output file each;
// rows keep their order within a bin.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "core/clock.h"
#include "core/fd_limit.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/progress.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "format/codec.h"
#include "format/logical_value.h"
#include "format/parquet_writer.h"
#include "stoke/maintenance.h"
#include "table/input_readers.h"
#include "table/row_tracking.h"
#include "table/scan.h"
#include "table/table_features.h"

namespace stoke {
namespace {

// True when every tensor and blob column of the file holds one row per page (or is packed, for small
// rows) as stoke writes it: pages listed in an OffsetIndex, PLAIN, no dictionary.
Result<bool> InStokeLayout(const ParquetReader& reader) {
  const auto& created = reader.metadata().created_by;
  if (!created || created->rfind("stoke", 0) != 0) return false;
  for (int g = 0; g < reader.num_row_groups(); ++g) {
    for (size_t c = 0; c < reader.columns().size(); ++c) {
      if (!reader.columns()[c].tensor && !reader.columns()[c].blob) continue;
      STOKE_ASSIGN_OR_RETURN(auto oi, reader.ReadOffsetIndex(g, c));
      if (!oi) return false;
    }
  }
  return true;
}

struct WrittenBin {
  std::string path;
  int64_t rows = 0;
  uint64_t bytes = 0;
  parquet::FileMetaData footer;
};

// A fresh data file name where `input` lies: the table root or its partition directory. A bin
// merges the files of several shards, so a shard's directory (sharded ingest) is left out.
std::string NewDataFilePath(const TableView& t, const delta::AddFile& input) {
  auto rel = delta::DecodePath(input.path);
  std::string dir = rel.ok() ? ParentPath(*rel) : std::string();
  if (IsShardDirectoryName(BaseName(dir))) dir = ParentPath(dir);
  return JoinPath(dir.empty() ? t.dir : JoinPath(t.dir, dir), fmt::format("part-00000-{}.parquet", RandomUuid()));
}

// Ends a rewritten file: closes it and renames `tmp` to out->path (unless they are the same: see
// InProgressPath) when `status` is OK, else deletes it; fills out->bytes and out->footer.
Status FinishBinFile(Storage& fs, Status status, std::unique_ptr<ParquetFileWriter> writer, const std::string& tmp,
                     WrittenBin* out) {
  if (status.ok()) status = writer->Close();
  if (status.ok() && tmp != out->path) status = fs.Rename(tmp, out->path);
  if (!status.ok()) {
    writer.reset();
    (void)fs.Delete(tmp);
    return status;
  }
  out->bytes = writer->bytes_written();
  out->footer = writer->metadata();
  return Status::OK();
}

// The hidden columns of materialized row ids and commit versions where the table enables row
// tracking (OptimizeTable checked that their names are there).
std::optional<delta::MaterializedRowTracking> HiddenColumns(const TableView& t) {
  auto hidden = delta::MaterializedColumns(t.snapshot, "");
  return hidden.ok() ? *hidden : std::nullopt;
}

// The columns of the files optimize writes: the table's file columns (partition columns live in
// the log), with tensor and blob columns REQUIRED (docs/format.md) also when another writer's files
// declare them OPTIONAL (a null tensor is then an error naming the file); and where the table
// enables row tracking, the hidden columns that preserve each row's stable row id and commit version.
std::vector<ColumnSpec> ColumnsToWrite(const TableView& t) {
  std::vector<ColumnSpec> cols = t.FileColumns();
  for (ColumnSpec& c : cols) {
    if (c.paged()) c.optional = false;
  }
  if (auto hidden = HiddenColumns(t)) {
    for (const std::string& name : {hidden->row_id, hidden->row_commit_version}) {
      cols.push_back(ColumnSpec{.name = name, .type = parquet::Type::kInt64, .optional = true});
    }
  }
  return cols;
}

// Column `c` of rows [first, ...) of the file of `add` as ReadInputChunk gave it (`v`), with a hidden
// row tracking column's nulls given the rows' default generated values (FillStableRowTracking);
// `hidden`: HiddenColumns of the table.
Status FillRowTracking(const std::optional<delta::MaterializedRowTracking>& hidden, const delta::AddFile& add,
                       const ColumnSpec& c, int64_t first, const std::string& file, ColumnValues* v) {
  return hidden ? delta::FillStableRowTracking(*hidden, c.name, add, first, file, v) : Status::OK();
}

// Inputs of up to this size are read whole in one request, and ParquetReader serves their column
// chunks from memory: on an object store, reading a one-row file piece by piece took about 9
// requests (size, magic, tail, each column chunk) one after another, 20 ms each behind the test proxy.
constexpr uint64_t kWholeFileBytes = uint64_t{16} << 20;
// Whole-file reads held at once by ForEachInputInOrder, at most.
constexpr uint64_t kWindowBytes = uint64_t{64} << 20;
// Requests in flight at once on an object store (opening inputs, reading cells, checking footers).
// Local files are read one at a time: in parallel, 100,000 one-row files from the page cache took
// 3.9-4.5 s against 3.4 s (docs/benchmarks.md).
constexpr size_t kRemoteParallelReads = 16;
// Open readers a sorted rewrite keeps for its second pass (InputReaders), in all and per bin at least.
// A reader holds its footer's tail (the whole of a file read whole) and decoded footer.
constexpr uint64_t kSortedReaderBytes = uint64_t{256} << 20;
constexpr uint64_t kMinSortedReaderBytes = uint64_t{16} << 20;
// On local storage, where a reader holds a descriptor: readers per bin at most. Opening a small local
// file again costs less than holding thousands of readers: a sort of 20,000 one-row files (8 KB) took
// 2.8-3.7 s holding up to 5,000 against 2.7-2.8 s holding 64 (2.5-3.2 s before readers were kept
// between the passes), with 60 MB more peak RSS.
constexpr uint64_t kMaxSortedReaders = 64;

// The threads that read a table's data files in parallel for one task of `n` reads: none (read on the
// calling thread) on local storage or for a single read.
std::unique_ptr<ThreadPool> ReadersFor(const TableView& t, size_t n) {
  if (!t.storage->remote() || n <= 1) return nullptr;
  return std::make_unique<ThreadPool>(std::min(n, kRemoteParallelReads));
}

// fn(0..n), on `pool` when there is one, else in order on this thread.
Status ForEachIndex(ThreadPool* pool, size_t n, const std::function<Status(size_t)>& fn) {
  if (pool && n > 1) return ParallelFor(*pool, n, fn);
  for (size_t i = 0; i < n; ++i) STOKE_RETURN_IF_ERROR(fn(i));
  return Status::OK();
}

// visit(k, reader of inputs[k]) for every input in order, each opened with OpenInput (whole when no
// larger than `whole_file_bytes`, at most kWholeFileBytes) and then handed to `prepare` (when given),
// which may read more of it. On an object store a window of up to kRemoteParallelReads inputs
// (kWindowBytes of whole-file reads at most) is opened and prepared in parallel before it is visited.
Status ForEachInputInOrder(const TableView& t, const std::vector<const delta::AddFile*>& inputs,
                           uint64_t whole_file_bytes,
                           const std::function<Status(size_t, std::unique_ptr<ParquetReader>)>& visit,
                           const std::function<Status(size_t, const ParquetReader&)>& prepare = {}) {
  whole_file_bytes = std::min(whole_file_bytes, kWholeFileBytes);
  std::unique_ptr<ThreadPool> openers = ReadersFor(t, inputs.size());
  const size_t window_files = openers ? kRemoteParallelReads : 1;
  std::vector<std::unique_ptr<ParquetReader>> window;
  for (size_t begin = 0, end = 0; begin < inputs.size(); begin = end) {
    uint64_t window_bytes = 0;
    for (end = begin; end < inputs.size() && end - begin < window_files; ++end) {
      const uint64_t size = static_cast<uint64_t>(inputs[end]->size);
      const uint64_t whole = size <= whole_file_bytes ? size : 0;
      if (end > begin && window_bytes + whole > kWindowBytes) break;
      window_bytes += whole;
    }
    window.clear();
    window.resize(end - begin);
    STOKE_RETURN_IF_ERROR(ForEachIndex(openers.get(), window.size(), [&](size_t k) -> Status {
      STOKE_ASSIGN_OR_RETURN(window[k], OpenInput(t, *inputs[begin + k], whole_file_bytes));
      return prepare ? prepare(begin + k, *window[k]) : Status::OK();
    }));
    for (size_t k = 0; k < window.size(); ++k) {
      STOKE_RETURN_IF_ERROR(visit(begin + k, std::move(window[k])));  // each reader freed after its rows
    }
  }
  return Status::OK();
}

// MapFileColumns' mark for a column the file does not have.
constexpr size_t kAbsentColumn = SIZE_MAX;

// The file's column for each of `cols`, by name (files written by other tools may order them
// differently). An OPTIONAL scalar column the file lacks was added to the schema after the file was
// written: kAbsentColumn, null in every row. NotFound naming the file for any other missing column.
Result<std::vector<size_t>> MapFileColumns(const ParquetReader& reader, const std::vector<ColumnSpec>& cols) {
  std::vector<size_t> map(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) {
    auto idx = FindFileColumn(reader, cols[c]);  // by physical name or field id under column mapping
    if (!idx.ok() && idx.status().code() == StatusCode::kNotFound && cols[c].optional && !cols[c].paged()) {
      map[c] = kAbsentColumn;
      continue;
    }
    STOKE_RETURN_IF_ERROR(idx.status());
    map[c] = *idx;
  }
  return map;
}

// Column `c` of one row group (`rows` rows; all null where the file lacks it; the whole file for
// group -1) in the table's type: another writer's form (an INT96 timestamp, a narrower type before a
// widening) is converted (ConvertToColumnType), one that cannot hold the table's values is Corruption.
Result<ColumnValues> ReadInputChunk(const ParquetReader& reader, int group, size_t file_column, const ColumnSpec& column,
                                    size_t rows) {
  if (file_column == kAbsentColumn) return ColumnValues{EmptyValuesFor(column.type), std::vector<uint8_t>(rows, 0)};
  STOKE_ASSIGN_OR_RETURN(ColumnValues v, group < 0 ? reader.ReadColumn(file_column) : reader.ReadColumnChunk(group, file_column));
  const parquet::SchemaElement& stored = reader.metadata().schema[reader.columns()[file_column].schema_index];
  STOKE_RETURN_IF_ERROR(ConvertToColumnType(stored, column, &v, reader.path()));
  return v;
}

// The rows [first, first + count) of a file less those in `deleted` (ascending), as indexes from
// `first`; nullopt when none of them is deleted.
std::optional<std::vector<size_t>> RowsKept(const std::vector<uint64_t>& deleted, int64_t first, int64_t count) {
  if (CountDeletedRows(deleted, first, count) == 0) return std::nullopt;
  std::vector<size_t> kept;
  auto next = std::lower_bound(deleted.begin(), deleted.end(), static_cast<uint64_t>(first));
  for (int64_t r = 0; r < count; ++r) {
    if (next != deleted.end() && *next == static_cast<uint64_t>(first + r)) {
      ++next;
    } else {
      kept.push_back(static_cast<size_t>(r));
    }
  }
  return kept;
}

// Appends the rows of one input file (open in `reader`) to the bin's output, less those its
// deletion vector deletes: scalars gathered in `scalars`, tensors appended to `enc`, a row group
// flushed whenever rows_per_group are pending.
template <typename Flush>
Status RewriteInput(const TableView& t, const delta::AddFile& add, const ParquetReader& reader,
                    const std::vector<ColumnSpec>& cols, int64_t rows_per_group, RowGroupEncoder& enc,
                    std::vector<ColumnValues>& scalars, int64_t& pending_rows, WrittenBin& out, Flush& flush) {
  auto mapped = MapFileColumns(reader, cols);
  if (!mapped.ok()) return mapped.status();
  const std::vector<size_t>& map = *mapped;
  STOKE_ASSIGN_OR_RETURN(const std::vector<uint64_t> deleted, DeletedRows(t, add));
  const auto hidden = HiddenColumns(t);
  Status status;
  int64_t group_first = 0;  // the file's row that begins row group g
  for (int g = 0; g < reader.num_row_groups() && status.ok(); ++g) {
    int64_t rows = reader.metadata().row_groups[g].num_rows;
    std::vector<ColumnValues> values(cols.size());
    for (size_t c = 0; c < cols.size() && status.ok(); ++c) {
      auto v = ReadInputChunk(reader, g, map[c], cols[c], static_cast<size_t>(rows));
      if (!v.ok()) {
        status = v.status();
        break;
      }
      values[c] = std::move(*v);
    }
    for (size_t c = 0; c < cols.size() && status.ok(); ++c) {
      status = FillRowTracking(hidden, add, cols[c], group_first, reader.path(), &values[c]);
    }
    if (!status.ok()) break;
    if (auto kept = RowsKept(deleted, std::exchange(group_first, group_first + rows), rows)) {
      for (auto& v : values) v = TakeRows(v, *kept);
      rows = static_cast<int64_t>(kept->size());
    }
    // Feed the rows in slices that end exactly at row-group boundaries of the output.
    for (int64_t r = 0; r < rows && status.ok();) {
      int64_t take = std::min(rows - r, rows_per_group - pending_rows);
      for (size_t c = 0; c < cols.size() && status.ok(); ++c) {
        if (cols[c].paged()) {
          const auto& def = values[c].defined;
          if (std::find(def.begin(), def.end(), 0) != def.end()) {
            status = Status::Corruption(fmt::format("{}: {} column '{}' has null rows (row {} of row group {})",
                                                    t.FilePath(add), cols[c].tensor ? "tensor" : "blob", cols[c].name,
                                                    std::find(def.begin(), def.end(), 0) - def.begin(), g));
            break;
          }
          const auto& blobs = std::get<std::vector<std::string>>(values[c].values);
          for (int64_t k = r; k < r + take && status.ok(); ++k) status = enc.AppendTensor(c, AsBytes(blobs[k]));
        } else {
          // The slice [r, r + take) of this column: present values before r are skipped.
          ColumnValues part{EmptyValuesFor(cols[c].type), {}};
          const auto& def = values[c].defined;
          size_t first = def.empty() ? static_cast<size_t>(r) : static_cast<size_t>(std::count(def.begin(), def.begin() + r, 1));
          size_t count = def.empty() ? static_cast<size_t>(take)
                                     : static_cast<size_t>(std::count(def.begin() + r, def.begin() + r + take, 1));
          if (!def.empty()) part.defined.assign(def.begin() + r, def.begin() + r + take);
          std::visit([&](auto& dst) {
            const auto& src = std::get<std::decay_t<decltype(dst)>>(values[c].values);
            dst.assign(src.begin() + first, src.begin() + first + count);
          }, part.values);
          if (!cols[c].optional && !part.defined.empty()) {
            if (std::count(part.defined.begin(), part.defined.end(), 0) > 0) {
              status = Status::Corruption(fmt::format("{}: column '{}' has nulls but the table declares it non-nullable",
                                                      t.FilePath(add), cols[c].name));
              break;
            }
            part.defined.clear();
          }
          AppendColumnValues(&scalars[c], std::move(part));
        }
      }
      pending_rows += take;
      r += take;
      out.rows += take;
      if (pending_rows == rows_per_group && status.ok()) status = flush();
    }
  }
  return status;
}

// Rewrites the rows of `inputs` (in order) into one new data file under the table.
Result<WrittenBin> RewriteBin(const TableView& t, const std::vector<const delta::AddFile*>& inputs,
                              const WriterOptions& wopts, int64_t rows_per_group, ProgressBar* bar) {
  Storage& fs = *t.storage;
  const std::vector<ColumnSpec> cols = ColumnsToWrite(t);
  WrittenBin out;
  out.path = NewDataFilePath(t, *inputs[0]);
  const std::string tmp = InProgressPath(fs, out.path);
  STOKE_ASSIGN_OR_RETURN(auto writer, ParquetFileWriter::Create(fs, tmp, cols, wopts));
  RowGroupEncoder enc(writer->columns(), writer->options());
  std::vector<ColumnValues> scalars(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) scalars[c] = ColumnValues{EmptyValuesFor(cols[c].type), {}};
  int64_t pending_rows = 0;

  auto flush = [&]() -> Status {
    if (pending_rows == 0) return Status::OK();
    for (size_t c = 0; c < cols.size(); ++c) {
      if (cols[c].paged()) continue;
      STOKE_RETURN_IF_ERROR(enc.SetScalars(c, std::move(scalars[c])));
      scalars[c] = ColumnValues{EmptyValuesFor(cols[c].type), {}};
    }
    STOKE_ASSIGN_OR_RETURN(auto rg, enc.Finish());
    pending_rows = 0;
    return writer->WriteRowGroup(std::move(rg));
  };

  Status status = ForEachInputInOrder(t, inputs, kWholeFileBytes, [&](size_t k, std::unique_ptr<ParquetReader> reader) -> Status {
    const delta::AddFile* add = inputs[k];
    STOKE_RETURN_IF_ERROR(RewriteInput(t, *add, *reader, cols, rows_per_group, enc, scalars, pending_rows, out, flush));
    if (bar) bar->Add(1, static_cast<uint64_t>(add->size));
    return Status::OK();
  });
  if (status.ok()) status = flush();
  STOKE_RETURN_IF_ERROR(FinishBinFile(fs, status, std::move(writer), tmp, &out));
  return out;
}

// Pass 1 of a sorted rewrite: the scalars of every input row, where each row is (input, row in it),
// and per input its leaf of every column. A file of up to kSortedWholeFileBytes is read whole (one
// request); of a larger one, the tensors would be read twice, so only its footer and scalar column
// chunks are. Their readers go to `readers` for pass 2 (as many as its budget allows), which then
// reads a whole-read file's cells from memory.
struct SortSource {
  size_t input;
  int64_t row;  // file-global row
};
struct SortInput {
  std::vector<SortSource> sources;
  std::vector<ColumnValues> scalars;  // per column (empty for paged ones), rows in input order
  std::vector<std::vector<size_t>> file_columns;
};

Result<SortInput> ReadSortInput(const TableView& t, const std::vector<const delta::AddFile*>& inputs,
                                const std::vector<ColumnSpec>& cols, InputReaders& readers) {
  SortInput in;
  in.scalars.resize(cols.size());
  for (size_t c = 0; c < cols.size(); ++c) in.scalars[c] = ColumnValues{EmptyValuesFor(cols[c].type), {}};
  in.file_columns.resize(inputs.size());
  size_t paged_columns = 0;
  for (const auto& c : cols) paged_columns += c.paged() ? 1 : 0;
  constexpr uint64_t kSortedWholeFileBytes = uint64_t{1} << 20;
  // Each input's scalar columns, read where its reader is opened (in parallel on an object store: a
  // file read in parts takes a request per column chunk), appended in input order.
  std::vector<std::vector<ColumnValues>> input_scalars(inputs.size());
  // Each input's rows that its deletion vector keeps (nullopt: all of them).
  std::vector<std::optional<std::vector<size_t>>> kept(inputs.size());
  const auto hidden = HiddenColumns(t);
  const auto read_scalars = [&](size_t i, const ParquetReader& reader) -> Status {
    STOKE_ASSIGN_OR_RETURN(in.file_columns[i], MapFileColumns(reader, cols));
    STOKE_ASSIGN_OR_RETURN(const std::vector<uint64_t> deleted, DeletedRows(t, *inputs[i]));
    kept[i] = RowsKept(deleted, 0, reader.num_rows());
    input_scalars[i].resize(cols.size());
    for (size_t c = 0; c < cols.size(); ++c) {
      if (cols[c].paged()) continue;
      STOKE_ASSIGN_OR_RETURN(input_scalars[i][c], ReadInputChunk(reader, /*group=*/-1, in.file_columns[i][c], cols[c],
                                                                 static_cast<size_t>(reader.num_rows())));
      STOKE_RETURN_IF_ERROR(FillRowTracking(hidden, *inputs[i], cols[c], 0, reader.path(), &input_scalars[i][c]));
      if (kept[i]) input_scalars[i][c] = TakeRows(input_scalars[i][c], *kept[i]);
    }
    return Status::OK();
  };
  STOKE_RETURN_IF_ERROR(ForEachInputInOrder(
      t, inputs, kSortedWholeFileBytes,
      [&](size_t i, std::unique_ptr<ParquetReader> reader) -> Status {
        for (size_t c = 0; c < cols.size(); ++c) {
          if (!cols[c].paged()) AppendColumnValues(&in.scalars[c], std::move(input_scalars[i][c]));
        }
        std::vector<ColumnValues>().swap(input_scalars[i]);
        if (kept[i]) {
          for (size_t r : *kept[i]) in.sources.push_back({i, static_cast<int64_t>(r)});
        } else {
          for (int64_t r = 0; r < reader->num_rows(); ++r) in.sources.push_back({i, r});
        }
        const int64_t cells = reader->num_rows() * static_cast<int64_t>(paged_columns);
        readers.Keep(i, std::move(reader), cells);
        return Status::OK();
      },
      read_scalars));
  return in;
}

// The order of `rows` rows in a sorted rewrite: a stable sort of row indices by `key`'s values, nulls
// last.
std::vector<size_t> SortedOrder(const ColumnValues& key, size_t rows) {
  std::vector<int64_t> key_value(rows, -1);  // index of each row's key among present values
  int64_t next = 0;
  for (size_t r = 0; r < rows; ++r) key_value[r] = key.defined.empty() || key.defined[r] ? next++ : -1;
  std::vector<size_t> order(rows);
  for (size_t r = 0; r < order.size(); ++r) order[r] = r;
  std::visit(
      [&](const auto& keys) {
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
          if (key_value[a] < 0 || key_value[b] < 0) return key_value[a] >= 0 && key_value[b] < 0;
          return keys[static_cast<size_t>(key_value[a])] < keys[static_cast<size_t>(key_value[b])];
        });
      },
      key.values);
  return order;
}

// The bin's rows ordered by `sort_by` (ascending, nulls last, stable) in one new file. Scalar columns
// of the whole bin are decoded into memory (they are small); tensors are then fetched row by row in
// the new order, one positioned read each, so memory stays bounded by the scalars, one row group, the
// cells read ahead of it (on an object store, kRemoteParallelReads reads in flight, up to
// kSortedCellBytes of cells held) and the open readers (`reader_bytes` and `max_readers`, see
// InputReaders). The progress bar (input files) advances with the rows written.
Result<WrittenBin> RewriteBinSorted(const TableView& t, const std::vector<const delta::AddFile*>& inputs,
                                    const WriterOptions& wopts, int64_t rows_per_group, int64_t row_bytes,
                                    uint64_t reader_bytes, size_t max_readers, const std::string& sort_by,
                                    ProgressBar* bar) {
  Storage& fs = *t.storage;
  const std::vector<ColumnSpec> cols = ColumnsToWrite(t);
  auto key_it = std::find_if(cols.begin(), cols.end(), [&](const ColumnSpec& c) { return c.name == sort_by; });
  const size_t key = static_cast<size_t>(key_it - cols.begin());
  InputReaders readers(t, inputs, reader_bytes, max_readers);
  STOKE_ASSIGN_OR_RETURN(SortInput in, ReadSortInput(t, inputs, cols, readers));
  const std::vector<size_t> order = SortedOrder(in.scalars[key], in.sources.size());
  const std::vector<SortSource>& sources = in.sources;
  const std::vector<ColumnValues>& scalars = in.scalars;
  const std::vector<std::vector<size_t>>& file_columns = in.file_columns;

  // Pass 2: row groups in the new order; tensors read where they are, through the readers held, a run
  // of cells at a time (in parallel on an object store), appended in order.
  WrittenBin out;
  out.path = NewDataFilePath(t, *inputs[0]);
  const std::string tmp = InProgressPath(fs, out.path);
  STOKE_ASSIGN_OR_RETURN(auto writer, ParquetFileWriter::Create(fs, tmp, cols, wopts));
  RowGroupEncoder enc(writer->columns(), writer->options());
  std::unique_ptr<ThreadPool> fetchers = ReadersFor(t, order.size());
  constexpr int64_t kSortedCellBytes = int64_t{32} << 20;
  const size_t run_rows =
      fetchers ? static_cast<size_t>(std::clamp<int64_t>(kSortedCellBytes / std::max<int64_t>(row_bytes, 1), 1, 256)) : 1;
  std::vector<AlignedBuffer> cells(run_rows);
  uint64_t bin_bytes = 0;
  for (const auto* f : inputs) bin_bytes += static_cast<uint64_t>(std::max<int64_t>(f->size, 0));
  uint64_t shown_files = 0, shown_bytes = 0;
  const auto show_progress = [&](size_t rows_written) {
    if (!bar) return;
    const bool all = rows_written >= order.size();
    const double part = all ? 1.0 : static_cast<double>(rows_written) / static_cast<double>(order.size());
    const uint64_t files = all ? inputs.size() : static_cast<uint64_t>(part * static_cast<double>(inputs.size()));
    const uint64_t bytes = all ? bin_bytes : static_cast<uint64_t>(part * static_cast<double>(bin_bytes));
    bar->Add(files - shown_files, bytes - shown_bytes);
    shown_files = files;
    shown_bytes = bytes;
  };
  Status status;
  for (size_t begin = 0; begin < order.size() && status.ok(); begin += static_cast<size_t>(rows_per_group)) {
    const size_t end = std::min(order.size(), begin + static_cast<size_t>(rows_per_group));
    const std::vector<size_t> group(order.begin() + static_cast<std::ptrdiff_t>(begin), order.begin() + static_cast<std::ptrdiff_t>(end));
    for (size_t c = 0; c < cols.size() && status.ok(); ++c) {
      if (!cols[c].paged()) {
        status = enc.SetScalars(c, TakeRows(scalars[c], group));
        continue;
      }
      for (size_t from = 0; from < group.size() && status.ok(); from += run_rows) {
        const size_t n = std::min(run_rows, group.size() - from);
        status = ForEachIndex(fetchers.get(), n, [&](size_t k) -> Status {
          const SortSource& src = sources[group[from + k]];
          return readers.ReadCell(src.input, src.row, file_columns[src.input][c], &cells[k]);
        });
        for (size_t k = 0; k < n && status.ok(); ++k) status = enc.AppendTensor(c, cells[k].view());
      }
    }
    if (!status.ok()) break;
    auto rg = enc.Finish();
    status = rg.ok() ? writer->WriteRowGroup(std::move(*rg)) : rg.status();
    out.rows += static_cast<int64_t>(group.size());
    if (status.ok() && end < order.size()) show_progress(end);
  }
  STOKE_RETURN_IF_ERROR(FinishBinFile(fs, status, std::move(writer), tmp, &out));
  show_progress(order.size());
  return out;
}

// The writer options of the rewritten files: the table's own codec unless `o` asks for one, so that
// compaction keeps what ingest chose, and what ingest put in every file's footer besides stoke.tensors
// and stoke.blobs (which the writer adds): the image formats and class names, kept in the table's
// configuration.
Result<WriterOptions> RewriteWriterOptions(const TableView& t, const OptimizeOptions& o) {
  const auto& config = t.snapshot.metadata.configuration;
  std::string codec(o.codec ? CodecName(*o.codec) : "");
  if (codec.empty()) {
    auto it = config.find(kCodecPolicyKey);
    codec = it != config.end() ? it->second : "auto";
  }
  WriterOptions wopts;
  STOKE_RETURN_IF_ERROR(SetCodecPolicy(codec, &wopts));
  for (const char* key : {kImagesMetadataKey, kClassesMetadataKey}) {
    auto it = config.find(key);
    if (it != config.end()) wopts.key_value_metadata.push_back({key, it->second});
  }
  return wopts;
}

// The predicate `where` bound to the table's columns; nullopt when `where` is empty.
Result<std::optional<Predicate>> BindWhere(const TableView& t, const std::string& where) {
  std::optional<Predicate> predicate;
  if (where.empty()) return predicate;
  STOKE_ASSIGN_OR_RETURN(predicate, Predicate::Parse(where));
  STOKE_RETURN_IF_ERROR(predicate->Bind(t.columns));
  return predicate;
}

// InvalidArgument unless `sort_by` is empty or names a scalar, non-partition column of the table.
Status CheckSortColumn(const TableView& t, const std::string& sort_by) {
  if (sort_by.empty()) return Status::OK();
  auto it = std::find_if(t.columns.begin(), t.columns.end(), [&](const ColumnSpec& c) { return c.name == sort_by; });
  if (it == t.columns.end() || it->paged() || t.IsPartitionColumn(sort_by)) {
    return Status::InvalidArgument(fmt::format("optimize: `sort_by` '{}' must be a scalar, non-partition column of the table",
                                               sort_by));
  }
  return Status::OK();
}

// The bytes of one row, for sizing row groups: a tensor's bytes, 8 for any other column; with blob
// columns, which vary in size, at least the table's mean bytes per row.
int64_t BytesPerRow(const TableView& t) {
  int64_t sample_bytes = 0;
  bool has_blobs = false;
  for (const auto& c : t.columns) {
    sample_bytes += c.tensor ? c.tensor->num_bytes() : 8;
    has_blobs = has_blobs || c.blob;
  }
  if (has_blobs) {
    int64_t bytes = 0;
    for (const auto& f : t.snapshot.files) bytes += f.size;
    const int64_t rows = t.snapshot.num_records();
    if (rows > 0) sample_bytes = std::max(sample_bytes, bytes / rows);
  }
  return sample_bytes;
}

// Whether each of `files` is in stoke's layout, from its footer (its size from the log; on an object
// store kRemoteParallelReads footers are read at once).
Result<std::vector<char>> InStokeLayout(const TableView& t, const std::vector<const delta::AddFile*>& files) {
  std::vector<char> in_layout(files.size(), 0);
  std::unique_ptr<ThreadPool> pool = ReadersFor(t, files.size());
  STOKE_RETURN_IF_ERROR(ForEachIndex(pool.get(), files.size(), [&](size_t i) -> Status {
    STOKE_ASSIGN_OR_RETURN(auto reader, OpenInput(t, *files[i], 0));
    STOKE_ASSIGN_OR_RETURN(bool yes, InStokeLayout(*reader));
    in_layout[i] = yes;
    return Status::OK();
  }));
  return in_layout;
}

// The files to rewrite, in table order: of those `where` may match (by their statistics), the small
// ones (every one with --sort-by) and those not in stoke's layout (opening the others to see).
Result<std::vector<const delta::AddFile*>> ChooseCandidates(const TableView& t, const OptimizeOptions& o,
                                                            const std::optional<Predicate>& where) {
  std::vector<const delta::AddFile*> candidates;
  std::vector<size_t> large;      // of candidates: those to open, to see whether they are in the layout
  std::vector<ColumnSpec> where_columns;  // only the predicate's columns' statistics are read
  for (const auto& c : t.columns) {
    if (where && std::binary_search(where->columns().begin(), where->columns().end(), c.name)) where_columns.push_back(c);
  }
  AddStatsReader stats_reader(where_columns);
  for (const auto& f : t.snapshot.files) {
    if (where) {
      int64_t records = -1;
      auto stats = FileStats(f, stats_reader, &records);
      if (!where->MayMatch(stats, records)) continue;
    }
    // A large file is rewritten only when it is not in stoke's layout or has deleted rows to drop.
    const bool small = f.size < o.target_file_bytes / 4 * 3 || !o.sort_by.empty() || f.deletion_vector;
    if (!small) large.push_back(candidates.size());
    candidates.push_back(&f);
  }
  if (large.empty()) return candidates;
  std::vector<const delta::AddFile*> to_open;
  for (size_t i : large) to_open.push_back(candidates[i]);
  STOKE_ASSIGN_OR_RETURN(std::vector<char> in_layout, InStokeLayout(t, to_open));
  std::vector<char> keep(candidates.size(), 1);
  for (size_t k = 0; k < large.size(); ++k) keep[large[k]] = !in_layout[k];
  size_t kept = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (keep[i]) candidates[kept++] = candidates[i];
  }
  candidates.resize(kept);
  return candidates;
}

// Input files rewritten together into one new file, in order.
using Bin = std::vector<const delta::AddFile*>;

// Greedy bins of about `target_bytes`, never across partitions (stable: table order within one).
std::vector<Bin> PackBins(std::vector<const delta::AddFile*> candidates, int64_t target_bytes) {
  std::stable_sort(candidates.begin(), candidates.end(), [](const delta::AddFile* a, const delta::AddFile* b) {
    return a->partition_values < b->partition_values;
  });
  std::vector<Bin> bins;
  int64_t bin_bytes = 0;
  for (const auto* f : candidates) {
    if (bins.empty() || bin_bytes + f->size > target_bytes || bins.back().front()->partition_values != f->partition_values) {
      bins.emplace_back();
      bin_bytes = 0;
    }
    bins.back().push_back(f);
    bin_bytes += f->size;
  }
  return bins;
}

// The bins worth rewriting: every one with --sort-by; else a bin of one file that is already in
// stoke's layout and has no deleted rows would only be copied, so it is left alone (which opens that
// file).
Result<std::vector<Bin>> BinsToRewrite(const TableView& t, const OptimizeOptions& o, std::vector<Bin> bins) {
  std::vector<size_t> single;  // bins of one file whose layout decides
  std::vector<const delta::AddFile*> to_open;
  for (size_t i = 0; i < bins.size(); ++i) {
    if (bins[i].size() == 1 && o.sort_by.empty() && !bins[i][0]->deletion_vector) {
      single.push_back(i);
      to_open.push_back(bins[i][0]);
    }
  }
  STOKE_ASSIGN_OR_RETURN(std::vector<char> in_layout, InStokeLayout(t, to_open));
  std::vector<char> keep(bins.size(), 1);
  for (size_t k = 0; k < single.size(); ++k) keep[single[k]] = !in_layout[k];
  std::vector<Bin> work;
  for (size_t i = 0; i < bins.size(); ++i) {
    if (keep[i]) work.push_back(std::move(bins[i]));
  }
  return work;
}

// The new file of each bin; nullopt where it was not written.
using NewFiles = std::vector<std::optional<WrittenBin>>;

// Rewrites each bin of `work` into one new file (sorted by --sort-by when given), bins in parallel on
// o.threads threads. (*written)[i] is bin i's file when it was written, also when another bin failed.
Status RewriteBins(const TableView& t, const OptimizeOptions& o, const std::vector<Bin>& work, const WriterOptions& wopts,
                   int64_t rows_per_group, int64_t row_bytes, NewFiles* written) {
  size_t inputs = 0;
  for (const auto& b : work) inputs += b.size();
  ProgressBar bar("optimize", inputs, "files", o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  written->resize(work.size());
  ThreadPool pool(o.threads);
  // The readers a sorted rewrite keeps open, shared out among the bins rewritten at once (but
  // kMinSortedReaderBytes per bin at least); on local storage, where each holds a descriptor, a quarter
  // of the descriptors in all and kMaxSortedReaders per bin at most.
  const size_t at_once = std::max<size_t>(1, std::min(pool.size(), work.size()));
  const uint64_t reader_bytes = std::max(kSortedReaderBytes / at_once, kMinSortedReaderBytes);
  size_t max_readers = SIZE_MAX;
  if (!o.sort_by.empty() && !t.storage->remote()) {
    const uint64_t descriptors = RaiseOpenFileLimitOnce();
    max_readers = static_cast<size_t>(std::min<uint64_t>(descriptors / 4 / at_once, kMaxSortedReaders));
  }
  Status s = ParallelFor(pool, work.size(), [&](size_t i) -> Status {
    STOKE_ASSIGN_OR_RETURN(auto w, o.sort_by.empty() ? RewriteBin(t, work[i], wopts, rows_per_group, &bar)
                                                     : RewriteBinSorted(t, work[i], wopts, rows_per_group, row_bytes,
                                                                        reader_bytes, max_readers, o.sort_by, &bar));
    (*written)[i] = std::move(w);
    return Status::OK();
  });
  bar.Finish();
  return s;
}

// Syncs the directories of the new files: the renames published them, and a power loss must not undo
// them once the commit refers to them. Stops at the first error.
Status SyncNewFileDirectories(Storage& fs, const NewFiles& written) {
  std::set<std::string> dirs;
  for (const auto& w : written) {
    if (w) dirs.insert(ParentPath(w->path));
  }
  for (const auto& d : dirs) STOKE_RETURN_IF_ERROR(fs.SyncDirectory(d));
  return Status::OK();
}

// Deletes the new files, ignoring errors (VACUUM removes what is left).
void DeleteNewFiles(Storage& fs, const NewFiles& written) {
  std::vector<std::string> paths;
  for (const auto& w : written) {
    if (w) paths.push_back(w->path);
  }
  DeleteLeftovers(fs, paths, "optimize's new files");
}

// The OPTIMIZE commit's actions, all with dataChange=false: a remove of every input file (with its
// deletion vector), then an add of each bin's new file that holds rows (statistics from its footer).
// REQUIRES: every bin's file was written.
// Counts them in `report`.
std::vector<delta::Action> OptimizeActions(const TableView& t, const std::vector<Bin>& work, const NewFiles& written,
                                           OptimizeReport* report) {
  const int64_t now = EpochMillis();
  std::vector<delta::Action> actions;
  size_t inputs = 0;
  for (const auto& b : work) inputs += b.size();
  actions.reserve(inputs + written.size());  // 650,000 removes: doubling held 1.6x their slots
  for (const auto& b : work) {
    for (const auto* f : b) {
      actions.push_back(delta::RemoveOf(*f, now, /*data_change=*/false));
      ++report->files_removed;
      report->bytes_rewritten += f->size;
    }
  }
  for (size_t i = 0; i < written.size(); ++i) {
    const auto& w = written[i];
    if (w->rows == 0) continue;  // every row of the bin was deleted: its file is deleted after the commit
    delta::AddFile a;
    a.path = delta::EncodePath(PathUnder(w->path, t.dir));
    a.partition_values = work[i][0]->partition_values;
    a.size = static_cast<int64_t>(w->bytes);
    auto st = t.storage->Stat(w->path);
    a.modification_time = st.ok() ? st->modification_time_ms : now;
    a.data_change = false;
    a.stats = delta::StatsJsonFromFooter(w->footer, t.FileColumns());
    actions.push_back(std::move(a));
    ++report->files_added;
    report->rows_rewritten += w->rows;
  }
  return actions;
}

// Refuses, before anything is written, columns stoke's writer cannot write back as they are: structs,
// arrays and maps, and decimals of more than 18 digits (FIXED_LEN_BYTE_ARRAY).
Status CheckRewritableColumns(const TableView& t, const std::string& table) {
  for (const ColumnSpec& c : t.columns) {
    if (c.nested() || c.type == parquet::Type::kFixedLenByteArray) {
      return Status::Unsupported(fmt::format("optimize: column '{}' of table '{}' is a {}, which stoke's writer does "
                                             "not write yet; nothing was written",
                                             c.name, table, SparkTypeName(c)));
    }
  }
  return Status::OK();
}

}  // namespace

Result<OptimizeReport> OptimizeTable(const OptimizeOptions& o) {
  if (o.target_file_bytes <= 0 || o.row_group_bytes <= 0) {
    return Status::InvalidArgument("optimize: `target_file_bytes` and `row_group_bytes` must be positive");
  }
  Stopwatch watch;
  STOKE_ASSIGN_OR_RETURN(TableView t, OpenTableView(o.table_dir));
  STOKE_RETURN_IF_ERROR(delta::CheckWritable(t.snapshot, delta::WriteCommand::kOptimize, o.table_dir));
  STOKE_RETURN_IF_ERROR(CheckRewritableColumns(t, o.table_dir));
  STOKE_RETURN_IF_ERROR(delta::MaterializedColumns(t.snapshot, o.table_dir).status());
  STOKE_ASSIGN_OR_RETURN(WriterOptions wopts, RewriteWriterOptions(t, o));
  STOKE_ASSIGN_OR_RETURN(std::optional<Predicate> where, BindWhere(t, o.where));
  STOKE_RETURN_IF_ERROR(CheckSortColumn(t, o.sort_by));
  OptimizeReport report;
  report.files_before = static_cast<int64_t>(t.snapshot.files.size());
  STOKE_ASSIGN_OR_RETURN(std::vector<const delta::AddFile*> candidates, ChooseCandidates(t, o, where));
  STOKE_ASSIGN_OR_RETURN(std::vector<Bin> work, BinsToRewrite(t, o, PackBins(std::move(candidates), o.target_file_bytes)));
  if (work.empty()) {
    report.files_after = report.files_before;
    report.seconds = watch.Seconds();
    return report;
  }

  const int64_t row_bytes = std::max<int64_t>(BytesPerRow(t), 1);
  const int64_t rows_per_group = std::max<int64_t>(1, std::min(o.row_group_bytes, o.target_file_bytes) / row_bytes);
  NewFiles written;
  Status s = RewriteBins(t, o, work, wopts, rows_per_group, row_bytes, &written);
  if (s.ok()) s = SyncNewFileDirectories(*t.storage, written);
  if (!s.ok()) {
    DeleteNewFiles(*t.storage, written);
    return s;
  }
  ReleaseFreeHeapMemory();  // what reading 100,000s of footers freed on the rewriting threads
  std::vector<delta::Action> actions = OptimizeActions(t, work, written, &report);
  delta::DeltaLog log(*t.storage, t.dir);
  nlohmann::json params = {{"predicate", delta::JsonArrayText(o.where)},
                           {"targetSize", std::to_string(o.target_file_bytes)},
                           {"sortBy", delta::JsonArrayText(o.sort_by)}};
  // The snapshot moves into the commit (the bins' pointers into it are not used after this): the
  // checkpoint after a commit of 100,000s of removes is written from it, not from the log read back.
  // Under row tracking the new files' row ids depend on the version committed (row_tracking.h).
  auto version = delta::AssignsRowIds(t.snapshot)
                     ? delta::CommitRewriteAssigningRowIds(log, t.snapshot, std::move(actions), "OPTIMIZE", params,
                                                           &t.snapshot)
                     : log.Commit(t.snapshot.version, std::move(actions), delta::CommitKind::kRewrite, "OPTIMIZE", params,
                                  /*max_attempts=*/100, nullptr, &t.snapshot);
  if (!version.ok()) {
    // After an I/O error the commit may have taken effect all the same (see IngestSources): keep the files.
    if (version.status().code() != StatusCode::kIOError) DeleteNewFiles(*t.storage, written);
    return version.status().WithContext(fmt::format("optimize '{}'", o.table_dir));
  }
  report.version = *version;
  NewFiles empty;  // bins whose every row was deleted: their files are in no version
  for (auto& w : written) {
    if (w && w->rows == 0) empty.push_back(std::move(w));
  }
  if (!empty.empty()) DeleteNewFiles(*t.storage, empty);
  report.files_after = report.files_before - report.files_removed + report.files_added;
  report.seconds = watch.Seconds();
  STOKE_LOG(kInfo, "optimize.committed", "table={} version={} removed={} added={}", o.table_dir, *version,
            report.files_removed, report.files_added);
  return report;
}

}  // namespace stoke
