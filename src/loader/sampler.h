// The sampler: which row ids one rank reads in an epoch, and in what order. Pure computation, no
// I/O; the first stage of the loader pipeline (docs/architecture.md, "The loader").
//
// An epoch has one GLOBAL order of the table's n rows, a function of (blocks, options, epoch) only,
// so it is the same on every rank (the loader's blocks come from the table's files, and for block
// shuffle over other writers' pages from their footers and its caches' size: loader_impl.h,
// CreateSampler). It is cut into per-rank shards by interleaving:
//
//   global order   g[0] g[1] g[2] g[3] g[4] g[5] g[6] ...
//   rank 0 (W=3)   g[0]           g[3]           g[6]
//   rank 1              g[1]           g[4]
//   rank 2                   g[2]           g[5]
//
// Interleaving (rather than contiguous chunks) makes a position easy to share between ranks:
// when every rank has consumed k samples, the ranks together have consumed exactly the first k * W
// positions of the global order. That global count is what `State` records, so a job can stop at
// world size W and resume at another world size W'.
//
// Uneven shards (n not a multiple of W): with drop_last the last n % W positions are dropped, so
// every rank gets floor(n / W); without it the order is padded to ceil(n / W) * W positions by
// repeating it from its start (position p >= n yields g[p % n]), so every rank gets ceil(n / W).
//
// Resume: a sampler restored to {epoch, c} shards the rest of the order, g[c..n), exactly as a
// fresh epoch shards g[0..n): the rest is truncated (drop_last) or padded by repeating from ITS
// start, g[c], g[c+1], ... . So the samples consumed before the state was taken plus the samples all
// ranks yield after the restore cover the epoch: each exactly once with drop_last when the dropped
// tail is empty (W' divides n - c; otherwise fewer than W' are dropped), and without drop_last
// every sample at least once, the repeats (fewer than W', so none is served more than twice unless
// fewer than W' - 1 samples remain) taken from the not-yet-consumed part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "stoke/status.h"

namespace stoke {

struct SamplerOptions {
  // How an epoch's global order is made. Values are not persisted.
  enum class Shuffle {
    kNone,    // table order
    kGlobal,  // a uniform permutation of all rows (Fisher-Yates), seeded by (seed, epoch)
    kBlock,   // blocks in a seeded order, rows of a block in table order, then a shuffle buffer
              // (or windows, window_blocks): reads stay local (a few blocks at a time) for
              // high-latency storage and for blocks decoded whole
  };
  // Default kGlobal.
  Shuffle shuffle = Shuffle::kGlobal;
  // Default 0. With the epoch, the only input of the order: the same (seed, epoch) gives the same
  // order on every rank, platform and standard library.
  uint64_t seed = 0;
  // Default 0. This rank's index, 0 <= rank < world_size.
  int rank = 0;
  // Default 1. Ranks sharing the epoch's order (processes, or one per accelerator).
  int world_size = 1;
  // Default false: pad (repeat samples from the start of the order) so every rank gets
  // ceil(n / world_size). True: drop the tail so every rank gets floor(n / world_size).
  bool drop_last = false;
  // Default 1024 rows; kBlock only; >= 1 (1 = no buffer: blocks stay contiguous). A reservoir of
  // this many rows after the block shuffle: each step emits a random row of it and refills the slot
  // with the next row of the block order; at the end the remainder is emitted shuffled.
  int64_t shuffle_buffer = 1024;
  // Default 0: kBlock streams the block order's rows through the shuffle buffer above. Otherwise
  // kBlock cuts the block order into windows of at most this many whole blocks (and at most
  // shuffle_buffer rows, unless one block alone is larger) and emits each window's rows in a uniform
  // random order: a block's rows all leave within its window, so a block that is read or decoded
  // whole (a page or row group of another writer's file) is needed once while a cache of
  // window_blocks blocks holds it. >= 0.
  int64_t window_blocks = 0;
  // Default -1: the table's row count is the sum of the block sizes. Otherwise the row count the
  // caller expects (say from the table's metadata); Create fails when the blocks do not sum to it.
  int64_t num_rows = -1;
};

// Not thread-safe: one sampler per consuming thread (and one per rank).
class Sampler {
 public:
  // block_sizes: rows per block (row group or file) in table order, each >= 0; row ids are
  // 0..n-1 in table order, n = their sum. Only kBlock and MeasureQuality use the split, so {n}
  // will do otherwise. Positioned at the start of epoch 0.
  // InvalidArgument for world_size < 1, rank outside [0, world_size), a negative block size, a
  // sum that overflows or differs from options.num_rows, shuffle_buffer < 1 or window_blocks < 0
  // with kBlock, or an unknown shuffle value.
  static Result<Sampler> Create(std::vector<int64_t> block_sizes, SamplerOptions options);

  // Positions the sampler at the start of `epoch` (REQUIRES: epoch >= 0). The epoch's order (n
  // int64 ids, so 5 MB for 650,000 rows; nothing for kNone) is computed on first use.
  void SetEpoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // Rows in the table.
  int64_t num_rows() const { return num_rows_; }
  // How many ids Next() yields from the start of the epoch, or from the restored position after a
  // Restore, to the end of the epoch: floor or ceil((n - restored consumed) / world_size).
  int64_t size() const { return size_; }

  // This rank's next row id, or -1 at the end of the epoch (and after it, until SetEpoch/Restore).
  int64_t Next();
  // Writes up to `max` ids to `out`; returns how many (fewer than max only at the end of the epoch).
  size_t NextBatch(int64_t* out, size_t max);

  // A resumable position: `consumed` counts positions of the epoch's global order that ALL ranks
  // together have consumed, so it does not depend on the world size.
  struct State {
    int64_t epoch = 0;
    int64_t consumed = 0;  // in [0, n]; n = the epoch is complete
  };
  // Assumes every rank consumed as many ids as this one (the loader takes them in lockstep
  // batches), so every rank returns the same State: {epoch, c + k * world_size} after this rank's
  // k-th id since the last SetEpoch (c = 0) or Restore (c = its consumed); {epoch, n} once this
  // rank has reached the end of the epoch, so a truncated tail is not served after a resume.
  State state() const;
  // Positions this rank so that all ranks together yield g[consumed..n) of that epoch, sharded as
  // described at the top of this file (any world size). InvalidArgument for epoch < 0 or consumed
  // outside [0, n] (n: nothing left); the sampler is unchanged then.
  Status Restore(const State& s);

  // Shuffle quality of this rank's whole order for the current epoch (what Next() yields from the
  // epoch start or restored position; the read position is not moved).
  struct Quality {
    // Mean |a - b| over consecutive ids a, b: about n / 3 for a uniform permutation, 1 for kNone.
    double mean_jump = 0;
    // Mean over consecutive, non-overlapping windows of `batch` ids (the last one may be shorter)
    // of (distinct blocks in the window) / (ids in the window): 1 = every id from another block.
    double distinct_block_fraction = 0;
  };
  // All zero when batch < 1 or the order is empty. `group_starts`: the first row of each group that
  // distinct_block_fraction counts (ascending, from 0; say the table's files where the blocks are
  // its pages); empty = the blocks.
  Quality MeasureQuality(int64_t batch, const std::vector<int64_t>& group_starts = {}) const;

 private:
  Sampler(std::vector<int64_t> block_starts, SamplerOptions options, int64_t num_rows);

  // Computes order_ for epoch_ unless it is already there.
  void EnsureOrder() const;
  // EnsureOrder's kBlock orders, of the blocks in `blocks` order: streamed through the shuffle
  // buffer, or shuffled window by window (window_blocks > 0).
  void BufferedBlockOrder(const std::vector<int64_t>& blocks) const;
  void WindowedBlockOrder(const std::vector<int64_t>& blocks) const;
  // The rows [begin, end) of block `b`.
  std::pair<int64_t, int64_t> BlockRows(size_t b) const;
  // Sets start_ and position_ and derives size_ from start_.
  void PositionAt(int64_t start);
  // The id at global position `p` of the epoch's order, p < num_rows_.
  int64_t GlobalAt(int64_t p) const { return order_.empty() ? p : order_[static_cast<size_t>(p)]; }
  // The id this rank yields as its k-th sample since start_, k < size_.
  int64_t ShardAt(int64_t k) const;
  // The group of `starts` (ascending, starts[0] = 0) holding row `row`.
  static size_t GroupOf(const std::vector<int64_t>& starts, int64_t row);

  SamplerOptions options_;
  int64_t num_rows_ = 0;
  std::vector<int64_t> block_starts_;  // first row of each block, ascending; block_starts_[0] = 0
  int64_t epoch_ = 0;
  int64_t start_ = 0;     // global position the current shard starts from (a restored `consumed`)
  int64_t size_ = 0;      // ids this rank yields from start_ to the end of the epoch
  int64_t position_ = 0;  // ids this rank has yielded since start_
  // The epoch's global order (empty for kNone: the identity). Computed lazily, also from const
  // MeasureQuality, hence mutable; the class is not thread-safe anyway.
  mutable std::vector<int64_t> order_;
  mutable int64_t order_epoch_ = -1;  // epoch order_ holds, -1 = none
};

}  // namespace stoke
