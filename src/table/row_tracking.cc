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

}  // namespace stoke::delta
