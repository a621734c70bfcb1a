#include "core/buffer_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace stoke {
namespace {

// Capacities are whole multiples of the alignment (4096), so the tests use such sizes.
constexpr size_t kPage = 4096;

AlignedBuffer WithCapacity(size_t bytes) {
  AlignedBuffer b;
  b.Resize(bytes);
  return b;
}

TEST(BufferPool, TakeFromAnEmptyPoolIsANewEmptyBuffer) {
  BufferPool pool;
  AlignedBuffer b = pool.Take(100);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), 0u);
}

TEST(BufferPool, TakePrefersTheNewestBufferThatIsLargeEnough) {
  BufferPool pool;
  pool.Give(WithCapacity(250 * kPage));
  pool.Give(WithCapacity(16 * kPage));
  pool.Give(WithCapacity(125 * kPage));
  pool.Give(WithCapacity(8 * kPage));
  AlignedBuffer b = pool.Take(100 * kPage);  // 125 pages is the newest with room; 250 is older
  EXPECT_EQ(b.capacity(), 125 * kPage);
  EXPECT_EQ(b.size(), 0u) << "given buffers come back cleared";
  EXPECT_EQ(pool.idle(), 3u);
  AlignedBuffer small = pool.Take(10);  // the newest
  EXPECT_EQ(small.capacity(), 8 * kPage);
}

TEST(BufferPool, TakeFallsBackToTheLargestWhenNoneIsLargeEnough) {
  BufferPool pool;
  pool.Give(WithCapacity(16 * kPage));
  pool.Give(WithCapacity(250 * kPage));
  pool.Give(WithCapacity(32 * kPage));
  AlignedBuffer b = pool.Take(5000 * kPage);
  EXPECT_EQ(b.capacity(), 250 * kPage);
  AlignedBuffer largest = pool.Take();  // no minimum: the largest of the rest
  EXPECT_EQ(largest.capacity(), 32 * kPage);
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(BufferPool, KeepsAtMostMaxBuffersAndDropsEmptyOnes) {
  BufferPool pool(2);
  pool.Give(AlignedBuffer());
  EXPECT_EQ(pool.idle(), 0u) << "a buffer without memory is not worth keeping";
  for (int i = 0; i < 5; ++i) pool.Give(WithCapacity(64));
  EXPECT_EQ(pool.idle(), 2u);
}

}  // namespace
}  // namespace stoke
