// The loader's read planning (docs/architecture.md, "The loader"): a batch's cells found in the
// sample index and coalesced into reads, or handed to the slow path. Private to src/loader.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "loader/batch_slots.h"
#include "loader/mapped_reads.h"
#include "loader/tensor_column.h"
#include "table/sample_index.h"

namespace stoke {

// The largest coalesced read: offsets within a read are 32-bit (ReadMember::offset, FetchRequest::length).
constexpr int64_t kMaxCoalesceBytes = int64_t{1} << 30;

// Plans a batch's reads. Used by the producer thread alone; holds no state between batches.
class ReadPlanner {
 public:
  struct Options {
    // Neighbouring pages merge into reads of at most this many bytes (<= kMaxCoalesceBytes; 0: no
    // merging), and across gaps of at most max_gap bytes.
    uint64_t max_read = 0;
    uint64_t max_gap = 0;
    // Split reads (the sample straight into its batch row): local tables without O_DIRECT.
    bool split_reads = true;
    // The table's files mapped (local files, or an object store's read cache entries; else null): a
    // page that could be a split read and that the page cache holds is a copy out of its mapping
    // (Slot::mapped_copies, done by ReadsNow) instead of a read. The producer's, as the planner is.
    MappedReads* mapped = nullptr;
    // The first table row of each decode unit (decode_units.h; empty: not known): a chunked column's
    // cells of one unit form one slow run.
    std::vector<int64_t> decode_units;
    // The most cells of a slow run (>= 1; the loader gives the batch's rows over the workers): a
    // batch's cells of one large unit are split among the workers (the first to reach the unit
    // decodes it, the others wait for it and copy their rows).
    size_t max_run_cells = SIZE_MAX;
  };
  // `index` and `tensors` outlive it.
  ReadPlanner(const SampleIndex& index, const std::vector<TensorColumn>& tensors, Options o)
      : index_(index), tensors_(tensors), o_(o) {}

  // The batch held by `s` (its rows set) as copies out of mappings in s->mapped_copies (in batch
  // order), reads in s->reads[0, num_reads), sorted by file and offset, and its cells for the slow
  // path (SlowCells, ArrayCells, BinaryCells) in s->slow_cells, cut into s->slow_runs.
  void Plan(Slot* s) const;

 private:
  void FindCells(Slot* s) const;
  void CoalesceCells(Slot* s) const;
  // Whether the cell's page can be a split read: one uncompressed value, of a tensor column copied
  // as it is stored.
  static bool Splittable(const SampleIndex::Location& loc, const TensorColumn& t);
  // Adds the cell as a copy out of its mapping when the page cache holds its page (a split read's
  // page, its head at most kMaxReadNowHead bytes); false otherwise.
  bool AddMappedCopy(Slot* s, const SampleIndex::Location& loc, uint32_t sample, uint32_t column) const;
  // Sorts s->slow_cells by page and cuts them into s->slow_runs: a page's cells, or a chunked
  // column's cells of one decode unit, go together, at most max_run_cells a run.
  void CutSlowRuns(Slot* s) const;
  // What a slow run shares: the page (file, offset) of a cell read by its page, the decode unit of a
  // chunked column's cell; where no units are known, a chunked cell's batch row (the row's other
  // chunked columns).
  std::pair<uint64_t, uint64_t> RunKey(const SlowCell& c) const;

  const SampleIndex& index_;
  const std::vector<TensorColumn>& tensors_;
  const Options o_;
};

}  // namespace stoke
