// Replaying a Delta log into a snapshot (delta_log.cc's reads and commits): a checkpoint's state,
// then the commits after it, each action applied as PROTOCOL.md's action reconciliation says.
// Internal to the table layer.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "table/checkpoint.h"
#include "table/delta_log.h"

namespace stoke::delta {

// Replays a checkpoint and the commits after it. A checkpoint is a reconciled state (no path added
// twice, no add of a removed path), so its actions are taken as they are, with no map of their
// paths: at 650,000 files that map was most of an open. Commits after it are replayed with maps of
// the paths they touch only, and Finish drops the checkpoint's adds and tombstones those replaced.
class Replayer {
 public:
  Replayer() = default;
  // Continues from `base`, a snapshot (what a commit on top of it then changes): its files and
  // tombstones are taken as a checkpoint's are.
  explicit Replayer(Snapshot&& base) {
    adds_ = std::move(base.files);
    superseded_.assign(adds_.size(), 0);
    tombstones_ = std::move(base.tombstones);
    checkpoint_adds_ = adds_.size();
    checkpoint_tombstones_ = tombstones_.size();
    own_begin_ = adds_.size();
    has_protocol_ = has_metadata_ = base.version >= 0;
    snapshot_ = std::move(base);
    snapshot_.files.clear();
    snapshot_.tombstones.clear();
  }

  // The actions of the checkpoint (before any commit), moved.
  // REQUIRES: every path decodes (ReadCheckpoint checks them, on the parts' threads).
  void ApplyCheckpoint(CheckpointActions&& checkpoint) {
    for (const Action& action : checkpoint.others) ApplyState(action);
    adds_ = std::move(checkpoint.adds);
    superseded_.assign(adds_.size(), 0);
    tombstones_ = std::move(checkpoint.removes);
    checkpoint = CheckpointActions{};
    checkpoint_adds_ = adds_.size();
    checkpoint_tombstones_ = tombstones_.size();
  }

  // Room for `n` more adds of commits (no doubling of 100,000s of them).
  void ReserveAdds(size_t n) {
    adds_.reserve(adds_.size() + n);
    superseded_.reserve(superseded_.size() + n);
  }

  // One action of a commit, in order (an add or remove is moved out of it).
  Status Apply(Action& action, const std::string& file) {
    if (auto* add = std::get_if<AddFile>(&action)) {
      STOKE_ASSIGN_OR_RETURN(std::string key, DecodedPath(add->path, file));
      if (auto it = FindLive(key); it != live_.end()) {
        Supersede(it->second);
        it->second = adds_.size();
      } else {
        live_.emplace(PathHash64(key), adds_.size());
      }
      if (auto it = FindTombstone(key); it != removed_.end()) {  // removed by a commit, now added again
        commit_tombstones_[it->second] = RemoveFile{};
        tombstone_dropped_[it->second] = 1;
        removed_.erase(it);
      }
      adds_.push_back(std::move(*add));
      superseded_.push_back(0);
    } else if (auto* rm = std::get_if<RemoveFile>(&action)) {
      STOKE_ASSIGN_OR_RETURN(std::string key, DecodedPath(rm->path, file));
      // Adds and removes are keyed by path and deletion vector (PROTOCOL.md, "Action Reconciliation"):
      // a commit that replaces a file's DV removes (path, old DV) and adds (path, new DV), in either
      // order, and the remove must not take the new add with it.
      if (auto it = FindLive(key); it != live_.end() && SameDeletionVector(adds_[it->second], *rm)) {
        Supersede(it->second);
        live_.erase(it);
      }
      if (auto it = FindTombstone(key); it != removed_.end()) {  // the latest remove of a path is kept
        commit_tombstones_[it->second] = std::move(*rm);
      } else {
        removed_.emplace(PathHash64(key), commit_tombstones_.size());
        commit_tombstones_.push_back(std::move(*rm));
        tombstone_dropped_.push_back(0);
      }
    } else {
      ApplyState(action);
    }
    return Status::OK();
  }

  // A commit on top of the base went in after other writers' commits: their actions, applied from
  // here on (after the commit's own), come first in the snapshot's file order, as in the log.
  void BeginEarlierCommits() {
    if (earlier_begin_ == kNone) earlier_begin_ = adds_.size();
  }

  Result<Snapshot> Finish(int64_t version, int64_t timestamp, const std::string& log_dir) && {
    if (!has_protocol_) return Status::Corruption(fmt::format("{}: no protocol action in versions 0..{}", log_dir, version));
    if (!has_metadata_) return Status::Corruption(fmt::format("{}: no metaData action in versions 0..{}", log_dir, version));
    snapshot_.version = version;
    snapshot_.timestamp = timestamp;
    // The checkpoint's adds and tombstones of paths a later commit added or removed (before the
    // rotation below, which moves only commits' adds and would leave live_'s indices stale).
    if (checkpoint_adds_ + checkpoint_tombstones_ > 0 && !(live_.empty() && removed_.empty())) {
      for (size_t i = 0; i < checkpoint_adds_; ++i) {
        if (Replaced(adds_[i].path)) Supersede(i);
      }
      std::erase_if(tombstones_, [&](const RemoveFile& r) { return Replaced(r.path); });
    }
    LiveAdds().swap(live_);
    if (earlier_begin_ != kNone) {  // [own_begin_, earlier_begin_) were this commit's adds
      std::rotate(adds_.begin() + static_cast<std::ptrdiff_t>(own_begin_),
                  adds_.begin() + static_cast<std::ptrdiff_t>(earlier_begin_), adds_.end());
      std::rotate(superseded_.begin() + static_cast<std::ptrdiff_t>(own_begin_),
                  superseded_.begin() + static_cast<std::ptrdiff_t>(earlier_begin_), superseded_.end());
    }
    // The live adds, compacted in place (no second vector of them).
    size_t kept = 0;
    for (size_t i = 0; i < adds_.size(); ++i) {
      if (superseded_[i]) continue;
      if (kept != i) adds_[kept] = std::move(adds_[i]);
      ++kept;
    }
    adds_.resize(kept);
    snapshot_.files = std::move(adds_);
    PathIndex().swap(removed_);
    tombstones_.reserve(tombstones_.size() + commit_tombstones_.size());
    for (size_t i = 0; i < commit_tombstones_.size(); ++i) {
      if (!tombstone_dropped_[i]) tombstones_.push_back(std::move(commit_tombstones_[i]));
    }
    std::vector<RemoveFile>().swap(commit_tombstones_);
    snapshot_.tombstones = std::move(tombstones_);
    return std::move(snapshot_);
  }

 private:
  void ApplyState(const Action& action) {
    if (const auto* p = std::get_if<Protocol>(&action)) {
      snapshot_.protocol = *p;
      has_protocol_ = true;
    } else if (const auto* m = std::get_if<Boxed<Metadata>>(&action)) {
      snapshot_.metadata = **m;
      has_metadata_ = true;
    } else if (const auto* t = std::get_if<Txn>(&action)) {
      auto [it, inserted] = snapshot_.app_versions.emplace(t->app_id, t->version);
      if (!inserted) it->second = std::max(it->second, t->version);
    } else if (const auto* d = std::get_if<DomainMetadata>(&action)) {
      if (d->removed) {
        snapshot_.domains.erase(d->domain);
      } else {
        snapshot_.domains[d->domain] = *d;
      }
    }
  }

  static bool SameDeletionVector(const AddFile& add, const RemoveFile& rm) {
    if (!add.deletion_vector || !rm.deletion_vector) return !add.deletion_vector && !rm.deletion_vector;
    return add.deletion_vector->UniqueId() == rm.deletion_vector->UniqueId();
  }

  void Supersede(size_t i) {
    superseded_[i] = 1;
    adds_[i] = AddFile{};  // frees its strings now
  }

  // Hash of a decoded path -> an index (into adds_ or commit_tombstones_): indexes by path without
  // holding the paths again (a commit of 650,000 files held 85 MB of key strings in each).
  using PathIndex = std::unordered_multimap<uint64_t, size_t>;
  using LiveAdds = PathIndex;
  // Whether `encoded` (an action's path) decodes to `key`.
  static bool SamePath(const std::string& encoded, const std::string& key) {
    if (encoded.find('%') == std::string::npos) return encoded == key;
    auto decoded = DecodePath(encoded);
    return decoded.ok() && *decoded == key;
  }
  // The entry of `index` for decoded path `key`: entries whose hash matches are checked against the
  // path of the action they point to (the entries' actions keep their paths while indexed).
  template <typename Actions>
  static PathIndex::iterator Find(PathIndex& index, const Actions& actions, const std::string& key) {
    auto [it, end] = index.equal_range(PathHash64(key));
    for (; it != end; ++it) {
      if (SamePath(actions[it->second].path, key)) return it;
    }
    return index.end();
  }
  PathIndex::iterator FindLive(const std::string& key) { return Find(live_, adds_, key); }
  PathIndex::iterator FindTombstone(const std::string& key) { return Find(removed_, commit_tombstones_, key); }
  static Result<std::string> DecodedPath(const std::string& path, const std::string& file) {
    auto decoded = DecodePath(path);
    if (!decoded.ok()) return Status::Corruption(fmt::format("{}: {}", file, decoded.status().message()));
    return std::move(decoded).value();
  }
  // Whether a commit added or removed the checkpoint's `path` (which decodes: see ApplyCheckpoint): a
  // path a commit touched is in live_ (added last) or in removed_ (removed last).
  bool Replaced(const std::string& path) {
    std::string decoded;
    if (path.find('%') != std::string::npos) {
      auto d = DecodePath(path);
      if (!d.ok()) return false;
      decoded = std::move(*d);
    }
    const std::string& key = decoded.empty() ? path : decoded;
    return FindLive(key) != live_.end() || FindTombstone(key) != removed_.end();
  }

  Snapshot snapshot_;
  std::vector<AddFile> adds_;                         // in the order added: the checkpoint's, then the commits'
  std::vector<char> superseded_;                      // per entry of adds_: 1 once removed or added again
  std::vector<RemoveFile> tombstones_;                // the checkpoint's
  size_t checkpoint_adds_ = 0, checkpoint_tombstones_ = 0;
  static constexpr size_t kNone = SIZE_MAX;
  size_t own_begin_ = 0;           // a commit on top of a base: where its adds start
  size_t earlier_begin_ = kNone;   // where the adds of commits that went in before it start
  PathIndex live_;                            // the commits' live adds: decoded path hash -> index in adds_
  std::vector<RemoveFile> commit_tombstones_;  // the commits' latest remove of each path, in order
  std::vector<char> tombstone_dropped_;        // per entry of commit_tombstones_: 1 once added again
  PathIndex removed_;                          // decoded path hash -> index in commit_tombstones_ (not dropped)
  bool has_protocol_ = false;
  bool has_metadata_ = false;
};

}  // namespace stoke::delta
