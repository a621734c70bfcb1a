// libFuzzer target: the top-level file of a V2 checkpoint (one action per line: protocol, metaData,
// checkpointMetadata, sidecar, add, remove, ...) from bytes, as ReadCheckpoint reads it. Beyond "no
// crash, no hang, no sanitizer report": every sidecar it accepts lies in _delta_log/_sidecars.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "table/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string log_dir = "/t/_delta_log";
  stoke::delta::CheckpointActions actions;
  std::vector<std::string> sidecars;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (!stoke::delta::ReadJsonCheckpoint(text, "fuzz.checkpoint.json", log_dir, &actions, &sidecars).ok()) return 0;
  const std::string dir = log_dir + "/_sidecars/";
  for (const std::string& s : sidecars) {
    if (s.compare(0, dir.size(), dir) != 0 || s.find('/', dir.size()) != std::string::npos) std::abort();
  }
  return 0;
}
