// V2 checkpoints (PROTOCOL.md, "V2 Checkpoint Table Feature", "V2 Spec", "Sidecar Files"): a
// UUID-named top-level file (JSON, one action per line, or Parquet) or a classic-named Parquet file
// holding the table's non-file actions, a checkpointMetadata action, and sidecar actions that name
// Parquet files in _delta_log/_sidecars with the add and remove actions.
#include <fmt/format.h>

#include <cctype>
#include <string>
#include <string_view>

#include "table/checkpoint.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;

constexpr std::string_view kSidecarDir = "_sidecars";
constexpr size_t kUuidChars = 36;  // 8-4-4-4-12

bool IsUuid(std::string_view s) {
  if (s.size() != kUuidChars) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? c != '-' : !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

bool IsV2CheckpointName(std::string_view name, int64_t version) {
  const std::string prefix = fmt::format("{:020d}.checkpoint.", version);
  if (name.substr(0, prefix.size()) != prefix) return false;
  std::string_view rest = name.substr(prefix.size());
  for (std::string_view ext : {".json", ".parquet"}) {
    if (rest.size() == kUuidChars + ext.size() && rest.substr(kUuidChars) == ext && IsUuid(rest.substr(0, kUuidChars))) {
      return true;
    }
  }
  return false;
}

Result<std::string> SidecarPath(const json& sidecar, const std::string& log_dir, std::string_view context) {
  auto bad = [&](std::string_view why) { return Status::Corruption(fmt::format("{}: sidecar: {}", context, why)); };
  if (!sidecar.is_object() || !sidecar.contains("path") || !sidecar["path"].is_string()) {
    return bad("expected an object with a string \"path\"");
  }
  auto decoded = DecodePath(sidecar["path"].get<std::string>());
  if (!decoded.ok()) return bad(decoded.status().message());
  std::string name = std::move(*decoded);
  // Sidecars always live in _delta_log/_sidecars; writers store the file name, or a path ending there.
  const size_t slash = name.rfind('/');
  if (slash != std::string::npos) {
    const std::string_view dir = std::string_view(name).substr(0, slash);
    if (dir != kSidecarDir && !dir.ends_with(fmt::format("_delta_log/{}", kSidecarDir))) {
      return bad(fmt::format("'{}' is not in _delta_log/{}", name, kSidecarDir));
    }
    name = name.substr(slash + 1);
  }
  if (name.empty() || name == "." || name == "..") return bad("an empty file name");
  return JoinPath(JoinPath(log_dir, std::string(kSidecarDir)), name);
}

Status ReadJsonCheckpoint(std::string_view text, const std::string& path, const std::string& log_dir,
                          CheckpointActions* out, std::vector<std::string>* sidecars) {
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return Status::Corruption(fmt::format("{}: line {}: not valid JSON", path, line_no));
    if (j.is_object() && j.size() == 1 && j.contains("sidecar")) {
      STOKE_ASSIGN_OR_RETURN(std::string sidecar, SidecarPath(j["sidecar"], log_dir, fmt::format("{}: line {}", path, line_no)));
      sidecars->push_back(std::move(sidecar));
      continue;
    }
    STOKE_ASSIGN_OR_RETURN(auto action, ParseAction(j, path, line_no));
    if (action && !std::holds_alternative<CommitInfo>(*action)) out->Add(std::move(*action));
  }
  return Status::OK();
}

}  // namespace stoke::delta
