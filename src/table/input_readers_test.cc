#include "table/input_readers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "io/fault_storage.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestTable;

constexpr int64_t kFiles = 5, kRowsPerFile = 4;
constexpr size_t kTensorColumn = 3;  // "t" in TestColumns

// A table of kFiles files of kRowsPerFile rows (two row groups each), read through a storage that
// counts its operations (opens and reads).
class InputReadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int64_t f = 0; f < kFiles; ++f) table_.AppendFile(f * kRowsPerFile, kRowsPerFile, 2);
    auto view = OpenTableView(table_.dir());
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    view_ = std::move(*view);
    view_.storage = std::shared_ptr<Storage>(&counting_, [](Storage*) {});
    ASSERT_EQ(view_.snapshot.files.size(), static_cast<size_t>(kFiles));
    // Inputs in id order (the log's order is not promised).
    for (const auto& add : view_.snapshot.files) inputs_.push_back(&add);
    std::sort(inputs_.begin(), inputs_.end(), [](const delta::AddFile* a, const delta::AddFile* b) {
      return std::stoll(a->path.substr(5)) < std::stoll(b->path.substr(5));
    });
    // The operations of one open (the handle and the footer's tail, which holds these small files).
    const uint64_t before = counting_.operations();
    auto reader = OpenInput(view_, *inputs_[0], 0);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    ops_per_open_ = counting_.operations() - before;
    reader_bytes_ = (*reader)->memory_bytes();
    ASSERT_GT(ops_per_open_, 0u);
    ASSERT_GT(reader_bytes_, 0u);
  }

  // Opens `input` (its footer's tail, which holds these small files) and hands the reader to `readers`.
  void KeepOpened(InputReaders& readers, size_t input) {
    auto reader = OpenInput(view_, *inputs_[input], 0);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    readers.Keep(input, std::move(*reader), kRowsPerFile);
  }

  // Reads cell `row` of input `input` and checks its bytes.
  void ExpectCell(InputReaders& readers, size_t input, int64_t row) {
    AlignedBuffer cell;
    ASSERT_TRUE(readers.ReadCell(input, row, kTensorColumn, &cell).ok());
    const std::string want = TensorOf(static_cast<int64_t>(input) * kRowsPerFile + row);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(cell.data()), cell.size()), want) << input << " " << row;
  }

  TestTable table_;
  FaultInjectingStorage counting_{LocalStorage()};
  TableView view_;
  std::vector<const delta::AddFile*> inputs_;
  uint64_t ops_per_open_ = 0;
  uint64_t reader_bytes_ = 0;
};

TEST_F(InputReadersTest, KeptReadersServeEveryCellWithoutReadingAgainAndCloseAfterTheLast) {
  InputReaders readers(view_, inputs_, uint64_t{64} << 20);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    auto reader = OpenInput(view_, *inputs_[i], static_cast<uint64_t>(inputs_[i]->size));  // read whole
    ASSERT_TRUE(reader.ok());
    readers.Keep(i, std::move(*reader), kRowsPerFile);
  }
  EXPECT_EQ(readers.held(), inputs_.size());
  EXPECT_EQ(readers.held_bytes(), inputs_.size() * reader_bytes_);
  std::vector<std::pair<size_t, int64_t>> cells;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    for (int64_t r = 0; r < kRowsPerFile; ++r) cells.push_back({i, r});
  }
  std::shuffle(cells.begin(), cells.end(), std::mt19937(7));
  const uint64_t before = counting_.operations();
  for (const auto& [i, r] : cells) ExpectCell(readers, i, r);
  EXPECT_EQ(counting_.operations(), before);  // all from memory
  EXPECT_EQ(readers.held(), 0u);              // each closed after its last cell
  EXPECT_EQ(readers.held_bytes(), 0u);
}

TEST_F(InputReadersTest, CountsWhatAReaderDecodesAsItReads) {
  InputReaders readers(view_, inputs_, uint64_t{64} << 20);
  KeepOpened(readers, 0);
  EXPECT_EQ(readers.held_bytes(), reader_bytes_);
  ExpectCell(readers, 0, 0);  // decodes the first row group's OffsetIndex, which the reader keeps
  EXPECT_GT(readers.held_bytes(), reader_bytes_);
  // A budget that held the reader when it was kept, but not once it has grown: it is closed.
  InputReaders tight(view_, inputs_, reader_bytes_);
  KeepOpened(tight, 0);
  EXPECT_EQ(tight.held(), 1u);
  ExpectCell(tight, 0, 0);
  EXPECT_EQ(tight.held(), 0u);
  EXPECT_EQ(tight.held_bytes(), 0u);
}

TEST_F(InputReadersTest, OpensAnInputOnceWhileItHasCellsLeft) {
  InputReaders readers(view_, inputs_, uint64_t{64} << 20);
  for (size_t i = 0; i < inputs_.size(); ++i) readers.Keep(i, nullptr, kRowsPerFile);
  const uint64_t before = counting_.operations();
  for (int64_t r = 0; r < kRowsPerFile; ++r) {  // round robin over the inputs
    for (size_t i = 0; i < inputs_.size(); ++i) ExpectCell(readers, i, r);
  }
  EXPECT_EQ(counting_.operations() - before, inputs_.size() * ops_per_open_);
  EXPECT_EQ(readers.held(), 0u);
}

TEST_F(InputReadersTest, ClosesTheLeastRecentlyUsedToStayWithinItsBudget) {
  // Room for one reader: alternating between two inputs opens one for every cell but the last (the
  // other input's last cell is not worth keeping its reader for, so the reader held stays)...
  InputReaders one(view_, inputs_, reader_bytes_ + reader_bytes_ / 2);
  one.Keep(0, nullptr, kRowsPerFile);
  one.Keep(1, nullptr, kRowsPerFile);
  uint64_t before = counting_.operations();
  for (int64_t r = 0; r < kRowsPerFile; ++r) {
    for (size_t i = 0; i < 2; ++i) {
      ExpectCell(one, i, r);
      EXPECT_LE(one.held_bytes(), reader_bytes_ + reader_bytes_ / 2);
    }
  }
  EXPECT_EQ(counting_.operations() - before, (2 * kRowsPerFile - 1) * ops_per_open_);
  // ... and reading them one input after the other, once per input.
  InputReaders in_order(view_, inputs_, reader_bytes_ + reader_bytes_ / 2);
  in_order.Keep(0, nullptr, kRowsPerFile);
  in_order.Keep(1, nullptr, kRowsPerFile);
  before = counting_.operations();
  for (size_t i = 0; i < 2; ++i) {
    for (int64_t r = 0; r < kRowsPerFile; ++r) ExpectCell(in_order, i, r);
  }
  EXPECT_EQ(counting_.operations() - before, 2 * ops_per_open_);

  // A cap on the number of readers (a local file's reader holds a descriptor) acts the same way.
  InputReaders capped(view_, inputs_, uint64_t{64} << 20, /*max_readers=*/1);
  capped.Keep(0, nullptr, kRowsPerFile);
  capped.Keep(1, nullptr, kRowsPerFile);
  before = counting_.operations();
  for (int64_t r = 0; r < kRowsPerFile; ++r) {
    for (size_t i = 0; i < 2; ++i) {
      ExpectCell(capped, i, r);
      EXPECT_LE(capped.held(), 1u);
    }
  }
  EXPECT_EQ(counting_.operations() - before, (2 * kRowsPerFile - 1) * ops_per_open_);

  // Room for two: the least recently used goes, not the lowest input. Inputs 0 and 1 are held; 0 is
  // used again, so opening 2 closes 1.
  InputReaders two(view_, inputs_, 2 * reader_bytes_ + reader_bytes_ / 2);
  for (size_t i = 0; i < 3; ++i) two.Keep(i, nullptr, kRowsPerFile);
  ExpectCell(two, 0, 0);
  ExpectCell(two, 1, 0);
  ExpectCell(two, 0, 1);
  ExpectCell(two, 2, 0);
  before = counting_.operations();
  ExpectCell(two, 0, 2);  // still held
  EXPECT_EQ(counting_.operations(), before);
  ExpectCell(two, 1, 1);  // closed for input 2: opened again
  EXPECT_EQ(counting_.operations() - before, ops_per_open_);
}

TEST_F(InputReadersTest, KeepsNothingWithoutABudgetAndNothingForASingleCell) {
  InputReaders none(view_, inputs_, 0);
  KeepOpened(none, 0);
  EXPECT_EQ(none.held(), 0u);
  InputReaders no_descriptors(view_, inputs_, uint64_t{64} << 20, /*max_readers=*/0);
  KeepOpened(no_descriptors, 1);
  EXPECT_EQ(no_descriptors.held(), 0u);
  ExpectCell(no_descriptors, 1, 0);
  EXPECT_EQ(no_descriptors.held(), 0u);
  uint64_t before = counting_.operations();
  for (int64_t r = 0; r < kRowsPerFile; ++r) ExpectCell(none, 0, r);
  EXPECT_EQ(counting_.operations() - before, kRowsPerFile * ops_per_open_);

  // An input not announced with Keep counts as one cell: opened for it, not kept.
  InputReaders unannounced(view_, inputs_, uint64_t{64} << 20);
  ExpectCell(unannounced, 3, 2);
  EXPECT_EQ(unannounced.held(), 0u);
}

TEST_F(InputReadersTest, ThreadsReadingAtOnceGetEveryCellWithinTheBudget) {
  const uint64_t budget = 2 * reader_bytes_;
  InputReaders readers(view_, inputs_, budget);
  for (size_t i = 0; i < inputs_.size(); ++i) readers.Keep(i, nullptr, kRowsPerFile);
  std::vector<std::pair<size_t, int64_t>> cells;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    for (int64_t r = 0; r < kRowsPerFile; ++r) cells.push_back({i, r});
  }
  std::shuffle(cells.begin(), cells.end(), std::mt19937(3));
  ThreadPool pool(4);
  std::vector<AlignedBuffer> out(cells.size());
  ASSERT_TRUE(ParallelFor(pool, cells.size(), [&](size_t k) -> Status {
                EXPECT_LE(readers.held_bytes(), budget);
                return readers.ReadCell(cells[k].first, cells[k].second, kTensorColumn, &out[k]);
              }).ok());
  for (size_t k = 0; k < cells.size(); ++k) {
    const std::string want = TensorOf(static_cast<int64_t>(cells[k].first) * kRowsPerFile + cells[k].second);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(out[k].data()), out[k].size()), want);
  }
  EXPECT_EQ(readers.held(), 0u);
}

}  // namespace
}  // namespace stoke
