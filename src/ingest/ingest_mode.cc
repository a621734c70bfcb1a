// The names of IngestMode (stoke/ingest.h), as users type them.
#include <fmt/format.h>

#include "stoke/ingest.h"

namespace stoke {

Result<IngestMode> ParseIngestMode(std::string_view name) {
  if (name == "append") return IngestMode::kAppend;
  if (name == "overwrite") return IngestMode::kOverwrite;
  return Status::InvalidArgument(fmt::format("ingest: --mode must be append or overwrite, not '{}'", name));
}

std::string_view IngestModeName(IngestMode mode) {
  switch (mode) {
    case IngestMode::kAppend: return "append";
    case IngestMode::kOverwrite: return "overwrite";
  }
  return "unknown";
}

}  // namespace stoke
