#include "core/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>

#ifdef STOKE_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

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

// Where a device is present, a pinned buffer is memory the CUDA driver has page-locked and mapped
// (what lets torch and cudaMemcpyAsync copy from it asynchronously), also for another copy of the
// runtime in the same process, such as PyTorch's.
TEST(HostBuffer, PinnedBufferIsRegisteredWithTheDriver) {
  if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device (or stoke built without CUDA)";
#ifdef STOKE_WITH_CUDA
  HostBuffer a(3 << 20, /*pinned=*/true);
  ASSERT_TRUE(a.pinned());
  cudaPointerAttributes attr{};
  ASSERT_EQ(cudaPointerGetAttributes(&attr, a.data() + 12345), cudaSuccess);
  EXPECT_EQ(attr.type, cudaMemoryTypeHost);
  // A round trip through the device returns the bytes.
  for (size_t i = 0; i < a.size(); ++i) a.data()[i] = static_cast<uint8_t>(i * 7);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, a.size()), cudaSuccess);
  HostBuffer b(a.size(), /*pinned=*/true);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(dev, a.data(), a.size(), cudaMemcpyHostToDevice, s), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(b.data(), dev, b.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0);
  cudaStreamDestroy(s);
  cudaFree(dev);
#endif
}

}  // namespace
}  // namespace stoke
