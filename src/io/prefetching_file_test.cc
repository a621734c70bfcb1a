#include "io/prefetching_file.h"

#include <gtest/gtest.h>

#include "io/object_store_testing.h"

namespace stoke {
namespace {

// Bytes in memory; counts reads and can fail them.
class MemoryFile final : public RandomAccessFile {
 public:
  explicit MemoryFile(std::string data) : data_(std::move(data)) {}
  Status ReadAt(uint64_t offset, MutableByteView dst) const override {
    ++reads_;
    if (fail_) return Status::IOError("injected: read of mem://f failed");
    if (offset > data_.size() || dst.size() > data_.size() - offset) return Status::IOError("past the end of mem://f");
    std::memcpy(dst.data(), data_.data() + offset, dst.size());
    return Status::OK();
  }
  uint64_t size() const override { return data_.size(); }
  const std::string& path() const override { return path_; }
  mutable int reads_ = 0;
  bool fail_ = false;

 private:
  std::string data_;
  std::string path_ = "mem://f";
};

std::string Read(const RandomAccessFile& f, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  Status st = f.ReadAt(offset, MutableByteView(reinterpret_cast<uint8_t*>(out.data()), n));
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

TEST(PrefetchingFile, MergesRangesWithinTheGapAndServesReadsInsideThem) {
  const std::string data = testing::TestBytes(100000, 4);
  auto base = std::make_unique<MemoryFile>(data);
  MemoryFile* raw = base.get();
  PrefetchingFile f(std::move(base));
  // [0,4) and [96000, 100000) are 95996 apart: two reads with a gap of 1000; [10,20) and [30,40) merge.
  ASSERT_TRUE(f.Prefetch({{0, 4}, {96000, 4000}, {10, 10}, {30, 10}, {200000, 5}, {50, 0}}, 1000).ok());
  EXPECT_EQ(raw->reads_, 2);
  EXPECT_EQ(Read(f, 0, 4), data.substr(0, 4));
  EXPECT_EQ(Read(f, 12, 25), data.substr(12, 25));  // inside the merged [0, 40)
  EXPECT_EQ(Read(f, 99990, 10), data.substr(99990, 10));
  EXPECT_EQ(raw->reads_, 2) << "answered from memory";
  EXPECT_EQ(Read(f, 95990, 20), data.substr(95990, 20));  // straddles a kept range: the base
  EXPECT_EQ(Read(f, 50000, 100), data.substr(50000, 100));
  EXPECT_EQ(raw->reads_, 4);
  EXPECT_EQ(f.base_reads(), 4u);
  // A later prefetch adds to what is kept.
  ASSERT_TRUE(f.Prefetch({{50000, 1000}}, 0).ok());
  EXPECT_EQ(Read(f, 50500, 100), data.substr(50500, 100));
  EXPECT_EQ(raw->reads_, 5);
}

TEST(PrefetchingFile, AFailedPrefetchIsTheBaseErrorAndReadsStillWork) {
  const std::string data = testing::TestBytes(1000, 5);
  auto base = std::make_unique<MemoryFile>(data);
  MemoryFile* raw = base.get();
  PrefetchingFile f(std::move(base));
  raw->fail_ = true;
  Status st = f.Prefetch({{0, 10}, {500, 10}}, 0);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("mem://f"), std::string::npos) << st.ToString();
  raw->fail_ = false;
  EXPECT_EQ(Read(f, 0, 10), data.substr(0, 10));
}

}  // namespace
}  // namespace stoke
