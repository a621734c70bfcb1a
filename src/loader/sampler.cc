#include "loader/sampler.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "core/random.h"

namespace stoke {
namespace {

// Independent random streams drawn from one (seed, epoch): changing how one is used must not shift
// another. Arbitrary distinct constants.
constexpr uint64_t kGlobalPermutationStream = 0x676c6f62616c7065ULL;  // "globalpe"
constexpr uint64_t kBlockOrderStream = 0x626c6f636b6f7264ULL;         // "blockord"
constexpr uint64_t kShuffleBufferStream = 0x7368756666627566ULL;      // "shuffbuf"
constexpr uint64_t kShuffleWindowStream = 0x77696e646f777368ULL;      // "windowsh"

uint64_t EpochSeed(uint64_t seed, int64_t epoch, uint64_t stream) {
  return SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) + static_cast<uint64_t>(epoch));
}

// Fisher-Yates with the core Rng only (std::shuffle's output differs between standard libraries).
void ShuffleInPlace(int64_t* v, size_t n, Rng& rng) {
  for (size_t i = n; i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

Sampler::Sampler(std::vector<int64_t> block_starts, SamplerOptions options, int64_t num_rows)
    : options_(options), num_rows_(num_rows), block_starts_(std::move(block_starts)) {
  PositionAt(0);
}

Result<Sampler> Sampler::Create(std::vector<int64_t> block_sizes, SamplerOptions options) {
  if (options.world_size < 1) {
    return Status::InvalidArgument("sampler: world_size is " + std::to_string(options.world_size) +
                                   ", expected at least 1");
  }
  if (options.rank < 0 || options.rank >= options.world_size) {
    return Status::InvalidArgument("sampler: rank is " + std::to_string(options.rank) + ", expected 0 <= rank < " +
                                   std::to_string(options.world_size));
  }
  switch (options.shuffle) {
    case SamplerOptions::Shuffle::kNone:
    case SamplerOptions::Shuffle::kGlobal:
      break;
    case SamplerOptions::Shuffle::kBlock:
      if (options.shuffle_buffer < 1) {
        return Status::InvalidArgument("sampler: shuffle_buffer is " + std::to_string(options.shuffle_buffer) +
                                       ", expected at least 1 (1 = no buffer)");
      }
      if (options.window_blocks < 0) {
        return Status::InvalidArgument("sampler: window_blocks is " + std::to_string(options.window_blocks) +
                                       ", expected at least 0 (0 = the shuffle buffer)");
      }
      break;
    default:
      return Status::InvalidArgument("sampler: unknown shuffle value " +
                                     std::to_string(static_cast<int>(options.shuffle)));
  }
  std::vector<int64_t> block_starts;
  block_starts.reserve(block_sizes.size());
  int64_t total = 0;
  for (size_t i = 0; i < block_sizes.size(); ++i) {
    if (block_sizes[i] < 0) {
      return Status::InvalidArgument("sampler: block " + std::to_string(i) + " has " +
                                     std::to_string(block_sizes[i]) + " rows, expected at least 0");
    }
    if (block_sizes[i] > std::numeric_limits<int64_t>::max() - total) {
      return Status::InvalidArgument("sampler: block sizes overflow int64 at block " + std::to_string(i));
    }
    block_starts.push_back(total);
    total += block_sizes[i];
  }
  if (options.num_rows >= 0 && options.num_rows != total) {
    return Status::InvalidArgument("sampler: " + std::to_string(block_sizes.size()) + " blocks sum to " +
                                   std::to_string(total) + " rows, expected num_rows " +
                                   std::to_string(options.num_rows));
  }
  if (options.num_rows < -1) {
    return Status::InvalidArgument("sampler: num_rows is " + std::to_string(options.num_rows) +
                                   ", expected -1 (the sum of the blocks) or at least 0");
  }
  return Sampler(std::move(block_starts), options, total);
}

void Sampler::SetEpoch(int64_t epoch) {
  epoch_ = epoch;
  PositionAt(0);
}

void Sampler::PositionAt(int64_t start) {
  start_ = start;
  position_ = 0;
  const int64_t remaining = num_rows_ - start_;
  const int64_t w = options_.world_size;
  size_ = options_.drop_last ? remaining / w : (remaining + w - 1) / w;
}

Status Sampler::Restore(const State& s) {
  if (s.epoch < 0) {
    return Status::InvalidArgument("sampler: restored epoch is " + std::to_string(s.epoch) + ", expected >= 0");
  }
  if (s.consumed < 0 || s.consumed > num_rows_) {
    return Status::InvalidArgument("sampler: restored position " + std::to_string(s.consumed) +
                                   " is outside the epoch's " + std::to_string(num_rows_) + " rows");
  }
  epoch_ = s.epoch;
  PositionAt(s.consumed);
  return Status::OK();
}

Sampler::State Sampler::state() const {
  if (position_ >= size_) return {epoch_, num_rows_};
  return {epoch_, start_ + position_ * options_.world_size};
}

void Sampler::EnsureOrder() const {
  if (order_epoch_ == epoch_) return;
  order_epoch_ = epoch_;
  if (options_.shuffle == SamplerOptions::Shuffle::kNone) {
    order_.clear();
    order_.shrink_to_fit();
    return;
  }
  const size_t n = static_cast<size_t>(num_rows_);
  order_.resize(n);
  if (options_.shuffle == SamplerOptions::Shuffle::kGlobal) {
    for (size_t i = 0; i < n; ++i) order_[i] = static_cast<int64_t>(i);
    Rng rng(EpochSeed(options_.seed, epoch_, kGlobalPermutationStream));
    ShuffleInPlace(order_.data(), n, rng);
    return;
  }

  // kBlock: blocks in a seeded order, then their rows mixed.
  std::vector<int64_t> blocks(block_starts_.size());
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int64_t>(i);
  Rng block_rng(EpochSeed(options_.seed, epoch_, kBlockOrderStream));
  ShuffleInPlace(blocks.data(), blocks.size(), block_rng);
  if (options_.window_blocks > 0) {
    WindowedBlockOrder(blocks);
  } else {
    BufferedBlockOrder(blocks);
  }
}

std::pair<int64_t, int64_t> Sampler::BlockRows(size_t b) const {
  return {block_starts_[b], b + 1 < block_starts_.size() ? block_starts_[b + 1] : num_rows_};
}

void Sampler::BufferedBlockOrder(const std::vector<int64_t>& blocks) const {
  Rng buffer_rng(EpochSeed(options_.seed, epoch_, kShuffleBufferStream));
  const uint64_t capacity = static_cast<uint64_t>(std::min<int64_t>(options_.shuffle_buffer, num_rows_));
  std::vector<int64_t> buffer;
  buffer.reserve(capacity);
  size_t out = 0;
  for (int64_t b : blocks) {
    const auto [begin, end] = BlockRows(static_cast<size_t>(b));
    for (int64_t row = begin; row < end; ++row) {
      if (buffer.size() < capacity) {
        buffer.push_back(row);
        continue;
      }
      const size_t slot = static_cast<size_t>(buffer_rng.Below(capacity));
      order_[out++] = buffer[slot];
      buffer[slot] = row;
    }
  }
  ShuffleInPlace(buffer.data(), buffer.size(), buffer_rng);
  for (int64_t row : buffer) order_[out++] = row;
}

void Sampler::WindowedBlockOrder(const std::vector<int64_t>& blocks) const {
  Rng window_rng(EpochSeed(options_.seed, epoch_, kShuffleWindowStream));
  size_t out = 0;
  size_t next = 0;  // the next block of `blocks` to place
  while (next < blocks.size()) {
    const size_t window_start = out;
    for (int64_t taken = 0; next < blocks.size() && taken < options_.window_blocks; ++next, ++taken) {
      const auto [begin, end] = BlockRows(static_cast<size_t>(blocks[next]));
      const int64_t rows_so_far = static_cast<int64_t>(out - window_start);
      if (taken > 0 && rows_so_far + (end - begin) > options_.shuffle_buffer) break;
      for (int64_t row = begin; row < end; ++row) order_[out++] = row;
    }
    ShuffleInPlace(order_.data() + window_start, out - window_start, window_rng);
  }
}

int64_t Sampler::ShardAt(int64_t k) const {
  const int64_t q = options_.rank + k * options_.world_size;
  const int64_t remaining = num_rows_ - start_;  // > 0 whenever k < size_
  return GlobalAt(start_ + (q < remaining ? q : q % remaining));
}

int64_t Sampler::Next() {
  if (position_ >= size_) return -1;
  EnsureOrder();
  return ShardAt(position_++);
}

size_t Sampler::NextBatch(int64_t* out, size_t max) {
  const int64_t left = size_ - position_;
  const size_t count = left <= 0 ? 0 : std::min(max, static_cast<size_t>(left));
  if (count == 0) return 0;
  EnsureOrder();
  for (size_t i = 0; i < count; ++i) out[i] = ShardAt(position_++);
  return count;
}

size_t Sampler::GroupOf(const std::vector<int64_t>& starts, int64_t row) {
  // The last group starting at or before `row` (empty groups share a start with the next one).
  auto it = std::upper_bound(starts.begin(), starts.end(), row);
  return static_cast<size_t>(it - starts.begin()) - 1;
}

Sampler::Quality Sampler::MeasureQuality(int64_t batch, const std::vector<int64_t>& group_starts) const {
  Quality q;
  if (batch < 1 || size_ == 0) return q;
  EnsureOrder();

  double jump_sum = 0;
  int64_t prev = ShardAt(0);
  for (int64_t k = 1; k < size_; ++k) {
    const int64_t id = ShardAt(k);
    jump_sum += static_cast<double>(id > prev ? id - prev : prev - id);
    prev = id;
  }
  q.mean_jump = size_ > 1 ? jump_sum / static_cast<double>(size_ - 1) : 0;

  // window_of[group] = the last window that saw the group, so each window counts a group once
  // without clearing a set.
  const std::vector<int64_t>& starts = group_starts.empty() ? block_starts_ : group_starts;
  std::vector<int64_t> window_of(starts.size(), -1);
  double fraction_sum = 0;
  int64_t windows = 0;
  for (int64_t begin = 0; begin < size_; begin += batch) {
    const int64_t end = std::min(size_, begin + batch);
    int64_t distinct = 0;
    for (int64_t k = begin; k < end; ++k) {
      int64_t& seen = window_of[GroupOf(starts, ShardAt(k))];
      if (seen != windows) {
        seen = windows;
        ++distinct;
      }
    }
    fraction_sum += static_cast<double>(distinct) / static_cast<double>(end - begin);
    ++windows;
  }
  q.distinct_block_fraction = fraction_sum / static_cast<double>(windows);
  return q;
}

}  // namespace stoke
