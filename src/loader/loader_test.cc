#include "stoke/loader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>
#include <utility>

#include "core/cpus.h"
#include "core/cpus_testing.h"
#include "core/random.h"
#include "loader/batch_slots.h"
#include "format/image.h"
#include "format/parquet_reader.h"
#include "format/parquet_writer.h"
#include "io/storage.h"
#include "loader/out_of_memory.h"
#include "table/sample_index.h"
#include "table/test_table.h"

namespace stoke {
namespace {

using testing_support::TensorOf;
using testing_support::TestTable;

// Rows [0, 1000) in three files of uneven size, row groups of 100 rows.
void MakeTable(TestTable& t) {
  t.AppendFile(0, 250, 100);
  t.AppendFile(250, 350, 100);
  t.AppendFile(600, 400, 100);
}

std::unique_ptr<Loader> OpenOrDie(const std::string& dir, LoaderOptions o) {
  auto l = Loader::Open(dir, o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? std::move(*l) : nullptr;
}

// Calls check(batch) for every batch of the loader's current epoch.
void ForEachBatch(Loader& l, const std::function<void(const Batch&)>& check) {
  for (;;) {
    auto b = l.Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (!b->has_value()) return;
    check(**b);
  }
}

// The name column of test_table.h's rows at batch row i: "n<id % 5>", null where id % 4 == 0.
void ExpectNameOfId(const BatchColumn& name, size_t i, int64_t id) {
  const bool present = id % 4 != 0;
  ASSERT_EQ(name.valid.size(), name.strings.size());
  EXPECT_EQ(name.valid[i], present ? 1 : 0) << id;
  EXPECT_EQ(name.strings[i], present ? "n" + std::to_string(id % 5) : "") << id;
}

// Every row id the loader yields in its current epoch, checking each sample's values on the way.
std::vector<int64_t> Drain(Loader& l, int64_t tensor_len = 16, int64_t max_batches = -1) {
  std::vector<int64_t> rows;
  for (int64_t b = 0; max_batches < 0 || b < max_batches; ++b) {
    auto next = l.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    const Batch& batch = **next;
    const BatchColumn* t = batch.column("t");
    const BatchColumn* id = batch.column("id");
    for (int64_t i = 0; i < batch.size(); ++i) {
      const int64_t row = batch.row_ids()[static_cast<size_t>(i)];
      rows.push_back(row);
      if (id != nullptr) {
        int64_t v;
        std::memcpy(&v, static_cast<const uint8_t*>(id->data()) + 8 * i, 8);
        EXPECT_EQ(v, row);
      }
      if (t != nullptr) {
        const std::string want = TensorOf(row, tensor_len);
        EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(t->data()) + i * tensor_len, want.data(), want.size()))
            << "row " << row;
      }
    }
  }
  return rows;
}

// A const Batch hands out read-only values, a non-const one writable values; only Loader::Next makes
// batches.
static_assert(std::is_same_v<decltype(std::declval<const Batch&>().column("t")->data()), const void*>);
static_assert(std::is_same_v<decltype(std::declval<const Batch&>().columns()[0].data()), const void*>);
static_assert(std::is_same_v<decltype(std::declval<Batch&>().column("t")->data()), void*>);
static_assert(std::is_same_v<decltype(std::declval<Batch&>().columns()[0].data()), void*>);
static_assert(!std::is_default_constructible_v<Batch> && !std::is_copy_constructible_v<Batch>);

TEST(Loader, ConsumerWritesIntoItsBatchAndReadsItBackThroughAConstView) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 8;
  o.columns = {"t"};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  auto next = l->Next();
  ASSERT_TRUE(next.ok() && next->has_value());
  Batch& b = **next;
  BatchColumn* col = b.column("t");
  ASSERT_NE(col, nullptr);
  ASSERT_EQ(col->num_bytes, 8u * 16);
  std::memset(col->data(), 0x5a, col->num_bytes);  // e.g. normalising in place
  const Batch& view = b;
  EXPECT_EQ(view.column("t")->data(), static_cast<const void*>(col->data()));
  EXPECT_EQ(static_cast<const uint8_t*>(view.columns()[0].data())[8 * 16 - 1], 0x5a);
  EXPECT_EQ(b.column("missing"), nullptr);
}

// A batch's scalar rows are copied in chunks of kGatherRows, by the producer and by the consumer
// waiting for it: every row of batches of one chunk, of several and of a partial last one, with or
// without tensor reads beside them, carries its own values.
TEST(Loader, GathersTheScalarsOfEveryRowOfBatchesOfManyChunks) {
  TestTable t;
  MakeTable(t);
  for (const int64_t batch_size : {int64_t{kGatherRows}, int64_t{300}, int64_t{1000}}) {
    for (const bool tensors : {true, false}) {
      LoaderOptions o;
      o.batch_size = batch_size;
      o.shuffle = LoaderOptions::Shuffle::kGlobal;
      if (!tensors) o.columns = {"id", "label", "name"};
      auto l = OpenOrDie(t.dir(), o);
      ASSERT_TRUE(l);
      int64_t seen = 0;
      ForEachBatch(*l, [&](const Batch& b) {
        const BatchColumn* id = b.column("id");
        const BatchColumn* label = b.column("label");
        const BatchColumn* name = b.column("name");
        ASSERT_EQ(name->strings.size(), static_cast<size_t>(b.size()));
        for (int64_t i = 0; i < b.size(); ++i, ++seen) {
          const int64_t row = b.row_ids()[static_cast<size_t>(i)];
          ASSERT_EQ(static_cast<const int64_t*>(id->data())[i], row) << batch_size << " row " << i;
          ASSERT_EQ(static_cast<const int32_t*>(label->data())[i], row % 3);
          ExpectNameOfId(*name, static_cast<size_t>(i), row);
        }
      });
      EXPECT_EQ(seen, 1000) << batch_size;
    }
  }
}

TEST(Loader, DeliversEveryRowWithItsValues) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 64;
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->num_rows(), 1000);
  EXPECT_EQ(l->samples_per_epoch(), 1000);
  EXPECT_EQ(l->batches_per_epoch(), 16);
  auto first = l->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  const Batch& b = **first;
  EXPECT_EQ(b.size(), 64);
  EXPECT_EQ(b.index(), 0);
  ASSERT_EQ(b.columns().size(), 4u);
  EXPECT_EQ(b.columns()[0].name, "id");
  EXPECT_EQ(b.columns()[0].dtype, DType::kInt64);
  EXPECT_EQ(b.columns()[0].kind, ColumnKind::kScalar);
  EXPECT_EQ(b.columns()[1].name, "label");
  EXPECT_EQ(b.columns()[1].dtype, DType::kInt32);
  const BatchColumn& name = b.columns()[2];
  EXPECT_EQ(name.kind, ColumnKind::kString);
  ASSERT_EQ(name.valid.size(), 64u);
  const BatchColumn& tc = b.columns()[3];
  EXPECT_EQ(tc.kind, ColumnKind::kTensor);
  EXPECT_EQ(tc.shape, (std::vector<int64_t>{64, 16}));
  EXPECT_EQ(tc.dtype, DType::kUInt8);
  for (int64_t i = 0; i < 64; ++i) {
    const int64_t row = b.row_ids()[i];
    int32_t label;
    std::memcpy(&label, static_cast<const uint8_t*>(b.columns()[1].data()) + 4 * i, 4);
    EXPECT_EQ(label, row % 3);
    EXPECT_EQ(name.valid[i], row % 4 != 0 ? 1 : 0);
    EXPECT_EQ(name.strings[i], row % 4 != 0 ? "n" + std::to_string(row % 5) : "");
  }
  std::vector<int64_t> rows(b.row_ids().begin(), b.row_ids().end());
  auto rest = Drain(*l);
  rows.insert(rows.end(), rest.begin(), rest.end());
  std::sort(rows.begin(), rows.end());
  ASSERT_EQ(rows.size(), 1000u);
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(rows[i], i);
  auto end = l->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  const LoaderStats st = l->stats();
  EXPECT_EQ(st.samples, 1000);
  EXPECT_EQ(st.batches, 16);
  EXPECT_GT(st.bytes_read, 0);
}

// A batch_size far beyond the table (2^60) gives one batch of the whole epoch, or none with
// drop_last: the batch buffers are sized by what a batch can hold, not by the option.
TEST(Loader, BatchSizeBeyondTheTableSizesNothingBeyondIt) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = int64_t{1} << 60;
  o.prefetch_bytes = 1 << 20;
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->batches_per_epoch(), 1);
  auto first = l->Next();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->size(), 1000);
  EXPECT_EQ((*first)->column("t")->shape, (std::vector<int64_t>{1000, 16}));
  first->reset();
  auto end = l->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());

  o.drop_last = true;
  auto dropped = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(dropped);
  EXPECT_EQ(dropped->batches_per_epoch(), 0);
  EXPECT_TRUE(Drain(*dropped).empty());
}

// Every sample of an epoch exactly once over the ranks (drop_last), or all at least once with
// fewer than world_size repeats (padding), for several world sizes and shuffles.
TEST(Loader, ShardsCoverTheEpochForEveryWorldSize) {
  TestTable t;
  MakeTable(t);
  for (auto shuffle : {LoaderOptions::Shuffle::kGlobal, LoaderOptions::Shuffle::kBlock, LoaderOptions::Shuffle::kNone}) {
    for (int world : {1, 2, 3, 7}) {
      for (bool drop_last : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "world " << world << " drop_last " << drop_last << " shuffle "
                                          << static_cast<int>(shuffle));
        std::map<int64_t, int> seen;
        std::set<size_t> counts;
        for (int rank = 0; rank < world; ++rank) {
          LoaderOptions o;
          o.batch_size = 32;
          o.shuffle = shuffle;
          o.shuffle_buffer = 50;
          o.seed = 9;
          o.rank = rank;
          o.world_size = world;
          o.drop_last = drop_last;
          o.columns = {"id", "t"};
          auto l = OpenOrDie(t.dir(), o);
          ASSERT_TRUE(l);
          ASSERT_TRUE(l->SetEpoch(3).ok());
          auto rows = Drain(*l);
          EXPECT_EQ(static_cast<int64_t>(rows.size()), l->samples_per_epoch() - (drop_last ? l->samples_per_epoch() % 32 : 0));
          counts.insert(rows.size());
          for (int64_t r : rows) ++seen[r];
        }
        EXPECT_EQ(counts.size(), 1u) << "ranks got different sample counts";
        if (drop_last) {
          for (const auto& [row, n] : seen) EXPECT_EQ(n, 1) << "row " << row;
          const int64_t per_rank = 1000 / world / 32 * 32;
          EXPECT_EQ(static_cast<int64_t>(seen.size()), per_rank * world);
        } else {
          EXPECT_EQ(seen.size(), 1000u);
          int64_t repeats = 0;
          for (const auto& [row, n] : seen) repeats += n - 1;
          EXPECT_LT(repeats, world);
        }
      }
    }
  }
}

TEST(Loader, SameSeedSameOrderAndEpochsDiffer) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 50;
  o.seed = 42;
  o.columns = {"id", "t"};
  auto a = OpenOrDie(t.dir(), o);
  auto b = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(a && b);
  const auto a0 = Drain(*a);
  const auto b0 = Drain(*b);
  EXPECT_EQ(a0, b0);
  ASSERT_TRUE(a->SetEpoch(1).ok());
  const auto a1 = Drain(*a);
  EXPECT_NE(a0, a1);
  EXPECT_EQ(std::set<int64_t>(a0.begin(), a0.end()), std::set<int64_t>(a1.begin(), a1.end()));
  o.seed = 43;
  auto c = OpenOrDie(t.dir(), o);
  EXPECT_NE(Drain(*c), a0);
}

TEST(Loader, ResumeYieldsExactlyTheRest) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 40;
  o.seed = 5;
  o.columns = {"t"};
  auto full = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(full);
  ASSERT_TRUE(full->SetEpoch(2).ok());
  const auto all = Drain(*full);

  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l->SetEpoch(2).ok());
  const auto head = Drain(*l, 16, 7);
  ASSERT_EQ(head.size(), 280u);
  const Loader::State s = l->state();
  EXPECT_EQ(s.epoch, 2);
  EXPECT_EQ(s.consumed, 280);
  auto resumed = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(resumed->Restore(s).ok());
  const auto tail = Drain(*resumed);
  std::vector<int64_t> joined = head;
  joined.insert(joined.end(), tail.begin(), tail.end());
  EXPECT_EQ(joined, all);
  // After the end, the state says the epoch is complete.
  EXPECT_EQ(resumed->state().consumed, 1000);
}

TEST(Loader, ResumeAtAnotherWorldSize) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 25;
  o.seed = 11;
  o.columns = {"id", "t"};
  o.world_size = 2;
  std::multiset<int64_t> consumed;
  Loader::State state;
  for (int rank = 0; rank < 2; ++rank) {
    o.rank = rank;
    auto l = OpenOrDie(t.dir(), o);
    const auto head = Drain(*l, 16, 5);  // 5 batches of 25 on each rank
    consumed.insert(head.begin(), head.end());
    state = l->state();
  }
  EXPECT_EQ(state.consumed, 250);
  o.world_size = 3;
  std::multiset<int64_t> rest;
  for (int rank = 0; rank < 3; ++rank) {
    o.rank = rank;
    auto l = OpenOrDie(t.dir(), o);
    ASSERT_TRUE(l->Restore(state).ok());
    const auto tail = Drain(*l);
    rest.insert(tail.begin(), tail.end());
  }
  // 750 remaining rows over 3 ranks: exactly once each, none of them consumed before.
  EXPECT_EQ(rest.size(), 750u);
  for (int64_t r : rest) EXPECT_EQ(consumed.count(r), 0u) << r;
  std::set<int64_t> all(consumed.begin(), consumed.end());
  all.insert(rest.begin(), rest.end());
  EXPECT_EQ(all.size(), 1000u);
}

TEST(Loader, WhereFiltersRows) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.where = "label = 1 AND id < 600";
  o.columns = {"label", "t", "id"};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->num_rows(), 200);
  const auto rows = Drain(*l);
  ASSERT_EQ(rows.size(), 200u);
  for (int64_t r : rows) {
    EXPECT_EQ(r % 3, 1);
    EXPECT_LT(r, 600);
  }
  o.where = "label = ";
  EXPECT_EQ(Loader::Open(t.dir(), o).status().code(), StatusCode::kInvalidArgument);
  o.where = "nope = 1";
  EXPECT_FALSE(Loader::Open(t.dir(), o).ok());
}

// The ids of the samples the loader yields in its current epoch, each checked against its tensor.
std::vector<int64_t> DrainIds(Loader& l) {
  std::vector<int64_t> ids;
  for (;;) {
    auto next = l.Next();
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    const Batch& batch = **next;
    const BatchColumn* t = batch.column("t");
    const BatchColumn* id = batch.column("id");
    for (int64_t i = 0; i < batch.size(); ++i) {
      int64_t v;
      std::memcpy(&v, static_cast<const uint8_t*>(id->data()) + 8 * i, 8);
      ids.push_back(v);
      const std::string want = TensorOf(v);
      EXPECT_EQ(0, std::memcmp(static_cast<const uint8_t*>(t->data()) + i * 16, want.data(), want.size())) << "id " << v;
    }
  }
  return ids;
}

TEST(Loader, AnEpochCoversOnlyTheRowsNoDeletionVectorDeletesOnEveryShard) {
  TestTable t;
  MakeTable(t);
  std::set<int64_t> deleted_ids;
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 350; r += 3) {  // every third row of the second file (ids 250..599)
    rows.push_back(r);
    deleted_ids.insert(250 + static_cast<int64_t>(r));
  }
  // As Spark's DELETE does, the file is removed and added again with its DV (last in the table).
  testing_support::DeleteRows(t, "part-250.parquet", rows);
  const int64_t live = 1000 - static_cast<int64_t>(deleted_ids.size());
  for (int world : {1, 3}) {
    std::map<int64_t, int> seen;
    for (int rank = 0; rank < world; ++rank) {
      LoaderOptions o;
      o.batch_size = 32;
      o.rank = rank;
      o.world_size = world;
      o.drop_last = true;
      o.columns = {"id", "t"};
      auto l = OpenOrDie(t.dir(), o);
      ASSERT_TRUE(l);
      EXPECT_EQ(l->num_rows(), live);
      for (int64_t id : DrainIds(*l)) ++seen[id];
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), live / world / 32 * 32 * world) << "world " << world;
    for (const auto& [id, n] : seen) {
      EXPECT_EQ(n, 1) << "id " << id;
      EXPECT_FALSE(deleted_ids.count(id)) << "deleted id " << id << " was loaded";
    }
  }
  // Only the tensor column, no filter: the deletion vector alone makes the selection.
  LoaderOptions only_tensors;
  only_tensors.columns = {"t"};
  auto l = OpenOrDie(t.dir(), only_tensors);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->num_rows(), live);
  // With a filter too.
  LoaderOptions o;
  o.where = "label = 1";
  o.columns = {"id", "t"};
  l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  int64_t want = 0;
  for (int64_t id = 0; id < 1000; ++id) want += id % 3 == 1 && !deleted_ids.count(id);
  EXPECT_EQ(l->num_rows(), want);
  for (int64_t id : DrainIds(*l)) EXPECT_FALSE(deleted_ids.count(id)) << id;
}

TEST(Loader, OptionErrorsNameTheOption) {
  TestTable t;
  MakeTable(t);
  auto err = [&](LoaderOptions o) { return Loader::Open(t.dir(), o).status(); };
  LoaderOptions o;
  o.batch_size = 0;
  EXPECT_NE(err(o).message().find("batch_size"), std::string::npos);
  o = {};
  o.rank = 2;
  o.world_size = 2;
  EXPECT_NE(err(o).message().find("rank"), std::string::npos);
  o = {};
  o.columns = {"id", "missing"};
  Status s = err(o);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("missing"), std::string::npos);
  o = {};
  o.transforms = {TransformSpec::RandomFlip({5})};
  EXPECT_EQ(err(o).code(), StatusCode::kInvalidArgument);
  o = {};
  o.threads = 100000;  // more threads than any process gets: an error, not a terminated process
  EXPECT_NE(err(o).message().find("threads must be in [1, 4096]"), std::string::npos);
  EXPECT_EQ(Loader::Open(t.dir() + "/nope", LoaderOptions{}).status().code(), StatusCode::kNotFound);
}

TEST(Loader, LargeSamplesOnePagePerRowBothBackendsAndDirect) {
  constexpr int64_t kLen = 100000;  // > 64 KiB: one page per row
  TestTable t(kLen);
  t.AppendFile(0, 30, 10);
  t.AppendFile(30, 45, 20);
  std::string direct_unsupported;  // why O_DIRECT cases did not run (tmpfs), reported as a skip
  for (auto backend : {LoaderOptions::Backend::kPread, LoaderOptions::Backend::kAuto}) {
    for (bool direct : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "backend " << static_cast<int>(backend) << " direct " << direct);
      LoaderOptions o;
      o.batch_size = 8;
      o.backend = backend;
      o.direct = direct;
      o.queue_depth = 4;
      o.prefetch_bytes = 1;  // the smallest budget still delivers (2 batch buffers, minimal fetch budget)
      auto l = Loader::Open(t.dir(), o);
      if (!l.ok() && direct && l.status().code() == StatusCode::kUnsupported) {  // tmpfs
        direct_unsupported = l.status().ToString();
        continue;
      }
      ASSERT_TRUE(l.ok()) << l.status().ToString();
      auto rows = Drain(**l, kLen);
      std::sort(rows.begin(), rows.end());
      ASSERT_EQ(rows.size(), 75u);
      for (int64_t i = 0; i < 75; ++i) EXPECT_EQ(rows[i], i);
    }
  }
  // Shuffle none reads neighbouring pages: coalesced reads deliver the same bytes.
  LoaderOptions o;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.batch_size = 16;
  auto l = OpenOrDie(t.dir(), o);
  const auto rows = Drain(*l, kLen);
  ASSERT_EQ(rows.size(), 75u);
  for (int64_t i = 0; i < 75; ++i) EXPECT_EQ(rows[i], i);
  EXPECT_LT(l->stats().bytes_read, 76 * (kLen + 100));
  if (!direct_unsupported.empty()) GTEST_SKIP() << "the O_DIRECT cases did not run: " << direct_unsupported;
}

// Flips one byte inside the page holding `row` of column t.
void CorruptRow(const std::string& dir, int64_t row) {
  auto index = SampleIndex::Open(dir);
  ASSERT_TRUE(index.ok());
  const auto loc = index->Find(row, 0);
  const std::string path = index->FilePath(loc.file);
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b;
  const off_t at = static_cast<off_t>(loc.offset + loc.length - 3);
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= 0x5A;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
}

// Takes batches until the first error (returned) or the end of the epoch (OK).
Status FirstError(Loader& l) {
  for (;;) {
    auto n = l.Next();
    if (!n.ok()) return n.status();
    if (!n->has_value()) return Status::OK();
  }
}

// Flips a byte of `row`'s sample in the table at `dir` (`rows` rows of `len`-byte tensors), then:
// a loader reports a CRC mismatch naming the file and row, and with on_error=skip delivers every other
// row with its bytes. Returns the raising loader's backend.
std::string ExpectFlippedByteReportedAndSkipped(const std::string& dir, int64_t row, int64_t rows, int64_t len) {
  CorruptRow(dir, row);
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  auto l = OpenOrDie(dir, o);
  Status error = FirstError(*l);
  EXPECT_EQ(error.code(), StatusCode::kCorruption) << error.ToString();
  const std::string where = fmt::format("part-0.parquet row {} (table row {})", row, row);
  EXPECT_NE(error.message().find(where), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("CRC mismatch"), std::string::npos) << error.message();
  o.on_error = LoaderOptions::OnError::kSkip;
  auto s = OpenOrDie(dir, o);
  auto delivered = Drain(*s, len);  // checks every delivered sample's bytes
  EXPECT_EQ(delivered.size(), static_cast<size_t>(rows - 1));
  EXPECT_EQ(std::count(delivered.begin(), delivered.end(), row), 0);
  return l->stats().backend;
}

// A 512-byte sample is a page of its own (the writer's default), so its read is its own bytes and
// the page CRC covers exactly them: a flipped byte in it is reported naming the file and row, and
// its neighbours load.
TEST(Loader, FlippedByteInASmallSampleNamesFileAndRow) {
  constexpr int64_t kLen = 512;
  TestTable t(kLen);
  t.AppendFile(0, 40, 40);
  auto index = SampleIndex::Open(t.dir());
  ASSERT_TRUE(index.ok());
  for (int64_t r = 0; r < 40; ++r) {
    const auto loc = index->Find(r, 0);
    EXPECT_EQ(loc.rows_in_page, 1u) << "row " << r;
    EXPECT_LT(loc.length, kLen + 64) << "row " << r;  // the sample, its length prefix and a page header
  }
  ExpectFlippedByteReportedAndSkipped(t.dir(), 13, 40, kLen);
}

// A 100,000-byte sample read from the page cache with the default backend is copied into its batch
// row by a reading thread, which takes the sample's CRC there (FetcherOptions::checksum_tails): a
// flipped byte in it is still reported naming the file and row, its neighbours load with their bytes,
// and with verify_crc off the flipped byte is delivered as read.
TEST(Loader, FlippedByteInASampleCopiedByAReadingThreadNamesFileAndRow) {
  constexpr int64_t kLen = 100000;
  TestTable t(kLen, parquet::Codec::kUncompressed);
  t.AppendFile(0, 24, 24);
  auto index = SampleIndex::Open(t.dir());
  ASSERT_TRUE(index.ok());
  const auto loc = index->Find(9, 0);
  ASSERT_EQ(loc.rows_in_page, 1u);  // a page of its own, read whole: header, length prefix, sample
  ASSERT_LT(loc.length, kLen + 64);
  const std::string backend = ExpectFlippedByteReportedAndSkipped(t.dir(), 9, 24, kLen);
  EXPECT_TRUE(backend == "io_uring+pread" || backend == "pread") << backend;
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.verify_crc = false;
  auto unchecked = OpenOrDie(t.dir(), o);
  EXPECT_TRUE(FirstError(*unchecked).ok());
}

// Whether reads that must not wait for the disk (RWF_NOWAIT) work on the file system holding `path`:
// the loader reads cached pages at once only where they do.
bool NoWaitReadsWork(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  uint8_t b;
  iovec iov{&b, 1};
  ssize_t n = ::preadv2(fd, &iov, 1, 0, RWF_NOWAIT);
  if (n < 0 && errno == EAGAIN) n = ::preadv2(fd, &iov, 1, 0, RWF_NOWAIT);  // the first byte, read just now
  ::close(fd);
  return n == 1;
}

// 512-byte uncompressed samples from the page cache are read at once (LoaderStats::reads_at_once) by
// the producer and by the consumer waiting for its batch, with every byte delivered over two epochs;
// with the io_uring or pread backend, and with O_DIRECT, none is.
TEST(Loader, SmallCachedSamplesAreReadAtOnceByteForByte) {
  constexpr int64_t kLen = 512;
  TestTable t(kLen, parquet::Codec::kUncompressed);
  t.AppendFile(0, 300, 100);
  t.AppendFile(300, 300, 100);
  using Backend = LoaderOptions::Backend;
  for (Backend backend : {Backend::kAuto, Backend::kIoUring, Backend::kPread}) {
    LoaderOptions o;
    o.batch_size = 16;
    o.backend = backend;
    auto opened = Loader::Open(t.dir(), o);
    if (!opened.ok() && backend == Backend::kIoUring) continue;  // io_uring refused here
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    Loader& l = **opened;
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      ASSERT_TRUE(l.SetEpoch(epoch).ok());
      auto rows = Drain(l, kLen);
      std::sort(rows.begin(), rows.end());
      ASSERT_EQ(rows.size(), 600u);
      for (int64_t i = 0; i < 600; ++i) EXPECT_EQ(rows[static_cast<size_t>(i)], i);
    }
    if (backend != Backend::kAuto) {
      EXPECT_EQ(l.stats().reads_at_once, 0) << l.stats().backend;
    } else if (NoWaitReadsWork(t.dir() + "/part-0.parquet")) {
      EXPECT_GT(l.stats().reads_at_once, 600) << "the cached pages went through the fetcher";
    }
  }
}

// LoaderStats says how many threads the loader sized: the workers asked for, or one per CPU the
// process may use (one, for a loader opened on a thread pinned to one CPU), and the reading threads
// of kAuto (one more than the CPUs) or kPread, none with io_uring alone.
TEST(Loader, StatsSayHowManyThreadsTheLoaderSized) {
  TestTable t(4096, parquet::Codec::kUncompressed);
  t.AppendFile(0, 64, 64);
  using Backend = LoaderOptions::Backend;
  auto open = [&](int threads, Backend backend) {
    LoaderOptions o;
    o.threads = threads;
    o.backend = backend;
    return Loader::Open(t.dir(), o);
  };
  auto three = open(3, Backend::kAuto);
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ((*three)->stats().workers, 3);
  auto deflt = open(0, Backend::kAuto);
  ASSERT_TRUE(deflt.ok()) << deflt.status().ToString();
  const LoaderStats s = (*deflt)->stats();
  EXPECT_EQ(s.workers, static_cast<int64_t>(AvailableCpus()));
  if (std::string(s.backend) == "io_uring+pread") {
    EXPECT_EQ(s.read_threads, std::min<int64_t>(static_cast<int64_t>(AvailableCpus()) + 1, 64));
  }
  if (auto ring = open(0, Backend::kIoUring); ring.ok()) {
    EXPECT_EQ((*ring)->stats().read_threads, 0);
  }
  auto pread = open(0, Backend::kPread);
  ASSERT_TRUE(pread.ok()) << pread.status().ToString();
  EXPECT_GT((*pread)->stats().read_threads, 0);

  LoaderStats pinned;
  ASSERT_TRUE(testing_support::RunOnOneCpu([&] {
    if (auto l = open(0, Backend::kAuto); l.ok()) pinned = (*l)->stats();
  }));
  EXPECT_EQ(pinned.workers, 1);
  if (std::string(pinned.backend) == "io_uring+pread") {
    EXPECT_EQ(pinned.read_threads, 2);
  }
}

// A flipped byte in a 512-byte sample read at once is reported, naming the file and row, and with
// on_error=skip its neighbours load with their bytes.
TEST(Loader, FlippedByteInASampleReadAtOnceNamesFileAndRow) {
  constexpr int64_t kLen = 512;
  TestTable t(kLen, parquet::Codec::kUncompressed);
  t.AppendFile(0, 64, 64);
  ExpectFlippedByteReportedAndSkipped(t.dir(), 21, 64, kLen);
  if (!NoWaitReadsWork(t.dir() + "/part-0.parquet")) GTEST_SKIP() << "no RWF_NOWAIT reads here: nothing read at once";
  LoaderOptions o;
  o.batch_size = 4;
  o.on_error = LoaderOptions::OnError::kSkip;
  auto l = OpenOrDie(t.dir(), o);
  EXPECT_EQ(Drain(*l, kLen).size(), 63u);
  EXPECT_GT(l->stats().reads_at_once, 0);
  EXPECT_EQ(l->stats().samples_skipped, 1);
}

// Small pages the page cache does not hold are not read at once: the producer hands them to the
// fetcher (a consumer waiting for their batch reads its share waiting for the disk), and every byte
// arrives.
TEST(Loader, SmallSamplesOutOfThePageCacheLoadByteForByte) {
  constexpr int64_t kLen = 512;
  TestTable t(kLen, parquet::Codec::kUncompressed);
  t.AppendFile(0, 2000, 1000);
  const std::string path = t.dir() + "/part-0.parquet";
  LoaderOptions o;
  o.batch_size = 16;
  auto l = OpenOrDie(t.dir(), o);  // the open reads the footer, before the pages are dropped
  ASSERT_NE(l, nullptr);
  if (!testing_support::DropFromPageCache(path, std::filesystem::file_size(path))) {
    GTEST_SKIP() << "the file's pages stay in the page cache here (tmpfs?)";
  }
  auto rows = Drain(*l, kLen);
  std::sort(rows.begin(), rows.end());
  ASSERT_EQ(rows.size(), 2000u);
  for (int64_t i = 0; i < 2000; ++i) EXPECT_EQ(rows[static_cast<size_t>(i)], i);
  EXPECT_LT(l->stats().reads_at_once, 2000) << "pages out of the page cache were read at once";
}

TEST(Loader, CorruptPageNamesFileAndRowOrIsSkipped) {
  constexpr int64_t kLen = 70000;
  TestTable t(kLen);
  t.AppendFile(0, 20, 10);
  t.AppendFile(20, 20, 10);
  CorruptRow(t.dir(), 27);
  LoaderOptions o;
  o.batch_size = 5;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  auto l = OpenOrDie(t.dir(), o);
  Status error;
  int64_t delivered = 0;
  for (;;) {
    auto n = l->Next();
    if (!n.ok()) {
      error = n.status();
      break;
    }
    if (!n->has_value()) break;
    delivered += (*n)->size();
  }
  EXPECT_EQ(delivered, 25);
  EXPECT_EQ(error.code(), StatusCode::kCorruption) << error.ToString();
  EXPECT_NE(error.message().find("part-20.parquet row 7 (table row 27)"), std::string::npos) << error.message();
  EXPECT_NE(error.message().find("CRC"), std::string::npos) << error.message();
  // The epoch cannot go on; SetEpoch starts again.
  EXPECT_FALSE(l->Next().ok());
  ASSERT_TRUE(l->SetEpoch(0).ok());
  EXPECT_TRUE(l->Next().ok());

  o.on_error = LoaderOptions::OnError::kSkip;
  auto s = OpenOrDie(t.dir(), o);
  auto rows = Drain(*s, kLen);
  EXPECT_EQ(rows.size(), 39u);
  EXPECT_EQ(std::count(rows.begin(), rows.end(), 27), 0);
  EXPECT_EQ(s->stats().samples_skipped, 1);
  // Without the CRC check the damage is found by the decompressor (these pages are zstd), still
  // naming the file and row.
  o.on_error = LoaderOptions::OnError::kRaise;
  o.verify_crc = false;
  auto nocrc = OpenOrDie(t.dir(), o);
  Status nocrc_error = FirstError(*nocrc);
  EXPECT_EQ(nocrc_error.code(), StatusCode::kCorruption);
  EXPECT_EQ(nocrc_error.message().find("CRC"), std::string::npos) << nocrc_error.message();
  EXPECT_NE(nocrc_error.message().find("row 7 (table row 27)"), std::string::npos) << nocrc_error.message();
}

TEST(Loader, TransformsChangeDtypeAndShape) {
  constexpr int64_t kLen = 24;
  TestTable t(kLen);
  t.AppendFile(0, 10, 10);
  LoaderOptions o;
  o.columns = {"t"};
  o.batch_size = 4;
  o.transforms = {TransformSpec::Cast(DType::kFloat32), TransformSpec::CenterCrop({0}, {20})};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  auto b = l->Next();
  ASSERT_TRUE(b.ok() && b->has_value());
  const BatchColumn& c = (**b).columns()[0];
  EXPECT_EQ(c.dtype, DType::kFloat32);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{4, 20}));
  for (int64_t i = 0; i < 4; ++i) {
    const std::string want = TensorOf((**b).row_ids()[i], kLen);
    for (int64_t k = 0; k < 20; ++k) {
      float v;
      std::memcpy(&v, static_cast<const uint8_t*>(c.data()) + 4 * (i * 20 + k), 4);
      EXPECT_EQ(v, static_cast<float>(static_cast<uint8_t>(want[static_cast<size_t>(k + 2)])));
    }
  }
}

TEST(Loader, StopsCleanlyMidEpochAndBatchesOutliveTheLoader) {
  constexpr int64_t kLen = 70000;
  TestTable t(kLen);
  t.AppendFile(0, 60, 20);
  LoaderOptions o;
  o.batch_size = 4;
  o.trace = true;
  std::optional<Batch> kept;
  {
    auto l = OpenOrDie(t.dir(), o);
    auto b = l->Next();
    ASSERT_TRUE(b.ok() && b->has_value());
    kept = std::move(*b);
    // Switching epochs mid-way drops what was prefetched.
    ASSERT_TRUE(l->SetEpoch(1).ok());
    EXPECT_EQ(Drain(*l, kLen).size(), 60u);
    ASSERT_TRUE(l->SetEpoch(2).ok());
    Drain(*l, kLen, 2);
    const std::string trace = std::string(::testing::TempDir()) + "/loader_trace.json";
    ASSERT_TRUE(l->WriteTrace(trace).ok());
    auto read = ReadFileToString(LocalStorage(), trace);
    ASSERT_TRUE(read.ok());
    const std::string& text = *read;
    EXPECT_NE(text.find("\"decode\""), std::string::npos);
    EXPECT_NE(text.find("\"fetch\""), std::string::npos);
    // The loader is destroyed mid-epoch with reads in flight.
  }
  const std::string want = TensorOf(kept->row_ids()[0], kLen);
  EXPECT_EQ(0, std::memcmp(kept->column("t")->data(), want.data(), want.size()));
  kept.reset();
}

TEST(Loader, ConsumerHoldingEveryBufferDoesNotHang) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.batch_size = 100;
  o.prefetch_bytes = 1;  // two batch buffers
  auto l = OpenOrDie(t.dir(), o);
  std::vector<Batch> held;
  for (;;) {
    auto b = l->Next();
    ASSERT_TRUE(b.ok());
    if (!b->has_value()) break;
    held.push_back(std::move(**b));
  }
  EXPECT_EQ(held.size(), 10u);
}

// A table of `n` one-row files in one commit (as a table ingested one sample per file is).
void MakeOneRowFiles(TestTable& t, int64_t n, bool sync = true) {
  std::vector<delta::AddFile> adds;
  adds.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    adds.push_back(testing_support::WriteDataFile(t.dir(), "part-" + std::to_string(i) + ".parquet", i, 1, 1,
                                                  t.tensor_len(), sync, t.codec()));
  }
  testing_support::CommitAdds(t, std::move(adds));
}

// Ends a death test's child with `code`. The threadsafe style (fork + exec) runs the whole test again
// in the child, which makes a table of its own at `dir`: it is removed first, as the child's
// destructors do not run.
[[noreturn]] void ExitRemoving(const std::string& dir, int code) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::_Exit(code);
}

// In a child process: lowers the soft and hard RLIMIT_NOFILE so that `limit` descriptors are left
// beyond those already open (a child inherits some from its parent, and the sanitizers and the test
// framework hold a few; the loader cannot raise it), loads every row of the table in `dir` (`rows`
// one-row files of `tensor_len`-byte tensors) through each backend in batches of `batch_size`, and
// returns an exit code: 0 when every row arrived once with its bytes. A hang ends in SIGALRM.
int LoadUnderOpenFileLimit(const std::string& dir, rlim_t limit, int64_t rows_expected, int64_t tensor_len = 16,
                           int64_t batch_size = 7) {
  ::alarm(120);
  std::error_code ec;
  rlim_t open_now = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++open_now;
  }
  rlimit rl{open_now + limit, open_now + limit};
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return 2;
  for (auto backend : {LoaderOptions::Backend::kPread, LoaderOptions::Backend::kAuto}) {
    LoaderOptions o;
    o.backend = backend;
    o.batch_size = batch_size;
    o.queue_depth = 64;  // more reads in flight than descriptors the fetcher may cache
    auto l = Loader::Open(dir, o);
    if (!l.ok()) {
      std::fprintf(stderr, "open: %s\n", l.status().ToString().c_str());
      return 3;
    }
    std::vector<int64_t> rows;
    for (;;) {
      auto b = (*l)->Next();
      if (!b.ok()) {
        std::fprintf(stderr, "next: %s\n", b.status().ToString().c_str());
        return 4;
      }
      if (!b->has_value()) break;
      const BatchColumn* col = (**b).column("t");
      for (int64_t i = 0; i < (**b).size(); ++i) {
        const int64_t row = (**b).row_ids()[static_cast<size_t>(i)];
        const std::string want = TensorOf(row, tensor_len);
        if (std::memcmp(static_cast<const uint8_t*>(col->data()) + i * tensor_len, want.data(), want.size()) != 0) {
          return 5;
        }
        rows.push_back(row);
      }
    }
    std::sort(rows.begin(), rows.end());
    if (rows.size() != static_cast<size_t>(rows_expected)) return 6;
    for (int64_t i = 0; i < rows_expected; ++i) {
      if (rows[static_cast<size_t>(i)] != i) return 7;
    }
  }
  return 0;
}

// More data files than the process may hold open: every row still loads, in shuffled order, with the
// sample index built (first backend) and then read from its cache (second).
TEST(Loader, TableWithMoreFilesThanTheOpenFileLimitLoads) {
  constexpr int64_t kFiles = 300;
  TestTable t;
  MakeOneRowFiles(t, kFiles);
  // A fresh process runs the load (fork + exec): a plain fork would inherit whatever threads earlier
  // tests left winding down (io_uring's io-wq workers linger after a ring closes), and under
  // ThreadSanitizer a child forked from a multi-threaded parent may not start threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitRemoving(t.dir(), LoadUnderOpenFileLimit(t.dir(), 64, kFiles)), ::testing::ExitedWithCode(0),
              "");  // 300 > 64
}

// A batch of small uncompressed samples from more files than the process may hold open: the
// batch's reads at once pin what descriptors they can (never waiting), the producer does them
// before it submits the rest, whose Submit may wait for a descriptor those pins hold; every row
// loads, with no hang however long the consumer sleeps.
TEST(Loader, BatchOverMoreFilesThanDescriptorsLoadsWithReadsAtOnce) {
  constexpr int64_t kFiles = 300, kLen = 512;
  TestTable t(kLen, parquet::Codec::kUncompressed);
  MakeOneRowFiles(t, kFiles);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitRemoving(t.dir(), LoadUnderOpenFileLimit(t.dir(), 64, kFiles, kLen, /*batch_size=*/256)),
              ::testing::ExitedWithCode(0), "");
}

// Runs one epoch; returns its error, or OK when every row arrived with its bytes.
Status DrainOrError(Loader& l, int64_t expected_rows) {
  int64_t rows = 0;
  for (;;) {
    auto b = l.Next();
    if (!b.ok()) return b.status();
    if (!b->has_value()) break;
    const BatchColumn* col = (**b).column("t");
    for (int64_t i = 0; i < (**b).size(); ++i) {
      const std::string want = TensorOf((**b).row_ids()[static_cast<size_t>(i)]);
      if (std::memcmp(static_cast<const uint8_t*>(col->data()) + i * 16, want.data(), 16) != 0) {
        return Status::Internal("wrong bytes");
      }
      ++rows;
    }
  }
  return rows == expected_rows ? Status::OK() : Status::Internal("missing rows");
}

// Every allocation the pipeline can fail, failed in turn (the n-th check of a run fails, for n = 1,
// 2, ... until a run completes without reaching it): each surfaces from Open or Next as an
// out-of-memory error, with on_error=skip too, and never aborts; after it the loader loads the
// epoch again.
TEST(Loader, EveryInjectedAllocationFailureIsAnErrorFromNext) {
  TestTable t;
  t.AppendFile(0, 20, 10);
  t.AppendFile(20, 20, 10);
  for (auto on_error : {LoaderOptions::OnError::kRaise, LoaderOptions::OnError::kSkip}) {
    int failures_seen = 0;
    bool completed = false;
    for (int64_t n = 1; n < 2000 && !completed; ++n) {
      SCOPED_TRACE(::testing::Message() << "failing allocation check " << n << " on_error " << static_cast<int>(on_error));
      LoaderOptions o;
      o.batch_size = 8;
      o.queue_depth = 4;
      o.on_error = on_error;
      o.threads = 2;
      AllocationFaults::Instance().FailNth(n);
      auto l = Loader::Open(t.dir(), o);
      if (!l.ok()) {
        AllocationFaults::Instance().FailNth(0);
        EXPECT_NE(l.status().message().find("out of memory"), std::string::npos) << l.status().ToString();
        ++failures_seen;
        continue;
      }
      Status st = DrainOrError(**l, 40);
      const bool fired = !AllocationFaults::Instance().armed();
      AllocationFaults::Instance().FailNth(0);
      if (st.ok()) {
        // The failure may have hit a step that only retries (none today) or was not reached at all.
        completed = !fired;
        continue;
      }
      ++failures_seen;
      EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
      EXPECT_NE(st.message().find("out of memory"), std::string::npos) << st.ToString();
      // The epoch failed; the loader itself is fine.
      ASSERT_TRUE((*l)->SetEpoch(0).ok());
      EXPECT_TRUE(DrainOrError(**l, 40).ok());
    }
    EXPECT_TRUE(completed);
    EXPECT_GT(failures_seen, 10);
  }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STOKE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define STOKE_TEST_SANITIZED 1
#endif
#endif

// The published "before" state at a tenth of its size: 100,000 one-row data files, loaded (each
// backend, every row once with its bytes) by a process that may hold at most 256 descriptors.
TEST(Loader, HundredThousandOneRowFilesLoadUnderALimitOf256Descriptors) {
#ifdef STOKE_TEST_SANITIZED
  GTEST_SKIP() << "100,000 files under a sanitizer take minutes; the 300-file test above covers the logic";
#else
  constexpr int64_t kFiles = 100000;
  TestTable t;
  MakeOneRowFiles(t, kFiles, /*sync=*/false);  // no fsync per file: the test is about descriptors
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitRemoving(t.dir(), LoadUnderOpenFileLimit(t.dir(), 256, kFiles)), ::testing::ExitedWithCode(0), "");
#endif
}

// In a process whose address space is capped a little above what it uses (threads with small
// stacks, so that starting them fits), a loader whose batch buffer does not fit: the real
// allocator refuses it (or a read buffer), and Next says "out of memory". Returns an exit code.
int LoadOverAnAddressSpaceLimit(const std::string& dir, int64_t batch_size) {
  ::alarm(120);
  pthread_attr_t small;
  if (pthread_attr_init(&small) != 0 || pthread_attr_setstacksize(&small, 256 << 10) != 0 ||
      pthread_setattr_default_np(&small) != 0) {
    return 2;
  }
  LoaderOptions o;
  o.batch_size = batch_size;
  auto l = Loader::Open(dir, o);
  if (!l.ok()) return 3;
  std::ifstream status("/proc/self/status");
  int64_t vm_kb = -1;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoll(line.substr(7));
  }
  if (vm_kb <= 0) return 4;
  const rlim_t cap = static_cast<rlim_t>(vm_kb + (32 << 10)) << 10;  // 32 MiB more than now
  const rlimit rl{cap, cap};
  if (::setrlimit(RLIMIT_AS, &rl) != 0) return 5;
  auto b = (*l)->Next();
  if (b.ok()) return 6;
  std::fprintf(stderr, "next: %s\n", b.status().ToString().c_str());
  if (b.status().code() != StatusCode::kIOError || b.status().message().find("out of memory") == std::string::npos) {
    return 7;
  }
  return 0;
}

// A batch larger than the memory the process may have: the real allocator fails (not an injected
// fault), and Next says so instead of the process aborting. Not under sanitizers, whose
// allocators reserve address space of their own.
TEST(Loader, BatchTooLargeForMemoryIsAnErrorFromNext) {
#ifdef STOKE_TEST_SANITIZED
  GTEST_SKIP() << "sanitizer allocators reserve address space of their own";
#else
  TestTable t(int64_t{1} << 20);  // rows of 1 MiB: a batch of 64 needs 64 MiB
  t.AppendFile(0, 64, 16);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ExitRemoving(t.dir(), LoadOverAnAddressSpaceLimit(t.dir(), 64)), ::testing::ExitedWithCode(0), "");
#endif
}

// A loader opened, then the process allowed no more threads (RLIMIT_NPROC of 1, as an unprivileged
// user: root is exempt): Next cannot start the producer and says so, instead of the process
// terminating on std::system_error. Returns an exit code.
int NextWithoutThreads(const std::string& dir) {
  ::alarm(120);
  auto l = Loader::Open(dir, LoaderOptions{});
  if (!l.ok()) return 2;
  // The table goes now: unprivileged, this process could not remove it, and a death test's child
  // (which made it) does not run its destructors. Next fails before it reads a file.
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (!testing_support::AllowNoMoreThreads()) return 3;
  for (int attempt = 0; attempt < 2; ++attempt) {  // and again: the failed start left nothing behind
    auto b = (*l)->Next();
    if (b.ok()) return 5;
    if (b.status().message().find("could not start its threads") == std::string::npos) return 6;
  }
  return 0;
}

TEST(Loader, ThreadsTheSystemRefusesAreAnErrorFromNext) {
  TestTable t;
  MakeTable(t);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(NextWithoutThreads(t.dir())), ::testing::ExitedWithCode(0), "");
}

// Reads are coalesced up to coalesce_bytes; read lengths are 32-bit, so values past 1 GiB are refused
// rather than wrapped, and the largest allowed value loads every row exactly.
TEST(Loader, CoalesceBytesIsValidatedAndLargeValuesLoadExactly) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  for (int64_t bad : {int64_t{4} << 30, (int64_t{1} << 30) + 1, int64_t{-1}}) {
    o.coalesce_bytes = bad;
    auto l = Loader::Open(t.dir(), o);
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(l.status().message().find("coalesce_bytes"), std::string::npos) << l.status().ToString();
  }
  o.coalesce_bytes = int64_t{1} << 30;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.batch_size = 64;
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_NE(l, nullptr);
  const auto rows = Drain(*l);
  ASSERT_EQ(rows.size(), 1000u);
  for (int64_t i = 0; i < 1000; ++i) EXPECT_EQ(rows[static_cast<size_t>(i)], i);
}

TEST(Loader, OneRowFilesAreAnsweredFromTheirStatisticsWithoutBeingOpened) {
  // The published "before" state: one file per sample. Each file's add statistics give its scalar
  // values and decide the filter, so opening the loader reads no data file (the sample index comes
  // from its cache): the one-row files are deleted below, and only the 10-row file must be there.
  TestTable t;
  std::vector<delta::AddFile> adds;
  for (int64_t id = 0; id < 40; ++id) {
    adds.push_back(testing_support::WriteDataFile(t.dir(), fmt::format("one-{}.parquet", id), id, 1, 1));
  }
  adds.push_back(testing_support::WriteDataFile(t.dir(), "ten.parquet", 40, 10, 10));
  testing_support::CommitAdds(t, adds);
  ASSERT_TRUE(SampleIndex::Open(t.dir()).ok());  // writes the cache
  for (int64_t id = 0; id < 40; ++id) std::filesystem::remove(t.dir() + fmt::format("/one-{}.parquet", id));
  LoaderOptions o;
  o.batch_size = 7;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.columns = {"id", "label", "name"};
  o.where = "label = 1";
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  std::vector<int64_t> ids;
  ForEachBatch(*l, [&](const Batch& b) {
    const BatchColumn* id = b.column("id");
    const BatchColumn* label = b.column("label");
    const BatchColumn* name = b.column("name");
    for (int64_t i = 0; i < b.size(); ++i) {
      const int64_t v = static_cast<const int64_t*>(id->data())[i];
      ids.push_back(v);
      EXPECT_EQ(static_cast<const int32_t*>(label->data())[i], 1) << v;
      ASSERT_FALSE(name->valid.empty());
      ExpectNameOfId(*name, static_cast<size_t>(i), v);
    }
  });
  std::vector<int64_t> want;
  for (int64_t id = 0; id < 50; ++id) {
    if (id % 3 == 1) want.push_back(id);
  }
  EXPECT_EQ(ids, want);
  // The 10-row file's statistics do not give its rows: it is read, and its absence is an error.
  std::filesystem::remove(t.dir() + "/ten.parquet");
  auto missing = Loader::Open(t.dir(), o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("ten.parquet"), std::string::npos) << missing.status().ToString();
}

TEST(Loader, FilesWithoutOffsetIndexesAreReadThroughTheirPageMaps) {
  // Another writer's file without page indexes: the sample index walks its page headers once, and
  // its samples are then read page by page like stoke's own, byte for byte.
  TestTable t;
  std::vector<delta::AddFile> adds = {testing_support::WriteDataFile(t.dir(), "a.parquet", 0, 300, 100),
                                      testing_support::WriteDataFile(t.dir(), "b.parquet", 300, 200, 50)};
  adds[1].size = testing_support::DropOffsetIndex(t.dir() + "/b.parquet", 3);
  testing_support::CommitAdds(t, adds);
  LoaderOptions o;
  o.batch_size = 30;
  o.columns = {"id", "t"};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  auto index = SampleIndex::Open(t.dir());
  ASSERT_TRUE(index.ok());
  ASSERT_FALSE(index->Find(350, 0).needs_decode);
  std::set<int64_t> rows;
  for (;;) {
    auto b = l->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (!b->has_value()) break;
    const BatchColumn* c = (*b)->column("t");
    for (int64_t i = 0; i < (*b)->size(); ++i) {
      const int64_t row = (*b)->row_ids()[i];
      rows.insert(row);
      const std::string want = TensorOf(row);
      ASSERT_EQ(std::string(static_cast<const char*>(c->data()) + i * 16, 16), want) << "row " << row;
    }
  }
  EXPECT_EQ(rows.size(), 500u);
  EXPECT_EQ(l->stats().cells_decoded, 0);
}

TEST(Loader, FilesWithoutOffsetIndexesAreReadThroughTheReader) {
  // Another writer's file without page indexes: its rows are read by decoding (the slow path),
  // next to stoke's own files read page by page.
  TestTable t;
  std::vector<delta::AddFile> adds = {testing_support::WriteDataFile(t.dir(), "a.parquet", 0, 300, 100),
                                      testing_support::WriteDataFile(t.dir(), "b.parquet", 300, 200, 50)};
  adds[1].size = testing_support::DropOffsetIndex(t.dir() + "/b.parquet", 3);
  testing_support::CommitAdds(t, adds);
  // Without a page map (its cache is what the loader then opens), b's rows are decoded.
  auto index = SampleIndex::Open(t.dir(), std::nullopt, {.map_pages = false});
  ASSERT_TRUE(index.ok());
  ASSERT_TRUE(index->Find(350, 0).needs_decode);
  ASSERT_FALSE(index->Find(10, 0).needs_decode);
  LoaderOptions o;
  o.batch_size = 30;
  o.columns = {"id", "t"};
  o.transforms = {TransformSpec::Cast(DType::kFloat16)};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_TRUE(l);
  std::set<int64_t> rows;
  for (;;) {
    auto b = l->Next();
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    if (!b->has_value()) break;
    const BatchColumn* c = (*b)->column("t");
    ASSERT_EQ(c->dtype, DType::kFloat16);
    for (int64_t i = 0; i < (*b)->size(); ++i) {
      const int64_t row = (*b)->row_ids()[i];
      rows.insert(row);
      // uint8 values up to 255 are exact in float16: compare bit patterns of a few elements.
      const std::string want = TensorOf(row);
      for (int k : {0, 7, 15}) {
        uint16_t h;
        std::memcpy(&h, static_cast<const uint8_t*>(c->data()) + 2 * (i * 16 + k), 2);
        const uint8_t v = static_cast<uint8_t>(want[k]);
        // Decode float16 (normal or zero) to an integer value.
        const int exp = (h >> 10) & 0x1F;
        const int mant = h & 0x3FF;
        const double got = exp == 0 ? 0.0 : std::ldexp(1.0 + mant / 1024.0, exp - 15);
        EXPECT_EQ(got, static_cast<double>(v)) << "row " << row << " element " << k;
      }
    }
  }
  EXPECT_EQ(rows.size(), 500u);
  EXPECT_EQ(l->stats().cells_decoded, 200);  // b's rows
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST(LoaderQuality, BlockShuffleMixesLessThanGlobal) {
  TestTable t;
  for (int64_t f = 0; f < 10; ++f) t.AppendFile(f * 100, 100, 100);
  LoaderOptions o;
  o.batch_size = 20;
  o.shuffle = LoaderOptions::Shuffle::kBlock;
  o.shuffle_buffer = 1;  // blocks stay contiguous
  auto l = Loader::Open(t.dir(), o);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  const ShuffleQuality block = (*l)->shuffle_quality();
  const ShuffleQuality global = (*l)->global_shuffle_quality();
  EXPECT_LT(block.mean_jump, 20);  // within a file, except at the 9 file boundaries
  EXPECT_GT(global.mean_jump, 200);  // about n / 3 = 333
  EXPECT_NEAR(block.distinct_file_fraction, 1.0 / 20, 0.02);
  EXPECT_GT(global.distinct_file_fraction, 0.3);
  o.shuffle = LoaderOptions::Shuffle::kGlobal;
  auto g = Loader::Open(t.dir(), o);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->shuffle_quality().mean_jump, global.mean_jump);
}

// ---------------------------------------------------------------------------------------------
// Image columns.

// A table of encoded images as image ingest writes it: id, label and the `image` blob column named
// in stoke.blobs and stoke.images (docs/format.md), one file, one row group.
class ImageTable {
 public:
  explicit ImageTable(const std::vector<std::string>& images, bool image_metadata = true) {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_images_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    const std::vector<ColumnSpec> cols = {{.name = "id", .type = parquet::Type::kInt64},
                                          {.name = "label", .type = parquet::Type::kInt32},
                                          {.name = "image", .type = parquet::Type::kByteArray, .blob = true}};
    auto w = ParquetFileWriter::Create(LocalStorage(), dir_ + "/part-0.parquet", cols, WriterOptions{});
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    RowGroupEncoder enc((*w)->columns(), (*w)->options());
    std::vector<int64_t> ids;
    std::vector<int32_t> labels;
    for (size_t i = 0; i < images.size(); ++i) {
      ids.push_back(static_cast<int64_t>(i));
      labels.push_back(static_cast<int32_t>(i % 3));
      EXPECT_TRUE(enc.AppendTensor(2, AsBytes(images[i])).ok());
    }
    EXPECT_TRUE(enc.SetScalars(0, ColumnValues{ids, {}}).ok());
    EXPECT_TRUE(enc.SetScalars(1, ColumnValues{labels, {}}).ok());
    auto rg = enc.Finish();
    EXPECT_TRUE(rg.ok()) << rg.status().ToString();
    EXPECT_TRUE((*w)->WriteRowGroup(std::move(*rg)).ok());
    EXPECT_TRUE((*w)->Close().ok());
    delta::AddFile add;
    add.path = "part-0.parquet";
    add.size = static_cast<int64_t>((*w)->bytes_written());
    add.modification_time = 1;
    add.stats = delta::StatsJsonFromFooter((*w)->metadata(), cols);
    delta::Metadata m;
    m.id = "00000000-0000-4000-8000-000000000001";
    m.schema_string = delta::SchemaToSparkJson(cols);
    m.configuration[kBlobsMetadataKey] = BlobColumnsToJson(cols);
    if (image_metadata) m.configuration[kImagesMetadataKey] = R"({"image": {"formats": ["jpeg", "png"]}})";
    delta::DeltaLog log(LocalStorage(), dir_);
    auto v = log.Commit(-1, {delta::Protocol{}, m, add}, delta::CommitKind::kExclusive, "WRITE", nlohmann::json::object());
    EXPECT_TRUE(v.ok()) << v.status().ToString();
  }
  ~ImageTable() { std::filesystem::remove_all(dir_); }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

std::vector<uint8_t> NoisePixels(int w, int h, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * 3);
  for (auto& v : p) v = static_cast<uint8_t>(rng.Below(256));
  return p;
}

// Images of the given sizes, JPEG for even rows and PNG for odd ones.
std::vector<std::string> EncodedImages(const std::vector<std::pair<int, int>>& sizes) {
  std::vector<std::string> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto [w, h] = sizes[i];
    const auto px = NoisePixels(w, h, i + 1);
    auto r = i % 2 == 0 ? EncodeJpeg(ByteView(px.data(), px.size()), w, h, 3, 90)
                        : EncodePng(ByteView(px.data(), px.size()), w, h, 3);
    EXPECT_TRUE(r.ok());
    out.push_back(*r);
  }
  return out;
}

TEST(LoaderImages, SameSizeImagesArriveDecodedAsTheDecoderGivesThem) {
  const auto images = EncodedImages(std::vector<std::pair<int, int>>(10, {12, 9}));
  ImageTable t(images);
  LoaderOptions o;
  o.batch_size = 4;
  o.threads = 2;
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_NE(l, nullptr);
  std::set<int64_t> seen;
  while (auto b = l->Next().value()) {
    const BatchColumn* img = b->column("image");
    ASSERT_NE(img, nullptr);
    EXPECT_EQ(img->dtype, DType::kUInt8);
    EXPECT_EQ(img->shape, (std::vector<int64_t>{b->size(), 9, 12, 3}));
    for (int64_t i = 0; i < b->size(); ++i) {
      const int64_t row = b->row_ids()[i];
      AlignedBuffer want;
      ASSERT_TRUE(DecodeImage(AsBytes(images[row]), "x", {}, &want).ok());
      ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(img->data()) + i * want.size(), want.data(), want.size()), 0) << row;
      seen.insert(row);
    }
    EXPECT_NE(b->column("label"), nullptr);
  }
  EXPECT_EQ(seen.size(), images.size());
  const LoaderStats st = l->stats();
  int64_t encoded = 0;
  for (const auto& i : images) encoded += static_cast<int64_t>(i.size());
  EXPECT_EQ(st.sample_bytes, encoded);
}

TEST(LoaderImages, TransformsMatchTransformImageForEverySample) {
  const auto images = EncodedImages({{40, 30}, {25, 60}, {64, 64}, {33, 17}, {50, 20}, {31, 31}, {90, 45}});
  ImageTable t(images);
  LoaderOptions o;
  o.batch_size = 3;
  o.seed = 11;
  o.transforms = {TransformSpec::RandomResizedCrop({16, 20}), TransformSpec::RandomHorizontalFlip(),
                  TransformSpec::ColorJitter(0.4, 0.4), TransformSpec::ToTensor(),
                  TransformSpec::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})};
  auto l = OpenOrDie(t.dir(), o);
  ASSERT_NE(l, nullptr);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE(l->SetEpoch(epoch).ok());
    int64_t n = 0;
    while (auto b = l->Next().value()) {
      const BatchColumn* img = b->column("image");
      ASSERT_EQ(img->dtype, DType::kFloat32);
      ASSERT_EQ(img->shape, (std::vector<int64_t>{b->size(), 3, 16, 20}));
      for (int64_t i = 0; i < b->size(); ++i) {
        ImageTransformOptions io;
        io.seed = 11;
        io.epoch = epoch;
        io.row = b->row_ids()[i];
        io.column = 0;
        auto want = TransformImage(images[io.row], "x", o.transforms, io);
        ASSERT_TRUE(want.ok()) << want.status().ToString();
        ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(img->data()) + i * want->data.size(), want->data.data(),
                              want->data.size()), 0) << "epoch " << epoch << " row " << io.row;
        ++n;
      }
    }
    EXPECT_EQ(n, 7);
  }
}

TEST(LoaderImages, MixedSizesNeedASizeFixingTransform) {
  ImageTable t(EncodedImages({{12, 9}, {12, 9}, {13, 9}, {12, 9}}));
  LoaderOptions o;
  o.batch_size = 4;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  auto l = OpenOrDie(t.dir(), o);
  auto b = l->Next();
  ASSERT_FALSE(b.ok());
  const std::string& m = b.status().message();
  EXPECT_NE(m.find("part-0.parquet row 2"), std::string::npos) << m;
  EXPECT_NE(m.find("column 'image'"), std::string::npos) << m;
  EXPECT_NE(m.find("13x9"), std::string::npos) << m;
  EXPECT_NE(m.find("center_crop"), std::string::npos) << m;
  o.transforms = {TransformSpec::ImageCenterCrop({8})};
  auto fixed = OpenOrDie(t.dir(), o);
  auto ok = fixed->Next();
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->column("image")->shape, (std::vector<int64_t>{4, 8, 8, 3}));
}

TEST(LoaderImages, ACorruptImageFailsNamingTheRowOrIsSkippedAndCounted) {
  auto images = EncodedImages(std::vector<std::pair<int, int>>(6, {16, 16}));
  images[2] = images[2].substr(0, images[2].size() / 2);  // a truncated JPEG
  images[3][images[3].size() - 20] ^= 0x5A;               // a damaged PNG
  ImageTable t(images);
  LoaderOptions o;
  o.batch_size = 6;
  o.shuffle = LoaderOptions::Shuffle::kNone;
  o.transforms = {TransformSpec::ToTensor()};
  auto l = OpenOrDie(t.dir(), o);
  auto b = l->Next();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kCorruption);
  EXPECT_NE(b.status().message().find("part-0.parquet row "), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("column 'image'"), std::string::npos) << b.status().message();
  o.on_error = LoaderOptions::OnError::kSkip;
  auto skip = OpenOrDie(t.dir(), o);
  auto batch = skip->Next();
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ((*batch)->size(), 4);
  EXPECT_EQ((*batch)->row_ids(), (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(skip->stats().samples_skipped, 2);
}

TEST(LoaderImages, BlobColumnsWithoutImageMetadataAreRefused) {
  ImageTable t(EncodedImages({{4, 4}}), /*image_metadata=*/false);
  auto l = Loader::Open(t.dir(), LoaderOptions{});
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(l.status().message().find("'image'"), std::string::npos) << l.status().message();
  LoaderOptions only_labels;
  only_labels.columns = {"label"};
  EXPECT_TRUE(Loader::Open(t.dir(), only_labels).ok());
}

TEST(LoaderImages, ImageTransformsOnFloatTensorsAreRefused) {
  TestTable t;
  MakeTable(t);
  LoaderOptions o;
  o.transforms = {TransformSpec::Resize({8})};
  auto l = Loader::Open(t.dir(), o);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("[H, W, C]"), std::string::npos) << l.status().message();
}

}  // namespace
}  // namespace stoke
