// `stoke bench delete-rows`: deletion vectors on a table, for the benchmarks (include/stoke/bench.h).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/clock.h"
#include "format/parquet_reader.h"
#include "stoke/bench.h"
#include "table/add_stats.h"
#include "table/deletion_vector.h"
#include "table/scan.h"
#include "table/table_features.h"

namespace stoke {
namespace {

constexpr std::string_view kOperation = "bench delete-rows";

// The rows the file holds: its stats' numRecords, else its footer's row count.
Result<int64_t> FileRows(const TableView& t, const delta::AddFile& add, AddStatsReader& stats) {
  const int64_t records = add.stats ? stats.NumRecords(*add.stats) : -1;
  if (records >= 0) return records;
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                         t.storage->OpenForReadWithSize(t.FilePath(add), static_cast<uint64_t>(add.size)));
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<ParquetReader> reader, ParquetReader::Open(std::move(file)));
  return reader->num_rows();
}

// The rows deleted after this run, ascending: `deleted` (before) plus round(fraction * live) of the
// other rows, chosen with `rng`.
std::vector<uint64_t> DeleteMore(const std::vector<uint64_t>& deleted, int64_t rows, double fraction,
                                 std::mt19937_64& rng) {
  std::vector<uint64_t> live;
  live.reserve(static_cast<size_t>(rows) - deleted.size());
  auto next = deleted.begin();
  for (uint64_t r = 0; r < static_cast<uint64_t>(rows); ++r) {
    if (next != deleted.end() && *next == r) {
      ++next;
    } else {
      live.push_back(r);
    }
  }
  const auto take = static_cast<size_t>(std::llround(fraction * static_cast<double>(live.size())));
  for (size_t i = 0; i < take; ++i) {  // a partial Fisher-Yates shuffle picks `take` of them
    std::uniform_int_distribution<size_t> pick(i, live.size() - 1);
    std::swap(live[i], live[pick(rng)]);
  }
  std::vector<uint64_t> out(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(take));
  out.insert(out.end(), deleted.begin(), deleted.end());
  std::sort(out.begin(), out.end());
  return out;
}

// The protocol and metadata checks: nothing is written to a table this run must not change. Writer
// versions 3 to 6 are refused too: upgraded to table features, they would list the features those
// versions imply (checkConstraints, changeDataFeed, ...), which stoke's writes then refuse.
Status CheckDeletable(const TableView& t, const std::string& table) {
  const int32_t writer = t.snapshot.protocol.min_writer_version;
  if (writer >= 3 && writer <= 6) {
    return Status::Unsupported(fmt::format("{}: table '{}' has writer version {}; deletion vectors are added to tables "
                                           "of writer version 2 or below, or 7; nothing was written",
                                           kOperation, table, writer));
  }
  return delta::CheckWritable(t.snapshot, delta::WriteCommand::kDeleteRows, table);
}

// The add's statistics with "tightBounds": false (PROTOCOL.md, "Per-file Statistics"): the bounds
// still describe every row of the file, deleted ones included; numRecords stays the file's rows.
std::optional<std::string> WideBounds(const std::optional<std::string>& stats) {
  if (!stats) return stats;
  auto j = nlohmann::json::parse(*stats, nullptr, false);
  if (!j.is_object()) return stats;  // malformed: left as it is (readers take it as unknown)
  j["tightBounds"] = false;
  return j.dump();
}

// The protocol and metadata actions that turn deletion vectors on, when the table lacks them.
void EnableDeletionVectors(const delta::Snapshot& snap, std::vector<delta::Action>* actions) {
  const auto& readers = snap.protocol.reader_features;
  if (std::find(readers.begin(), readers.end(), "deletionVectors") == readers.end()) {
    actions->push_back(delta::WithTableFeature(snap.protocol, "deletionVectors", /*reader_feature=*/true));
  }
  auto it = snap.metadata.configuration.find("delta.enableDeletionVectors");
  if (it == snap.metadata.configuration.end() || it->second != "true") {
    delta::Metadata meta = snap.metadata;
    meta.configuration["delta.enableDeletionVectors"] = "true";
    actions->push_back(delta::Boxed<delta::Metadata>(std::move(meta)));
  }
}

// The remove and the add that replace a file's deletion vector.
void ReplaceDeletionVector(const delta::AddFile& add, delta::DeletionVectorDescriptor dv, int64_t now,
                           std::vector<delta::Action>* actions) {
  actions->push_back(delta::RemoveOf(add, now, /*data_change=*/true));
  delta::AddFile next = add;
  next.data_change = true;
  next.stats = WideBounds(add.stats);
  next.deletion_vector = std::make_shared<const delta::DeletionVectorDescriptor>(std::move(dv));
  actions->push_back(std::move(next));
}

}  // namespace

Result<DeleteRowsReport> RunDeleteRows(const DeleteRowsOptions& o) {
  if (!(o.fraction >= 0 && o.fraction <= 1)) {
    return Status::InvalidArgument(fmt::format("fraction must be in [0, 1], got {}", o.fraction));
  }
  STOKE_ASSIGN_OR_RETURN(TableView t, OpenTableView(o.table));
  STOKE_RETURN_IF_ERROR(CheckDeletable(t, o.table));
  const std::vector<ColumnSpec> no_columns;
  AddStatsReader stats(no_columns);
  DeleteRowsReport report;
  report.files = static_cast<int64_t>(t.snapshot.files.size());
  std::vector<size_t> touched;
  std::vector<std::vector<uint64_t>> dvs;
  for (size_t i = 0; i < t.snapshot.files.size(); ++i) {
    const delta::AddFile& add = t.snapshot.files[i];
    STOKE_ASSIGN_OR_RETURN(const int64_t rows, FileRows(t, add, stats));
    STOKE_ASSIGN_OR_RETURN(const std::vector<uint64_t> deleted, DeletedRows(t, add));
    if (!deleted.empty() && deleted.back() >= static_cast<uint64_t>(rows)) {
      return Status::Corruption(fmt::format("the deletion vector of '{}' deletes row {}, beyond the file's {} rows",
                                            t.FilePath(add), deleted.back(), rows));
    }
    std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + i);
    std::vector<uint64_t> next = DeleteMore(deleted, rows, o.fraction, rng);
    report.rows_before += rows - static_cast<int64_t>(deleted.size());
    if (next.size() == deleted.size()) continue;
    report.rows_deleted += static_cast<int64_t>(next.size() - deleted.size());
    touched.push_back(i);
    dvs.push_back(std::move(next));
  }
  report.files_touched = static_cast<int64_t>(touched.size());
  if (touched.empty()) return report;
  STOKE_ASSIGN_OR_RETURN(std::vector<delta::DeletionVectorDescriptor> written,
                         delta::WriteDeletionVectorsFile(*t.storage, t.dir, dvs, ""));
  std::vector<delta::Action> actions;
  EnableDeletionVectors(t.snapshot, &actions);
  const delta::CommitKind kind = actions.empty() ? delta::CommitKind::kRewrite : delta::CommitKind::kExclusive;
  const int64_t now = EpochMillis();
  for (size_t k = 0; k < touched.size(); ++k) {
    ReplaceDeletionVector(t.snapshot.files[touched[k]], std::move(written[k]), now, &actions);
  }
  delta::DeltaLog log(*t.storage, t.dir);
  const nlohmann::json params = {{"predicate", fmt::format("random {} of each file's rows, seed {}", o.fraction, o.seed)}};
  // The snapshot read goes with the commit: its timestamp and metadata (in-commit timestamps) need no
  // read of the log.
  STOKE_ASSIGN_OR_RETURN(report.version, log.Commit(t.snapshot.version, std::move(actions), kind, "DELETE", params,
                                                    /*max_attempts=*/100, nullptr, &t.snapshot));
  return report;
}

}  // namespace stoke
