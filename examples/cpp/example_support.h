// What the C++ API examples share (not part of stoke's API): a scratch directory to work in and a
// small table in it. Each example's main() is `return example::Run(Example);`.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "stoke/ingest.h"
#include "stoke/status.h"
#include "stoke/tools.h"

namespace example {

// Writes `samples` volumes (.npy files of [8, 8, 4, 2] float32, and labels.csv) into dir/volumes
// and ingests them into the table dir/table, `rows_per_file` rows per data file (0: one file);
// returns the table's path.
inline stoke::Result<std::string> MakeSmallTable(const std::string& dir, int64_t samples = 64,
                                                 int64_t rows_per_file = 0) {
  stoke::SynthVolumesOptions volumes;
  volumes.out_dir = dir + "/volumes";
  volumes.samples = samples;
  volumes.shape = {8, 8, 4};
  volumes.channels = 2;
  volumes.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::SynthVolumes(volumes));
  stoke::IngestOptions ingest;
  ingest.source_dir = volumes.out_dir;
  ingest.labels_csv = volumes.out_dir + "/labels.csv";
  ingest.table_dir = dir + "/table";
  ingest.tensor_column = "volume";
  ingest.rows_per_file = rows_per_file;
  ingest.progress = false;
  STOKE_RETURN_IF_ERROR(stoke::IngestSources(ingest));
  return ingest.table_dir;
}

// An error naming `what` unless `condition` holds: the examples check what they show.
inline stoke::Status Expect(bool condition, const std::string& what) {
  return condition ? stoke::Status::OK() : stoke::Status::Internal("expected " + what);
}

// Runs example(dir) in a fresh scratch directory, deleted afterwards, and prints its error if it
// returns one. The exit status for main(): 0 when it returned OK.
template <typename Example>
int Run(Example&& example) {
  std::string dir = (std::filesystem::temp_directory_path() / "stoke_example_XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const stoke::Status status = example(dir);
  std::filesystem::remove_all(dir);
  if (!status.ok()) std::fprintf(stderr, "example failed: %s\n", status.ToString().c_str());
  return status.ok() ? 0 : 1;
}

}  // namespace example
