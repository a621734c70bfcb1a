#include "core/process_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace stoke {
namespace {

TEST(ProcessMemory, AnonymousResidentBytesGrowsWithMemoryTouched) {
  const int64_t before = AnonymousResidentBytes();
  ASSERT_GT(before, 0);
  std::vector<char> touched(size_t{256} << 20);
  std::memset(touched.data(), 1, touched.size());
  const int64_t after = AnonymousResidentBytes();
  EXPECT_GE(after - before, int64_t{200} << 20);
  EXPECT_EQ(touched[12345], 1);
}

}  // namespace
}  // namespace stoke
