#include "loader/read_planner.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "loader/array_table_testing.h"

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

}  // namespace
}  // namespace stoke
