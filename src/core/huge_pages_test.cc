#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace stoke {
namespace {

uintptr_t HugePageOf(const uint8_t* p) { return reinterpret_cast<uintptr_t>(p) / kHugePageBytes; }

TEST(HugePageBlocks, SmallBuffersArePackedIntoOneHugePageInSizeClasses) {
  auto blocks = HugePageBlocks::Create();
  EXPECT_EQ(HugePageBlocks::CapacityFor(360031 + 4096), 384u << 10);
  EXPECT_EQ(HugePageBlocks::CapacityFor(1), 64u << 10);
  EXPECT_EQ(HugePageBlocks::CapacityFor(kHugePageBytes + 1), kHugePageBytes + 4096);
  std::vector<AlignedBuffer> taken;
  for (int i = 0; i < 5; ++i) taken.push_back(blocks->Take(364544));  // five 384 KiB blocks fit a huge page
  std::set<uint8_t*> starts;
  for (auto& b : taken) {
    EXPECT_EQ(b.capacity(), 384u << 10);
    EXPECT_EQ(b.size(), 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
    EXPECT_EQ(HugePageOf(b.data()), HugePageOf(taken[0].data())) << "one huge page";
    EXPECT_EQ(HugePageOf(b.data()), HugePageOf(b.data() + b.capacity() - 1)) << "no block crosses a huge page";
    starts.insert(b.data());
  }
  EXPECT_EQ(starts.size(), 5u);
  EXPECT_EQ(blocks->mapped_bytes(), kHugePageBytes);
  AlignedBuffer sixth = blocks->Take(364544);
  EXPECT_EQ(blocks->mapped_bytes(), 2 * kHugePageBytes);
  EXPECT_NE(HugePageOf(sixth.data()), HugePageOf(taken[0].data()));
}

TEST(HugePageBlocks, ReturnedBlocksAreTakenAgainBeforeMoreIsMapped) {
  auto blocks = HugePageBlocks::Create();
  uint8_t* first = nullptr;
  {
    AlignedBuffer b = blocks->Take(100000);
    first = b.data();
  }  // returned here
  AlignedBuffer again = blocks->Take(100000);
  EXPECT_EQ(again.data(), first);
  for (int i = 0; i < 200; ++i) {
    AlignedBuffer b = blocks->Take(1 << 20);
    b.Resize(1 << 20);
    std::memset(b.data(), i, b.size());
  }
  EXPECT_EQ(blocks->mapped_bytes(), 2 * kHugePageBytes) << "one page for each class, reused";
}

TEST(HugePageBlocks, LargeBuffersStartOnAHugePageOfTheirOwn) {
  auto blocks = HugePageBlocks::Create();
  AlignedBuffer a = blocks->Take((4 << 20) + 31);
  AlignedBuffer b = blocks->Take((4 << 20) + 31);
  for (auto* buf : {&a, &b}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % kHugePageBytes, 0u);
    EXPECT_EQ(buf->capacity(), (4u << 20) + 4096);
    buf->Resize(buf->capacity());
    std::memset(buf->data(), 0xab, buf->size());
  }
  EXPECT_NE(a.data(), b.data());
}

TEST(HugePageBlocks, LargeBuffersOfEverNewSizesDoNotPileUp) {
  // Pages of other writers' files, or blobs, come in many sizes; each read's buffer is returned
  // before the next is taken, as a loader at a low queue depth would.
  auto blocks = HugePageBlocks::Create();
  size_t largest = 0;
  for (size_t i = 0; i < 300; ++i) {
    const size_t size = kHugePageBytes + i * 123457;
    AlignedBuffer b = blocks->Take(size);
    ASSERT_GE(b.capacity(), size);
    b.Resize(size);
    b.data()[size - 1] = static_cast<uint8_t>(i);
    largest = std::max(largest, b.capacity());
  }
  EXPECT_LE(blocks->mapped_bytes(), HugePageBlocks::kMaxIdleLargeBytes + largest);
  // What is kept is taken again: the first size (kept, as nothing was idle then) maps nothing more.
  const size_t mapped = blocks->mapped_bytes();
  for (int round = 0; round < 3; ++round) {
    AlignedBuffer b = blocks->Take(kHugePageBytes);
  }
  EXPECT_EQ(blocks->mapped_bytes(), mapped);
}

TEST(HugePageBlocks, BuffersOutliveTheOwnersReferenceAndGrowOntoTheHeap) {
  AlignedBuffer kept;
  AlignedBuffer grown;
  {
    auto blocks = HugePageBlocks::Create();
    kept = blocks->Take(70000);
    grown = blocks->Take(70000);
  }  // the owner lets go; the buffers keep the memory mapped
  kept.Resize(70000);
  std::memset(kept.data(), 7, kept.size());
  grown.Resize(100);
  std::memset(grown.data(), 3, grown.size());
  grown.Resize(1 << 20);  // beyond its block: the bytes move to the heap and the block is returned
  EXPECT_EQ(grown.data()[99], 3);
  EXPECT_EQ(kept.data()[69999], 7);
  AlignedBuffer moved = std::move(kept);
  EXPECT_EQ(moved.data()[0], 7);
}

TEST(HugePageBlocks, TakeAndReturnFromManyThreads) {
  auto blocks = HugePageBlocks::Create();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&blocks, t] {
      std::vector<AlignedBuffer> held;
      for (int i = 0; i < 500; ++i) {
        held.push_back(blocks->Take(static_cast<size_t>(65536 * (1 + (i + t) % 3))));
        held.back().Resize(8);
        std::memset(held.back().data(), t, 8);
        if (held.size() > 8) held.erase(held.begin());
      }
      for (auto& b : held) EXPECT_EQ(b.data()[7], t);
    });
  }
  for (auto& th : threads) th.join();
  // Three classes, at most 4 threads x 9 buffers each alive at once: a bounded number of pages.
  EXPECT_LE(blocks->mapped_bytes(), 3 * 8 * kHugePageBytes);
}

}  // namespace
}  // namespace stoke
