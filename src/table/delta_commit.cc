// DeltaLog::Commit: a new version written with put-if-absent, its timestamp never below its
// predecessor's, and retried on top of winners whose actions do not conflict (the conflict rules are
// in commit_conflicts.cc; delta_log.cc has the decisions they follow).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "core/clock.h"
#include "core/log.h"
#include "core/mutex.h"
#include "core/random.h"
#include "core/text.h"
#include "io/object_storage.h"
#include "table/delta_log.h"
#include "table/delta_log_shared.h"
#include "table/log_replay.h"
#include "table/table_features.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

constexpr char kEngineInfo[] = "stoke/0.1.0";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string Dump(const ordered_json& j) { return j.dump(-1, ' ', false, ordered_json::error_handler_t::replace); }

// The timestamp of a commit's actions (its commitInfo's), when it has one.
std::optional<int64_t> CommitTimestamp(const std::vector<Action>& actions) {
  for (const Action& a : actions) {
    if (const auto* ci = std::get_if<CommitInfo>(&a)) {
      if (auto ts = delta::CommitTimestamp(*ci)) return ts;
    }
  }
  return std::nullopt;
}

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
// one, at most one commitInfo, domainMetadata only in a kExclusive commit without exclusive_allows,
// and creating the table (read_version -1) needs a protocol and a metaData action. A metaData without an id gets one, and when creating the table its creation time.
// The effective kind is kExclusive, without exclusive_allows, for a commit that creates the table or
// carries protocol or metaData; kRewrite for a kBlindAppend that removes files; else `kind`.
Result<CheckedActions> CheckActions(std::vector<Action>& actions, int64_t read_version, CommitKind kind,
                                    std::function<bool(const std::vector<Action>&)> exclusive_allows,
                                    const std::string& table_dir) {
  CheckedActions checked;
  CommitClaims& claims = checked.claims;
  claims.read_version = read_version;
  bool has_protocol = false, has_metadata = false;
  std::string domain;  // of a domainMetadata action, when there is one
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
    } else if (const auto* d = std::get_if<DomainMetadata>(&a)) {
      domain = d->domain;
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
  // Two commits that change one domain conflict (PROTOCOL.md, "Domain Metadata"): a commit that
  // changes one goes on top of no winner.
  if (!domain.empty() && (claims.kind != CommitKind::kExclusive || claims.exclusive_allows)) {
    return Status::InvalidArgument(fmt::format(
        "Commit: a domainMetadata action (domain '{}') needs an exclusive commit that accepts no winner", domain));
  }
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

// What a commit needs of its predecessor, the version it is read on.
struct Predecessor {
  std::optional<int64_t> time;  // its timestamp; nullopt when there is none (a new table)
  bool in_commit_timestamps = false;  // the commit writes in-commit timestamps
};

// The predecessor of a commit of `actions` on top of `read_version`: its timestamp is `state`'s when
// `state` is that version, else its commitInfo's (first line), else its file's time. In-commit
// timestamps are written as the metaData among `actions` says, else as `state`'s does, else as the
// predecessor did (a table that has them enabled writes them in every commit since).
Predecessor ReadPredecessor(Storage& storage, const DeltaLog& log, const std::vector<Action>& actions,
                            int64_t read_version, const Snapshot* state) {
  std::optional<bool> ict;
  for (const Action& a : actions) {
    if (const auto* m = std::get_if<Boxed<Metadata>>(&a)) ict = InCommitTimestampsEnabled(**m);
  }
  Predecessor p;
  if (read_version < 0) {
    p.in_commit_timestamps = ict.value_or(false);
  } else if (state != nullptr && state->version == read_version) {
    p.time = state->timestamp;
    p.in_commit_timestamps = ict.value_or(InCommitTimestampsEnabled(state->metadata));
  } else {
    const std::string path = log.CommitPath(read_version);
    std::optional<CommitInfo> info = FirstLineCommitInfo(storage, path);
    p.time = info ? CommitTimestamp(*info) : std::nullopt;
    if (!p.time) p.time = FileTime(storage, path);
    p.in_commit_timestamps = ict.value_or(info && info->value.contains(kInCommitTimestampField));
  }
  return p;
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
// On a table with in-commit timestamps the same value is its inCommitTimestamp, which the feature's
// rules define the same way (PROTOCOL.md, "Writer Requirements for In-Commit Timestamps").
struct CommitStamp {
  CommitInfo info;
  int64_t timestamp = 0;
  bool in_commit_timestamp = false;

  // Sets the timestamp to the later of `now` and previous + 1, in `info` too.
  void Set(int64_t now, std::optional<int64_t> previous) {
    timestamp = previous && *previous >= now ? *previous + 1 : now;
    info.value["timestamp"] = timestamp;
    if (in_commit_timestamp) info.value[kInCommitTimestampField] = timestamp;
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
  const Predecessor previous = ReadPredecessor(storage_, *this, actions, read_version, state);
  stamp.in_commit_timestamp = previous.in_commit_timestamps;
  stamp.Set(CommitTimestamp(stamp.info).value_or(EpochMillis()), previous.time);
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
