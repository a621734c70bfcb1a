#include "core/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

namespace stoke {
namespace {

TEST(HostBuffer, AlignedWritableAndMovable) {
  HostBuffer a(1000, /*pinned=*/true);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 4096, 0u);
  // Pinned only when CUDA is built in and a device is present; otherwise plain aligned memory.
  EXPECT_EQ(a.pinned(), BuiltWithCuda() && CudaDeviceAvailable());
  std::memset(a.data(), 7, a.size());
  HostBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data()[999], 7);
  HostBuffer c(0, false);
  EXPECT_NE(c.data(), nullptr);
  EXPECT_FALSE(c.pinned());
  c = std::move(b);
  EXPECT_EQ(c.size(), 1000u);
}

}  // namespace
}  // namespace stoke
