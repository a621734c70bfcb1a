// stoke/bench.h: the loader as a training loop would drive it, the naive baseline (one .npy file per
// sample) on the same samples, reported alike, and the memory-copy limit.
#include <cstdio>
#include <string>

#include "example_support.h"
#include "stoke/bench.h"

stoke::Status Example(const std::string& dir) {
  STOKE_ASSIGN_OR_RETURN(std::string table, example::MakeSmallTable(dir));

  stoke::LoadBenchOptions load;
  load.table_dir = table;
  load.loader.batch_size = 16;
  load.epochs = 2;
  load.compute_ms = 1;  // the accelerator's time per batch, emulated
  STOKE_ASSIGN_OR_RETURN(stoke::LoadBenchReport loaded, stoke::RunLoadBench(load));
  std::printf("%s\n", stoke::LoadReportJson(loaded).c_str());

  stoke::PerFileBenchOptions files;
  files.dir = dir + "/volumes";  // the .npy files the table was ingested from
  files.batch_size = 16;
  files.epochs = 2;
  files.compute_ms = 1;
  STOKE_ASSIGN_OR_RETURN(stoke::PerFileBenchReport read, stoke::RunPerFileBench(files));
  std::printf("%s\n", stoke::PerFileReportJson(read).c_str());

  stoke::MemcpyBenchOptions copy;  // the warm limit: one memory copy per sample, no system call
  copy.table_dir = table;
  copy.batch_size = 16;
  copy.seconds = 0.1;
  STOKE_ASSIGN_OR_RETURN(stoke::MemcpyBenchReport copied, stoke::RunMemcpyBench(copy));
  std::printf("%s\n", stoke::MemcpyReportJson(copied).c_str());
  return example::Expect(loaded.samples == 128 && read.samples == 128 && copied.samples > 0,
                         "128 samples each, and copies");
}

int main() { return example::Run(Example); }
