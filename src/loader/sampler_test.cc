#include "loader/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <vector>

#include "stoke/status.h"

namespace stoke {
namespace {

using Shuffle = SamplerOptions::Shuffle;

constexpr Shuffle kAllShuffles[] = {Shuffle::kNone, Shuffle::kGlobal, Shuffle::kBlock};

// Blocks of `block` rows (the last one shorter) covering n rows.
std::vector<int64_t> EvenBlocks(int64_t n, int64_t block) {
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += block) sizes.push_back(std::min(block, n - start));
  return sizes;
}

// The first row of each block of `sizes`.
std::vector<int64_t> StartsOf(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> starts;
  int64_t n = 0;
  for (int64_t b : sizes) {
    starts.push_back(n);
    n += b;
  }
  return starts;
}

Sampler MakeSampler(std::vector<int64_t> blocks, const SamplerOptions& options) {
  Result<Sampler> s = Sampler::Create(std::move(blocks), options);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

std::vector<int64_t> Drain(Sampler& s) {
  std::vector<int64_t> ids;
  for (int64_t id = s.Next(); id >= 0; id = s.Next()) ids.push_back(id);
  return ids;
}

// Every rank's order for one epoch.
std::vector<std::vector<int64_t>> AllShards(const std::vector<int64_t>& blocks, SamplerOptions options, int64_t epoch) {
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < options.world_size; ++r) {
    options.rank = r;
    Sampler s = MakeSampler(blocks, options);
    s.SetEpoch(epoch);
    shards.push_back(Drain(s));
  }
  return shards;
}

std::map<int64_t, int> Counts(const std::vector<std::vector<int64_t>>& shards) {
  std::map<int64_t, int> counts;
  for (const auto& shard : shards)
    for (int64_t id : shard) counts[id]++;
  return counts;
}

TEST(Sampler, DropLastDeliversEverySampleAtMostOnceAcrossRanks) {
  for (Shuffle shuffle : kAllShuffles) {
    for (int64_t n : {int64_t{42}, int64_t{1000}, int64_t{1001}}) {
      for (int world : {1, 2, 3, 7}) {
        SCOPED_TRACE(testing::Message() << "shuffle " << static_cast<int>(shuffle) << " n " << n << " world " << world);
        SamplerOptions o;
        o.shuffle = shuffle;
        o.seed = 7;
        o.world_size = world;
        o.drop_last = true;
        o.shuffle_buffer = 16;
        auto shards = AllShards(EvenBlocks(n, 10), o, 3);
        for (const auto& shard : shards) EXPECT_EQ(static_cast<int64_t>(shard.size()), n / world);
        auto counts = Counts(shards);
        for (auto [id, c] : counts) {
          EXPECT_EQ(c, 1) << "row " << id;
          EXPECT_TRUE(id >= 0 && id < n) << id;
        }
        const int64_t dropped = n - static_cast<int64_t>(counts.size());
        EXPECT_EQ(dropped, n % world);  // 0 when world divides n: every sample exactly once
        EXPECT_LT(dropped, world);
      }
    }
  }
}

TEST(Sampler, PaddingDeliversEverySampleOnceOrTwiceWithEqualShares) {
  for (Shuffle shuffle : kAllShuffles) {
    for (int64_t n : {int64_t{42}, int64_t{1000}, int64_t{1001}}) {
      for (int world : {1, 2, 3, 7}) {
        SCOPED_TRACE(testing::Message() << "shuffle " << static_cast<int>(shuffle) << " n " << n << " world " << world);
        SamplerOptions o;
        o.shuffle = shuffle;
        o.seed = 11;
        o.world_size = world;
        o.drop_last = false;
        o.shuffle_buffer = 16;
        auto shards = AllShards(EvenBlocks(n, 10), o, 1);
        const int64_t per_rank = (n + world - 1) / world;
        for (const auto& shard : shards) EXPECT_EQ(static_cast<int64_t>(shard.size()), per_rank);
        auto counts = Counts(shards);
        EXPECT_EQ(static_cast<int64_t>(counts.size()), n);  // every sample at least once
        int64_t repeats = 0;
        for (auto [id, c] : counts) {
          EXPECT_TRUE(c == 1 || c == 2) << "row " << id << " seen " << c << " times";
          repeats += c - 1;
        }
        EXPECT_EQ(repeats, per_rank * world - n);
        EXPECT_LT(repeats, world);
      }
    }
  }
}

TEST(Sampler, PaddingRepeatsTheStartOfTheGlobalOrder) {
  SamplerOptions o;
  o.seed = 5;
  o.world_size = 3;
  auto global = AllShards({10}, SamplerOptions{.seed = 5}, 0)[0];  // world 1: the global order
  auto shards = AllShards({10}, o, 0);  // 12 positions: 10 rows, then global[0], global[1]
  EXPECT_EQ(shards[1].back(), global[0]);
  EXPECT_EQ(shards[2].back(), global[1]);
  EXPECT_EQ(shards[0].back(), global[9]);
}

TEST(Sampler, SameOptionsGiveIdenticalOrders) {
  for (Shuffle shuffle : kAllShuffles) {
    SamplerOptions o;
    o.shuffle = shuffle;
    o.seed = 1234;
    o.world_size = 3;
    o.rank = 2;
    o.shuffle_buffer = 64;
    Sampler a = MakeSampler(EvenBlocks(5000, 100), o);
    Sampler b = MakeSampler(EvenBlocks(5000, 100), o);
    a.SetEpoch(4);
    b.SetEpoch(4);
    std::vector<int64_t> by_next = Drain(a);
    std::vector<int64_t> by_batch(b.size() + 5);
    size_t got = 0;
    while (size_t k = b.NextBatch(by_batch.data() + got, 7)) got += k;
    by_batch.resize(got);
    EXPECT_EQ(by_next, by_batch);
    EXPECT_EQ(static_cast<int64_t>(by_next.size()), a.size());
  }
}

TEST(Sampler, OrdersArePinned) {
  // The order is part of the resume contract: a job restored by a later build must see the same
  // order. A change here breaks resuming checkpoints taken before it.
  SamplerOptions o;
  o.seed = 42;
  Sampler s = MakeSampler({10}, o);
  s.SetEpoch(1);
  std::vector<int64_t> got = Drain(s);
  std::vector<int64_t> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(10);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  EXPECT_EQ(got, (std::vector<int64_t>{8, 1, 6, 3, 5, 7, 9, 0, 4, 2}));

  o.shuffle = Shuffle::kBlock;
  o.shuffle_buffer = 2;
  Sampler b = MakeSampler({3, 3, 3}, o);
  b.SetEpoch(1);
  EXPECT_EQ(Drain(b), (std::vector<int64_t>{7, 8, 3, 6, 4, 0, 1, 2, 5}));
}

TEST(Sampler, EpochsAndSeedsChangeTheOrder) {
  for (Shuffle shuffle : {Shuffle::kGlobal, Shuffle::kBlock}) {
    SamplerOptions o;
    o.shuffle = shuffle;
    o.seed = 3;
    o.shuffle_buffer = 32;
    const auto blocks = EvenBlocks(2000, 50);
    auto e0 = AllShards(blocks, o, 0)[0];
    auto e1 = AllShards(blocks, o, 1)[0];
    EXPECT_NE(e0, e1);
    std::vector<int64_t> sorted0 = e0, sorted1 = e1;
    std::sort(sorted0.begin(), sorted0.end());
    std::sort(sorted1.begin(), sorted1.end());
    EXPECT_EQ(sorted0, sorted1);  // both are permutations of all rows
    o.seed = 4;
    EXPECT_NE(AllShards(blocks, o, 0)[0], e0);

    // Going back to an epoch gives its order again.
    o.seed = 3;
    Sampler s = MakeSampler(blocks, o);
    s.SetEpoch(1);
    Drain(s);
    s.SetEpoch(0);
    EXPECT_EQ(s.epoch(), 0);
    EXPECT_EQ(Drain(s), e0);
  }
}

TEST(Sampler, NoShuffleIsTableOrder) {
  SamplerOptions o;
  o.shuffle = Shuffle::kNone;
  o.seed = 99;
  Sampler s = MakeSampler({3, 0, 4}, o);
  EXPECT_EQ(Drain(s), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  s.SetEpoch(8);
  EXPECT_EQ(Drain(s), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));

  o.world_size = 3;
  o.rank = 1;
  o.drop_last = true;
  Sampler r1 = MakeSampler({7}, o);
  EXPECT_EQ(Drain(r1), (std::vector<int64_t>{1, 4}));  // interleaved: positions 1, 4 of 0..5
}

TEST(Sampler, BlockShuffleWithoutBufferKeepsBlocksContiguous) {
  const std::vector<int64_t> blocks = {5, 0, 12, 1, 7, 30, 3, 0, 9, 20, 13};
  const std::vector<int64_t> starts = StartsOf(blocks);
  const int64_t n = starts.back() + blocks.back();
  SamplerOptions o;
  o.shuffle = Shuffle::kBlock;
  o.shuffle_buffer = 1;
  o.seed = 17;
  Sampler s = MakeSampler(blocks, o);
  const std::vector<int64_t> order = Drain(s);
  ASSERT_EQ(static_cast<int64_t>(order.size()), n);

  // Cut the order into runs of consecutive ids; each run must be exactly one whole block.
  std::vector<int64_t> run_starts;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || order[i] != order[i - 1] + 1 ||
        std::binary_search(starts.begin(), starts.end(), order[i])) {
      run_starts.push_back(order[i]);
    }
  }
  size_t i = 0;
  for (int64_t start : run_starts) {
    const size_t b = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), start) - starts.begin()) - 1;
    ASSERT_EQ(start, starts[b]) << "a run starts inside block " << b;
    for (int64_t k = 0; k < blocks[b]; ++k, ++i) ASSERT_EQ(order[i], start + k) << "block " << b << " broken";
  }
  EXPECT_EQ(i, order.size());
  std::vector<int64_t> table_order(static_cast<size_t>(n));
  std::iota(table_order.begin(), table_order.end(), 0);
  EXPECT_NE(order, table_order);  // the blocks were shuffled
}

TEST(Sampler, BlockShuffleIsAPermutationForAnyBufferSize) {
  for (int64_t buffer : {int64_t{1}, int64_t{7}, int64_t{100}, int64_t{100000}}) {
    SamplerOptions o;
    o.shuffle = Shuffle::kBlock;
    o.shuffle_buffer = buffer;
    o.seed = 2;
    Sampler s = MakeSampler(EvenBlocks(1234, 37), o);
    std::vector<int64_t> order = Drain(s);
    std::sort(order.begin(), order.end());
    std::vector<int64_t> identity(1234);
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(order, identity) << "buffer " << buffer;
  }
}

// The most blocks that share a window of `order`: for each block, how many blocks have a row between
// its first and last row in the order.
int64_t MostBlocksAcrossABlock(const std::vector<int64_t>& order, const std::vector<int64_t>& starts) {
  const auto block_of = [&](int64_t row) {
    return static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), row) - starts.begin()) - 1;
  };
  std::map<size_t, std::pair<size_t, size_t>> span;  // block -> first and last position in the order
  for (size_t i = 0; i < order.size(); ++i) {
    auto [it, fresh] = span.try_emplace(block_of(order[i]), i, i);
    if (!fresh) it->second.second = i;
  }
  int64_t most = 0;
  for (const auto& [block, positions] : span) {
    std::vector<bool> seen(starts.size(), false);
    int64_t blocks = 0;
    for (size_t i = positions.first; i <= positions.second; ++i) {
      const size_t b = block_of(order[i]);
      if (!seen[b]) ++blocks;
      seen[b] = true;
    }
    most = std::max(most, blocks);
  }
  return most;
}

TEST(Sampler, WindowedBlockShuffleMixesWholeBlocksWindowByWindow) {
  const std::vector<int64_t> blocks = {5, 0, 12, 1, 7, 30, 3, 0, 9, 20, 13, 2, 2, 8};
  const std::vector<int64_t> starts = StartsOf(blocks);
  const int64_t n = starts.back() + blocks.back();
  for (int64_t window : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{100}}) {
    SamplerOptions o;
    o.shuffle = Shuffle::kBlock;
    o.window_blocks = window;
    o.shuffle_buffer = 1 << 20;
    o.seed = 5;
    Sampler s = MakeSampler(blocks, o);
    const std::vector<int64_t> order = Drain(s);
    std::vector<int64_t> sorted = order, identity(static_cast<size_t>(n));
    std::sort(sorted.begin(), sorted.end());
    std::iota(identity.begin(), identity.end(), 0);
    EXPECT_EQ(sorted, identity) << "window " << window;
    // Every block's rows leave within one window of at most `window` blocks (the empty blocks, which
    // take a place in a window, leave it fewer).
    EXPECT_LE(MostBlocksAcrossABlock(order, starts), window) << "window " << window;
    if (window >= 2) {
      EXPECT_GT(MostBlocksAcrossABlock(order, starts), 1) << "window " << window << ": no mixing";
    }
  }
}

TEST(Sampler, WindowedBlockShuffleHoldsAtMostTheShuffleBufferButAlwaysOneBlock) {
  SamplerOptions o;
  o.shuffle = Shuffle::kBlock;
  o.window_blocks = 100;
  o.shuffle_buffer = 25;  // two blocks of 10 fit, three do not
  o.seed = 9;
  const auto blocks = EvenBlocks(400, 10);
  Sampler s = MakeSampler(blocks, o);
  EXPECT_EQ(MostBlocksAcrossABlock(Drain(s), StartsOf(blocks)), 2);

  o.shuffle_buffer = 4;  // a block larger than the buffer is a window of its own
  Sampler alone = MakeSampler({50, 7}, o);
  const std::vector<int64_t> order = Drain(alone);
  EXPECT_EQ(MostBlocksAcrossABlock(order, {0, 50}), 1);
  std::vector<int64_t> sorted = order, identity(57);
  std::sort(sorted.begin(), sorted.end());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
}

TEST(Sampler, WindowedBlockShuffleIsSeededByEpochAndShardsAcrossRanks) {
  SamplerOptions o;
  o.shuffle = Shuffle::kBlock;
  o.window_blocks = 4;
  o.seed = 3;
  o.world_size = 3;
  const auto blocks = EvenBlocks(1000, 16);
  const auto epoch0 = AllShards(blocks, o, 0);
  EXPECT_EQ(epoch0, AllShards(blocks, o, 0));
  EXPECT_NE(epoch0, AllShards(blocks, o, 1));
  const auto counts = Counts(epoch0);
  EXPECT_EQ(counts.size(), 1000u);
  for (const auto& [id, count] : counts) EXPECT_LE(count, 2) << id;  // padding repeats at most once
}

TEST(Sampler, QualityCountsTheGroupsItIsGiven) {
  SamplerOptions o;
  o.shuffle = Shuffle::kNone;
  Sampler s = MakeSampler(EvenBlocks(64, 2), o);  // blocks of 2 rows: a batch of 8 spans 4
  EXPECT_DOUBLE_EQ(s.MeasureQuality(8).distinct_block_fraction, 0.5);
  EXPECT_DOUBLE_EQ(s.MeasureQuality(8, {0, 32}).distinct_block_fraction, 1.0 / 8);  // files of 32 rows
}

TEST(Sampler, BlockShuffleIsMoreLocalThanGlobalShuffle) {
  const auto blocks = EvenBlocks(64000, 1000);
  const int64_t batch = 64;
  SamplerOptions o;
  o.seed = 8;
  o.shuffle = Shuffle::kGlobal;
  Sampler global = MakeSampler(blocks, o);
  o.shuffle = Shuffle::kBlock;
  o.shuffle_buffer = 256;
  Sampler block = MakeSampler(blocks, o);
  o.shuffle = Shuffle::kNone;
  Sampler none = MakeSampler(blocks, o);

  const Sampler::Quality g = global.MeasureQuality(batch);
  const Sampler::Quality b = block.MeasureQuality(batch);
  const Sampler::Quality z = none.MeasureQuality(batch);
  std::printf("[ quality  ] n=64000, blocks of 1000, batch %lld\n", static_cast<long long>(batch));
  std::printf("[ quality  ] kGlobal: mean_jump %.1f, distinct_block_fraction %.3f\n", g.mean_jump,
              g.distinct_block_fraction);
  std::printf("[ quality  ] kBlock (buffer 256): mean_jump %.1f, distinct_block_fraction %.3f\n", b.mean_jump,
              b.distinct_block_fraction);
  std::printf("[ quality  ] kNone: mean_jump %.1f, distinct_block_fraction %.3f\n", z.mean_jump,
              z.distinct_block_fraction);
  testing::Test::RecordProperty("global_mean_jump", std::to_string(g.mean_jump));
  testing::Test::RecordProperty("block_mean_jump", std::to_string(b.mean_jump));

  EXPECT_LT(b.mean_jump, g.mean_jump);
  EXPECT_LT(b.distinct_block_fraction, g.distinct_block_fraction);
  EXPECT_NEAR(g.mean_jump, 64000.0 / 3, 64000.0 / 30);  // a uniform permutation: about n / 3
  EXPECT_DOUBLE_EQ(z.mean_jump, 1.0);
  EXPECT_LT(z.distinct_block_fraction, 2.0 / batch);  // one block per window, two where a window
                                                      // straddles a block boundary
}

TEST(Sampler, MeasureQualityDoesNotMoveThePosition) {
  SamplerOptions o;
  o.seed = 1;
  Sampler s = MakeSampler({100}, o);
  const int64_t first = s.Next();
  (void)s.MeasureQuality(8);
  EXPECT_EQ(s.state().consumed, 1);
  Sampler t = MakeSampler({100}, o);
  EXPECT_EQ(t.Next(), first);
  EXPECT_EQ(s.MeasureQuality(0).mean_jump, 0);
}

// Takes `batches` batches of `batch` ids on every rank of `options.world_size`; returns what they
// took and the (common) state.
std::vector<int64_t> ConsumeOnAllRanks(const std::vector<int64_t>& blocks, SamplerOptions options, int64_t epoch,
                                       size_t batches, size_t batch, Sampler::State* state) {
  std::vector<int64_t> taken;
  for (int r = 0; r < options.world_size; ++r) {
    options.rank = r;
    Sampler s = MakeSampler(blocks, options);
    s.SetEpoch(epoch);
    std::vector<int64_t> buf(batch);
    for (size_t i = 0; i < batches; ++i) {
      const size_t got = s.NextBatch(buf.data(), batch);
      taken.insert(taken.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(got));
    }
    const Sampler::State st = s.state();
    if (r == 0) *state = st;
    EXPECT_EQ(st.epoch, state->epoch);
    EXPECT_EQ(st.consumed, state->consumed) << "ranks disagree on the global position";
  }
  return taken;
}

std::vector<std::vector<int64_t>> RestoreOnAllRanks(const std::vector<int64_t>& blocks, SamplerOptions options,
                                                    const Sampler::State& state) {
  std::vector<std::vector<int64_t>> shards;
  for (int r = 0; r < options.world_size; ++r) {
    options.rank = r;
    Sampler s = MakeSampler(blocks, options);
    Status st = s.Restore(state);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(s.epoch(), state.epoch);
    shards.push_back(Drain(s));
  }
  return shards;
}

TEST(Sampler, ResumeAfterBatchesYieldsExactlyTheRest) {
  for (Shuffle shuffle : kAllShuffles) {
    const auto blocks = EvenBlocks(1000, 40);
    SamplerOptions o;
    o.shuffle = shuffle;
    o.seed = 21;
    o.world_size = 2;
    o.drop_last = true;
    o.shuffle_buffer = 50;
    Sampler::State state;
    std::vector<int64_t> taken = ConsumeOnAllRanks(blocks, o, 2, 5, 10, &state);
    EXPECT_EQ(state.epoch, 2);
    EXPECT_EQ(state.consumed, 5 * 10 * 2);

    std::vector<std::vector<int64_t>> rest = RestoreOnAllRanks(blocks, o, state);
    // Same world size: each rank continues exactly where it stopped.
    std::vector<std::vector<int64_t>> full = AllShards(blocks, o, 2);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(rest[r], std::vector<int64_t>(full[r].begin() + 50, full[r].end()));
    }
    rest.push_back(taken);
    auto counts = Counts(rest);
    EXPECT_EQ(counts.size(), 1000u);
    for (auto [id, c] : counts) EXPECT_EQ(c, 1) << "row " << id;
  }
}

TEST(Sampler, ResumeAtWorldSize3FromStateAtWorldSize2) {
  for (Shuffle shuffle : kAllShuffles) {
    const auto blocks = EvenBlocks(1200, 64);
    SamplerOptions o;
    o.shuffle = shuffle;
    o.seed = 5;
    o.world_size = 2;
    o.drop_last = true;
    o.shuffle_buffer = 100;
    Sampler::State state;
    // 2 ranks x 10 batches x 3 = 60 consumed; 1140 left, a multiple of 3.
    std::vector<int64_t> taken = ConsumeOnAllRanks(blocks, o, 0, 10, 3, &state);
    EXPECT_EQ(state.consumed, 60);

    o.world_size = 3;
    auto rest = RestoreOnAllRanks(blocks, o, state);
    for (const auto& shard : rest) EXPECT_EQ(shard.size(), 380u);
    rest.push_back(taken);
    auto counts = Counts(rest);
    EXPECT_EQ(counts.size(), 1200u);
    for (auto [id, c] : counts) EXPECT_EQ(c, 1) << "row " << id;

    // And back: a state taken at world size 3 restored at world size 2.
    Sampler::State state3;
    std::vector<int64_t> taken3 = ConsumeOnAllRanks(blocks, o, 0, 7, 5, &state3);
    EXPECT_EQ(state3.consumed, 105);
    o.world_size = 2;
    auto rest2 = RestoreOnAllRanks(blocks, o, state3);  // 1095 left: one dropped with drop_last
    rest2.push_back(taken3);
    auto counts2 = Counts(rest2);
    EXPECT_EQ(counts2.size(), 1199u);
    for (auto [id, c] : counts2) EXPECT_EQ(c, 1) << "row " << id;
  }
}

TEST(Sampler, ResumeWithPaddingCoversTheRestAndRepeatsOnlyUnconsumedSamples) {
  const auto blocks = EvenBlocks(11, 4);
  SamplerOptions o;
  o.seed = 9;
  o.world_size = 2;
  o.drop_last = false;
  Sampler::State state;
  std::vector<int64_t> taken = ConsumeOnAllRanks(blocks, o, 0, 2, 1, &state);
  EXPECT_EQ(state.consumed, 4);

  // 7 left over 3 ranks: padded to 9 with the first 2 not-yet-consumed samples.
  o.world_size = 3;
  auto rest = RestoreOnAllRanks(blocks, o, state);
  for (const auto& shard : rest) EXPECT_EQ(shard.size(), 3u);
  auto rest_counts = Counts(rest);
  EXPECT_EQ(rest_counts.size(), 7u);
  for (int64_t id : taken) EXPECT_EQ(rest_counts.count(id), 0u) << "consumed row " << id << " served again";
  rest.push_back(taken);
  auto counts = Counts(rest);
  EXPECT_EQ(counts.size(), 11u);
  int repeats = 0;
  for (auto [id, c] : counts) {
    EXPECT_LE(c, 2);
    repeats += c - 1;
  }
  EXPECT_EQ(repeats, 2);
}

TEST(Sampler, StateAtTheEndOfAnEpochIsComplete) {
  for (bool drop_last : {true, false}) {
    SamplerOptions o;
    o.world_size = 2;
    o.drop_last = drop_last;
    Sampler::State state;
    std::vector<int64_t> taken = ConsumeOnAllRanks({11}, o, 3, 100, 4, &state);
    EXPECT_EQ(state.epoch, 3);
    EXPECT_EQ(state.consumed, 11);  // the dropped tail is not served after a resume
    o.world_size = 1;
    auto rest = RestoreOnAllRanks({11}, o, state);
    EXPECT_TRUE(rest[0].empty());
  }
}

TEST(Sampler, StateCountsGlobalPositions) {
  SamplerOptions o;
  o.world_size = 4;
  o.rank = 3;
  o.drop_last = true;
  Sampler s = MakeSampler({100}, o);
  EXPECT_EQ(s.size(), 25);
  EXPECT_EQ(s.state().consumed, 0);
  int64_t buf[10];
  EXPECT_EQ(s.NextBatch(buf, 10), 10u);
  EXPECT_EQ(s.state().consumed, 40);
  ASSERT_TRUE(s.Restore({1, 40}).ok());
  EXPECT_EQ(s.size(), 15);
  EXPECT_EQ(s.state().consumed, 40);
  s.SetEpoch(2);
  EXPECT_EQ(s.size(), 25);
  EXPECT_EQ(s.state().consumed, 0);
}

TEST(Sampler, NextBatchStopsAtTheEndOfTheEpoch) {
  SamplerOptions o;
  o.world_size = 3;
  o.drop_last = false;
  Sampler s = MakeSampler({10}, o);
  std::vector<int64_t> buf(8);
  EXPECT_EQ(s.NextBatch(buf.data(), 3), 3u);
  EXPECT_EQ(s.NextBatch(buf.data(), 8), 1u);  // 4 per rank
  EXPECT_EQ(s.NextBatch(buf.data(), 8), 0u);
  EXPECT_EQ(s.Next(), -1);
}

TEST(Sampler, EmptyTableYieldsNothing) {
  SamplerOptions o;
  o.world_size = 2;
  o.shuffle = Shuffle::kBlock;
  Sampler s = MakeSampler({}, o);
  EXPECT_EQ(s.size(), 0);
  EXPECT_EQ(s.Next(), -1);
  EXPECT_EQ(s.state().consumed, 0);
  EXPECT_EQ(s.MeasureQuality(4).mean_jump, 0);
}

TEST(Sampler, CreateRejectsInvalidOptions) {
  auto expect_invalid = [](std::vector<int64_t> blocks, SamplerOptions o, const char* what) {
    Result<Sampler> s = Sampler::Create(std::move(blocks), o);
    ASSERT_FALSE(s.ok()) << what;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << what << ": " << s.status().ToString();
  };
  expect_invalid({10}, SamplerOptions{.rank = 2, .world_size = 2}, "rank == world_size");
  expect_invalid({10}, SamplerOptions{.rank = 5, .world_size = 2}, "rank > world_size");
  expect_invalid({10}, SamplerOptions{.rank = -1, .world_size = 2}, "negative rank");
  expect_invalid({10}, SamplerOptions{.rank = 0, .world_size = 0}, "world_size 0");
  expect_invalid({10}, SamplerOptions{.world_size = -3}, "negative world_size");
  expect_invalid({10, -1, 4}, SamplerOptions{}, "negative block size");
  expect_invalid({10, 5}, SamplerOptions{.num_rows = 16}, "blocks do not sum to num_rows");
  expect_invalid({10}, SamplerOptions{.num_rows = -2}, "negative num_rows");
  expect_invalid({INT64_MAX, 1}, SamplerOptions{}, "sum overflows");
  expect_invalid({10}, SamplerOptions{.shuffle = Shuffle::kBlock, .shuffle_buffer = 0}, "empty shuffle buffer");
  expect_invalid({10}, SamplerOptions{.shuffle = Shuffle::kBlock, .window_blocks = -1}, "negative window");
  expect_invalid({10}, SamplerOptions{.shuffle = static_cast<Shuffle>(7)}, "unknown shuffle");

  EXPECT_TRUE(Sampler::Create({10, 5}, SamplerOptions{.num_rows = 15}).ok());
  EXPECT_TRUE(Sampler::Create({10}, SamplerOptions{.shuffle = Shuffle::kGlobal, .shuffle_buffer = 0}).ok());
}

TEST(Sampler, RestoreRejectsPositionsOutsideTheEpoch) {
  Sampler s = MakeSampler({10}, SamplerOptions{});
  EXPECT_EQ(s.Restore({0, 11}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Restore({0, -1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Restore({-1, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.epoch(), 0);
  EXPECT_EQ(s.size(), 10);
  EXPECT_TRUE(s.Restore({0, 10}).ok());
  EXPECT_EQ(s.Next(), -1);
}

TEST(Sampler, LargeEpochPermutesEveryRow) {
  // The size the loader sees (650,000 rows, 5 MB of order); also a speed check of the shuffle.
  SamplerOptions o;
  o.seed = 77;
  o.world_size = 4;
  o.rank = 1;
  Sampler s = MakeSampler({650000}, o);
  s.SetEpoch(3);
  std::vector<int64_t> ids(static_cast<size_t>(s.size()));
  ASSERT_EQ(s.NextBatch(ids.data(), ids.size()), ids.size());
  std::vector<char> seen(650000, 0);
  for (int64_t id : ids) {
    ASSERT_TRUE(id >= 0 && id < 650000);
    ASSERT_EQ(seen[static_cast<size_t>(id)], 0);
    seen[static_cast<size_t>(id)] = 1;
  }
}

}  // namespace
}  // namespace stoke
