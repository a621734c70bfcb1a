// What a table already holds of an ingest's sources (ingested_sources.h).
#include "ingest/ingested_sources.h"

#include <algorithm>
#include <optional>

#include "core/mutex.h"
#include "core/thread_pool.h"
#include "format/parquet_reader.h"
#include "table/add_stats.h"
#include "table/column_mapping.h"

namespace stoke {
namespace {

// The cells of a STRING column by row (null for a null cell); all null when `column` is null.
std::vector<const std::string*> StringCellsByRow(const ColumnValues* column, size_t rows) {
  std::vector<const std::string*> cells(rows, nullptr);
  if (column == nullptr) return cells;
  const auto& values = std::get<std::vector<std::string>>(column->values);
  for (size_t r = 0, v = 0; r < rows && v < values.size(); ++r) {
    if (column->defined.empty() || column->defined[r]) cells[r] = &values[v++];
  }
  return cells;
}

// Folds one data file's rows (their `file`, `source_location` and `source_version` cells; no location columns
// in files written before stoke recorded them) into `out`. `candidates` are the plan's files from
// out->first on.
void MatchSourceRows(const SourceSet& planned, std::span<const DirEntry> candidates, const ColumnValues& files,
                     const ColumnValues* locations, const ColumnValues* versions, SourcesInTable* out) {
  const auto& names = std::get<std::vector<std::string>>(files.values);
  const auto location = StringCellsByRow(locations, names.size());
  const auto version = StringCellsByRow(versions, names.size());
  for (size_t r = 0; r < names.size(); ++r) {
    auto it = std::lower_bound(candidates.begin(), candidates.end(), names[r],
                               [](const DirEntry& e, const std::string& name) { return e.name < name; });
    if (it == candidates.end() || it->name != names[r]) continue;
    const size_t k = static_cast<size_t>(it - candidates.begin());
    const auto file = static_cast<uint32_t>(out->first + k);
    InTable& state = out->state[k];
    if (location[r] == nullptr) {
      state = InTable::kYes;
    } else if (*location[r] == planned.FileLocation(file) && state != InTable::kYes) {
      const bool same = version[r] != nullptr && *version[r] == planned.FileVersion(file);
      state = same ? InTable::kYes : InTable::kChanged;
      if (!same) out->table_versions[k] = version[r] ? *version[r] : "(none)";
    }
  }
}

// The names stoke's columns of ingested files have in the table's data files (their physical names
// under column mapping).
struct IngestedColumnNames {
  std::string file, id, location, version;

  explicit IngestedColumnNames(const std::vector<ColumnSpec>& table)
      : file(delta::FileColumnName(table, "file")),
        id(delta::FileColumnName(table, "id")),
        location(delta::FileColumnName(table, kSourceLocationColumn)),
        version(delta::FileColumnName(table, kSourceVersionColumn)) {}
};

// One data file's `file` cells, with its `source_location` and `source_version` cells where it has them, folded
// into `out` under `mu`; and the largest of its ids when `ids` is set.
Status ReadSourceRows(Storage& fs, const std::string& path, const IngestedColumnNames& names, const SourceSet& planned,
                      std::span<const DirEntry> candidates, Mutex& mu, SourcesInTable* out, int64_t* ids) {
  STOKE_ASSIGN_OR_RETURN(auto reader, ParquetReader::Open(fs, path));
  STOKE_ASSIGN_OR_RETURN(size_t file_col, reader->FindColumn(names.file));
  STOKE_ASSIGN_OR_RETURN(auto files, reader->ReadColumn(file_col));
  std::optional<ColumnValues> locations, versions;
  auto location_col = reader->FindColumn(names.location);
  auto version_col = reader->FindColumn(names.version);
  if (planned.has_locations && location_col.ok() && version_col.ok()) {
    STOKE_ASSIGN_OR_RETURN(locations, reader->ReadColumn(*location_col));
    STOKE_ASSIGN_OR_RETURN(versions, reader->ReadColumn(*version_col));
    // Columns of those names that are not strings are another writer's (the schema check refuses
    // the append): no locations.
    const auto strings = [](const ColumnValues& c) { return std::holds_alternative<std::vector<std::string>>(c.values); };
    if (!strings(*locations) || !strings(*versions)) {
      locations.reset();
      versions.reset();
    }
  }
  int64_t file_max = -1;
  if (ids != nullptr) {
    STOKE_ASSIGN_OR_RETURN(size_t id_col, reader->FindColumn(names.id));
    STOKE_ASSIGN_OR_RETURN(auto values, reader->ReadColumn(id_col));
    for (int64_t id : std::get<std::vector<int64_t>>(values.values)) file_max = std::max(file_max, id);
  }
  MutexLock lock(&mu);
  MatchSourceRows(planned, candidates, files, locations ? &*locations : nullptr, versions ? &*versions : nullptr, out);
  if (ids != nullptr) *ids = std::max(*ids, file_max);
  return Status::OK();
}

}  // namespace

Status ReadIngestedFiles(Storage& fs, const delta::Snapshot& snap, const std::vector<ColumnSpec>& table_columns,
                         const std::string& table_dir, const SourceSet& planned, size_t first,
                         std::span<const DirEntry> candidates, const std::string& run, SourcesInTable* out,
                         int64_t* max_id) {
  const auto by_name = [](const DirEntry& e, std::string_view name) { return e.name < name; };
  *max_id = -1;
  out->first = first;
  out->state.assign(candidates.size(), InTable::kNo);
  std::vector<size_t> to_open;
  std::vector<bool> needs_ids(snap.files.size(), true);
  // The `file` range and the largest id from the add statistics (a string maximum of 32 bytes or
  // more may be truncated by another writer, so AddStatsReader drops it: no longer an upper bound).
  const IngestedColumnNames names(table_columns);
  ColumnSpec file_column{.name = "file", .type = parquet::Type::kByteArray, .is_string = true, .physical_name = names.file};
  ColumnSpec id_column{.name = "id", .type = parquet::Type::kInt64, .physical_name = names.id};
  const std::vector<ColumnSpec> stat_columns = {file_column, id_column};
  AddStatsReader stats_reader(stat_columns);
  std::vector<Predicate::ColumnStats> stats;
  for (size_t i = 0; i < snap.files.size(); ++i) {
    const delta::AddFile& add = snap.files[i];
    const bool in_run = !run.empty() && add.tags.count(kIngestRunTag) && add.tags.at(kIngestRunTag) == run;
    if (in_run) needs_ids[i] = false;
    const std::string* lo = nullptr;
    const std::string* hi = nullptr;
    int64_t records = -1;
    if (add.stats && stats_reader.Read(*add.stats, &stats, &records)) {
      if (stats[0].min) lo = std::get_if<std::string>(&stats[0].min->v);
      if (stats[0].max) hi = std::get_if<std::string>(&stats[0].max->v);
      const int64_t* id = stats[1].max ? std::get_if<int64_t>(&stats[1].max->v) : nullptr;
      if (!in_run && id != nullptr) {
        *max_id = std::max(*max_id, *id);
        needs_ids[i] = false;
      }
    }
    bool may_hold_candidate = true;
    if (lo != nullptr && hi != nullptr) {
      auto it = std::lower_bound(candidates.begin(), candidates.end(), *lo, by_name);
      may_hold_candidate = it != candidates.end() && it->name <= *hi;
    }
    if (may_hold_candidate || needs_ids[i]) to_open.push_back(i);
  }
  Mutex mu;
  ThreadPool pool(std::min<size_t>(std::max<size_t>(to_open.size(), 1), fs.parallelism()));
  return ParallelFor(pool, to_open.size(), [&](size_t k) -> Status {
    const size_t i = to_open[k];
    STOKE_ASSIGN_OR_RETURN(std::string rel, delta::DecodePath(snap.files[i].path));
    return ReadSourceRows(fs, JoinPath(table_dir, rel), names, planned, candidates, mu, out,
                          needs_ids[i] ? max_id : nullptr);
  });
}

}  // namespace stoke
