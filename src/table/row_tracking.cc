#include "table/row_tracking.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>

namespace stoke::delta {
namespace {

// The high-water mark of the snapshot's delta.rowTracking domain; -1 when the table has none yet.
Result<int64_t> HighWaterMark(const Snapshot& snapshot) {
  auto it = snapshot.domains.find(kRowTrackingDomain);
  if (it == snapshot.domains.end()) return int64_t{-1};
  const auto j = nlohmann::json::parse(it->second.configuration, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("rowIdHighWaterMark") || !j["rowIdHighWaterMark"].is_number_integer()) {
    return Status::Corruption(fmt::format("the {} domain's configuration has no integer rowIdHighWaterMark: {}",
                                          kRowTrackingDomain, it->second.configuration));
  }
  return j["rowIdHighWaterMark"].get<int64_t>();
}

// The numRecords of an add's statistics; nullopt without them.
std::optional<int64_t> NumRecords(const AddFile& add) {
  if (!add.stats) return std::nullopt;
  const auto j = nlohmann::json::parse(*add.stats, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("numRecords") || !j["numRecords"].is_number_integer()) return std::nullopt;
  const int64_t n = j["numRecords"].get<int64_t>();
  return n >= 0 ? std::optional<int64_t>(n) : std::nullopt;
}

}  // namespace

bool AssignsRowIds(const Snapshot& snapshot) {
  const auto& features = snapshot.protocol.writer_features;
  if (snapshot.protocol.min_writer_version != 7 ||
      std::find(features.begin(), features.end(), "rowTracking") == features.end()) {
    return false;
  }
  auto suspended = snapshot.metadata.configuration.find("delta.rowTrackingSuspended");
  return suspended == snapshot.metadata.configuration.end() || suspended->second != "true";
}

Status AssignRowIds(const Snapshot& snapshot, int64_t version, std::vector<Action>* actions) {
  STOKE_ASSIGN_OR_RETURN(int64_t mark, HighWaterMark(snapshot));
  const int64_t before = mark;
  for (Action& a : *actions) {
    auto* add = std::get_if<AddFile>(&a);
    if (add == nullptr || (add->tracking && add->tracking->base_row_id)) continue;
    const std::optional<int64_t> rows = NumRecords(*add);
    if (!rows) {
      return Status::InvalidArgument(fmt::format("row tracking: the add of '{}' has no numRecords to assign row ids by",
                                                 add->path));
    }
    FileTracking t = add->tracking ? *add->tracking : FileTracking{};
    t.base_row_id = mark + 1;
    t.default_row_commit_version = version;
    add->tracking = std::make_shared<const FileTracking>(std::move(t));
    mark += *rows;
  }
  if (mark != before) {
    actions->push_back(DomainMetadata{kRowTrackingDomain, nlohmann::json{{"rowIdHighWaterMark", mark}}.dump(), false});
  }
  return Status::OK();
}

namespace {

// The claims of a rewrite of `actions`, read at `read_version`, for checking winners.
CommitClaims RewriteClaims(const std::vector<Action>& actions, int64_t read_version) {
  CommitClaims claims;
  claims.read_version = read_version;
  claims.kind = CommitKind::kRewrite;
  for (const Action& a : actions) {
    if (const auto* add = std::get_if<AddFile>(&a)) {
      auto path = DecodePath(add->path);
      claims.adds.Insert(path.ok() ? *path : add->path);
    } else if (const auto* remove = std::get_if<RemoveFile>(&a)) {
      auto path = DecodePath(remove->path);
      claims.removes.Insert(path.ok() ? *path : remove->path);
    }
  }
  claims.adds.Seal();
  claims.removes.Seal();
  return claims;
}

}  // namespace

Result<int64_t> CommitRewriteAssigningRowIds(const DeltaLog& log, const Snapshot& read, std::vector<Action> actions,
                                             const std::string& operation, const nlohmann::json& parameters,
                                             Snapshot* state, int max_attempts) {
  const CommitClaims claims = RewriteClaims(actions, read.version);
  const Snapshot* base = &read;
  std::optional<Snapshot> newer;
  for (int attempt = 1;; ++attempt) {
    std::vector<Action> assigned = actions;
    STOKE_RETURN_IF_ERROR(AssignRowIds(*base, base->version + 1, &assigned));
    const int64_t read_version = base->version;
    // The first attempt may hand `read` (as `state`) to the commit; later ones their own snapshot.
    Snapshot* handed = attempt == 1 ? state : &*newer;
    auto version = log.Commit(read_version, std::move(assigned), CommitKind::kExclusive, operation, parameters, 1,
                              nullptr, handed);
    if (version.ok() || version.status().code() != StatusCode::kConflict || attempt >= max_attempts) return version;
    STOKE_ASSIGN_OR_RETURN(Snapshot latest, log.ReadSnapshot());
    for (int64_t v = read_version + 1; v <= latest.version; ++v) {
      std::vector<Action> winner;
      STOKE_RETURN_IF_ERROR(ForEachCommitAction(log.storage(), log.CommitPath(v), [&](Action& a) {
        winner.push_back(std::move(a));
        return Status::OK();
      }));
      STOKE_RETURN_IF_ERROR(CheckConcurrentCommit(claims, winner, v, log.table_dir()));
    }
    newer = std::move(latest);
    base = &*newer;
  }
}

Result<std::optional<MaterializedRowTracking>> MaterializedColumns(const Snapshot& snapshot, std::string_view table) {
  const auto& config = snapshot.metadata.configuration;
  auto enabled = config.find("delta.enableRowTracking");
  if (!AssignsRowIds(snapshot) || enabled == config.end() || enabled->second != "true") {
    return std::optional<MaterializedRowTracking>();
  }
  auto id = config.find("delta.rowTracking.materializedRowIdColumnName");
  auto version = config.find("delta.rowTracking.materializedRowCommitVersionColumnName");
  if (id == config.end() || version == config.end() || id->second.empty() || version->second.empty()) {
    return Status::Corruption(fmt::format("table '{}' enables row tracking without the names of its materialized row id "
                                          "and row commit version columns (delta.rowTracking.materialized*ColumnName)",
                                          table));
  }
  return std::optional<MaterializedRowTracking>(MaterializedRowTracking{id->second, version->second});
}

Status FillStableRowTracking(const MaterializedRowTracking& hidden, const std::string& column, const AddFile& add,
                             int64_t first, std::string_view file, ColumnValues* values) {
  const bool row_id = column == hidden.row_id;
  if (!row_id && column != hidden.row_commit_version) return Status::OK();
  if (values->defined.empty()) return Status::OK();  // every row holds its own
  const std::optional<int64_t> base = !add.tracking ? std::nullopt
                                      : row_id      ? add.tracking->base_row_id
                                                    : add.tracking->default_row_commit_version;
  if (!base) {
    return Status::Corruption(fmt::format("{}: its add has no {} to give its rows their {}", file,
                                          row_id ? "baseRowId" : "defaultRowCommitVersion",
                                          row_id ? "row ids" : "row commit versions"));
  }
  const auto& held = std::get<std::vector<int64_t>>(values->values);
  std::vector<int64_t> out;
  out.reserve(values->defined.size());
  for (size_t r = 0, v = 0; r < values->defined.size(); ++r) {
    out.push_back(values->defined[r] ? held[v++] : row_id ? *base + first + static_cast<int64_t>(r) : *base);
  }
  values->values = std::move(out);
  values->defined.clear();
  return Status::OK();
}

}  // namespace stoke::delta
