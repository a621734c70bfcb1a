// The loader's scalar-column stage (scalar_columns.h).
#include "loader/scalar_columns.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "core/thread_pool.h"
#include "format/dtype.h"
#include "format/logical_value.h"
#include "format/parquet_reader.h"
#include "io/prefetching_file.h"
#include "table/add_stats.h"

namespace stoke {
namespace {

// The rows of a run of consecutive data files (snapshot order), as ScalarColumns::Read reads them.
struct FilePart {
  std::vector<ScalarColumn> cols;  // the selected scalar columns of the run's rows
  std::vector<uint8_t> keep;       // per row: the filter keeps it
  int64_t rows = 0;
};

// What ScalarColumns::Read reads of every data file: the selected scalar columns and the filter's columns.
struct ScalarScan {
  const TableView& view;
  const std::vector<size_t>& scalar_cols;  // indices in view.columns, in the columns' order
  const std::optional<Predicate>& where;   // bound to view.columns
  std::vector<std::string> where_cols;     // where's columns (sorted), or none
  std::vector<ColumnSpec> stat_columns;    // the columns whose statistics are read (StatColumns)
  std::vector<size_t> stat_of_scalar;      // per scalar column, its position in stat_columns
  const ScalarColumns::ReadOptions& options;
};

// What one thread of ScalarColumns::Read reuses from file to file: the statistics reader and its results.
struct StatsScratch {
  explicit StatsScratch(const std::vector<ColumnSpec>& columns) : reader(columns) {}
  AddStatsReader reader;
  std::vector<Predicate::ColumnStats> stats;  // by stat column
  std::vector<ColumnValues> constants;        // by scalar column
};

// A decimal column's values (INT64 or 16-byte unscaled, decimal_scale digits after the point) as
// doubles.
ColumnValues DecimalsAsDoubles(const ColumnValues& v, int32_t scale) {
  const size_t n = std::visit([](const auto& vec) { return vec.size(); }, v.values);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = DecimalToDouble(DecimalAt(v.values, i), scale);
  return ColumnValues{std::move(out), v.defined};
}

void AppendPlainValues(const ColumnValues& v, size_t rows, ScalarColumn* col);

// Appends one row group's decoded values of a scalar column to `col` (decimals converted first).
void AppendScalarValues(const ColumnValues& v, size_t rows, ScalarColumn* col) {
  if (col->decimal_scale >= 0) {
    AppendPlainValues(DecimalsAsDoubles(v, col->decimal_scale), rows, col);
  } else {
    AppendPlainValues(v, rows, col);
  }
}

// The values as they are: of the type of col->dtype.
void AppendPlainValues(const ColumnValues& v, size_t rows, ScalarColumn* col) {
  const size_t esize = col->is_string ? 0 : DTypeSize(col->dtype);
  const size_t base = col->is_string ? col->strings.size() : col->values.size() / std::max<size_t>(esize, 1);
  const bool track_nulls = !v.defined.empty() || !col->valid.empty();
  if (col->is_string) {
    col->strings.resize(base + rows);
  } else {
    col->values.resize((base + rows) * esize, 0);
  }
  if (track_nulls) col->valid.resize(base + rows, 1);
  size_t next = 0;
  std::visit(
      [&](const auto& vec) {
        using T = typename std::decay_t<decltype(vec)>::value_type;
        for (size_t r = 0; r < rows; ++r) {
          const bool present = v.defined.empty() || v.defined[r];
          if (track_nulls) col->valid[base + r] = present ? 1 : 0;
          if (!present) continue;
          const T& x = vec[next++];
          if constexpr (std::is_same_v<T, std::string>) {
            col->strings[base + r] = x;
          } else {
            std::memcpy(col->values.data() + (base + r) * esize, &x, sizeof(T));
          }
        }
      },
      v.values);
}

// Every one of `rows` rows of a file's column, when the file's statistics say it exactly: all null
// (null_count == rows), or one value (no nulls and min == max, compared as the column's type: integers
// and booleans as they are, floats bit for bit and never NaN or a signed zero, strings under 32 bytes,
// the length other writers truncate statistics to). nullopt when the file must be read.
std::optional<ColumnValues> ConstantFromStats(const ColumnSpec& spec, const Predicate::ColumnStats& st, int64_t rows) {
  // Decimal statistics are not exact beyond 15 digits: such files are read.
  if (rows < 0 || !st.null_count || spec.logical == LogicalType::kDecimal) return std::nullopt;
  ColumnValues out{EmptyValuesFor(spec.type), {}};
  const size_t n = static_cast<size_t>(rows);
  if (*st.null_count == rows) {
    out.defined.assign(n, 0);
    return out;
  }
  if (*st.null_count != 0 || !st.min || !st.max || !(*st.min == *st.max)) return std::nullopt;
  const auto& v = st.min->v;
  bool ok = false;
  std::visit(
      [&](auto& dst) {
        using T = typename std::decay_t<decltype(dst)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          if (const auto* x = std::get_if<std::string>(&v); x && spec.is_string && x->size() < 32) {
            dst.assign(n, *x);
            ok = true;
          }
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          const auto* x = std::get_if<double>(&v);
          if (x && std::isfinite(*x) && *x != 0.0 && static_cast<double>(static_cast<T>(*x)) == *x) {
            dst.assign(n, static_cast<T>(*x));
            ok = true;
          }
        } else if constexpr (std::is_same_v<T, uint8_t>) {  // BOOLEAN
          if (const auto* x = std::get_if<bool>(&v)) {
            dst.assign(n, *x ? 1 : 0);
            ok = true;
          }
        } else if constexpr (std::is_integral_v<T>) {
          const auto* x = std::get_if<int64_t>(&v);
          if (x && *x >= std::numeric_limits<T>::min() && *x <= std::numeric_limits<T>::max()) {
            dst.assign(n, static_cast<T>(*x));
            ok = true;
          }
        }
      },
      out.values);
  if (!ok) return std::nullopt;
  return out;
}

// The byte ranges (offset, length) of the column chunks of `columns` (by name; names not in the
// file, such as partition columns, are skipped) in every row group of `reader`'s file: where the
// decoding of those columns will read. A hint: chunks whose metadata is odd are left out, and the
// reader checks them when it reads them; so are chunks the reader holds in the tail it read with the
// footer (the whole of a small file), which it serves without a read.
std::vector<std::pair<uint64_t, uint64_t>> ColumnChunkRanges(const ParquetReader& reader,
                                                             const std::vector<std::string>& columns) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const std::string& name : columns) {
    auto c = reader.FindColumn(name);
    if (!c.ok()) continue;
    for (const auto& rg : reader.metadata().row_groups) {
      if (*c >= rg.columns.size() || !rg.columns[*c].meta_data) continue;
      const auto& m = *rg.columns[*c].meta_data;
      int64_t start = m.data_page_offset;
      if (m.dictionary_page_offset && *m.dictionary_page_offset > 0 && *m.dictionary_page_offset < start) {
        start = *m.dictionary_page_offset;
      }
      if (start < 0 || m.total_compressed_size <= 0) continue;
      if (reader.HoldsRange(static_cast<uint64_t>(start), static_cast<uint64_t>(m.total_compressed_size))) continue;
      ranges.emplace_back(static_cast<uint64_t>(start), static_cast<uint64_t>(m.total_compressed_size));
    }
  }
  return ranges;
}


// The columns whose statistics the scan reads (the selected scalar columns and the filter's, in
// table order), and where each selected scalar column is among them.
void StatColumns(ScalarScan* scan) {
  for (size_t c = 0; c < scan->view.columns.size(); ++c) {
    const bool selected = std::find(scan->scalar_cols.begin(), scan->scalar_cols.end(), c) != scan->scalar_cols.end();
    if (selected || std::binary_search(scan->where_cols.begin(), scan->where_cols.end(), scan->view.columns[c].name)) {
      scan->stat_columns.push_back(scan->view.columns[c]);
    }
  }
  for (size_t c : scan->scalar_cols) {
    const auto it = std::find_if(scan->stat_columns.begin(), scan->stat_columns.end(),
                                 [&](const ColumnSpec& s) { return s.name == scan->view.columns[c].name; });
    scan->stat_of_scalar.push_back(static_cast<size_t>(it - scan->stat_columns.begin()));
  }
}

// Appends a file's `records` rows to `part` from its statistics alone (scratch.stats), when they
// give every selected scalar column exactly (ConstantFromStats); the filter keeps them unless
// `skip_file`. False, with `part` unchanged, when the file must be read.
bool AppendRowsFromStats(const ScalarScan& scan, StatsScratch& scratch, int64_t records, bool skip_file, FilePart& part) {
  scratch.constants.resize(scan.scalar_cols.size());
  for (size_t k = 0; k < scan.scalar_cols.size(); ++k) {
    const ColumnSpec& spec = scan.view.columns[scan.scalar_cols[k]];
    std::optional<ColumnValues> c = ConstantFromStats(spec, scratch.stats[scan.stat_of_scalar[k]], records);
    if (!c) return false;
    scratch.constants[k] = std::move(*c);
  }
  part.rows += records;
  part.keep.insert(part.keep.end(), static_cast<size_t>(records), skip_file ? 0 : 1);
  for (size_t k = 0; k < scan.scalar_cols.size(); ++k) {
    AppendScalarValues(scratch.constants[k], static_cast<size_t>(records), &part.cols[k]);
  }
  return true;
}

// Appends the rows of data file `add`, open in `reader`, to `part`, row group by row group: whether
// the filter keeps each (none when `skip_file`, or when the row group's statistics rule it out), and
// the selected scalar columns' values.
Status AppendRowGroups(const ScalarScan& scan, const delta::AddFile& add, const ParquetReader& reader, bool skip_file,
                       FilePart& part) {
  const TableView& view = scan.view;
  const std::optional<Predicate>& where = scan.where;
  const auto& starts = reader.row_group_starts();
  const int64_t file_rows = starts.empty() ? 0 : starts.back();
  const size_t first = part.keep.size();  // this file's first row in the part
  part.rows += file_rows;
  part.keep.insert(part.keep.end(), static_cast<size_t>(file_rows), skip_file ? 0 : 1);
  for (int g = 0; g < reader.num_row_groups(); ++g) {
    const int64_t rows = reader.metadata().row_groups[g].num_rows;
    std::map<std::string, ColumnValues> decoded;
    auto decode = [&](const ColumnSpec& spec) -> Result<const ColumnValues*> {
      auto it = decoded.find(spec.name);
      if (it != decoded.end()) return &it->second;
      STOKE_ASSIGN_OR_RETURN(ColumnValues v, ReadRowGroupColumn(view, add, reader, g, spec));
      return &decoded.emplace(spec.name, std::move(v)).first->second;
    };
    const auto keep_begin = part.keep.begin() + static_cast<std::ptrdiff_t>(first) + starts[g];
    if (where && !skip_file && where->MayMatch(RowGroupStats(view, add, reader, g), rows)) {
      std::map<std::string, const ColumnValues*> cols;
      for (const auto& name : scan.where_cols) {
        auto it = std::find_if(view.columns.begin(), view.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
        STOKE_ASSIGN_OR_RETURN(cols[name], decode(*it));
      }
      std::vector<uint8_t> keep;
      STOKE_RETURN_IF_ERROR(where->Evaluate(cols, static_cast<size_t>(rows), &keep));
      std::copy(keep.begin(), keep.end(), keep_begin);
    } else if (where) {
      std::fill(keep_begin, keep_begin + rows, 0);
    }
    for (size_t k = 0; k < scan.scalar_cols.size(); ++k) {
      STOKE_ASSIGN_OR_RETURN(const ColumnValues* v, decode(view.columns[scan.scalar_cols[k]]));
      AppendScalarValues(*v, static_cast<size_t>(rows), &part.cols[k]);
    }
  }
  return Status::OK();
}

// Opens data file `add` for the scan (on object stores, fetching its footer and the scan's column
// chunks ahead in few requests).
Result<std::unique_ptr<ParquetReader>> OpenForScalars(const ScalarScan& scan, const delta::AddFile& add) {
  // The size comes from the log: on object stores, no HEAD per file.
  const uint64_t size = static_cast<uint64_t>(add.size);
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                         scan.view.storage->OpenForReadWithSize(scan.view.FilePath(add), size));
  if (!scan.options.remote) return ParquetReader::Open(std::move(file));
  // On object stores every read is a request: the reader's one read of the footer's tail (it does not
  // read the leading magic there unless the tail holds it), then the chunks of the columns the scan
  // reads, fetched ahead in as few GETs as the gap allows.
  auto prefetching = std::make_unique<PrefetchingFile>(std::move(file));
  PrefetchingFile* prefetch = prefetching.get();
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(std::move(prefetching)));
  std::vector<std::string> needed;  // as the files name them (physical names under column mapping)
  const auto& columns = scan.view.columns;
  for (const std::string& name : scan.where_cols) {
    auto it = std::find_if(columns.begin(), columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
    if (it != columns.end()) needed.push_back(it->file_name());
  }
  for (size_t c : scan.scalar_cols) needed.push_back(columns[c].file_name());
  STOKE_RETURN_IF_ERROR(prefetch->Prefetch(ColumnChunkRanges(*reader, needed), scan.options.coalesce_gap));
  return reader;
}

// ReadFileScalars without the deletion vector.
Status AppendFileScalars(const ScalarScan& scan, const delta::AddFile& add, StatsScratch& scratch, FilePart& part) {
  const std::optional<Predicate>& where = scan.where;
  int64_t records = -1;
  FileStatsInto(add, scratch.reader, &scratch.stats, &records);
  bool skip_file = false, decided = true;
  if (where) {  // the predicate takes the statistics by name
    std::map<std::string, Predicate::ColumnStats> by_name;
    for (size_t c = 0; c < scratch.stats.size(); ++c) by_name[scan.stat_columns[c].name] = scratch.stats[c];
    skip_file = !where->MayMatch(by_name, records);
    decided = skip_file || where->MustMatch(by_name, records);
  }
  // A file whose statistics decide the filter for all its rows and give each selected scalar
  // column exactly (a table of one-row files: every file) is not opened.
  if (records >= 0 && decided && AppendRowsFromStats(scan, scratch, records, skip_file, part)) return Status::OK();
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, OpenForScalars(scan, add));
  return AppendRowGroups(scan, add, *reader, skip_file, part);
}

// Appends the rows of data file `add` to `part`: whether the filter keeps each, and the selected
// scalar columns' values; opens the file only when its statistics do not give them; rows its
// deletion vector deletes are not kept. Called on several threads at once.
Status ReadFileScalars(const ScalarScan& scan, const delta::AddFile& add, StatsScratch& scratch, FilePart& part) {
  const size_t first = part.keep.size();
  STOKE_RETURN_IF_ERROR(AppendFileScalars(scan, add, scratch, part));
  if (!add.deletion_vector) return Status::OK();
  STOKE_ASSIGN_OR_RETURN(const std::vector<uint64_t> deleted, DeletedRows(scan.view, add));
  const auto rows = static_cast<int64_t>(part.keep.size() - first);
  if (!deleted.empty() && deleted.back() >= static_cast<uint64_t>(rows)) {
    return Status::Corruption(fmt::format("the deletion vector of '{}' deletes row {}, beyond the file's {} rows",
                                          scan.view.FilePath(add), deleted.back(), rows));
  }
  ClearDeletedRows(deleted, 0, rows, part.keep.data() + first);
  return Status::OK();
}

// Packs the parts' rows into `packed` in snapshot order (the sample index's row order), freeing each
// part as it goes, and, when `filtered`, collects the rows the filter keeps into *rows. Corruption
// when the parts do not hold the expected rows.
Status PackParts(std::vector<FilePart>& parts, bool filtered, const ScalarColumns::ReadOptions& options,
                 std::span<const ScalarColumn> columns, ScalarRows* packed, std::vector<int64_t>* rows) {
  int64_t total = 0;
  size_t string_bytes = 0;
  std::vector<bool> nullable(columns.size(), false);
  for (const auto& p : parts) {
    total += p.rows;
    for (size_t k = 0; k < columns.size(); ++k) {
      nullable[k] = nullable[k] || !p.cols[k].valid.empty();
      for (const std::string& s : p.cols[k].strings) string_bytes += s.size();
    }
  }
  if (total != options.expected_rows) {
    return Status::Corruption(fmt::format("{}: the data files hold {} rows, the sample index {}", options.table, total,
                                          options.expected_rows));
  }
  // Reserved whole: the records are not grown by doubling (at 650,000 rows that held old and new
  // arrays at once).
  packed->SetLayout(columns, nullable, static_cast<size_t>(total), string_bytes);
  int64_t base = 0;
  for (auto& p : parts) {
    packed->Append(p.cols, static_cast<size_t>(p.rows));
    p.cols.clear();
    p.cols.shrink_to_fit();
    if (filtered) {
      for (int64_t r = 0; r < p.rows; ++r) {
        if (p.keep[static_cast<size_t>(r)]) rows->push_back(base + r);
      }
    }
    base += p.rows;
  }
  return Status::OK();
}

}  // namespace

Result<DType> ScalarColumns::DTypeOf(const ColumnSpec& c) {
  if (c.nested()) {
    return Status::Unsupported(fmt::format("column '{}' is a {}: the loader delivers arrays of numbers as tensors, not "
                                           "structs or maps; select other columns, or read it with a query",
                                           c.name, SparkTypeName(c)));
  }
  if (c.logical == LogicalType::kDecimal) return DType::kFloat64;
  if (auto dtype = DTypeOfPhysicalType(c.type)) return *dtype;
  if (c.type == parquet::Type::kByteArray && c.is_string) return DType::kUInt8;
  return Status::Unsupported(fmt::format("column '{}': the loader delivers tensor, integer, floating-point, boolean "
                                         "and string columns; this one is binary",
                                         c.name));
}


Status ScalarColumns::Add(const ColumnSpec& column, size_t view_index) {
  STOKE_ASSIGN_OR_RETURN(DType dtype, DTypeOf(column));
  ScalarColumn s;
  s.name = column.name;
  s.dtype = dtype;
  s.is_string = column.is_string;
  if (column.logical == LogicalType::kDecimal) s.decimal_scale = column.scale;
  columns_.push_back(std::move(s));
  view_index_.push_back(view_index);
  return Status::OK();
}

Status ScalarColumns::Read(const TableView& view, const std::optional<Predicate>& where, const ReadOptions& options) {
  const std::vector<size_t>& scalar_cols = view_index_;
  ScalarScan scan{view, scalar_cols, where, where ? where->columns() : std::vector<std::string>{}, {}, {}, options};
  const bool deletions = HasDeletionVectors(view.snapshot);
  if (scalar_cols.empty() && !where && !deletions) {
    all_rows_ = true;
    return Status::OK();
  }
  const auto& adds = view.snapshot.files;
  // Statistics are read for the predicate's columns and the selected scalar columns only.
  StatColumns(&scan);
  // Files are taken in chunks, one FilePart each, so that a table of 100,000s of one-row files costs
  // a few thousand parts, not one per file.
  const size_t chunk_files = std::clamp<size_t>(adds.size() / 64, 1, 256);
  const size_t chunks = (adds.size() + chunk_files - 1) / chunk_files;
  std::vector<FilePart> parts(chunks);
  ThreadPool pool(std::min<size_t>(8, std::max<size_t>(1, chunks)));
  Status st = ParallelFor(pool, chunks, [&](size_t c) -> Status {
    FilePart& part = parts[c];
    for (size_t k = 0; k < scalar_cols.size(); ++k) part.cols.push_back(columns_[k]);  // empty, typed
    StatsScratch scratch(scan.stat_columns);
    for (size_t i = c * chunk_files; i < std::min(adds.size(), (c + 1) * chunk_files); ++i) {
      STOKE_RETURN_IF_ERROR(ReadFileScalars(scan, adds[i], scratch, part));
    }
    return Status::OK();
  });
  if (!st.ok()) return st;
  all_rows_ = !(where.has_value() || deletions);
  return PackParts(parts, !all_rows_, options, columns_, &packed_, &rows_);
}

std::optional<int64_t> ScalarColumns::FirstRow(int64_t table_rows) const {
  if (all_rows_) return table_rows > 0 ? std::optional<int64_t>(0) : std::nullopt;
  return rows_.empty() ? std::nullopt : std::optional<int64_t>(rows_.front());
}

int64_t ScalarColumns::ServedIn(int64_t first, int64_t end, size_t* next) const {
  if (all_rows_) return end - first;
  int64_t count = 0;
  while (*next < rows_.size() && rows_[*next] < end) ++*next, ++count;
  return count;
}

void ScalarColumns::PrepareBatch(size_t rows, ScalarBatch out) const {
  for (size_t k = 0; k < columns_.size(); ++k) {
    if (columns_[k].is_string) (*out.strings)[k].resize(rows);
    auto& valid = (*out.valid)[k];
    valid.clear();
    if (packed_.nullable(k)) valid.resize(rows);
  }
}

void ScalarColumns::Gather(std::span<const int64_t> table_rows, size_t begin, size_t end, ScalarBatch out) const {
  packed_.Gather(table_rows, begin, end, out);
}

}  // namespace stoke
