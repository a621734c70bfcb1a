// Conflict checks between concurrent commits (delta_log.h): the claimed paths and the check of a
// commit against a winner that took its version first.
#include <fmt/format.h>

#include <algorithm>

#include "table/delta_log.h"

namespace stoke::delta {

PathClaims::PathClaims(std::initializer_list<std::string_view> paths) {
  for (std::string_view p : paths) Insert(p);
  Seal();
}

void PathClaims::Insert(std::string_view path) {
  const uint64_t h = PathHash64(path);
  sorted_ = sorted_ && (hashes_.empty() || hashes_.back() <= h);
  hashes_.push_back(h);
}

void PathClaims::Seal() {
  if (!sorted_) std::sort(hashes_.begin(), hashes_.end());
  sorted_ = true;
}

bool PathClaims::Contains(std::string_view path) const {
  const uint64_t h = PathHash64(path);
  if (!sorted_) return std::find(hashes_.begin(), hashes_.end(), h) != hashes_.end();
  return std::binary_search(hashes_.begin(), hashes_.end(), h);
}

Status CheckConcurrentCommit(const CommitClaims& mine, const std::vector<Action>& winner, int64_t winner_version,
                             std::string_view table_dir) {
  auto conflict = [&](std::string_view why) {
    return Status::Conflict(fmt::format("table '{}': concurrent commit at version {} {}; this commit (read version {}) was not written",
                                        table_dir, winner_version, why, mine.read_version));
  };
  if (mine.kind == CommitKind::kExclusive && !(mine.exclusive_allows && mine.exclusive_allows(winner))) {
    return conflict(mine.read_version == -1 ? "created the table first" : "came first, and this commit depends on the version it read");
  }
  for (const Action& a : winner) {
    if (std::holds_alternative<Protocol>(a)) return conflict("changed the protocol");
    if (std::holds_alternative<Boxed<Metadata>>(a)) return conflict("changed the table metadata");
    if (const auto* t = std::get_if<Txn>(&a); t && mine.app_ids.count(t->app_id)) {
      return conflict(fmt::format("carries a transaction of the same application '{}'", t->app_id));
    }
    if (const auto* add = std::get_if<AddFile>(&a)) {
      auto p = DecodePath(add->path);
      if (p.ok() && mine.adds.Contains(*p)) return conflict(fmt::format("added the same file '{}'", *p));
    }
    if (const auto* rm = std::get_if<RemoveFile>(&a)) {
      auto p = DecodePath(rm->path);
      if (p.ok() && mine.removes.Contains(*p)) return conflict(fmt::format("removed '{}', which this commit removes", *p));
    }
  }
  return Status::OK();
}

}  // namespace stoke::delta
