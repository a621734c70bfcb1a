#include "loader/read_planner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loader/array_table_testing.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_arrays::ArrayTable;
using testing_arrays::Rows;

// The runs the planner cuts a batch's chunked cells into, as lists of (table row, batch row).
std::vector<std::vector<std::pair<int64_t, uint32_t>>> RunsOf(const ReadPlanner& planner, Slot* s) {
  planner.Plan(s);
  std::vector<std::vector<std::pair<int64_t, uint32_t>>> runs;
  for (const SlowRun& run : s->slow_runs) {
    EXPECT_EQ(run.slot, s);
    auto& cells = runs.emplace_back();
    for (uint32_t i = run.begin; i < run.end; ++i) {
      const SlowCell& c = s->slow_cells[i];
      EXPECT_EQ(c.file, SlowCell::kChunkedFile);
      EXPECT_EQ(c.offset, static_cast<uint64_t>(s->rows[c.sample]));
      cells.emplace_back(static_cast<int64_t>(c.offset), c.sample);
    }
  }
  return runs;
}

class SlowRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto index = SampleIndex::Open(table_.dir());
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    index_ = std::make_unique<SampleIndex>(std::move(*index));
    TensorColumn v;
    v.name = "v";
    v.array = true;
    tensors_.push_back(v);
    slot_.rows = {7, 1, 2, 0, 10, 8};
    slot_.size = static_cast<int64_t>(slot_.rows.size());
  }
  ArrayTable table_{{Rows(0, 12)}, 12, 3};
  std::unique_ptr<SampleIndex> index_;
  std::vector<TensorColumn> tensors_;
  Slot slot_;
};

TEST_F(SlowRunsTest, ABatchsRowsOfOneDecodeUnitAreOneRunInTableOrder) {
  const ReadPlanner planner(*index_, tensors_, {.decode_units = {0, 3, 6, 9}});
  using Run = std::vector<std::pair<int64_t, uint32_t>>;
  EXPECT_EQ(RunsOf(planner, &slot_), (std::vector<Run>{{{0, 3}, {1, 1}, {2, 2}}, {{7, 0}, {8, 5}}, {{10, 4}}}));
}

TEST_F(SlowRunsTest, ARunHoldsAtMostMaxRunCells) {
  const ReadPlanner planner(*index_, tensors_, {.decode_units = {0, 3, 6, 9}, .max_run_cells = 2});
  using Run = std::vector<std::pair<int64_t, uint32_t>>;
  EXPECT_EQ(RunsOf(planner, &slot_),
            (std::vector<Run>{{{0, 3}, {1, 1}}, {{2, 2}}, {{7, 0}, {8, 5}}, {{10, 4}}}));
}

TEST_F(SlowRunsTest, WithoutDecodeUnitsEachCellIsARunOfItsOwn) {
  const ReadPlanner planner(*index_, tensors_, {});
  using Run = std::vector<std::pair<int64_t, uint32_t>>;
  EXPECT_EQ(RunsOf(planner, &slot_),
            (std::vector<Run>{{{0, 3}}, {{1, 1}}, {{2, 2}}, {{7, 0}}, {{8, 5}}, {{10, 4}}}));
}

// A table of 300-byte uncompressed samples, one page each, in the page cache, and a batch of it.
class SplitPagesTest : public ::testing::Test {
 protected:
  static constexpr size_t kBytes = 300;
  void SetUp() override {
    table_.AppendFile(0, 40, 40);
    auto index = SampleIndex::Open(table_.dir());
    ASSERT_TRUE(index.ok()) << index.status().ToString();
    index_ = std::make_unique<SampleIndex>(std::move(*index));
    std::ifstream in(index_->FilePath(0), std::ios::binary);  // into the page cache
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_FALSE(bytes.empty());
    TensorColumn t;
    t.name = "t";
    t.in_bytes = t.out_bytes = kBytes;
    tensors_.push_back(t);
    slot_.rows = {31, 4, 17, 0, 39};
    slot_.size = static_cast<int64_t>(slot_.rows.size());
    slot_.tensors.emplace_back(kBytes * slot_.rows.size(), /*pinned=*/false);
  }
  testing_support::TestTable table_{kBytes, parquet::Codec::kUncompressed};
  std::unique_ptr<SampleIndex> index_;
  std::vector<TensorColumn> tensors_;
  Slot slot_;
};

// With the files mapped, a page the page cache holds is a copy out of the mapping (one record, in
// batch order), not a read; its value goes to its batch row.
TEST_F(SplitPagesTest, CachedPagesAreCopiesOutOfTheirMappings) {
  MappedReads mapped(index_->file_paths());
  mapped.BeginBatch();
  const ReadPlanner planner(*index_, tensors_, {.mapped = &mapped});
  planner.Plan(&slot_);
  EXPECT_EQ(slot_.num_reads, 0u);
  ASSERT_EQ(slot_.mapped_copies.size(), slot_.rows.size());
  for (uint32_t i = 0; i < slot_.mapped_copies.size(); ++i) {
    const MappedCopy& c = slot_.mapped_copies[i];
    const SampleIndex::Location loc = index_->Find(slot_.rows[i], 0);
    EXPECT_EQ(c.sample, i);
    EXPECT_EQ(c.column, 0u);
    EXPECT_EQ(c.length, loc.length);
    EXPECT_EQ(c.head_length, loc.length - kBytes);
    EXPECT_EQ(c.tail, slot_.tensors[0].data() + i * kBytes);
    ASSERT_NE(c.from.map, nullptr);
    EXPECT_EQ(c.from.offset, loc.offset);
  }
}

// Without mappings the same pages are split reads, one per page, in file order.
TEST_F(SplitPagesTest, WithoutMappingsPagesAreSplitReads) {
  const ReadPlanner planner(*index_, tensors_, {});
  planner.Plan(&slot_);
  EXPECT_TRUE(slot_.mapped_copies.empty());
  ASSERT_EQ(slot_.num_reads, slot_.rows.size());
  for (size_t g = 0; g < slot_.num_reads; ++g) {
    const Read& r = slot_.reads[g];
    ASSERT_EQ(r.members.size(), 1u);
    EXPECT_EQ(r.tail, slot_.tensors[0].data() + r.members.begin()->sample * kBytes);
    EXPECT_EQ(r.head_length, r.length - kBytes);
    if (g > 0) EXPECT_GT(r.offset, slot_.reads[g - 1].offset);
  }
}

// A read's members: the first in the read itself, all of them in order once there are more.
TEST(ReadMembersTest, KeepsMembersInOrderAcrossClears) {
  ReadMembers members;
  EXPECT_EQ(members.size(), 0u);
  EXPECT_EQ(members.begin(), members.end());
  for (int round = 0; round < 2; ++round) {
    for (uint32_t k = 0; k < 5; ++k) {
      members.push_back(ReadMember{.sample = k, .offset = 10 * k});
      ASSERT_EQ(members.size(), k + 1);
      EXPECT_EQ(members.back().sample, k);
      uint32_t want = 0;
      for (const ReadMember& m : members) EXPECT_EQ(m.offset, 10 * want++);
      EXPECT_EQ(want, k + 1);
    }
    members.clear();
    EXPECT_EQ(members.size(), 0u);
  }
  members.push_back(ReadMember{.sample = 9});
  EXPECT_EQ(members.size(), 1u);
  EXPECT_EQ(members.begin()->sample, 9u);
}

}  // namespace
}  // namespace stoke
