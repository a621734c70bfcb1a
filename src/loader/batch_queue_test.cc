#include "loader/batch_queue.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

bool HasWork(const Slot& s) { return s.gather_next.load() < s.gather_chunks; }

TEST(BatchQueue, OldestWithFindsTheOldestQueuedBatchWithWorkAndCountsThem) {
  BatchQueue q;
  q.Reset();
  Slot a, b, c;
  for (Slot* s : {&a, &b, &c}) {
    s->pending = 1;
    q.Push(s);
  }
  size_t count = 99;
  EXPECT_EQ(q.OldestWith(&HasWork, &count), nullptr);
  EXPECT_EQ(count, 0u);
  b.gather_chunks = 2;
  c.gather_chunks = 1;
  EXPECT_EQ(q.OldestWith(&HasWork, &count), &b);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(q.OldestWith(&HasWork, nullptr), &b);
  b.gather_next = 2;  // every chunk of b claimed
  EXPECT_EQ(q.OldestWith(&HasWork, &count), &c);
  EXPECT_EQ(count, 1u);
  // A batch the consumer took is no longer looked at.
  q.FinishPending(&a, 1);
  ASSERT_TRUE(q.WaitAndPop().ok());
  c.gather_next = 1;
  EXPECT_EQ(q.OldestWith(&HasWork, &count), nullptr);
}

}  // namespace
}  // namespace stoke
