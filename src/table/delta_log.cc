// The Delta Lake transaction log: log file names, replay into a snapshot, history. Commits are in
// delta_commit.cc, their conflict checks in commit_conflicts.cc, the actions' JSON in
// delta_actions.cc, schemas and statistics in delta_schema.cc. Protocol references are to
// delta-io/delta PROTOCOL.md.
//
// Decisions recorded here because readers of the code need them:
// - Conflicts (Commit): a winner that changed protocol or metaData conflicts with every kind; a
//   winner that added a path this commit adds, or that carries a txn of an appId this commit
//   carries, conflicts too (Delta's ConcurrentTransactionException); for kRewrite, a winner that
//   removed a path this commit removes conflicts (ConcurrentDeleteDeleteException). A commit that
//   carries protocol/metaData, or creates the table, is treated as kExclusive whatever `kind` says;
//   a kBlindAppend that removes files is treated as kRewrite.
#include "table/delta_log.h"

#include "core/log.h"
#include "format/logical_value.h"
#include "table/checkpoint.h"
#include "table/delta_log_shared.h"
#include "table/log_replay.h"
#include "table/table_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

#include "core/text.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr size_t kVersionDigits = 20;



bool IsDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int64_t ParseVersionDigits(std::string_view digits) {
  int64_t v = 0;
  for (char c : digits) {
    if (v > (INT64_MAX - 9) / 10) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// What a file in _delta_log is, from its name.
struct LogFileName {
  enum Kind { kOther, kCommit, kCheckpoint } kind = kOther;
  int64_t version = -1;
};

LogFileName ClassifyLogFile(std::string_view name) {
  LogFileName out;
  if (name.size() < kVersionDigits + 1) return out;
  std::string_view digits = name.substr(0, kVersionDigits);
  std::string_view rest = name.substr(kVersionDigits);
  if (!IsDigits(digits)) return out;
  if (rest == ".json") {
    out.kind = LogFileName::kCommit;
  } else if (rest.starts_with(".checkpoint.") && (rest.ends_with(".parquet") || rest.ends_with(".json"))) {
    // Classic (".checkpoint.parquet"), multi-part and V2 (".checkpoint.<uuid>.json|parquet").
    out.kind = LogFileName::kCheckpoint;
  } else {
    return out;  // .crc, temporary files, compacted logs: not ours to read
  }
  out.version = ParseVersionDigits(digits);
  if (out.version < 0) out.kind = LogFileName::kOther;
  return out;
}

}  // namespace

// The listing of _delta_log, reduced to what replay needs.
struct LogListing {
  int64_t from = 0;                    // versions before this one were not listed (ListRecentLog)
  std::set<int64_t> commits;           // versions with a commit file
  std::set<int64_t> checkpoints;       // versions with a checkpoint file
  std::vector<std::string> checkpoint_names;
  // Why the log could not be listed when its directory is missing: on an object store, the missing
  // container or bucket (a prefix without keys lists as empty).
  std::string missing;
  // Records `name` when it is a commit or checkpoint of version `from` or later.
  void Add(const std::string& name) {
    LogFileName n = ClassifyLogFile(name);
    if (n.version < from) return;
    if (n.kind == LogFileName::kCommit) commits.insert(n.version);
    if (n.kind == LogFileName::kCheckpoint) {
      checkpoints.insert(n.version);
      checkpoint_names.push_back(name);
    }
  }
  int64_t latest() const {
    int64_t v = commits.empty() ? -1 : *commits.rbegin();
    if (!checkpoints.empty()) v = std::max(v, *checkpoints.rbegin());
    return v;
  }
};

namespace {

// commitInfo's field `key`, when it is there and an int64.
std::optional<int64_t> Int64Field(const CommitInfo& ci, const char* key) {
  auto it = ci.value.find(key);
  if (it != ci.value.end() && it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it != ci.value.end() && it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t{INT64_MAX}) {
    return it->get<int64_t>();
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> CommitTimestamp(const CommitInfo& ci) {
  if (auto ict = Int64Field(ci, kInCommitTimestampField)) return ict;
  return Int64Field(ci, "timestamp");
}

// A commit's modification time (ms), the fallback timestamp of a commit without commitInfo.timestamp.
int64_t FileTime(Storage& storage, const std::string& path) {
  auto st = storage.Stat(path);
  return st.ok() ? st->modification_time_ms : 0;
}

// The commitInfo of a commit from its first line only (writers put commitInfo first), so that a
// snapshot taken from a checkpoint does not parse a commit of 100,000s of actions again. nullopt when
// the first line is not a commitInfo, or the file cannot be read.
std::optional<CommitInfo> FirstLineCommitInfo(Storage& storage, const std::string& path) {
  // 64 KiB holds nearly every first line; a longer one (a large commitInfo) is read on, up to 16 MiB.
  constexpr uint64_t kHead = 64 * 1024, kMaxLine = uint64_t{16} << 20;
  auto file = storage.OpenForRead(path);
  if (!file.ok()) return std::nullopt;
  const uint64_t size = (*file)->size();
  std::string head;
  size_t nl = std::string::npos;
  for (uint64_t read = 0; nl == std::string::npos && read < std::min(size, kMaxLine);) {
    const uint64_t n = std::min(read == 0 ? kHead : read, std::min(size, kMaxLine) - read);  // doubling
    head.resize(static_cast<size_t>(read + n));
    if (!(*file)->ReadAt(read, MutableByteView(reinterpret_cast<uint8_t*>(head.data()) + read, n)).ok()) return std::nullopt;
    nl = head.find('\n', static_cast<size_t>(read));
    read += n;
  }
  if (nl == std::string::npos && head.size() < size) return std::nullopt;  // a first line over kMaxLine
  auto actions = ParseCommit(std::string_view(head).substr(0, nl), path);
  if (!actions.ok() || actions->size() != 1 || !std::holds_alternative<CommitInfo>((*actions)[0])) return std::nullopt;
  return std::get<CommitInfo>(std::move((*actions)[0]));
}

// ---------------------------------------------------------------------------------------------
// DeltaLog.

namespace {

Result<LogListing> ListLog(Storage& storage, const std::string& log_dir) {
  LogListing out;
  auto names = storage.ListNames(log_dir);
  if (!names.ok()) {
    if (names.status().code() != StatusCode::kNotFound) return names.status();
    out.missing = names.status().message();
    return out;
  }
  for (const std::string& name : *names) out.Add(name);
  return out;
}

// The version `_last_checkpoint` names, when it is there and says one.
std::optional<int64_t> LastCheckpointVersion(Storage& storage, const std::string& log_dir) {
  auto text = storage.ReadFile(JoinPath(log_dir, "_last_checkpoint"));
  if (!text.ok()) return std::nullopt;
  auto j = json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("version") || !j["version"].is_number_integer()) return std::nullopt;
  const int64_t version = j["version"].get<int64_t>();
  return version >= 0 ? std::optional<int64_t>(version) : std::nullopt;
}

// Versions listed at a time by ListRecentLog: the names of a block share their first 18 digits.
constexpr int64_t kListBlock = 100;

// The log's listing from the checkpoint `_last_checkpoint` names on: the blocks of kListBlock
// versions from that one's, each one listing of the names with its prefix (on an object store a
// request, however long the log), until a block that does not end in a commit. Then neither a table
// open nor a commit lists more as the log grows. The whole listing (ListLog) when there is no hint,
// or when the listing from it holds neither that checkpoint nor a commit after it (a hint from
// another life of the table).
Result<LogListing> ListRecentLog(Storage& storage, const std::string& log_dir) {
  const std::optional<int64_t> hint = LastCheckpointVersion(storage, log_dir);
  if (!hint) return ListLog(storage, log_dir);
  LogListing out;
  out.from = *hint;
  for (int64_t block = *hint / kListBlock;; ++block) {
    auto names = storage.ListNamesWithPrefix(log_dir, fmt::format("{:0{}d}", block, kVersionDigits - 2));
    if (!names.ok()) return ListLog(storage, log_dir);
    for (const std::string& name : *names) out.Add(name);
    if (out.commits.count(block * kListBlock + kListBlock - 1)) continue;
    // A block that ends short is the log's last, unless commits are missing at its end: then the
    // next block's first commit is there (a stat, not a listing: locally a scan of the whole
    // directory), and the whole listing reports the gap, which a commit would otherwise fill.
    auto next = storage.Stat(JoinPath(log_dir, fmt::format("{:0{}d}.json", (block + 1) * kListBlock, kVersionDigits)));
    if (next.ok() || next.status().code() != StatusCode::kNotFound) return ListLog(storage, log_dir);
    break;
  }
  if (!out.checkpoints.count(*hint) && out.commits.empty()) return ListLog(storage, log_dir);
  return out;
}

// The timestamp of a commit's commitInfo from its first line (FirstLineCommitInfo); nullopt without one.
std::optional<int64_t> FirstLineTimestamp(Storage& storage, const std::string& path) {
  std::optional<CommitInfo> info = FirstLineCommitInfo(storage, path);
  return info ? CommitTimestamp(*info) : std::nullopt;
}

}  // namespace

DeltaLog::DeltaLog(Storage& storage, std::string table_dir) : storage_(storage), table_dir_(std::move(table_dir)) {}

std::string DeltaLog::log_dir() const { return JoinPath(table_dir_, kLogDirName); }

std::string DeltaLog::CommitPath(int64_t version) const {
  return JoinPath(log_dir(), fmt::format("{:020d}.json", version));
}

Result<int64_t> DeltaLog::LatestVersion() const {
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListRecentLog(storage_, log_dir()));
  return listing.latest();
}

Result<Snapshot> DeltaLog::ReadSnapshot(std::optional<int64_t> version) const {
  // From the latest checkpoint's listing; an older version, or a snapshot that cannot be read from
  // it (a checkpoint missing or unreadable), from the whole log's.
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListRecentLog(storage_, log_dir()));
  if (listing.from > 0 && (!version || *version >= listing.from)) {
    auto snapshot = ReadSnapshotFrom(listing, version);
    if (snapshot.ok()) return snapshot;
  }
  if (listing.from > 0) {
    STOKE_ASSIGN_OR_RETURN(listing, ListLog(storage_, log_dir()));
  }
  return ReadSnapshotFrom(listing, version);
}

Result<Snapshot> DeltaLog::ReadSnapshotFrom(const LogListing& listing, std::optional<int64_t> version) const {
  const std::string dir = log_dir();
  const int64_t latest = listing.latest();
  if (latest < 0) {
    return Status::NotFound(fmt::format("no Delta table at '{}' ({})", table_dir_,
                                        listing.missing.empty() ? "no commits in " + dir : listing.missing));
  }
  const int64_t target = version.value_or(latest);
  if (target < 0 || target > latest) {
    return Status::NotFound(
        fmt::format("table '{}' has no version {} (versions 0..{} exist)", table_dir_, target, latest));
  }
  // Start from the newest complete checkpoint at or below `target`; then every commit after it up
  // to `target` must be there. An unreadable checkpoint is skipped when the commits it summarises
  // are all present.
  Replayer replayer;
  int64_t start = 0;
  std::string checkpoint_path;
  for (auto it = listing.checkpoints.rbegin(); it != listing.checkpoints.rend(); ++it) {
    const int64_t cp = *it;
    if (cp > target || CheckpointFiles(listing.checkpoint_names, cp).empty()) continue;
    auto actions = ReadCheckpoint(storage_, dir, cp, listing.checkpoint_names);
    if (!actions.ok()) {
      bool commits_cover = static_cast<int64_t>(std::distance(listing.commits.begin(), listing.commits.upper_bound(cp))) == cp + 1;
      if (!commits_cover) return actions.status();
      STOKE_LOG(kWarn, "delta.checkpoint_unreadable", "table={} version={} error=\"{}\"", table_dir_, cp,
                actions.status().ToString());
      continue;
    }
    checkpoint_path = JoinPath(dir, CheckpointFiles(listing.checkpoint_names, cp).front());
    replayer.ApplyCheckpoint(std::move(*actions));
    start = cp + 1;
    break;
  }
  for (int64_t v = start; v <= target; ++v) {
    if (listing.commits.count(v)) continue;
    return Status::Corruption(fmt::format("{}: commit {} ({:020d}.json) is missing (versions {}..{} are needed for version {}{})",
                                          dir, v, v, start, target, target,
                                          start > 0 ? fmt::format(", after the checkpoint at version {}", start - 1) : ""));
  }
  int64_t timestamp = 0;
  for (int64_t v = start; v <= target; ++v) {
    const std::string path = CommitPath(v);
    std::optional<int64_t> ts;
    Status read = ForEachCommitAction(storage_, path, [&](Action& action) {
      if (const auto* ci = std::get_if<CommitInfo>(&action)) {
        if (!ts) ts = CommitTimestamp(*ci);
        return Status::OK();
      }
      return replayer.Apply(action, path);
    });
    if (!read.ok()) {
      if (read.code() == StatusCode::kNotFound) {
        return Status::Corruption(fmt::format("{}: commit {} vanished while reading the log", path, v));
      }
      return read;
    }
    // The file's time only when the commit has no timestamp (a stat is a request on object stores).
    if (v == target) timestamp = ts ? *ts : FileTime(storage_, path);
  }
  if (start > target) {  // the snapshot is the checkpoint itself
    std::optional<int64_t> ts = FirstLineTimestamp(storage_, CommitPath(target));
    if (!ts) {
      auto st = storage_.Stat(checkpoint_path);
      ts = st.ok() ? st->modification_time_ms : 0;
    }
    timestamp = *ts;
  }
  STOKE_ASSIGN_OR_RETURN(Snapshot snapshot, std::move(replayer).Finish(target, timestamp, dir));
  STOKE_RETURN_IF_ERROR(CheckReadable(snapshot, fmt::format("'{}' version {}", table_dir_, target)));
  return snapshot;
}

Status CheckAndWriteCheckpoint(Storage& storage, const DeltaLog& log, const Snapshot& snapshot) {
  STOKE_RETURN_IF_ERROR(CheckWritable(snapshot, WriteCommand::kCheckpoint, log.table_dir()));
  return WriteCheckpoint(storage, log.log_dir(), snapshot);
}

Status DeltaLog::Checkpoint(std::optional<int64_t> version) const {
  STOKE_ASSIGN_OR_RETURN(Snapshot snapshot, ReadSnapshot(version));
  return CheckAndWriteCheckpoint(storage_, *this, snapshot);
}

namespace {

// An int64 table property; nullopt when absent or not a number.
std::optional<int64_t> Int64Property(const Metadata& m, const std::string& key) {
  auto it = m.configuration.find(key);
  if (it == m.configuration.end()) return std::nullopt;
  int64_t v = 0;
  const char* end = it->second.data() + it->second.size();
  auto [ptr, ec] = std::from_chars(it->second.data(), end, v);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// The versions [lo, hi] time travel to `timestamp_ms` may land on: those that can be read (the
// commits there since the oldest whose successors are all there, from commit 0 or a checkpoint on),
// narrowed by in-commit timestamps' enablement (see VersionAt).
std::pair<int64_t, int64_t> TimeTravelRange(const LogListing& listing, const Metadata& latest, int64_t timestamp_ms) {
  int64_t hi = *listing.commits.rbegin(), lo = hi;
  while (listing.commits.count(lo - 1)) --lo;
  if (lo > 0) {  // commit 0 is gone: a version is read from a checkpoint at or after lo - 1
    auto checkpoint = listing.checkpoints.lower_bound(lo - 1);
    lo = checkpoint == listing.checkpoints.end() ? hi + 1 : std::max(lo, *checkpoint);
  }
  if (InCommitTimestampsEnabled(latest)) {
    auto version = Int64Property(latest, "delta.inCommitTimestampEnablementVersion");
    auto time = Int64Property(latest, "delta.inCommitTimestampEnablementTimestamp");
    if (version && time) {
      if (timestamp_ms >= *time) {
        lo = std::max(lo, *version);
      } else {
        hi = std::min(hi, *version - 1);
      }
    }
  }
  return {lo, hi};
}

// ISO-8601 text of a time in ms since the epoch, within years 1 to 9999; "<n> ms" beyond.
std::string TimeText(int64_t ms) {
  constexpr int64_t kYear1 = -62135596800000, kYear10000 = 253402300800000;
  return ms >= kYear1 && ms < kYear10000 ? FormatTimestamp(ms * 1000, /*utc=*/true) : fmt::format("{} ms", ms);
}

}  // namespace

Result<int64_t> DeltaLog::VersionAt(int64_t timestamp_ms) const {
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListLog(storage_, log_dir()));
  if (listing.commits.empty()) {
    return Status::NotFound(fmt::format("no Delta table at '{}'{}", table_dir_,
                                        listing.missing.empty() ? "" : " (" + listing.missing + ")"));
  }
  STOKE_ASSIGN_OR_RETURN(Snapshot latest, ReadSnapshotFrom(listing, std::nullopt));
  auto [lo, hi] = TimeTravelRange(listing, latest.metadata, timestamp_ms);
  // A commit's time as History gives it: its commitInfo's (the first line's, else the first
  // commitInfo in it), else its file's.
  auto time_of = [&](int64_t v) {
    const std::string path = CommitPath(v);
    std::optional<int64_t> ts = FirstLineTimestamp(storage_, path);
    if (!ts) {
      (void)ForEachCommitAction(storage_, path, [&](Action& a) {
        if (const auto* ci = std::get_if<CommitInfo>(&a); ci != nullptr && !ts) ts = CommitTimestamp(*ci);
        return Status::OK();
      });
    }
    return ts ? *ts : FileTime(storage_, path);
  };
  const int64_t first_time = lo <= hi ? time_of(lo) : 0;
  if (lo > hi || first_time > timestamp_ms) {
    const std::string when = TimeText(timestamp_ms);
    if (lo > hi) return Status::NotFound(fmt::format("table '{}' has no version at or before {}", table_dir_, when));
    return Status::NotFound(fmt::format("table '{}' has no version at or before {}: its earliest readable version, {}, "
                                        "was committed at {}",
                                        table_dir_, when, lo, TimeText(first_time)));
  }
  // The last version in [lo, hi] committed at or before the time: time_of(lo) is, time_of(hi + 1) is not.
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (time_of(mid) <= timestamp_ms) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

Result<std::vector<CommitSummary>> DeltaLog::History(int64_t limit) const {
  STOKE_ASSIGN_OR_RETURN(LogListing listing, ListLog(storage_, log_dir()));
  if (listing.commits.empty()) {
    return Status::NotFound(fmt::format("no Delta table at '{}'{}", table_dir_,
                                        listing.missing.empty() ? "" : " (" + listing.missing + ")"));
  }
  std::vector<CommitSummary> out;
  for (auto it = listing.commits.rbegin(); it != listing.commits.rend(); ++it) {
    const int64_t version = *it;
    if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
    const std::string path = CommitPath(version);
    CommitSummary s;
    s.version = version;
    s.info = nullptr;
    std::optional<int64_t> ts;
    STOKE_RETURN_IF_ERROR(ForEachCommitAction(storage_, path, [&](Action& a) {
      if (const auto* ci = std::get_if<CommitInfo>(&a)) {
        if (!ts) ts = CommitTimestamp(*ci);
        s.info = ci->value;
        auto op = ci->value.find("operation");
        if (op != ci->value.end() && op->is_string()) s.operation = op->get<std::string>();
      } else if (const auto* add = std::get_if<AddFile>(&a)) {
        ++s.files_added;
        s.bytes_added += add->size;
      } else if (const auto* rm = std::get_if<RemoveFile>(&a)) {
        ++s.files_removed;
        s.bytes_removed += rm->size.value_or(0);
      }
      return Status::OK();
    }));
    s.timestamp = ts ? *ts : FileTime(storage_, path);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace stoke::delta
