// The Delta Lake transaction log: log file names, replay into a snapshot, commits and their
// conflict checks, history. The actions' JSON is in delta_actions.cc, schemas and statistics in
// delta_schema.cc. Protocol references are to delta-io/delta PROTOCOL.md.
//
// Decisions recorded here because readers of the code need them:
// - Conflicts (Commit): a winner that changed protocol or metaData conflicts with every kind; a
//   winner that added a path this commit adds, or that carries a txn of an appId this commit
//   carries, conflicts too (Delta's ConcurrentTransactionException); for kRewrite, a winner that
//   removed a path this commit removes conflicts (ConcurrentDeleteDeleteException). A commit that
//   carries protocol/metaData, or creates the table, is treated as kExclusive whatever `kind` says;
//   a kBlindAppend that removes files is treated as kRewrite.
#include "table/delta_log.h"

#include "core/clock.h"
#include "core/log.h"
#include "io/object_storage.h"
#include "table/checkpoint.h"
#include "table/log_replay.h"
#include "table/table_features.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <unordered_set>
#include <unordered_map>

#include "core/mutex.h"
#include "core/random.h"
#include "core/text.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr char kEngineInfo[] = "stoke/0.1.0";
constexpr size_t kVersionDigits = 20;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string Dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }


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

// commitInfo.timestamp, when it is there and an int64.
std::optional<int64_t> CommitTimestamp(const CommitInfo& ci) {
  auto it = ci.value.find("timestamp");
  if (it != ci.value.end() && it->is_number_integer() && !it->is_number_unsigned()) return it->get<int64_t>();
  if (it != ci.value.end() && it->is_number_unsigned() && it->get<uint64_t>() <= uint64_t{INT64_MAX}) {
    return it->get<int64_t>();
  }
  return std::nullopt;
}

// The commitInfo.timestamp of a commit, when it has one.
std::optional<int64_t> CommitTimestamp(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (const auto* ci = std::get_if<CommitInfo>(&a)) {
      if (auto ts = CommitTimestamp(*ci)) return ts;
    }
  }
  return std::nullopt;
}

}  // namespace

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

// A commit's modification time (ms), the fallback timestamp of a commit without commitInfo.timestamp.
int64_t FileTime(Storage& storage, const std::string& path) {
  auto st = storage.Stat(path);
  return st.ok() ? st->modification_time_ms : 0;
}

// The commitInfo timestamp of a commit from its first line only (writers put commitInfo first), so
// that a snapshot taken from a checkpoint does not parse a commit of 100,000s of actions again.
// nullopt when the first line is not a commitInfo with a timestamp, or the file cannot be read.
std::optional<int64_t> FirstLineTimestamp(Storage& storage, const std::string& path) {
  constexpr uint64_t kHead = 64 * 1024;
  auto file = storage.OpenForRead(path);
  if (!file.ok()) return std::nullopt;
  std::string head(static_cast<size_t>(std::min<uint64_t>((*file)->size(), kHead)), '\0');
  if (!(*file)->ReadAt(0, MutableByteView(reinterpret_cast<uint8_t*>(head.data()), head.size())).ok()) return std::nullopt;
  const size_t nl = head.find('\n');
  if (nl == std::string::npos && head.size() == kHead) return std::nullopt;  // a first line longer than that
  auto actions = ParseCommit(std::string_view(head).substr(0, nl), path);
  if (!actions.ok()) return std::nullopt;
  return CommitTimestamp(*actions);
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

namespace {

// The checkpoint of `snapshot`, unless the table uses a feature whose rules it would break.
Status CheckAndWriteCheckpoint(Storage& storage, const DeltaLog& log, const Snapshot& snapshot) {
  // Writer features a checkpoint keeps besides those every write keeps: it copies each action's
  // deletionVector.
  constexpr std::string_view kKeeps[] = {"deletionVectors"};
  STOKE_RETURN_IF_ERROR(CheckWritable(snapshot, "checkpoint", log.table_dir(), /*removes_data=*/false, kKeeps));
  return WriteCheckpoint(storage, log.log_dir(), snapshot);
}

}  // namespace

Status DeltaLog::Checkpoint(std::optional<int64_t> version) const {
  STOKE_ASSIGN_OR_RETURN(Snapshot snapshot, ReadSnapshot(version));
  return CheckAndWriteCheckpoint(storage_, *this, snapshot);
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

namespace {

// Commits on an object store are conditional puts (If-None-Match: *). A server that ignores the
// condition (s3rver does; so did S3 before August 2024) would let a second writer overwrite a
// commit, losing it. Probed once per process and table (two small PUTs and a DELETE under
// _delta_log); such a server is refused unless STOKE_SINGLE_WRITER=1 says only this process writes.
Status CheckConditionalCommits(Storage& storage, const std::string& table_dir) {
  static Mutex mu;
  static std::map<std::pair<const Storage*, std::string>, Status> probed GUARDED_BY(mu);
  MutexLock lock(&mu);
  auto key = std::make_pair(static_cast<const Storage*>(&storage), table_dir);
  auto it = probed.find(key);
  if (it == probed.end()) {
    Status probe = ProbeConditionalPut(storage, JoinPath(table_dir, kLogDirName));
    if (probe.code() == StatusCode::kUnsupported) {
      const char* single = std::getenv("STOKE_SINGLE_WRITER");
      if (single != nullptr && std::string(single) == "1") {
        STOKE_LOG(kWarn, "delta.unconditional_commits", "table={} (STOKE_SINGLE_WRITER=1: committing without a guard)",
                  table_dir);
        probe = Status::OK();
      } else {
        probe = Status::Unsupported(fmt::format(
            "the object store holding '{}' ignores conditional writes (If-None-Match), so two writers could "
            "overwrite each other's commit; if only this process writes to the table, set STOKE_SINGLE_WRITER=1",
            table_dir));
      }
    }
    // A failed probe (the network, say) is not remembered: the next commit probes again.
    if (!probe.ok() && probe.code() != StatusCode::kUnsupported) return probe;
    it = probed.emplace(key, probe).first;
  }
  return it->second;
}

}  // namespace

namespace {

// A commit's actions once checked, and what they claim.
struct CheckedActions {
  CommitClaims claims;           // with the effective kind
  bool has_commit_info = false;  // the actions carry their own commitInfo
};

// Collects what `actions`, committed on top of `read_version`, claim (decoded add and remove paths,
// txn application ids) and checks them (else InvalidArgument): every path decodes to a non-empty
// one, at most one commitInfo, and creating the table (read_version -1) needs a protocol and a
// metaData action. A metaData without an id gets one, and when creating the table its creation time.
// The effective kind is kExclusive, without exclusive_allows, for a commit that creates the table or
// carries protocol or metaData; kRewrite for a kBlindAppend that removes files; else `kind`.
Result<CheckedActions> CheckActions(std::vector<Action>& actions, int64_t read_version, CommitKind kind,
                                    std::function<bool(const std::vector<Action>&)> exclusive_allows,
                                    const std::string& table_dir) {
  CheckedActions checked;
  CommitClaims& claims = checked.claims;
  claims.read_version = read_version;
  bool has_protocol = false, has_metadata = false;
  int commit_infos = 0;
  for (Action& a : actions) {
    if (auto* add = std::get_if<AddFile>(&a)) {
      auto p = DecodePath(add->path);
      if (!p.ok() || p->empty()) return Status::InvalidArgument(fmt::format("Commit: bad add path '{}'", add->path));
      claims.adds.Insert(*p);
    } else if (auto* rm = std::get_if<RemoveFile>(&a)) {
      auto p = DecodePath(rm->path);
      if (!p.ok() || p->empty()) return Status::InvalidArgument(fmt::format("Commit: bad remove path '{}'", rm->path));
      claims.removes.Insert(*p);
    } else if (std::holds_alternative<Protocol>(a)) {
      has_protocol = true;
    } else if (auto* boxed = std::get_if<Boxed<Metadata>>(&a)) {
      Metadata* m = &**boxed;
      has_metadata = true;
      if (m->id.empty()) m->id = RandomUuid();
      if (!m->created_time && read_version == -1) m->created_time = EpochMillis();
    } else if (auto* t = std::get_if<Txn>(&a)) {
      claims.app_ids.insert(t->app_id);
    } else if (std::holds_alternative<CommitInfo>(a)) {
      ++commit_infos;
    }
  }
  claims.adds.Seal();
  claims.removes.Seal();
  if (commit_infos > 1) return Status::InvalidArgument("Commit: at most one commitInfo action per commit");
  if (read_version == -1 && (!has_protocol || !has_metadata)) {
    return Status::InvalidArgument(
        fmt::format("Commit: creating the table at '{}' needs a protocol and a metaData action", table_dir));
  }
  claims.kind = kind;
  if (read_version == -1 || has_protocol || has_metadata) {
    claims.kind = CommitKind::kExclusive;
    exclusive_allows = nullptr;  // creating the table or changing metadata never goes on top of a winner
  } else if (kind == CommitKind::kBlindAppend && !claims.removes.empty()) {
    claims.kind = CommitKind::kRewrite;
  }
  claims.exclusive_allows = std::move(exclusive_allows);
  checked.has_commit_info = commit_infos == 1;
  return checked;
}

// The commitInfo of a commit whose actions carry none: timestamp, operation, operationParameters
// (each value a JSON string, as Spark writes them; InvalidArgument unless they are an object or
// null), readVersion (unless creating the table), isBlindAppend and engineInfo.
Result<CommitInfo> NewCommitInfo(const std::string& operation, const json& operation_parameters, int64_t read_version,
                                 CommitKind effective) {
  json params = json::object();
  if (!operation_parameters.is_null()) {
    if (!operation_parameters.is_object()) {
      return Status::InvalidArgument("Commit: operation_parameters must be a JSON object");
    }
    for (auto it = operation_parameters.begin(); it != operation_parameters.end(); ++it) {
      params[it.key()] = it->is_string() ? it->get<std::string>() : Dump(*it);
    }
  }
  json info = json::object();
  info["timestamp"] = EpochMillis();
  info["operation"] = operation;
  info["operationParameters"] = std::move(params);
  if (read_version >= 0) info["readVersion"] = read_version;
  info["isBlindAppend"] = effective == CommitKind::kBlindAppend;
  info["engineInfo"] = kEngineInfo;
  return CommitInfo{std::move(info)};
}

// The commitInfo among `actions` (CheckActions allows one), moved out of them.
CommitInfo TakeCommitInfo(std::vector<Action>& actions) {
  auto it = std::find_if(actions.begin(), actions.end(), [](const Action& a) { return std::holds_alternative<CommitInfo>(a); });
  CommitInfo info = std::move(std::get<CommitInfo>(*it));
  actions.erase(it);
  return info;
}

// The timestamp of `version` (a commit's predecessor; nullopt for -1): `state`'s when it is that
// version, else the commit's commitInfo timestamp, else its file's time.
std::optional<int64_t> VersionTime(Storage& storage, const DeltaLog& log, int64_t version, const Snapshot* state) {
  if (version < 0) return std::nullopt;
  if (state != nullptr && state->version == version) return state->timestamp;
  const std::string path = log.CommitPath(version);
  if (auto ts = FirstLineTimestamp(storage, path)) return ts;
  return FileTime(storage, path);
}

// Readies `log` for a commit on top of `read_version`: creates the log directory for a new table
// (read_version -1), else NotFound unless that version exists.
Status PrepareLogFor(Storage& storage, const DeltaLog& log, int64_t read_version) {
  if (read_version == -1) return storage.CreateDirectories(log.log_dir());
  auto st = storage.Stat(log.CommitPath(read_version));
  if (!st.ok()) {
    if (st.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(
          fmt::format("Commit: table '{}' has no version {} to commit on top of", log.table_dir(), read_version));
    }
    return st.status();
  }
  return Status::OK();
}

// A commit's JSON until it is published, serialised one action at a time, each freed once written,
// so that a commit of 100,000s of files is never held twice. Where files can be linked (local disks)
// it goes to a temporary file in the log directory, synced, and published under the version's name
// by PublishIfAbsent, so it is never in memory whole (322 MB at 650,000 adds); the temporary file is
// deleted with the CommitFile unless published. On object stores, where a temporary object would
// cost two more requests, it is built in memory and PUT with PutIfAbsent.
class CommitFile {
 public:
  CommitFile(Storage& storage, std::string log_dir)
      : storage_(storage), log_dir_(std::move(log_dir)), staged_(!storage.CreateIsAtomic()) {}
  ~CommitFile() {
    if (!staged_path_.empty()) (void)storage_.Delete(staged_path_);
  }
  CommitFile(const CommitFile&) = delete;
  CommitFile& operator=(const CommitFile&) = delete;

  // Writes `commit_info` (when set) as the first line, then `actions` in order, freeing each action
  // (or moving it into `replay`, when given) once written, and then `actions` itself. REQUIRES: the
  // actions' paths were checked (CheckActions), so the replay cannot fail.
  Status Write(std::optional<Action>& commit_info, std::vector<Action>& actions, Replayer* replay,
               const std::string& table_dir) {
    auto write_lines = [&](auto&& line) -> Status {
      auto one = [&](Action& a) -> Status {
        std::string text = Dump(ActionJson(a));
        text += '\n';
        STOKE_RETURN_IF_ERROR(line(text));
        if (replay != nullptr) (void)replay->Apply(a, table_dir);
        a = CommitInfo{};
        return Status::OK();
      };
      if (commit_info) STOKE_RETURN_IF_ERROR(one(*commit_info));
      for (Action& a : actions) STOKE_RETURN_IF_ERROR(one(a));
      std::vector<Action>().swap(actions);
      return Status::OK();
    };
    if (!staged_) {
      return write_lines([&](const std::string& line) {
        bytes_ += line;
        return Status::OK();
      });
    }
    staged_path_ = JoinPath(log_dir_, fmt::format(".commit-{}.json.tmp", RandomUuid()));
    STOKE_ASSIGN_OR_RETURN(auto file, storage_.Create(staged_path_, /*exclusive=*/true));
    constexpr size_t kFlushBytes = 1 << 20;
    STOKE_RETURN_IF_ERROR(write_lines([&](const std::string& line) -> Status {
      bytes_ += line;
      if (bytes_.size() < kFlushBytes) return Status::OK();
      Status appended = file->Append(AsBytes(bytes_));
      bytes_.clear();
      return appended;
    }));
    if (!bytes_.empty()) STOKE_RETURN_IF_ERROR(file->Append(AsBytes(bytes_)));
    std::string().swap(bytes_);
    STOKE_RETURN_IF_ERROR(file->Sync());
    return file->Close();
  }

  // Replaces the commit's first line (its commitInfo) with `line` (ending in '\n'): a commit that
  // goes in after a winner takes a later timestamp. A staged commit is copied into a new temporary
  // file (1 MiB at a time), since the line's length may change.
  Status ReplaceFirstLine(const std::string& line) {
    if (!staged_) {
      const size_t nl = bytes_.find('\n');
      bytes_.replace(0, nl == std::string::npos ? bytes_.size() : nl + 1, line);
      return Status::OK();
    }
    const std::string old_path = staged_path_;
    staged_path_ = JoinPath(log_dir_, fmt::format(".commit-{}.json.tmp", RandomUuid()));
    Status copied = CopyWithFirstLine(old_path, line, staged_path_);
    if (!copied.ok()) {
      (void)storage_.Delete(staged_path_);
      staged_path_ = old_path;
      return copied;
    }
    (void)storage_.Delete(old_path);
    return Status::OK();
  }

  // Publishes the commit as `path` unless a file is there (AlreadyExists); once published, holds
  // nothing more.
  Status PublishAs(const std::string& path) {
    STOKE_RETURN_IF_ERROR(staged_ ? storage_.PublishIfAbsent(staged_path_, path) : storage_.PutIfAbsent(path, AsBytes(bytes_)));
    staged_path_.clear();       // published: nothing to delete
    std::string().swap(bytes_);  // the commit's JSON (322 MB at 650,000 adds) is not held any longer
    return Status::OK();
  }

 private:
  // Writes `line` and then what follows the first line of `from` to a new file `to`, synced.
  Status CopyWithFirstLine(const std::string& from, const std::string& line, const std::string& to) {
    STOKE_ASSIGN_OR_RETURN(auto in, storage_.OpenForRead(from));
    STOKE_ASSIGN_OR_RETURN(auto out, storage_.Create(to, /*exclusive=*/true));
    STOKE_RETURN_IF_ERROR(out->Append(AsBytes(line)));
    constexpr uint64_t kChunk = 1 << 20;
    std::string chunk;
    bool first_line_done = false;
    for (uint64_t at = 0; at < in->size(); at += chunk.size()) {
      chunk.resize(static_cast<size_t>(std::min<uint64_t>(kChunk, in->size() - at)));
      STOKE_RETURN_IF_ERROR(in->ReadAt(at, MutableByteView(reinterpret_cast<uint8_t*>(chunk.data()), chunk.size())));
      std::string_view rest(chunk);
      if (!first_line_done) {
        const size_t nl = rest.find('\n');
        if (nl == std::string_view::npos) continue;  // still inside the first line
        rest.remove_prefix(nl + 1);
        first_line_done = true;
      }
      STOKE_RETURN_IF_ERROR(out->Append(AsBytes(rest)));
    }
    STOKE_RETURN_IF_ERROR(out->Sync());
    return out->Close();
  }

  Storage& storage_;
  const std::string log_dir_;
  const bool staged_;
  std::string staged_path_;  // staged: the temporary file, until published
  std::string bytes_;        // in memory: the commit; staged: lines not appended yet
};

// A commit's commitInfo (its first line) and timestamp: never below its predecessor's, so that
// timestamps grow with versions (time travel by timestamp assumes it) even when writers' clocks
// differ or a commit goes in after winners that took their timestamps later.
struct CommitStamp {
  CommitInfo info;
  int64_t timestamp = 0;

  // Sets the timestamp to the later of `now` and previous + 1, in `info` too.
  void Set(int64_t now, std::optional<int64_t> previous) {
    timestamp = previous && *previous >= now ? *previous + 1 : now;
    info.value["timestamp"] = timestamp;
  }
  // Set(now, previous), as the commit's new first line.
  std::string After(int64_t previous) {
    Set(EpochMillis(), previous);
    return Dump(ActionJson(Action(info))) + "\n";
  }
};

// OK when none of the winning commits `first`..`last` conflicts with `claims` (CheckConcurrentCommit);
// Corruption when one of them is missing.
// With `replay` (a commit that keeps its state, see DeltaLog::Commit), each winner's actions are
// applied to it too, as commits that went in before this one; *replayed_through is then the last
// version applied (a failure to apply one leaves it where it was: the state is read from the log).
// *latest_timestamp becomes at least the largest commitInfo timestamp among them.
Status CheckWinners(Storage& storage, const DeltaLog& log, const CommitClaims& claims, int64_t first, int64_t last,
                    Replayer* replay, int64_t* replayed_through, int64_t* latest_timestamp) {
  for (int64_t w = first; w <= last; ++w) {
    const std::string path = log.CommitPath(w);
    auto text = ReadFileToString(storage, path);
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound) {
        return Status::Corruption(fmt::format("{}: winning commit {} is missing", log.log_dir(), w));
      }
      return text.status();
    }
    STOKE_ASSIGN_OR_RETURN(auto winner, ParseCommit(*text, path));
    text->clear();
    text->shrink_to_fit();
    STOKE_RETURN_IF_ERROR(CheckConcurrentCommit(claims, winner, w, log.table_dir()));
    const std::optional<int64_t> winner_time = CommitTimestamp(winner);  // else its file's (a stat)
    *latest_timestamp = std::max(*latest_timestamp, winner_time ? *winner_time : FileTime(storage, path));
    if (replay != nullptr && *replayed_through == w - 1) {
      replay->BeginEarlierCommits();
      bool applied = true;
      for (Action& a : winner) applied = applied && replay->Apply(a, path).ok();
      if (applied) *replayed_through = w;
    }
  }
  return Status::OK();
}

// Publishes `file` as the version after claims.read_version; when another writer took it, checks the
// winners since (CheckWinners) and tries the version after the latest, up to `max_attempts` times.
// Returns the version published. Conflict when a winner conflicts, when a kExclusive commit without
// exclusive_allows loses, or after max_attempts; the storage's other errors as they are. `claims` is
// freed on return (100,000s of paths).
// After losing to winners, the commit's timestamp (stamp) is moved past theirs (ReplaceFirstLine), so
// that timestamps never decrease with versions, whatever the writers' clocks.
Result<int64_t> PublishWithRetries(Storage& storage, const DeltaLog& log, CommitFile& file, CommitClaims claims,
                                   int max_attempts, Replayer* replay, int64_t* replayed_through, CommitStamp& stamp) {
  const int64_t read_version = claims.read_version;
  int64_t version = read_version + 1;
  int64_t checked = read_version;  // winners up to here hold nothing that conflicts
  for (int attempt = 1; attempt <= max_attempts; ++attempt) {
    Status s = file.PublishAs(log.CommitPath(version));
    if (s.ok()) return version;
    if (s.code() != StatusCode::kAlreadyExists) return s;
    if (claims.kind == CommitKind::kExclusive && !claims.exclusive_allows) {
      return Status::Conflict(fmt::format(
          "table '{}': version {} was committed by another writer first; a {} commit cannot be retried on top of it",
          log.table_dir(), version, read_version == -1 ? "table-creating" : "metadata-changing"));
    }
    STOKE_ASSIGN_OR_RETURN(int64_t latest, log.LatestVersion());
    latest = std::max(latest, version);
    int64_t winners_time = INT64_MIN;
    STOKE_RETURN_IF_ERROR(CheckWinners(storage, log, claims, checked + 1, latest, replay, replayed_through, &winners_time));
    if (winners_time >= stamp.timestamp) STOKE_RETURN_IF_ERROR(file.ReplaceFirstLine(stamp.After(winners_time)));
    checked = latest;
    version = latest + 1;
  }
  return Status::Conflict(fmt::format("table '{}': gave up after {} attempts lost to concurrent writers (last tried version {})",
                                      log.table_dir(), max_attempts, version));
}

// Sets *state to the snapshot at `version`, just committed: the replay's (consumed) when it holds
// every commit up to the one before (the version read, and the winners applied while retrying),
// else read from the log; an empty Snapshot, logged, when that fails.
void SetStateAfterCommit(const DeltaLog& log, std::optional<Replayer>& replay, int64_t replayed_through, int64_t version,
                         std::optional<int64_t> commit_time, Snapshot* state) {
  Result<Snapshot> now = version == replayed_through + 1
                             ? std::move(*replay).Finish(version, commit_time.value_or(EpochMillis()), log.log_dir())
                             : log.ReadSnapshot(version);
  replay.reset();
  if (now.ok()) {
    *state = std::move(*now);
  } else {
    STOKE_LOG(kWarn, "delta.state_unknown", "table={} version={} error=\"{}\"", log.table_dir(), version, now.status().ToString());
    *state = Snapshot{};
  }
}

// A checkpoint every kCheckpointInterval versions, and after a commit of very many actions, keeps
// opening fast: writes the one due after committing `version` of `num_actions` actions, from `state`
// when it is that version's, else from the log. It only speeds up reads, so a failure is logged.
void CheckpointIfDue(Storage& storage, const DeltaLog& log, int64_t version, size_t num_actions, const Snapshot* state) {
  if (!((version > 0 && version % kCheckpointInterval == 0) || num_actions > kCheckpointAfterActions)) return;
  Status cs = state != nullptr && state->version == version ? CheckAndWriteCheckpoint(storage, log, *state)
                                                            : log.Checkpoint(version);
  if (!cs.ok()) STOKE_LOG(kWarn, "delta.checkpoint_failed", "table={} version={} error=\"{}\"", log.table_dir(), version, cs.ToString());
}

}  // namespace

Result<int64_t> DeltaLog::Commit(int64_t read_version, std::vector<Action> actions, CommitKind kind,
                                 const std::string& operation, const nlohmann::json& operation_parameters,
                                 int max_attempts, std::function<bool(const std::vector<Action>&)> exclusive_allows,
                                 Snapshot* state) const {
  if (read_version < -1) return Status::InvalidArgument(fmt::format("Commit: read_version {} < -1", read_version));
  if (max_attempts < 1) return Status::InvalidArgument("Commit: max_attempts must be at least 1");
  if (state != nullptr && state->version != read_version) {
    return Status::InvalidArgument(fmt::format("Commit: the state given is version {}, not the read version {}",
                                               state->version, read_version));
  }
  STOKE_ASSIGN_OR_RETURN(CheckedActions checked,
                         CheckActions(actions, read_version, kind, std::move(exclusive_allows), table_dir_));
  // The commitInfo, the actions' own or a new one, written as the commit's first line (readers look
  // for the timestamp there); kept apart rather than inserted before 100,000s of actions, which
  // reallocated them all.
  CommitStamp stamp;
  if (checked.has_commit_info) {
    stamp.info = TakeCommitInfo(actions);
  } else {
    STOKE_ASSIGN_OR_RETURN(stamp.info, NewCommitInfo(operation, operation_parameters, read_version, checked.claims.kind));
  }
  STOKE_RETURN_IF_ERROR(PrepareLogFor(storage_, *this, read_version));
  if (storage_.CreateIsAtomic()) STOKE_RETURN_IF_ERROR(CheckConditionalCommits(storage_, table_dir_));
  stamp.Set(CommitTimestamp(stamp.info).value_or(EpochMillis()), VersionTime(storage_, *this, read_version, state));
  std::optional<Action> commit_info = Action(stamp.info);
  const size_t num_actions = actions.size() + 1;
  // With `state`, the actions move into a replay on top of it as they are written: the state at the
  // committed version is then known without reading the log (nor holding the actions twice).
  std::optional<Replayer> replay;
  if (state != nullptr) {
    replay.emplace(std::move(*state));
    replay->ReserveAdds(checked.claims.adds.size());
  }
  CommitFile file(storage_, log_dir());
  STOKE_RETURN_IF_ERROR(file.Write(commit_info, actions, replay ? &*replay : nullptr, table_dir_));
  int64_t replayed_through = read_version;  // the replay holds every commit up to this one
  STOKE_ASSIGN_OR_RETURN(int64_t version, PublishWithRetries(storage_, *this, file, std::move(checked.claims), max_attempts,
                                                             replay ? &*replay : nullptr, &replayed_through, stamp));
  if (replay) SetStateAfterCommit(*this, replay, replayed_through, version, stamp.timestamp, state);
  CheckpointIfDue(storage_, *this, version, num_actions, state);
  return version;
}

}  // namespace stoke::delta
