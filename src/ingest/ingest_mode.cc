// The names of IngestMode and OnChanged (stoke/ingest.h), as users type them.
#include <fmt/format.h>

#include "stoke/ingest.h"

namespace stoke {

Result<IngestMode> ParseIngestMode(std::string_view name) {
  if (name == "append") return IngestMode::kAppend;
  if (name == "overwrite") return IngestMode::kOverwrite;
  return Status::InvalidArgument(fmt::format("ingest: `mode` must be append or overwrite, not '{}'", name));
}

std::string_view IngestModeName(IngestMode mode) {
  switch (mode) {
    case IngestMode::kAppend: return "append";
    case IngestMode::kOverwrite: return "overwrite";
  }
  return "unknown";
}

Result<OnChanged> ParseOnChanged(std::string_view name) {
  if (name == "skip") return OnChanged::kSkip;
  if (name == "append") return OnChanged::kAppend;
  if (name == "error") return OnChanged::kError;
  return Status::InvalidArgument(
      fmt::format("ingest: `on_changed` must be skip, append or error, not '{}'", name));
}

std::string_view OnChangedName(OnChanged on_changed) {
  switch (on_changed) {
    case OnChanged::kSkip: return "skip";
    case OnChanged::kAppend: return "append";
    case OnChanged::kError: return "error";
  }
  return "unknown";
}

}  // namespace stoke
