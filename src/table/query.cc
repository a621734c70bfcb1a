// `stoke query`: predicate scans over a table's scalar columns with file and row-group skipping.
#include <fmt/format.h>

#include "format/row_printer.h"
#include "stoke/table.h"
#include "table/scan.h"

namespace stoke {

Result<QueryReport> QueryTable(const QueryOptions& o, std::ostream& out) {
  STOKE_ASSIGN_OR_RETURN(TableView t, OpenTableView(o.table_dir, o.version));
  std::optional<Predicate> where;
  if (!o.where.empty()) {
    STOKE_ASSIGN_OR_RETURN(where, Predicate::Parse(o.where));
    STOKE_RETURN_IF_ERROR(where->Bind(t.columns));
  }
  // Selected columns, by table column index.
  std::vector<size_t> selected;
  if (o.select.empty()) {
    for (size_t c = 0; c < t.columns.size(); ++c) selected.push_back(c);
  } else {
    for (const auto& name : o.select) {
      auto it = std::find_if(t.columns.begin(), t.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
      if (it == t.columns.end()) {
        std::vector<std::string> names;
        for (const auto& c : t.columns) names.push_back(c.name);
        return Status::InvalidArgument(fmt::format("--select: unknown column '{}' (columns: {})", name, fmt::join(names, ", ")));
      }
      selected.push_back(static_cast<size_t>(it - t.columns.begin()));
    }
  }
  std::vector<RowPrinter::Column> pcols;
  for (size_t c : selected) pcols.push_back({t.columns[c].name, t.columns[c].type, t.columns[c].is_string});
  RowPrinter printer(pcols, o.format);

  QueryReport report;
  report.files_total = static_cast<int64_t>(t.snapshot.files.size());
  const bool want_rows = !o.count_only;
  for (const auto& add : t.snapshot.files) {
    if (want_rows && o.limit >= 0 && report.rows >= o.limit) break;
    int64_t records = -1;
    if (where && !where->MayMatch(FileStats(add, t.columns, &records), records)) continue;
    ++report.files_scanned;
    STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(LocalStorage(), t.FilePath(add)));
    std::vector<size_t> file_col(t.columns.size());
    for (size_t c = 0; c < t.columns.size(); ++c) {
      if (t.IsPartitionColumn(t.columns[c].name)) continue;  // its values come from the log
      STOKE_ASSIGN_OR_RETURN(file_col[c], reader->FindColumn(t.columns[c].name));
    }
    report.row_groups_total += reader->num_row_groups();
    for (int g = 0; g < reader->num_row_groups(); ++g) {
      if (want_rows && o.limit >= 0 && report.rows >= o.limit) break;
      const int64_t n = reader->metadata().row_groups[g].num_rows;
      if (where && !where->MayMatch(RowGroupStats(t, add, *reader, g), n)) continue;
      ++report.row_groups_scanned;
      // Decode the predicate's columns and the selected scalar columns; tensor cells are read one
      // positioned read per matching row.
      std::map<std::string, ColumnValues> decoded;
      auto decode = [&](size_t c) -> Status {
        if (decoded.count(t.columns[c].name)) return Status::OK();
        STOKE_ASSIGN_OR_RETURN(auto v, ReadRowGroupColumn(t, add, *reader, g, t.columns[c]));
        decoded.emplace(t.columns[c].name, std::move(v));
        return Status::OK();
      };
      std::vector<uint8_t> keep(static_cast<size_t>(n), 1);
      if (where) {
        std::map<std::string, const ColumnValues*> cols;
        for (const auto& name : where->columns()) {
          auto it = std::find_if(t.columns.begin(), t.columns.end(), [&](const ColumnSpec& c) { return c.name == name; });
          STOKE_RETURN_IF_ERROR(decode(static_cast<size_t>(it - t.columns.begin())));
          cols[name] = &decoded.at(name);
        }
        STOKE_RETURN_IF_ERROR(where->Evaluate(cols, static_cast<size_t>(n), &keep));
      }
      if (!want_rows) {
        for (uint8_t k : keep) report.rows += k;
        continue;
      }
      for (size_t c : selected) {
        if (!t.columns[c].tensor) STOKE_RETURN_IF_ERROR(decode(c));
      }
      // Index of each row's value among the present values, per selected scalar column.
      std::vector<std::vector<int64_t>> value_index(selected.size());
      for (size_t s = 0; s < selected.size(); ++s) {
        if (t.columns[selected[s]].tensor) continue;
        const auto& v = decoded.at(t.columns[selected[s]].name);
        value_index[s].resize(static_cast<size_t>(n));
        int64_t next = 0;
        for (int64_t r = 0; r < n; ++r) {
          bool present = v.defined.empty() || v.defined[r];
          value_index[s][r] = present ? next++ : -1;
        }
      }
      AlignedBuffer cell;
      for (int64_t r = 0; r < n; ++r) {
        if (!keep[r]) continue;
        if (o.limit >= 0 && report.rows >= o.limit) break;
        std::vector<std::optional<std::string>> row(selected.size());
        for (size_t s = 0; s < selected.size(); ++s) {
          const size_t c = selected[s];
          if (t.columns[c].tensor) {
            STOKE_RETURN_IF_ERROR(reader->ReadBinaryCell(reader->row_group_starts()[g] + r, file_col[c], &cell));
            row[s] = BinaryCell(AsChars(cell.view()));
          } else if (value_index[s][r] >= 0) {
            row[s] = RowPrinter::CellText(pcols[s], decoded.at(t.columns[c].name).values, static_cast<size_t>(value_index[s][r]));
          }
        }
        printer.AddRow(std::move(row));
        ++report.rows;
      }
    }
  }
  if (o.count_only) {
    out << report.rows << "\n";
  } else {
    printer.Print(out, o.format == CatOptions::Format::kTable
                           ? fmt::format("; scanned {} of {} files, {} of their {} row groups", report.files_scanned,
                                         report.files_total, report.row_groups_scanned, report.row_groups_total)
                           : "");
  }
  return report;
}

}  // namespace stoke
