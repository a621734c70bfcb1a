// `stoke vacuum`: removes data files no retained version needs.
//
// A file is kept when it is live in the latest version, or in any version whose commit is newer
// than the retention cutoff, or in the last version before the cutoff (that version was the table
// until the first retained commit, so readers of the cutoff instant still see it); so is the
// deletion-vector file of each such add (PROTOCOL.md, "Deletion Vector Files"). Anything else
// under the table that is older than the cutoff is deleted (removed files and never-committed
// leftovers alike), but for hidden names at any depth (_delta_log, _stoke, '.' files) and tables
// inside the table. Files newer than the cutoff are never
// deleted, so a concurrent ingest's not-yet-committed files survive.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "core/log.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "io/uri.h"
#include "stoke/maintenance.h"
#include "table/delta_log.h"
#include "table/table_features.h"

namespace stoke {

namespace {

// The prefix of a kept name that any directory may hold (see KeepDeletionVectorFile).
const std::string kAnyDirectory = "*/";

// The commit time before which files no version needs may go: now less the retention period.
int64_t RetentionCutoffMs(double retain_hours) {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now_ms - static_cast<int64_t>(retain_hours * 3600.0 * 1000.0);
}

// The table's latest version, once vacuum may work on it: it is a table, and its protocol lets
// stoke write (checked before anything is deleted: PROTOCOL.md, "VACUUM Protocol Check").
Result<int64_t> LatestVacuumableVersion(const delta::DeltaLog& log, const std::string& table_dir) {
  STOKE_ASSIGN_OR_RETURN(int64_t latest, log.LatestVersion());
  if (latest < 0) {  // the log's own error says why (a missing directory, container or bucket)
    return log.ReadSnapshot(std::nullopt).status().WithContext(fmt::format("vacuum: '{}' is not a table", table_dir));
  }
  STOKE_ASSIGN_OR_RETURN(auto latest_snapshot, log.ReadSnapshot(latest));
  STOKE_RETURN_IF_ERROR(delta::CheckWritable(latest_snapshot, delta::WriteCommand::kVacuum, table_dir));
  return latest;
}

// Adds to `keep` the deletion-vector file of `add`, when it has one: its path relative to the table
// for a 'u' DV; for a 'p' DV, whose absolute path or URI need not spell the table's location as
// `table_dir` does, "*/" and its file name, which keeps every file of that name under the table.
Status KeepDeletionVectorFile(const delta::AddFile& add, const std::string& table_dir, std::set<std::string>* keep) {
  if (!add.deletion_vector || add.deletion_vector->storage_type == delta::kDvStorageInline) return Status::OK();
  STOKE_ASSIGN_OR_RETURN(std::string path, delta::DeletionVectorFilePath(*add.deletion_vector, table_dir));
  if (add.deletion_vector->storage_type == delta::kDvStorageAbsolutePath) {
    keep->insert(kAnyDirectory + BaseName(path));
  } else {
    keep->insert(PathUnder(path, table_dir));
  }
  return Status::OK();
}

// The files (decoded paths relative to the table) live in any version from the last one at or before
// `cutoff` (or 0) to `latest`, and the deletion-vector files of their adds: the state at that
// version (from its checkpoint and commits: old commits may be gone once a checkpoint covers them),
// then every later commit, replayed once.
Result<std::set<std::string>> RetainedFiles(Storage& fs, const delta::DeltaLog& log, int64_t latest, int64_t cutoff) {
  STOKE_ASSIGN_OR_RETURN(auto history, log.History());
  int64_t first_kept = 0;
  for (const auto& h : history) {
    if (h.timestamp <= cutoff) first_kept = std::max(first_kept, h.version);
  }
  std::set<std::string> live, keep;
  STOKE_ASSIGN_OR_RETURN(auto first, log.ReadSnapshot(first_kept));
  for (const auto& f : first.files) {
    STOKE_ASSIGN_OR_RETURN(std::string p, delta::DecodePath(f.path));
    live.insert(p);
    STOKE_RETURN_IF_ERROR(KeepDeletionVectorFile(f, log.table_dir(), &keep));
  }
  keep.insert(live.begin(), live.end());
  for (int64_t v = first_kept + 1; v <= latest; ++v) {
    STOKE_RETURN_IF_ERROR(delta::ForEachCommitAction(fs, log.CommitPath(v), [&](delta::Action& a) -> Status {
      if (const auto* add = std::get_if<delta::AddFile>(&a)) {
        STOKE_ASSIGN_OR_RETURN(std::string p, delta::DecodePath(add->path));
        live.insert(std::move(p));
        STOKE_RETURN_IF_ERROR(KeepDeletionVectorFile(*add, log.table_dir(), &keep));
      } else if (const auto* rm = std::get_if<delta::RemoveFile>(&a)) {
        STOKE_ASSIGN_OR_RETURN(std::string p, delta::DecodePath(rm->path));
        live.erase(p);
      }
      return Status::OK();
    }));
    keep.insert(live.begin(), live.end());
  }
  return keep;
}

// Every file under the table, through the storage's listing (a local directory tree, or the keys
// under an object-store prefix), that is not in `keep` and is older than `cutoff`, into
// report->files and report->bytes. As Delta's VACUUM: hidden names ('_' or '.' first: the log,
// stoke's cache, _SUCCESS, .crc files) are skipped at every depth, except partition directories
// (name=value). Beyond Delta, a directory holding a _delta_log of its own is another table: it is
// left whole rather than have its data deleted as files this table does not reference.
Status FindUnreferenced(Storage& fs, const std::string& dir, const std::set<std::string>& keep, int64_t cutoff,
                        const std::string& table_dir, VacuumReport* report) {
  auto hidden = [](const std::string& name) {
    return (name[0] == '_' || name[0] == '.') && name.find('=') == std::string::npos;
  };
  std::vector<std::string> pending = {""};  // directories to list, relative to the table
  while (!pending.empty()) {
    const std::string rel_dir = std::move(pending.back());
    pending.pop_back();
    STOKE_ASSIGN_OR_RETURN(auto entries, fs.List(rel_dir.empty() ? dir : JoinPath(dir, rel_dir)));
    if (!rel_dir.empty() && std::any_of(entries.begin(), entries.end(), [](const auto& e) {
          return e.is_directory && e.name == delta::kLogDirName;
        })) {
      STOKE_LOG(kWarn, "vacuum.nested_table", "table={} dir={} note=\"a table inside the table: left alone\"",
                table_dir, rel_dir);
      continue;
    }
    for (const auto& e : entries) {
      if (e.name.empty() || hidden(e.name)) continue;
      const std::string rel = rel_dir.empty() ? e.name : rel_dir + "/" + e.name;
      if (e.is_directory) {
        pending.push_back(rel);
        continue;
      }
      if (keep.count(rel) || keep.count(kAnyDirectory + e.name) || e.modification_time_ms > cutoff) continue;
      report->files.push_back(rel);
      report->bytes += static_cast<int64_t>(e.size);
    }
  }
  std::sort(report->files.begin(), report->files.end());
  return Status::OK();
}

// Deletes `files` (relative to `dir`) in parallel: a table compacted from 100,000s of small files
// has as many to delete, each a metadata operation (an unlink, or a request of tens of milliseconds
// on an object store). A file gone already (another vacuum) is no error.
Status DeleteFiles(Storage& fs, const std::string& dir, const std::vector<std::string>& files, const VacuumOptions& o) {
  const size_t threads = fs.remote() ? 64 : 8;
  ThreadPool pool(std::min(threads, files.size()));
  ProgressBar bar("vacuum", files.size(), "files", o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  Status deleted = ParallelFor(pool, files.size(), [&](size_t i) -> Status {
    Status s = fs.Delete(JoinPath(dir, files[i]));
    if (s.code() == StatusCode::kNotFound) s = Status::OK();
    if (s.ok()) STOKE_LOG(kInfo, "vacuum.deleted", "table={} file={}", o.table_dir, files[i]);
    bar.Add(1, 0);
    return s;
  });
  bar.Finish();
  return deleted;
}

}  // namespace

Result<VacuumReport> VacuumTable(const VacuumOptions& o) {
  if (!(o.retain_hours >= 0) || std::isinf(o.retain_hours)) {  // NaN fails the comparison
    return Status::InvalidArgument(fmt::format("vacuum: `retain_hours` must be a non-negative number of hours, got {}",
                                               o.retain_hours));
  }
  STOKE_ASSIGN_OR_RETURN(StorageLocation where, ResolveStorageLocation(o.table_dir));
  Storage& fs = *where.storage;
  delta::DeltaLog log(fs, where.path);
  STOKE_ASSIGN_OR_RETURN(int64_t latest, LatestVacuumableVersion(log, o.table_dir));
  const int64_t cutoff = RetentionCutoffMs(o.retain_hours);
  STOKE_ASSIGN_OR_RETURN(std::set<std::string> keep, RetainedFiles(fs, log, latest, cutoff));
  VacuumReport report;
  report.referenced_kept = static_cast<int64_t>(keep.size());
  STOKE_RETURN_IF_ERROR(FindUnreferenced(fs, where.path, keep, cutoff, o.table_dir, &report));
  if (!o.dry_run && !report.files.empty()) STOKE_RETURN_IF_ERROR(DeleteFiles(fs, where.path, report.files, o));
  return report;
}

}  // namespace stoke
