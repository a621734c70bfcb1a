// The loader's scalar-column stage (docs/architecture.md): at Open it reads the selected scalar
// columns (integers, floats, booleans, strings, dates, timestamps) of every row of the table and
// the rows the loader serves (those `where` keeps and no deletion vector deletes), packed row by row
// (ScalarRows); during a run it copies a batch's rows out of them. Immutable after Read: every const
// method may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "loader/scalar_rows.h"
#include "stoke/loader.h"
#include "stoke/status.h"
#include "table/predicate.h"
#include "table/scan.h"

namespace stoke {

// A scalar column of the table: what it is and, while ScalarColumns::Read reads a run of files, the
// values of their rows (after Read they are packed in ScalarRows, and these are empty).
struct ScalarColumn {
  std::string name;
  DType dtype = DType::kInt64;
  bool is_string = false;
  std::vector<uint8_t> values;       // rows * DTypeSize(dtype), 0 where null
  std::vector<uint8_t> valid;        // rows, or empty when no value is null
  std::vector<std::string> strings;  // string columns: rows ("" where null)
  int32_t decimal_scale = -1;        // decimal columns (delivered as float64): the scale; -1 otherwise
};

class ScalarColumns {
 public:
  // How Read reaches the data files.
  struct ReadOptions {
    std::string table;           // the table's location, for messages
    int64_t expected_rows = 0;   // the sample index's rows: Corruption when the files hold others
    bool remote = false;         // an object store: each file's needed column chunks are fetched ahead
    uint64_t coalesce_gap = 0;   // remote: chunks at most this far apart are fetched in one request
  };

  // The dtype a column is delivered as: dates as int32 days since 1970-01-01, timestamps as int64
  // microseconds since the epoch (UTC for "timestamp"), bytes and shorts as int32, decimals (any
  // precision) as float64, unscaled / 10^scale rounded to a double, strings as uint8 text.
  // Unsupported, naming the column, for binary and nested columns (the loader's array columns are a
  // stage of their own: array_cells.h).
  static Result<DType> DTypeOf(const ColumnSpec& column);

  // Adds column `view_index` of the table (`column`, its spec) to those Read reads.
  Status Add(const ColumnSpec& column, size_t view_index);
  // Reads the added columns of every row of `view`'s data files (file by file, on up to 8 threads:
  // footers are small, latency-bound reads; a file whose statistics give its values is not opened),
  // and the rows `where` keeps less those deletion vectors delete. Corruption naming the table when
  // the files hold other rows than options.expected_rows.
  Status Read(const TableView& view, const std::optional<Predicate>& where, const ReadOptions& options);

  size_t size() const { return columns_.size(); }
  const ScalarColumn& column(size_t k) const { return columns_[k]; }
  const std::vector<ScalarColumn>& columns() const { return columns_; }
  // True when every table row is served, in table order.
  bool all_rows() const { return all_rows_; }
  // The rows served, ascending, when !all_rows().
  const std::vector<int64_t>& rows() const { return rows_; }
  // The table row of served row `i`.
  int64_t TableRow(int64_t i) const { return all_rows_ ? i : rows_[static_cast<size_t>(i)]; }
  // The first row served, or none (of a table of `table_rows`).
  std::optional<int64_t> FirstRow(int64_t table_rows) const;
  // How many of the table rows [first, end) are served, moving `*next` (a cursor into rows(), for
  // calls over ascending ranges) past them.
  int64_t ServedIn(int64_t first, int64_t end, size_t* next) const;
  // Sizes `out` for a batch of `rows` rows: the strings and the validity (the caller sizes values).
  void PrepareBatch(size_t rows, ScalarBatch out) const;
  // Copies the values of batch rows [begin, end) (table rows table_rows[begin, end)) into `out`,
  // sized by PrepareBatch. Disjoint ranges of one batch may be gathered by different threads at once.
  void Gather(std::span<const int64_t> table_rows, size_t begin, size_t end, ScalarBatch out) const;

 private:
  std::vector<ScalarColumn> columns_;
  ScalarRows packed_;  // every table row's values (Read)
  std::vector<size_t> view_index_;  // per column, its index in the view's columns
  std::vector<int64_t> rows_;
  bool all_rows_ = true;
};

}  // namespace stoke
