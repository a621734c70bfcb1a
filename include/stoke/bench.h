// Benchmarks: the loader (`stoke bench load`) and the baselines it is compared with on the same
// samples (`stoke bench files`: one .npy file per sample, read the naive way). Both report the same
// figures, also as one line of JSON with the same keys, for bench/load_vs_baselines.sh.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "stoke/loader.h"
#include "stoke/status.h"

namespace stoke {

// ---- stoke bench files: the per-file baseline ---------------------------------------------------
//
// For each sample of a seeded shuffled order: open(2), fstat, read the whole file, close(2), parse
// the .npy header, copy the payload into its slot of a batch buffer. Batches are handed to a
// consumer in order; the consumer may sleep `compute_ms` per batch to stand in for an accelerator.

// One batch as the consumer sees it. Valid only during the on_batch call.
struct PerFileBatch {
  int64_t index = 0;                     // 0, 1, 2, ... across epochs
  int64_t epoch = 0;                     // the epoch it belongs to
  std::span<const int64_t> files;        // per sample, its index in the sorted list of .npy names
  std::span<const uint8_t> payload;      // files.size() payloads of payload_bytes each, in order
};

// What `stoke bench files` reads and how.
struct PerFileBenchOptions {
  std::string dir;           // Required. Directory of .npy files (non-recursive; other files ignored).
  int64_t batch_size = 32;   // Default 32, >= 1. The last batch of an epoch may be short (no drop_last).
  int64_t epochs = 1;        // Default 1, >= 1. Ignored when `batches` > 0.
  int64_t batches = 0;       // Default 0 (= whole epochs). > 0: stop after this many batches,
                             // crossing into further epochs as needed.
  uint64_t seed = 0;         // Default 0. Epoch e's order is a Fisher-Yates shuffle seeded by (seed, e).
  double compute_ms = 0;     // Default 0. Milliseconds the consumer sleeps per batch (emulated compute).
  int threads = 1;           // Default 1: one loop reads a batch, then computes on it. T > 1: T reader
                             // threads fill up to 2T batch buffers ahead; batches still arrive in order.
  bool cold = false;         // Default false. Open with O_DIRECT: reads bypass the page cache.
                             // Unsupported where the file system refuses O_DIRECT (tmpfs).
  // Default: none. Called on the consumer thread for every batch, after the emulated compute.
  std::function<void(const PerFileBatch&)> on_batch;
};

// What the baseline measured.
struct PerFileBenchReport {
  int64_t files = 0;          // .npy files in the directory
  int64_t samples = 0;        // samples delivered (a file read twice counts twice)
  int64_t batches = 0;        // batches delivered
  int64_t payload_bytes = 0;  // of one sample (every file must hold the same, as batches stack them)
  int64_t file_bytes = 0;     // file bytes read in all (headers included; not O_DIRECT's padding)
  double wall_seconds = 0;  // from the first batch requested to the last batch consumed
  double wait_seconds = 0;  // consumer time blocked on data (with threads = 1: all the reading)
  double compute_seconds = 0;  // consumer time in the emulated compute (measured)
  int threads = 1;            // as PerFileBenchOptions::threads
  bool cold = false;          // as PerFileBenchOptions::cold
  double compute_ms = 0;      // as PerFileBenchOptions::compute_ms

  // samples / wall_seconds
  double samples_per_second() const { return wall_seconds > 0 ? samples / wall_seconds : 0; }
  // file bytes / wall_seconds, 10^6 bytes
  double mb_per_second() const { return wall_seconds > 0 ? file_bytes / wall_seconds / 1e6 : 0; }
  // wait_seconds / wall_seconds
  double wait_share() const { return wall_seconds > 0 ? wait_seconds / wall_seconds : 0; }
  // compute_seconds / wall_seconds
  double utilisation() const { return wall_seconds > 0 ? compute_seconds / wall_seconds : 0; }
};

// Runs the baseline. Errors name the file: NotFound/IOError for one that cannot be opened or read,
// Corruption for a bad .npy header or a file shorter than its header says, InvalidArgument for a
// payload size differing from the first file's, or a directory without .npy files.
Result<PerFileBenchReport> RunPerFileBench(const PerFileBenchOptions& options);

// The report as one line of JSON (no newline), with the keys `stoke bench load --json` prints:
// {"tool":"files","samples":...,"batches":...,"wall_s":...,"samples_per_s":...,"mb_per_s":...,
//  "wait_share":...,"utilisation":...,"compute_ms":...,"threads":...,"cold":...}
std::string PerFileReportJson(const PerFileBenchReport& report);


// ---- stoke bench load: the loader ---------------------------------------------------------------
//
// Opens the table (timed: open_seconds), then consumes batches as a training loop would: Next(), then the
// emulated compute (a sleep of compute_ms per batch: the accelerator works while the host waits, as
// in the MLPerf Storage / DLIO benchmarks). Accelerator utilisation = compute time / wall time.

// What `stoke bench load` loads and how.
struct LoadBenchOptions {
  std::string table_dir;     // Required.
  LoaderOptions loader;      // Defaults as in LoaderOptions (batch 32, global shuffle, 512 MiB budget).
  int64_t epochs = 1;        // Default 1, >= 1. Ignored when `batches` > 0.
  int64_t batches = 0;       // Default 0 (= whole epochs). > 0: stop after this many batches, crossing
                             // into further epochs as needed.
  int64_t warmup_batches = 0;  // Default 0. Batches consumed before the clock starts (not counted).
  double compute_ms = 0;     // Default 0. Emulated compute per batch, milliseconds.
  std::string trace_path;    // Default none. Chrome trace JSON of the measured run.
};

// What the loader benchmark measured.
struct LoadBenchReport {
  double open_seconds = 0;  // Loader::Open: snapshot, sample index, scalar columns
  bool index_from_cache = false;  // Loader::index_from_cache
  int64_t table_rows = 0;       // rows that pass `where` (Loader::num_rows)
  int64_t samples = 0;          // measured samples
  int64_t batches = 0;          // measured batches
  int64_t bytes_read = 0;       // bytes fetched in the measured part
  double wall_seconds = 0;  // from the first measured Next() to the end of the last batch's compute
  double wait_seconds = 0;  // time blocked in Next()
  double compute_seconds = 0;  // measured time in the emulated compute
  double compute_ms = 0;        // as LoadBenchOptions::compute_ms
  double page_bytes_mean = 0;   // bytes fetched per sample (one tensor column: the read size)
  int64_t max_rss_bytes = 0;    // peak resident set size of the process (getrusage), with the pages
                                // of data files read through mappings (the page cache's)
  int64_t max_anonymous_rss_bytes = 0;  // peak of the process's own resident memory, without
                                        // file pages: sampled every 16 batches and at the end
  LoaderStats stats;            // the loader's own figures (whole run, warm-up included)
  ShuffleQuality shuffle;       // of epoch 0's order
  ShuffleQuality global_shuffle;  // of a global shuffle with the same seed, for reference
  LoadBenchOptions options;     // what was asked

  // samples / wall_seconds
  double samples_per_second() const { return wall_seconds > 0 ? samples / wall_seconds : 0; }
  // bytes_read / wall_seconds, 10^6 bytes
  double mb_per_second() const { return wall_seconds > 0 ? bytes_read / wall_seconds / 1e6 : 0; }
  // wait_seconds / wall_seconds
  double wait_share() const { return wall_seconds > 0 ? wait_seconds / wall_seconds : 0; }
  // compute_seconds / wall_seconds
  double utilisation() const { return wall_seconds > 0 ? compute_seconds / wall_seconds : 0; }
};

// Errors: those of Loader::Open and Loader::Next, and InvalidArgument for bad counts.
Result<LoadBenchReport> RunLoadBench(const LoadBenchOptions& options);
// {"tool":"stoke","samples":...,"batches":...,"wall_s":...,"samples_per_s":...,"mb_per_s":...,
//  "wait_share":...,"utilisation":...,"compute_ms":...,"open_s":...,"index_from_cache":...,
//  "backend":"io_uring","page_bytes_mean":...,"cold":...,"max_rss_mb":...,"max_anonymous_rss_mb":...,...}
std::string LoadReportJson(const LoadBenchReport& report);
// A few lines for people: the figures and the per-stage busy times.
std::string FormatLoadReport(const LoadBenchReport& report);


// ---- stoke bench memcpy: the warm limit ----------------------------------------------------------
//
// The most a loader can deliver from a warm local table: one memory copy per sample out of the page
// cache, with no system call, no page header parsed and no check. The table's data files are mapped
// read-only; for every row, its value's bytes in its page are found once, before the clock starts
// (each page checked as the loader checks it, CRC included), and every 4 KiB page of them is touched,
// so that the measured copies fault nothing in. Then `threads` threads each take the next batch of
// epoch 0's global order (the loader's Sampler with `seed`, repeated after its end) and copy its rows
// one after another into a batch buffer of their own, until `seconds` have passed. A page stored
// compressed has no value to copy from: its stored bytes are copied instead, unchecked, for each of
// its rows (report.copies "pages"). The data files should be in the page cache first
// (`resident_share` says how much of them was).

// What `stoke bench memcpy` copies and how.
struct MemcpyBenchOptions {
  std::string table_dir;   // Required. A local table directory.
  std::string column;      // Default "": the table's first tensor or blob column.
  int64_t batch_size = 32;  // Default 32, >= 1.
  int threads = 0;         // Default 0: one per CPU this process may use (as the loader's workers).
  double seconds = 4;      // Default 4, > 0, at most 30 days: batches are started until this much time has passed.
  uint64_t seed = 0;       // Default 0: the shuffle seed, as LoaderOptions::seed.
};

// What the reference measured.
struct MemcpyBenchReport {
  std::string column;            // the column copied
  int64_t table_rows = 0;        // rows in the table
  int64_t samples = 0;           // rows copied (a row copied twice counts twice)
  int64_t batches = 0;           // batches copied
  int64_t bytes = 0;             // bytes copied
  double wall_seconds = 0;  // from starting the threads to the last one's end
  int64_t batch_size = 0;        // as MemcpyBenchOptions::batch_size
  int threads = 0;               // threads that copied
  std::string copies;            // "values", or "pages" where some page is stored compressed
  double sample_bytes_mean = 0;  // bytes per row copied
  double resident_share = 0;     // of the data files' 4 KiB pages, the share in the page cache at the start

  // samples / wall_seconds
  double samples_per_second() const { return wall_seconds > 0 ? samples / wall_seconds : 0; }
  // bytes / wall_seconds, 10^6 bytes
  double mb_per_second() const { return wall_seconds > 0 ? bytes / wall_seconds / 1e6 : 0; }
};

// Errors: InvalidArgument for bad options, a table without rows or without the column, a row not in
// a page of its own (other writers' layouts that the loader reads by decoding), or batches too large
// to allocate; those of opening the table's sample index and mapping its files; Corruption for an
// uncompressed page that fails the loader's checks.
Result<MemcpyBenchReport> RunMemcpyBench(const MemcpyBenchOptions& options);
// {"tool":"memcpy","samples":...,"batches":...,"wall_s":...,"samples_per_s":...,"mb_per_s":...,
//  "threads":...,"batch_size":...,"column":...,"table_rows":...,"copies":"values","sample_bytes_mean":...,
//  "resident_share":...}
std::string MemcpyReportJson(const MemcpyBenchReport& report);


// ---- stoke bench delete-rows: a table with deletion vectors -----------------------------------
//
// Builds the input of the deletion-vector benchmarks (bench/deletion_vectors.sh): deletes a random
// share of every data file's live rows as a DELETE of Spark or Databricks would, with deletion
// vectors. All of one run's DVs go into one DV file in the table directory, each at its own offset,
// and one commit (operation "DELETE") removes and re-adds each file touched with its new DV (the
// union of the rows it deleted before and now; its statistics marked "tightBounds": false). A table
// without the deletionVectors feature gets it in the same commit (protocol 3/7, keeping what its
// legacy versions implied) and delta.enableDeletionVectors=true.

// What `stoke bench delete-rows` deletes, and where.
struct DeleteRowsOptions {
  std::string table;      // Required. A directory or URI, as `stoke query` takes it.
  double fraction = 0.1;  // Default 0.1, in [0, 1]: of each file's live rows, round(fraction * live)
                          // rows are deleted, chosen at random.
  uint64_t seed = 0;      // Default 0. The rows chosen in file i depend on (seed, i) only.
};

// What a run of RunDeleteRows did.
struct DeleteRowsReport {
  int64_t version = -1;       // the commit written; -1 when nothing was deleted (no commit)
  int64_t files = 0;          // data files in the table
  int64_t files_touched = 0;  // files that got a new deletion vector
  int64_t rows_before = 0;    // live rows before
  int64_t rows_deleted = 0;   // rows this run deleted
};

// Errors: InvalidArgument for a fraction outside [0, 1]; those of opening the table; Unsupported
// (before writing anything) for a table whose features stoke's writes do not keep, other than
// deletionVectors itself, of writer version 3 to 6, or whose delta.appendOnly forbids deletes; Conflict when another writer
// committed first. A failed run may leave an unreferenced DV file, which `stoke vacuum` removes.
Result<DeleteRowsReport> RunDeleteRows(const DeleteRowsOptions& options);

}  // namespace stoke
