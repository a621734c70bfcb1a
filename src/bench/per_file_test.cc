#include "stoke/bench.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "format/npy.h"
#include "io/storage.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

// 1000 float32 values: a 4000-byte payload after numpy's 128-byte header, so each file is 4128
// bytes, just past one 4096-byte block (the O_DIRECT read comes back short at the end of the file).
constexpr int64_t kElements = 1000;
constexpr size_t kPayloadBytes = kElements * sizeof(float);

class PerFileBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_per_file_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fsys::remove_all(dir_); }

  // File i holds the values i*kElements, i*kElements+1, ...: every payload is distinct.
  void WriteVolumes(int n) {
    for (int i = 0; i < n; ++i) {
      std::vector<float> v(kElements);
      for (int64_t k = 0; k < kElements; ++k) v[k] = static_cast<float>(i * kElements + k);
      const std::vector<int64_t> shape = {10, 100};
      ASSERT_TRUE(WriteNpyFile(LocalStorage(), Path(i), DType::kFloat32, shape,
                               ByteView(reinterpret_cast<const uint8_t*>(v.data()), kPayloadBytes))
                      .ok());
    }
  }
  std::string Path(int i) const { return fmt::format("{}/volume_{:06d}.npy", dir_, i); }

  PerFileBenchOptions Options() const {
    PerFileBenchOptions o;
    o.dir = dir_;
    o.batch_size = 4;
    return o;
  }

  std::string dir_;
};

// What the consumer saw: per batch, its epoch and files, and each sample's first value.
struct Seen {
  std::vector<int64_t> batch_epochs;
  std::vector<std::vector<int64_t>> batch_files;
  bool payloads_right = true;
};

void Observe(PerFileBenchOptions* o, Seen* seen) {
  o->on_batch = [seen](const PerFileBatch& b) {
    EXPECT_EQ(b.index, static_cast<int64_t>(seen->batch_files.size()));
    EXPECT_EQ(b.payload.size(), b.files.size() * kPayloadBytes);
    seen->batch_epochs.push_back(b.epoch);
    seen->batch_files.emplace_back(b.files.begin(), b.files.end());
    for (size_t j = 0; j < b.files.size(); ++j) {
      std::vector<float> got(kElements);
      std::memcpy(got.data(), b.payload.data() + j * kPayloadBytes, kPayloadBytes);
      for (int64_t k = 0; k < kElements; ++k) {
        if (got[k] != static_cast<float>(b.files[j] * kElements + k)) seen->payloads_right = false;
      }
    }
  };
}

// Every epoch reads every file exactly once, in batches of batch_size with a short last one.
void ExpectEveryFileOncePerEpoch(const Seen& seen, int files, int epochs, int batch_size) {
  std::map<int64_t, std::multiset<int64_t>> per_epoch;
  std::map<int64_t, std::vector<size_t>> sizes;
  for (size_t b = 0; b < seen.batch_files.size(); ++b) {
    per_epoch[seen.batch_epochs[b]].insert(seen.batch_files[b].begin(), seen.batch_files[b].end());
    sizes[seen.batch_epochs[b]].push_back(seen.batch_files[b].size());
  }
  ASSERT_EQ(per_epoch.size(), static_cast<size_t>(epochs));
  std::multiset<int64_t> all;
  for (int i = 0; i < files; ++i) all.insert(i);
  for (const auto& [epoch, got] : per_epoch) {
    EXPECT_EQ(got, all) << "epoch " << epoch;
    const auto& s = sizes[epoch];
    for (size_t b = 0; b + 1 < s.size(); ++b) EXPECT_EQ(s[b], static_cast<size_t>(batch_size));
    EXPECT_EQ(s.back(), static_cast<size_t>(files - (s.size() - 1) * batch_size));
  }
  EXPECT_TRUE(seen.payloads_right);
}

TEST_F(PerFileBenchTest, ReadsEveryFileOncePerEpochWithTheRightPayload) {
  WriteVolumes(10);
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    PerFileBenchOptions o = Options();
    o.epochs = 3;
    o.threads = threads;
    Seen seen;
    Observe(&o, &seen);
    auto r = RunPerFileBench(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->files, 10);
    EXPECT_EQ(r->samples, 30);
    EXPECT_EQ(r->batches, 9);  // 4 + 4 + 2 per epoch
    EXPECT_EQ(r->payload_bytes, static_cast<int64_t>(kPayloadBytes));
    EXPECT_EQ(r->file_bytes, 30 * static_cast<int64_t>(fsys::file_size(Path(0))));
    EXPECT_GT(r->wall_seconds, 0);
    EXPECT_LE(r->wait_seconds, r->wall_seconds);
    ExpectEveryFileOncePerEpoch(seen, 10, 3, 4);
  }
}

TEST_F(PerFileBenchTest, OrderDependsOnSeedAndEpochNotOnThreads) {
  WriteVolumes(20);
  auto order = [&](uint64_t seed, int threads) {
    PerFileBenchOptions o = Options();
    o.epochs = 2;
    o.seed = seed;
    o.threads = threads;
    Seen seen;
    Observe(&o, &seen);
    EXPECT_TRUE(RunPerFileBench(o).ok());
    return seen.batch_files;
  };
  auto a = order(1, 1);
  EXPECT_EQ(a, order(1, 4));
  EXPECT_NE(a, order(2, 1));
  // The two epochs are shuffled differently.
  std::vector<std::vector<int64_t>> epoch0(a.begin(), a.begin() + 5), epoch1(a.begin() + 5, a.end());
  EXPECT_NE(epoch0, epoch1);
}

TEST_F(PerFileBenchTest, BatchesCrossIntoTheNextEpoch) {
  WriteVolumes(10);
  for (int threads : {1, 2}) {
    PerFileBenchOptions o = Options();
    o.batches = 5;
    o.threads = threads;
    Seen seen;
    Observe(&o, &seen);
    auto r = RunPerFileBench(o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->batches, 5);
    EXPECT_EQ(r->samples, 4 + 4 + 2 + 4 + 4);
    EXPECT_EQ(seen.batch_epochs, (std::vector<int64_t>{0, 0, 0, 1, 1}));
  }
}

TEST_F(PerFileBenchTest, ColdReadsWithODirectReturnTheSameBytes) {
  WriteVolumes(10);
  for (int threads : {1, 3}) {
    PerFileBenchOptions o = Options();
    o.cold = true;
    o.threads = threads;
    Seen seen;
    Observe(&o, &seen);
    auto r = RunPerFileBench(o);
    if (!r.ok() && r.status().code() == StatusCode::kUnsupported) {
      GTEST_SKIP() << "O_DIRECT refused here: " << r.status().ToString();
    }
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->cold);
    // Bytes of the files, not of the 4096-byte blocks read.
    EXPECT_EQ(r->file_bytes, 10 * static_cast<int64_t>(fsys::file_size(Path(0))));
    ExpectEveryFileOncePerEpoch(seen, 10, 1, 4);
  }
}

TEST_F(PerFileBenchTest, ComputeIsEmulatedPerBatch) {
  WriteVolumes(8);
  PerFileBenchOptions o = Options();
  o.compute_ms = 3;
  auto r = RunPerFileBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batches, 2);
  EXPECT_GE(r->compute_seconds, 0.006);
  EXPECT_GT(r->utilisation(), 0);
  EXPECT_LE(r->utilisation(), 1);
  EXPECT_LE(r->wait_seconds + r->compute_seconds, r->wall_seconds * 1.001);
  const std::string json = PerFileReportJson(*r);
  for (const char* key : {"\"tool\":\"files\"", "\"samples\":8", "\"batches\":2", "\"wall_s\":", "\"samples_per_s\":",
                          "\"mb_per_s\":", "\"wait_share\":", "\"utilisation\":", "\"compute_ms\":3"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
}

TEST_F(PerFileBenchTest, ErrorsNameTheFile) {
  WriteVolumes(6);
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    PerFileBenchOptions o = Options();
    o.threads = threads;

    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir_ + "/volume_000003.npy", AsBytes("not a numpy file")).ok());
    auto bad = RunPerFileBench(o);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
    EXPECT_NE(bad.status().message().find("volume_000003.npy"), std::string::npos) << bad.status().ToString();

    // A sample of another size cannot be stacked into the batch.
    const std::vector<int64_t> shape = {3};
    const float v[3] = {1, 2, 3};
    ASSERT_TRUE(WriteNpyFile(LocalStorage(), dir_ + "/volume_000003.npy", DType::kFloat32, shape,
                             ByteView(reinterpret_cast<const uint8_t*>(v), sizeof(v)))
                    .ok());
    auto other = RunPerFileBench(o);
    ASSERT_FALSE(other.ok());
    EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(other.status().message().find("volume_000003.npy"), std::string::npos) << other.status().ToString();

    // A dangling link cannot be opened.
    fsys::remove(dir_ + "/volume_000003.npy");
    fsys::create_symlink(dir_ + "/missing", dir_ + "/volume_000003.npy");
    auto gone = RunPerFileBench(o);
    ASSERT_FALSE(gone.ok());
    EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
    EXPECT_NE(gone.status().message().find("volume_000003.npy"), std::string::npos) << gone.status().ToString();
    fsys::remove(dir_ + "/volume_000003.npy");
    WriteVolumes(6);
  }
}

TEST_F(PerFileBenchTest, DirectoryWithoutNpyFilesIsInvalid) {
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), dir_ + "/labels.csv", AsBytes("file,label\n")).ok());
  auto r = RunPerFileBench(Options());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke
