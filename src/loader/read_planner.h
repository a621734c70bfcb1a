// The loader's read planning (docs/architecture.md, "The loader"): a batch's cells found in the
// sample index and coalesced into reads, or handed to the slow path. Private to src/loader.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/batch_slots.h"
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
  };
  // `index` and `tensors` outlive it.
  ReadPlanner(const SampleIndex& index, const std::vector<TensorColumn>& tensors, Options o)
      : index_(index), tensors_(tensors), o_(o) {}

  // The batch held by `s` (its rows set) as reads in s->reads[0, num_reads), sorted by file and
  // offset, and its cells for the slow path (SlowCells, ArrayCells, BinaryCells) as one-cell reads
  // in *slow, a cached page's cells together.
  void Plan(Slot* s, std::vector<Read>* slow) const;

 private:
  void FindCells(Slot* s, std::vector<Read>* slow) const;
  void CoalesceCells(Slot* s) const;

  const SampleIndex& index_;
  const std::vector<TensorColumn>& tensors_;
  const Options o_;
};

}  // namespace stoke
