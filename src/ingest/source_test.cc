// Planning sources: kind detection, layouts, items and columns (what every kind's ingest builds on).
#include "ingest/source.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "format/hdf5_testing.h"
#include "format/image.h"
#include "format/npy.h"
#include "io/storage.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;
using testing_support::DatasetSpec;
using testing_support::NumberAttribute;
using testing_support::StringAttribute;
using testing_support::WriteDataset;

class SourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_source_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { fsys::remove_all(dir_); }

  std::string Path(const std::string& rel) {
    fsys::create_directories(fsys::path(dir_ + "/" + rel).parent_path());
    return dir_ + "/" + rel;
  }
  void Npy(const std::string& rel) {
    std::vector<float> v(6, 1.5f);
    const std::vector<int64_t> shape = {2, 3};
    ASSERT_TRUE(WriteNpyFile(LocalStorage(), Path(rel), DType::kFloat32, shape,
                             ByteView(reinterpret_cast<const uint8_t*>(v.data()), 24)).ok());
  }
  void Image(const std::string& rel, bool png = false) {
    std::vector<uint8_t> pixels(8 * 6 * 3, 99);
    auto bytes = png ? EncodePng(ByteView(pixels.data(), pixels.size()), 8, 6, 3)
                     : EncodeJpeg(ByteView(pixels.data(), pixels.size()), 8, 6, 3, 90);
    ASSERT_TRUE(bytes.ok());
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path(rel), AsBytes(*bytes)).ok());
  }
  // An HDF5 file with x float32 (n, 2, 3), y int32 (n,), s (scalar int64) and a root attribute.
  void Hdf5(const std::string& rel, hsize_t n, hsize_t y_rows = 0) {
    std::vector<float> x(n * 6, 2.0f);
    std::vector<int32_t> y(y_rows ? y_rows : n, 7);
    int64_t s = 5;
    hid_t file = H5Fcreate(Path(rel).c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    WriteDataset(file, {"x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, 2, 3}, {}, false, -1, false, x.data()});
    WriteDataset(file, {"y", H5T_STD_I32LE, H5T_NATIVE_INT32, {y_rows ? y_rows : n}, {}, false, -1, false, y.data()});
    WriteDataset(file, {"s", H5T_STD_I64LE, H5T_NATIVE_INT64, {}, {}, false, -1, false, &s});
    StringAttribute(file, "site", "north", true);
    H5Fclose(file);
  }
  Result<SourceSet> Plan(const std::string& source, std::string format = "", std::string labels = "") {
    SourceOptions o;
    o.source = source;
    STOKE_ASSIGN_OR_RETURN(o.format, ParseSourceFormat(format));  // the one parser of the names
    o.labels_csv = std::move(labels);
    return PlanSources(o, "ingest");
  }
  static std::vector<std::string> Names(const SourceSet& s) {
    std::vector<std::string> out;
    for (const auto& c : s.columns) out.push_back(c.name);
    return out;
  }

  std::string dir_;
};

TEST_F(SourceTest, DetectsTheKindFromTheFileNames) {
  Npy("npy/b.npy");
  Npy("npy/a.npy");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("npy/notes.txt"), AsBytes(std::string("x"))).ok());
  auto s = Plan(dir_ + "/npy");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->kind, SourceFormat::kNpy);
  ASSERT_EQ(s->files.size(), 2u);
  EXPECT_EQ(s->files[0].name, "a.npy");  // sorted; other files ignored
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "data"}));
  EXPECT_EQ(s->num_items(), 2);

  Hdf5("h5/one.hdf5", 4);
  auto h = Plan(dir_ + "/h5");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->kind, SourceFormat::kHdf5);
  Image("img/a.JPG");  // any case
  auto i = Plan(dir_ + "/img");
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_EQ(i->kind, SourceFormat::kImages);
}

// Options of another kind of source are refused, not ignored (a --dataset meant for HDF5 files).
TEST_F(SourceTest, Hdf5OptionsOnOtherSourcesAreRefused) {
  Npy("plain/a.npy");
  SourceOptions o;
  o.source = dir_ + "/plain";
  o.datasets = {"x"};
  auto s = PlanSources(o, "ingest");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("`datasets` applies to HDF5 sources"), std::string::npos) << s.status().message();
  o.datasets.clear();
  o.hdf5_samples = Hdf5Samples::kFile;
  s = PlanSources(o, "ingest");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("`hdf5_samples` applies to HDF5 sources"), std::string::npos)
      << s.status().message();
}

TEST_F(SourceTest, MixingKindsIsAnErrorNamingTwoFiles) {
  Npy("mix/a.npy");
  Hdf5("mix/b.h5", 2);
  auto s = Plan(dir_ + "/mix");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'a.npy'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("'b.h5'"), std::string::npos) << s.status().message();
  // --format picks one kind and ignores the others' files.
  auto forced = Plan(dir_ + "/mix", "hdf5");
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  ASSERT_EQ(forced->files.size(), 1u);
  EXPECT_EQ(forced->files[0].name, "b.h5");
  EXPECT_EQ(Plan(dir_ + "/mix", "tiff").status().code(), StatusCode::kInvalidArgument);
  // Images among class directories holding another kind.
  Image("tree/cat/1.jpg");
  Npy("tree/dog/2.npy");
  auto tree = Plan(dir_ + "/tree");
  ASSERT_FALSE(tree.ok());
  EXPECT_NE(tree.status().message().find("dog/2.npy"), std::string::npos) << tree.status().message();
  // Arrays in subdirectories only (train/, val/): the error says array files are read at the top
  // of the directory given, not that they sit "among images".
  Npy("split/train/0.npy");
  Npy("split/val/1.npy");
  auto split = Plan(dir_ + "/split");
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("npy files are read at the top of the directory given"), std::string::npos)
      << split.status().message();
  EXPECT_EQ(split.status().message().find("among images"), std::string::npos) << split.status().message();
}

TEST_F(SourceTest, OneFileIsASourceToo) {
  Hdf5("data/big.h5", 6);
  Hdf5("data/other.h5", 2);
  auto s = Plan(dir_ + "/data/big.h5");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->root, dir_ + "/data");
  ASSERT_EQ(s->files.size(), 1u);
  EXPECT_EQ(s->files[0].name, "big.h5");
  EXPECT_EQ(s->num_items(), 6);
  auto missing = Plan(dir_ + "/data/missing.h5");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.h5"), std::string::npos) << missing.status().message();
}

TEST_F(SourceTest, Hdf5SamplesAlongAxisZeroByDefault) {
  Hdf5("h5/a.h5", 3);
  Hdf5("h5/b.h5", 5);  // N may differ between files
  auto s = Plan(dir_ + "/h5");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Attributes and scalars first (y rank 1: a scalar per sample; s rank 0: repeated), then tensors.
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "index", "site", "s", "y", "x"}));
  EXPECT_TRUE(s->has_index);
  EXPECT_EQ(s->num_items(), 8);
  EXPECT_EQ(s->item_starts, (std::vector<int64_t>{0, 3, 8}));
  const SourceItem item = s->item(4);
  EXPECT_EQ(item.file, 1u);
  EXPECT_EQ(item.index, 1);
  const ColumnSpec& x = s->columns.back();
  ASSERT_TRUE(x.tensor.has_value());
  EXPECT_EQ(x.tensor->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s->columns[5].type, parquet::Type::kInt32);  // y
  EXPECT_EQ(s->columns[4].type, parquet::Type::kInt64);  // s
  EXPECT_TRUE(s->columns[3].is_string);                  // site
}

TEST_F(SourceTest, Hdf5FilesOfOneSampleWhenFirstExtentsDiffer) {
  Hdf5("h5/a.h5", 3, /*y_rows=*/4);
  Hdf5("h5/b.h5", 3, 4);
  auto s = Plan(dir_ + "/h5");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->has_index);
  EXPECT_EQ(s->num_items(), 2);
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "site", "s", "x", "y"}));
  EXPECT_EQ(s->columns[4].tensor->shape, (std::vector<int64_t>{3, 2, 3}));  // the whole dataset
  EXPECT_EQ(s->columns[5].tensor->shape, (std::vector<int64_t>{4}));
  // axis0 forced on them: their first extents must agree.
  SourceOptions o;
  o.source = dir_ + "/h5";
  o.hdf5_samples = Hdf5Samples::kAxis0;
  auto forced = PlanSources(o, "ingest");
  ASSERT_FALSE(forced.ok());
  EXPECT_NE(forced.status().message().find("'x' 3, 'y' 4"), std::string::npos) << forced.status().message();
}

TEST_F(SourceTest, Hdf5FilesMustMatchTheFirstNamingFileAndDataset) {
  Hdf5("h5/a.h5", 3);
  // b: x of another per-sample shape.
  std::vector<float> x(3 * 4, 1.0f);
  std::vector<int32_t> y(3, 1);
  int64_t s = 1;
  hid_t file = H5Fcreate(Path("h5/b.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  WriteDataset(file, {"x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {3, 4}, {}, false, -1, false, x.data()});
  WriteDataset(file, {"y", H5T_STD_I32LE, H5T_NATIVE_INT32, {3}, {}, false, -1, false, y.data()});
  WriteDataset(file, {"s", H5T_STD_I64LE, H5T_NATIVE_INT64, {}, {}, false, -1, false, &s});
  StringAttribute(file, "site", "south", true);
  H5Fclose(file);
  auto plan = Plan(dir_ + "/h5");
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("b.h5"), std::string::npos) << m;
  EXPECT_NE(m.find("'x'"), std::string::npos) << m;
  // Attributes too: c has an integer where a has a string.
  fsys::remove(dir_ + "/h5/b.h5");
  Hdf5("h5/c.h5", 2);
  file = H5Fopen(Path("h5/c.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  H5Adelete(file, "site");
  NumberAttribute<int32_t>(file, "site", H5T_NATIVE_INT32, 3);
  H5Fclose(file);
  plan = Plan(dir_ + "/h5");
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("c.h5"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("'site'"), std::string::npos) << plan.status().message();
}

TEST_F(SourceTest, ImageFolderClassesAreTheSortedSubdirectories) {
  Image("root/dog/b/2.jpg");  // any depth under a class directory
  Image("root/dog/1.png", true);
  Image("root/cat/3.jpg");
  Image("root/.hidden/4.jpg");  // hidden directories are not classes
  Image("root/stray.jpg");      // outside the classes: ignored
  auto s = Plan(dir_ + "/root");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->classes, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(s->files.size(), 3u);
  EXPECT_EQ(s->files[0].name, "cat/3.jpg");
  EXPECT_EQ(s->files[1].name, "dog/1.png");
  EXPECT_EQ(s->files[2].name, "dog/b/2.jpg");
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "label", "width", "height", "channels", "image"}));
  EXPECT_TRUE(s->columns.back().blob);
  EXPECT_EQ(s->labels[0].cells, (std::vector<std::string>{"0", "1", "1"}));
  EXPECT_EQ(s->metadata.at(kClassesMetadataKey), R"({"label":["cat","dog"]})");
  EXPECT_EQ(s->metadata.at(kImagesMetadataKey), R"({"image":{"formats":["jpeg","png"]}})");
  // An empty class directory is an error naming it.
  fsys::create_directories(dir_ + "/root/emu");
  auto empty = Plan(dir_ + "/root");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("emu"), std::string::npos) << empty.status().message();
}

TEST_F(SourceTest, ImagesWithALabelsCsvNeedNoClassDirectories) {
  Image("flat/a/1.jpg");
  Image("flat/2.jpg");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("flat.csv"), AsBytes(std::string("file,y\na/1.jpg,3\n2.jpg,4\n"))).ok());
  auto s = Plan(dir_ + "/flat", "", dir_ + "/flat.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->classes.empty());
  EXPECT_EQ(s->metadata.count(kClassesMetadataKey), 0u);
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "y", "width", "height", "channels", "image"}));
  EXPECT_EQ(s->labels[0].cells, (std::vector<std::string>{"4", "3"}));  // 2.jpg sorts before a/1.jpg
  // A CSV column may not take a name stoke writes.
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("bad.csv"), AsBytes(std::string("file,width\na/1.jpg,3\n2.jpg,4\n"))).ok());
  EXPECT_EQ(Plan(dir_ + "/flat", "", dir_ + "/bad.csv").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SourceTest, WithoutLabelDropsAPartitionColumn) {
  Npy("p/a.npy");
  Npy("p/b.npy");
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("p.csv"), AsBytes(std::string("file,split,k\na.npy,x,1\nb.npy,y,2\n"))).ok());
  auto s = Plan(dir_ + "/p", "", dir_ + "/p.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(Names(*s), (std::vector<std::string>{"id", "file", "split", "k", "data"}));
  SourceSet w = WithoutLabel(*s, 0);
  EXPECT_EQ(Names(w), (std::vector<std::string>{"id", "file", "k", "data"}));
  EXPECT_EQ(w.first_source_column, 3u);
  EXPECT_EQ(w.labels.size(), 1u);
}

}  // namespace
}  // namespace stoke
