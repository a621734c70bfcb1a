// libFuzzer target: a Delta checkpoint file from bytes, read by the columnar checkpoint reader.
// Beyond "no crash, no hang, no sanitizer report": when both the columnar reader and the generic
// one (rows of JSON) accept the file, they must give the same actions.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "format/parquet_nested.h"
#include "io/memory_file.h"
#include "table/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = stoke::ParquetReader::Open(std::make_unique<stoke::MemoryFile>(data, size, "fuzz.checkpoint.parquet"));
  if (!r.ok()) return 0;
  if ((*r)->num_rows() > 100000) return 0;  // keep each run short
  stoke::delta::CheckpointActions columnar;
  if (!stoke::delta::ReadCheckpointColumns(**r, &columnar).ok()) return 0;
  auto rows = stoke::ReadNestedParquet(**r);
  if (!rows.ok()) return 0;
  stoke::delta::CheckpointActions generic;
  for (auto& row : *rows) {
    if (!row.is_object()) return 0;
    for (auto it = row.begin(); it != row.end(); ++it) {
      if (it->is_null() || it.key() == "commitInfo") continue;
      nlohmann::json one = nlohmann::json::object();
      one[it.key()] = it.value();
      auto parsed = stoke::delta::ParseAction(one, "fuzz", 1);
      if (!parsed.ok()) return 0;  // the generic path is stricter about some fields
      if (*parsed) generic.Add(std::move(**parsed));
    }
  }
  // Both grouped by kind, as the replay takes them.
  if (stoke::delta::SerializeCommit(std::move(columnar).ToActions()) != stoke::delta::SerializeCommit(std::move(generic).ToActions())) {
    std::abort();
  }
  return 0;
}
