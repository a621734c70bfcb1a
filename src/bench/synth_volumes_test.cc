#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>

#include "format/csv.h"
#include "format/npy.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_synth_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fsys::remove_all(dir_); }
  SynthVolumesOptions Options(const std::string& sub, int64_t n, uint64_t seed) {
    SynthVolumesOptions o;
    o.out_dir = dir_ + "/" + sub;
    o.samples = n;
    o.seed = seed;
    o.progress = false;
    return o;
  }
  std::string dir_;
};

TEST_F(SynthTest, SameSeedSameBytesOtherSeedOtherBytes) {
  ASSERT_TRUE(SynthVolumes(Options("a", 20, 7)).ok());
  ASSERT_TRUE(SynthVolumes(Options("b", 20, 7)).ok());
  ASSERT_TRUE(SynthVolumes(Options("c", 20, 8)).ok());
  for (const char* f : {"volume_000000.npy", "volume_000019.npy", "labels.csv"}) {
    auto a = ReadFileToString(LocalStorage(), dir_ + "/a/" + f);
    auto b = ReadFileToString(LocalStorage(), dir_ + "/b/" + f);
    auto c = ReadFileToString(LocalStorage(), dir_ + "/c/" + f);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(*a, *b) << f;
    EXPECT_NE(*a, *c) << f;
  }
  auto arr = ReadNpyFile(LocalStorage(), dir_ + "/a/volume_000003.npy");
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ(arr->dtype, DType::kFloat32);
  EXPECT_EQ(arr->shape, (std::vector<int64_t>{30, 30, 10, 10}));
  EXPECT_EQ(arr->num_bytes(), 360000u);
}

// The label must be learnable but not trivial: a hand-made detector (the highest local mean of the
// permeability channel over 4x4x2 boxes) separates the classes well above chance, yet not perfectly.
TEST_F(SynthTest, LabelIsLearnableButNotTrivial) {
  const int n = 300;
  auto rep = SynthVolumes(Options("d", n, 3));
  ASSERT_TRUE(rep.ok());
  EXPECT_GT(rep->positives, n * 0.35);
  EXPECT_LT(rep->positives, n * 0.65);
  auto csv = ParseCsv(*ReadFileToString(LocalStorage(), dir_ + "/d/labels.csv"), "labels.csv");
  ASSERT_TRUE(csv.ok());
  ASSERT_EQ(csv->header, (std::vector<std::string>{"file", "label", "x", "y", "split"}));
  ASSERT_EQ(csv->rows.size(), static_cast<size_t>(n));
  std::vector<std::pair<double, int>> scored;
  for (const auto& row : csv->rows) {
    auto arr = ReadNpyFile(LocalStorage(), dir_ + "/d/" + row[0]);
    ASSERT_TRUE(arr.ok());
    const float* v = reinterpret_cast<const float*>(arr->data.data());
    // Remove each depth layer's mean first (the background varies with depth).
    std::vector<double> layer_mean(10, 0);
    for (int x = 0; x < 30; ++x)
      for (int y = 0; y < 30; ++y)
        for (int z = 0; z < 10; ++z) layer_mean[z] += v[((x * 30 + y) * 10 + z) * 10] / 900.0;
    double best = -1e9;
    for (int x = 0; x + 4 <= 30; x += 2)
      for (int y = 0; y + 4 <= 30; y += 2)
        for (int z = 0; z + 2 <= 10; ++z) {
          double s = 0;
          for (int dx = 0; dx < 4; ++dx)
            for (int dy = 0; dy < 4; ++dy)
              for (int dz = 0; dz < 2; ++dz) s += v[(((x + dx) * 30 + y + dy) * 10 + z + dz) * 10] - layer_mean[z + dz];
          best = std::max(best, s / 32);
        }
    scored.push_back({best, std::stoi(row[1])});
  }
  std::vector<double> scores;
  for (auto& s : scored) scores.push_back(s.first);
  std::nth_element(scores.begin(), scores.begin() + n / 2, scores.end());
  double median = scores[n / 2];
  int correct = 0;
  for (auto& [s, label] : scored) correct += (s > median) == (label == 1);
  double accuracy = static_cast<double>(correct) / n;
  EXPECT_GT(accuracy, 0.65) << "the body should be detectable";
  EXPECT_LT(accuracy, 0.99) << "label noise should keep any detector from perfection";
}

TEST_F(SynthTest, RejectsBadOptions) {
  auto o = Options("e", 0, 1);
  EXPECT_EQ(SynthVolumes(o).status().code(), StatusCode::kInvalidArgument);
  o.samples = 1;
  o.shape = {30, 30};
  EXPECT_EQ(SynthVolumes(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke
