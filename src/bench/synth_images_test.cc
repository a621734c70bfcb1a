#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "format/image.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

class SynthImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_synth_images_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fsys::remove_all(dir_); }
  SynthImagesOptions Options(const std::string& sub, uint64_t seed) {
    SynthImagesOptions o;
    o.out_dir = dir_ + "/" + sub;
    o.images = 9;
    o.classes = 2;
    o.min_size = 20;
    o.max_size = 60;
    o.png_fraction = 0.4;
    o.seed = seed;
    o.progress = false;
    return o;
  }
  // Relative path -> bytes of every file under `sub`.
  std::map<std::string, std::string> Files(const std::string& sub) {
    std::map<std::string, std::string> out;
    for (const auto& e : fsys::recursive_directory_iterator(dir_ + "/" + sub)) {
      if (!e.is_regular_file()) continue;
      out[fsys::relative(e.path(), dir_ + "/" + sub).string()] = *ReadFileToString(LocalStorage(), e.path().string());
    }
    return out;
  }
  std::string dir_;
};

TEST_F(SynthImagesTest, WritesAnImageFolderDeterministically) {
  auto r = SynthImages(Options("a", 3));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files, 9);
  ASSERT_TRUE(SynthImages(Options("b", 3)).ok());
  ASSERT_TRUE(SynthImages(Options("c", 4)).ok());
  const auto a = Files("a"), b = Files("b"), c = Files("c");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 9u);
  int64_t bytes = 0, pngs = 0;
  for (const auto& [rel, data] : a) {
    const int64_t index = std::stoll(fsys::path(rel).stem().string());
    EXPECT_EQ(fsys::path(rel).parent_path().string(), index % 2 == 0 ? "class_000" : "class_001");
    auto info = ReadImageInfo(AsBytes(data), rel);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->format == ImageFormat::kPng, fsys::path(rel).extension() == ".png") << rel;
    EXPECT_GE(info->width, 20);
    EXPECT_LE(info->width, 60);
    EXPECT_GE(info->height, 20);
    EXPECT_LE(info->height, 60);
    EXPECT_EQ(info->channels, 3);
    bytes += static_cast<int64_t>(data.size());
    pngs += info->format == ImageFormat::kPng;
  }
  EXPECT_EQ(r->bytes, bytes);
  EXPECT_GT(pngs, 0);
  EXPECT_LT(pngs, 9);
}

TEST_F(SynthImagesTest, RejectsBadOptions) {
  for (auto change : std::vector<void (*)(SynthImagesOptions&)>{
           [](SynthImagesOptions& o) { o.images = 0; }, [](SynthImagesOptions& o) { o.classes = 0; },
           [](SynthImagesOptions& o) { o.min_size = 4; }, [](SynthImagesOptions& o) { o.max_size = 10; },
           [](SynthImagesOptions& o) { o.quality = 101; }, [](SynthImagesOptions& o) { o.png_fraction = 1.5; },
           [](SynthImagesOptions& o) { o.out_dir.clear(); }}) {
    SynthImagesOptions o = Options("x", 1);
    change(o);
    EXPECT_EQ(SynthImages(o).status().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace stoke
