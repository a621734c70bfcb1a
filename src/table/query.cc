// `stoke query`: predicate scans over a table's scalar columns with file and row-group skipping.
// One scan (ScanMatches) feeds two consumers: the printer of `stoke query` and the columnar result
// of QueryTableColumns (the Python binding's `Table.query`).
#include <fmt/format.h>

#include <cstring>

#include "core/thread_pool.h"
#include "format/dtype.h"
#include "format/logical_value.h"
#include "format/row_printer.h"
#include "stoke/table.h"
#include "table/scan.h"

namespace stoke {
namespace {

// MatchedRows::file_column of a column that a data file lacks (a later schema's): all null.
constexpr size_t kNotInFile = SIZE_MAX;

struct Scan {
  TableView t;
  std::optional<Predicate> where;
  std::vector<size_t> selected;  // table column indexes, in output order
};

Result<Scan> PrepareScan(const QueryOptions& o) {
  if (o.limit < kNoLimit) return Status::InvalidArgument(fmt::format("query: `limit` must be -1 (all) or at least 0, got {}", o.limit));
  if (o.offset < 0) return Status::InvalidArgument(fmt::format("query: `offset` must be at least 0, got {}", o.offset));
  Scan s;
  STOKE_ASSIGN_OR_RETURN(s.t, OpenDatasetView(o.table_dir, o.version));
  const auto& columns = s.t.columns;
  if (!o.where.empty()) {
    STOKE_ASSIGN_OR_RETURN(s.where, Predicate::Parse(o.where));
    STOKE_RETURN_IF_ERROR(s.where->Bind(columns));
  }
  if (o.select.empty()) {
    for (size_t c = 0; c < columns.size(); ++c) s.selected.push_back(c);
  }
  for (const auto& name : o.select) {
    auto it = std::find_if(columns.begin(), columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
    if (it == columns.end()) {
      std::vector<std::string> names;
      for (const auto& c : columns) names.push_back(c.name);
      return Status::InvalidArgument(fmt::format("select: unknown column '{}' (columns: {})", name, fmt::join(names, ", ")));
    }
    s.selected.push_back(static_cast<size_t>(it - columns.begin()));
  }
  return s;
}

// What ScanMatches hands its consumer for each row group with matching rows.
struct MatchedRows {
  const ParquetReader& reader;
  int row_group;
  const std::vector<size_t>& file_column;             // by table column: index in the data file
  const std::map<std::string, ColumnValues>& decoded;  // the selected scalar columns (and the predicate's)
  const std::vector<size_t>& rows;                     // matching rows of the row group, ascending
};

// Per file, from its add statistics: -1 no row can match, 1 every row matches (counting: the file
// is not opened), 0 it must be read; `records` gets each file's numRecords (-1 unknown). Parsing the
// statistics of 100,000s of files is the bulk of a count, so it runs on every core.
Status DecideFromStats(const Scan& s, bool want_rows, std::vector<int8_t>* decision, std::vector<int64_t>* records) {
  const TableView& t = s.t;
  const auto& files = t.snapshot.files;
  constexpr size_t kChunk = 4096;
  const size_t chunks = (files.size() + kChunk - 1) / kChunk;
  // Only the predicate's columns' statistics are read.
  std::vector<ColumnSpec> stat_columns;
  for (const auto& c : t.columns) {
    if (s.where && std::binary_search(s.where->columns().begin(), s.where->columns().end(), c.name)) {
      stat_columns.push_back(c);
    }
  }
  auto decide = [&](size_t chunk) -> Status {
    AddStatsReader reader(stat_columns);
    for (size_t i = chunk * kChunk; i < std::min(files.size(), (chunk + 1) * kChunk); ++i) {
      int64_t& n = (*records)[i];
      const auto stats = FileStats(files[i], reader, &n);
      if ((s.where && !s.where->MayMatch(stats, n)) || files[i].LiveRecords(n) == 0) {
        (*decision)[i] = -1;
      } else if (!want_rows && files[i].LiveRecords(n) >= 0 && (!s.where || s.where->MustMatch(stats, n))) {
        // The statistics describe every row of the file, deleted ones too: what holds for all of
        // them holds for the live ones, which the deletion vector's cardinality counts.
        (*decision)[i] = 1;
      }
    }
    return Status::OK();
  };
  if (chunks > 1) {
    ThreadPool pool(0);
    return ParallelFor(pool, chunks, decide);
  }
  return chunks == 1 ? decide(0) : Status::OK();
}

// Per table column, its leaf in the file (kNotInFile for an OPTIONAL column added after the file was
// written; unset for partition and nested columns).
Result<std::vector<size_t>> FileColumns(const TableView& t, const ParquetReader& reader) {
  std::vector<size_t> file_col(t.columns.size());
  for (size_t c = 0; c < t.columns.size(); ++c) {
    // Partition columns' values come from the log; nested ones are read whole by name, not as a leaf.
    if (t.IsPartitionColumn(t.columns[c].name) || t.columns[c].nested()) continue;
    auto found = FindFileColumn(reader, t.columns[c]);
    if (!found.ok() && t.columns[c].optional) {
      file_col[c] = kNotInFile;  // added to the schema after this file was written: null
      continue;
    }
    STOKE_ASSIGN_OR_RETURN(file_col[c], std::move(found));
  }
  return file_col;
}

// Visits the rows matching the predicate, file by file and row group by row group (snapshot order),
// skipping files and row groups whose statistics exclude it; passes over the first o.offset and stops
// after o.limit rows. With o.count_only, counts without decoding the selected columns and without
// calling on_rows (and without an offset).
template <typename OnRows>
Status ScanMatches(const Scan& s, const QueryOptions& o, QueryReport* report, OnRows&& on_rows) {
  const TableView& t = s.t;
  const bool want_rows = !o.count_only;
  auto limit_reached = [&] { return want_rows && o.limit >= 0 && report->rows >= o.limit; };
  int64_t pass_over = want_rows ? o.offset : 0;
  const auto& files = t.snapshot.files;
  report->files_total = static_cast<int64_t>(files.size());
  std::vector<int8_t> decision(files.size(), 0);
  std::vector<int64_t> records(files.size(), -1);
  if (s.where || !want_rows) STOKE_RETURN_IF_ERROR(DecideFromStats(s, want_rows, &decision, &records));
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& add = files[i];
    if (limit_reached()) break;
    if (decision[i] < 0) continue;
    if (decision[i] > 0) {
      report->rows += add.LiveRecords(records[i]);
      ++report->files_counted_from_stats;
      continue;
    }
    ++report->files_scanned;
    STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(*t.storage, t.FilePath(add)));
    STOKE_ASSIGN_OR_RETURN(const std::vector<uint64_t> deleted, DeletedRows(t, add));
    STOKE_ASSIGN_OR_RETURN(const std::vector<size_t> file_col, FileColumns(t, *reader));
    report->row_groups_total += reader->num_row_groups();
    for (int g = 0; g < reader->num_row_groups(); ++g) {
      if (limit_reached()) break;
      const int64_t n = reader->metadata().row_groups[g].num_rows;
      const int64_t first_row = reader->row_group_starts()[g];
      if (s.where || !want_rows) {
        const auto rg_stats = RowGroupStats(t, add, *reader, g);
        if (s.where && !s.where->MayMatch(rg_stats, n)) continue;
        if (!want_rows && (!s.where || s.where->MustMatch(rg_stats, n))) {
          report->rows += n - CountDeletedRows(deleted, first_row, n);
          continue;
        }
      }
      ++report->row_groups_scanned;
      std::map<std::string, ColumnValues> decoded;
      auto decode = [&](size_t c) -> Status {
        if (decoded.count(t.columns[c].name)) return Status::OK();
        STOKE_ASSIGN_OR_RETURN(auto v, ReadRowGroupColumn(t, add, *reader, g, t.columns[c]));
        decoded.emplace(t.columns[c].name, std::move(v));
        return Status::OK();
      };
      std::vector<uint8_t> keep(static_cast<size_t>(n), 1);
      if (s.where) {
        std::map<std::string, const ColumnValues*> cols;
        for (const auto& name : s.where->columns()) {
          auto it = std::find_if(t.columns.begin(), t.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
          STOKE_RETURN_IF_ERROR(decode(static_cast<size_t>(it - t.columns.begin())));
          cols[name] = &decoded.at(name);
        }
        STOKE_RETURN_IF_ERROR(s.where->Evaluate(cols, static_cast<size_t>(n), &keep));
      }
      ClearDeletedRows(deleted, first_row, n, keep.data());
      if (!want_rows) {
        for (uint8_t k : keep) report->rows += k;
        continue;
      }
      std::vector<size_t> rows;
      for (int64_t r = 0; r < n && !(o.limit >= 0 && report->rows + static_cast<int64_t>(rows.size()) >= o.limit); ++r) {
        if (!keep[r]) continue;
        if (pass_over > 0) {
          --pass_over;
        } else {
          rows.push_back(static_cast<size_t>(r));
        }
      }
      if (rows.empty()) continue;
      for (size_t c : s.selected) {
        if (!t.columns[c].paged()) STOKE_RETURN_IF_ERROR(decode(c));
      }
      STOKE_RETURN_IF_ERROR(on_rows(MatchedRows{*reader, g, file_col, decoded, rows}));
      report->rows += static_cast<int64_t>(rows.size());
    }
  }
  return Status::OK();
}

// One tensor or blob cell (one positioned read); NotFound for a null cell.
Status ReadPagedCell(const ParquetReader& reader, int row_group, size_t row, size_t file_column, AlignedBuffer* cell) {
  if (file_column == kNotInFile) return Status::NotFound("a column the file does not have");
  return reader.ReadBinaryCell(reader.row_group_starts()[row_group] + static_cast<int64_t>(row), file_column, cell);
}

// A column's values as a query result holds them: decimals as their exact text, dates (int32 days)
// as int64 days (NumPy's datetime64[D]).
ValueVector ResultValues(const ColumnSpec& spec, const ValueVector& values) {
  if (spec.logical == LogicalType::kDate) {
    const auto& days = std::get<std::vector<int32_t>>(values);
    return std::vector<int64_t>(days.begin(), days.end());
  }
  const size_t n = std::visit([](const auto& v) { return v.size(); }, values);
  std::vector<std::string> texts;
  texts.reserve(n);
  for (size_t i = 0; i < n; ++i) texts.push_back(FormatDecimal(DecimalAt(values, i), spec.scale));
  return texts;
}

DType ScalarDType(parquet::Type type) { return DTypeOfPhysicalType(type).value_or(DType::kInt64); }

}  // namespace

Result<QueryRows> QueryTableRows(const QueryOptions& o) {
  STOKE_ASSIGN_OR_RETURN(Scan s, PrepareScan(o));
  const TableView& t = s.t;
  std::vector<PrintedColumn> pcols;
  QueryRows result;
  result.counted = o.count_only;
  for (size_t c : s.selected) {
    const ColumnSpec& spec = t.columns[c];
    pcols.push_back({spec.name, spec.type, spec.is_string, spec.logical, spec.scale, spec.nested()});
    result.rows.columns.push_back(TextColumnOf(pcols.back()));
  }
  AlignedBuffer cell;
  STOKE_RETURN_IF_ERROR(ScanMatches(s, o, &result.report, [&](const MatchedRows& m) -> Status {
    // Index of each row's value among the present values, per selected scalar column.
    std::vector<std::vector<int64_t>> value_index(s.selected.size());
    for (size_t k = 0; k < s.selected.size(); ++k) {
      const ColumnSpec& col = t.columns[s.selected[k]];
      if (col.paged()) continue;
      const auto& v = m.decoded.at(col.name);
      value_index[k].resize(v.num_rows());
      int64_t next = 0;
      for (size_t r = 0; r < v.num_rows(); ++r) value_index[k][r] = (v.defined.empty() || v.defined[r]) ? next++ : -1;
    }
    for (size_t r : m.rows) {
      std::vector<std::optional<std::string>> row(s.selected.size());
      for (size_t k = 0; k < s.selected.size(); ++k) {
        const size_t c = s.selected[k];
        if (t.columns[c].paged()) {
          Status st = ReadPagedCell(m.reader, m.row_group, r, m.file_column[c], &cell);
          if (st.code() == StatusCode::kNotFound) continue;  // null
          STOKE_RETURN_IF_ERROR(st);
          row[k] = BinaryCell(AsChars(cell.view()));
        } else if (value_index[k][r] >= 0) {
          row[k] = CellText(pcols[k], m.decoded.at(t.columns[c].name).values, static_cast<size_t>(value_index[k][r]));
        }
      }
      result.rows.rows.push_back(std::move(row));
    }
    return Status::OK();
  }));
  return result;
}

std::string QueryRowsText(const QueryRows& rows, RowFormat format) {
  if (rows.counted) return fmt::format("{}\n", rows.report.rows);
  const QueryReport& r = rows.report;
  return RowsText(rows.rows, format,
                  fmt::format("; scanned {} of {} files, {} of their {} row groups", r.files_scanned, r.files_total,
                              r.row_groups_scanned, r.row_groups_total));
}

namespace {

// The result column of table column `spec`: its kind and, for numbers and tensors, its dtype and shape.
QueryColumn ResultColumn(const ColumnSpec& spec) {
  QueryColumn q;
  q.name = spec.name;
  if (spec.tensor) {
    q.kind = ColumnKind::kTensor;
    q.dtype = spec.tensor->dtype;
    q.shape = spec.tensor->shape;
  } else if (spec.logical == LogicalType::kDate || spec.logical == LogicalType::kTimestamp ||
             spec.logical == LogicalType::kTimestampNtz) {
    q.kind = spec.logical == LogicalType::kDate ? ColumnKind::kDate : ColumnKind::kTimestamp;
    q.dtype = DType::kInt64;
  } else if (spec.logical == LogicalType::kDecimal) {
    q.kind = ColumnKind::kDecimal;
  } else if (spec.nested()) {
    q.kind = ColumnKind::kNested;
  } else if (spec.type == parquet::Type::kByteArray || spec.type == parquet::Type::kFixedLenByteArray ||
             spec.type == parquet::Type::kInt96) {
    q.kind = spec.is_string ? ColumnKind::kString : ColumnKind::kBinary;
  } else {
    q.kind = ColumnKind::kScalar;
    q.dtype = ScalarDType(spec.type);
  }
  return q;
}

// Appends the matched rows' cells of tensor column `spec` (leaf `file_column`) to q: zeros, marked
// invalid, for a null cell.
Status AppendTensorCells(const MatchedRows& m, const ColumnSpec& spec, size_t file_column, AlignedBuffer& cell,
                         QueryColumn* q) {
  const size_t before = q->valid.size();
  const size_t cell_bytes = static_cast<size_t>(spec.tensor->num_bytes());
  q->data.resize((before + m.rows.size()) * cell_bytes);
  for (size_t i = 0; i < m.rows.size(); ++i) {
    Status st = ReadPagedCell(m.reader, m.row_group, m.rows[i], file_column, &cell);
    uint8_t* dst = q->data.data() + (before + i) * cell_bytes;
    if (st.code() == StatusCode::kNotFound) {  // null: zeros, marked invalid
      std::memset(dst, 0, cell_bytes);
      q->valid.push_back(0);
      continue;
    }
    STOKE_RETURN_IF_ERROR(st);
    if (cell.size() != cell_bytes) {
      return Status::Corruption(fmt::format("{}: row {} of row group {}: column '{}' holds {} bytes, its tensor "
                                            "type {}{} needs {}", m.reader.path(), m.rows[i], m.row_group,
                                            spec.name, cell.size(), DTypeName(spec.tensor->dtype),
                                            fmt::format("[{}]", fmt::join(spec.tensor->shape, ",")), cell_bytes));
    }
    std::memcpy(dst, cell.data(), cell_bytes);
    q->valid.push_back(1);
  }
  return Status::OK();
}

// Appends the matched rows' cells of blob column (leaf `file_column`) to q's strings.
Status AppendBlobCells(const MatchedRows& m, size_t file_column, AlignedBuffer& cell, QueryColumn* q) {
  for (size_t r : m.rows) {
    Status st = ReadPagedCell(m.reader, m.row_group, r, file_column, &cell);
    if (st.code() == StatusCode::kNotFound) {  // null
      q->strings.emplace_back();
      q->valid.push_back(0);
      continue;
    }
    STOKE_RETURN_IF_ERROR(st);
    q->strings.emplace_back(AsChars(cell.view()));
    q->valid.push_back(1);
  }
  return Status::OK();
}

// Appends the matched rows' values of a scalar, string, decimal or nested column to q.
void AppendDecodedValues(const MatchedRows& m, const ColumnSpec& spec, QueryColumn* q) {
  const size_t before = q->valid.size();
  ColumnValues taken = TakeRows(m.decoded.at(spec.name), m.rows);
  size_t v = 0;  // next present value
  for (size_t i = 0; i < m.rows.size(); ++i) q->valid.push_back(taken.defined.empty() || taken.defined[i] ? 1 : 0);
  if (q->kind == ColumnKind::kDecimal || q->kind == ColumnKind::kDate) taken.values = ResultValues(spec, taken.values);
  if (q->kind == ColumnKind::kDecimal || q->kind == ColumnKind::kNested) {
    const auto& texts = std::get<std::vector<std::string>>(taken.values);
    for (size_t i = 0; i < m.rows.size(); ++i) q->strings.push_back(q->valid[before + i] ? texts[v++] : std::string());
    return;
  }
  std::visit(
      [&](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        if constexpr (std::is_same_v<T, std::string>) {
          for (size_t i = 0; i < m.rows.size(); ++i) q->strings.push_back(q->valid[before + i] ? values[v++] : std::string());
        } else {
          const size_t size = sizeof(T);
          q->data.resize((before + m.rows.size()) * size);
          uint8_t* dst = q->data.data() + before * size;
          for (size_t i = 0; i < m.rows.size(); ++i, dst += size) {
            const T x = q->valid[before + i] ? values[v++] : T{};
            std::memcpy(dst, &x, size);
          }
        }
      },
      taken.values);
}

}  // namespace

Result<QueryResult> QueryTableColumns(const QueryOptions& o) {
  STOKE_ASSIGN_OR_RETURN(Scan s, PrepareScan(o));
  const TableView& t = s.t;
  QueryResult result;
  for (size_t c : s.selected) result.columns.push_back(ResultColumn(t.columns[c]));
  AlignedBuffer cell;
  STOKE_RETURN_IF_ERROR(ScanMatches(s, o, &result.report, [&](const MatchedRows& m) -> Status {
    for (size_t k = 0; k < s.selected.size(); ++k) {
      const ColumnSpec& spec = t.columns[s.selected[k]];
      QueryColumn& q = result.columns[k];  // valid is kept for every row, trimmed at the end
      if (spec.tensor) {
        STOKE_RETURN_IF_ERROR(AppendTensorCells(m, spec, m.file_column[s.selected[k]], cell, &q));
      } else if (spec.blob) {
        STOKE_RETURN_IF_ERROR(AppendBlobCells(m, m.file_column[s.selected[k]], cell, &q));
      } else {
        AppendDecodedValues(m, spec, &q);
      }
    }
    return Status::OK();
  }));
  for (QueryColumn& q : result.columns) {
    if (std::find(q.valid.begin(), q.valid.end(), 0) == q.valid.end()) q.valid.clear();
  }
  return result;
}

}  // namespace stoke
