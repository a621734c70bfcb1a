#include "loader/descriptor_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace stoke {
namespace {

// Opens file f the way the fetcher does: a place reserved, then the descriptor given.
int Open(DescriptorCache& c, uint32_t f, int fd) {
  EXPECT_EQ(c.PinOpen(f), -1);
  EXPECT_TRUE(c.HasRoom());
  const int victim = c.Reserve(f);
  c.Opened(f, fd);
  return victim;
}

TEST(DescriptorCache, AnOpenFileIsPinnedAgainWithoutAPlaceOfItsOwn) {
  DescriptorCache c(4, 2);
  EXPECT_EQ(Open(c, 1, 11), -1);
  EXPECT_EQ(c.PinOpen(1), 11);  // a second read of file 1
  EXPECT_EQ(c.open(), 1u);
  c.Unpin(1);
  EXPECT_FALSE(c.has_idle());  // one pin left
  c.Unpin(1);
  EXPECT_TRUE(c.has_idle());
  EXPECT_EQ(c.PinOpen(1), 11);  // pinned again: no longer idle
  EXPECT_FALSE(c.has_idle());
}

TEST(DescriptorCache, AFullCacheEvictsTheLeastRecentlyUsedIdleFile) {
  DescriptorCache c(5, 3);
  Open(c, 0, 10);
  Open(c, 1, 11);
  Open(c, 2, 12);
  EXPECT_FALSE(c.HasRoom());  // three open, all pinned
  c.Unpin(1);
  c.Unpin(0);
  c.Unpin(2);                 // idle, oldest first: 1, 0, 2
  EXPECT_EQ(c.PinOpen(0), 10);
  c.Unpin(0);                 // used again: 1, 2, 0
  ASSERT_TRUE(c.HasRoom());
  EXPECT_EQ(Open(c, 3, 13), 11);  // file 1's descriptor goes
  EXPECT_EQ(Open(c, 4, 14), 12);  // then file 2's
  EXPECT_EQ(c.open(), 3u);
  EXPECT_EQ(c.PinOpen(1), -1);    // closed now
  EXPECT_EQ(c.EvictIdle(), 10);
  EXPECT_EQ(c.EvictIdle(), -1);   // files 3 and 4 are pinned
  EXPECT_EQ(c.open(), 2u);
}

TEST(DescriptorCache, AFailedOpenGivesItsPlaceBack) {
  DescriptorCache c(2, 1);
  EXPECT_EQ(c.Reserve(0), -1);
  EXPECT_FALSE(c.HasRoom());
  c.OpenFailed(0);
  EXPECT_TRUE(c.HasRoom());
  EXPECT_EQ(c.open(), 0u);
  EXPECT_EQ(c.PinOpen(0), -1);
}

TEST(DescriptorCache, TakeAllHandsOverEveryOpenDescriptor) {
  DescriptorCache c(3, 3);
  Open(c, 0, 10);
  Open(c, 2, 12);
  c.Unpin(0);
  std::vector<int> fds = c.TakeAll();
  std::sort(fds.begin(), fds.end());
  EXPECT_EQ(fds, (std::vector<int>{10, 12}));
  EXPECT_EQ(c.open(), 0u);
  EXPECT_FALSE(c.has_idle());
}

}  // namespace
}  // namespace stoke
