// .npy and .npz sources: the first file sets the tensor columns (a .npy array one column named by
// SourceOptions::npy_column, an .npz archive one column per member), every other file must hold the
// same arrays, and the rows carry each file's bytes unchanged.
#include "ingest/npy_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "format/npy.h"
#include "format/npz.h"
#include "format/parquet_reader.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

NpyArray Array(DType dtype, std::vector<int64_t> shape, uint8_t fill) {
  NpyArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  int64_t n = DTypeSize(dtype);
  for (int64_t d : a.shape) n *= d;
  a.data.Resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) a.data.data()[i] = static_cast<uint8_t>(fill + i);
  return a;
}

class NpySourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_npy_source_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    fsys::create_directories(src_);
  }
  void TearDown() override { fsys::remove_all(dir_); }

  void Npy(const std::string& name, const NpyArray& a) {
    ASSERT_TRUE(WriteNpyFile(LocalStorage(), src_ + "/" + name, a.dtype, a.shape, a.data.view()).ok());
  }
  void Npz(const std::string& name, const std::vector<std::pair<std::string, const NpyArray*>>& members,
           bool compress) {
    ASSERT_TRUE(WriteNpzFile(LocalStorage(), src_ + "/" + name, members, compress).ok());
  }
  Result<SourceSet> Plan(std::string npy_column = "data") {
    SourceOptions o;
    o.source = src_;
    o.npy_column = std::move(npy_column);
    return PlanSources(o, "ingest");
  }
  Result<ConvertReport> Convert(const std::string& out_file) {
    ConvertOptions o;
    o.source_dir = src_;
    o.out = dir_ + "/" + out_file;
    o.progress = false;
    return ConvertSources(o);
  }

  std::string dir_, src_;
};

TEST_F(NpySourceTest, TheFirstNpyFileSetsTheTensorColumn) {
  const NpyArray a = Array(DType::kFloat32, {2, 3}, 1), b = Array(DType::kFloat32, {2, 3}, 50);
  Npy("b.npy", b);
  Npy("a.npy", a);
  auto set = Plan("volume");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->kind, SourceFormat::kNpy);
  ASSERT_EQ(set->files.size(), 2u);
  EXPECT_EQ(set->files[0].name, "a.npy");  // sorted
  ASSERT_FALSE(set->columns.empty());
  const ColumnSpec& col = set->columns.back();
  EXPECT_EQ(col.name, "volume");
  ASSERT_TRUE(col.tensor.has_value());
  EXPECT_EQ(col.tensor->dtype, DType::kFloat32);
  EXPECT_EQ(col.tensor->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(set->sample_bytes, 24);
  EXPECT_EQ(set->item_starts, (std::vector<int64_t>{0, 1, 2}));
}

TEST_F(NpySourceTest, NpzMembersBecomeColumnsWithTheirBytes) {
  const NpyArray x0 = Array(DType::kInt16, {4}, 3), y0 = Array(DType::kFloat64, {2, 2}, 9);
  const NpyArray x1 = Array(DType::kInt16, {4}, 100), y1 = Array(DType::kFloat64, {2, 2}, 200);
  Npz("s0.npz", {{"x", &x0}, {"y", &y0}}, /*compress=*/false);
  Npz("s1.npz", {{"x", &x1}, {"y", &y1}}, /*compress=*/true);
  auto set = Plan();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->kind, SourceFormat::kNpz);
  ASSERT_GE(set->columns.size(), 2u);
  const size_t n = set->columns.size();
  EXPECT_EQ(set->columns[n - 2].name, "x");
  EXPECT_EQ(set->columns[n - 1].name, "y");
  EXPECT_EQ(set->sample_bytes, 8 + 32);

  auto rep = Convert("out.parquet");
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  auto r = ParquetReader::Open(LocalStorage(), dir_ + "/out.parquet");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto x = (*r)->FindColumn("x");
  auto y = (*r)->FindColumn("y");
  ASSERT_TRUE(x.ok() && y.ok());
  const NpyArray* want[2][2] = {{&x0, &y0}, {&x1, &y1}};
  for (int64_t row = 0; row < 2; ++row) {
    AlignedBuffer cell;
    ASSERT_TRUE((*r)->ReadBinaryCell(row, *x, &cell).ok());
    EXPECT_EQ(AsChars(cell.view()), AsChars(want[row][0]->data.view())) << "row " << row;
    ASSERT_TRUE((*r)->ReadBinaryCell(row, *y, &cell).ok());
    EXPECT_EQ(AsChars(cell.view()), AsChars(want[row][1]->data.view())) << "row " << row;
  }
}

TEST_F(NpySourceTest, AFileUnlikeTheFirstIsAnErrorNamingBothAndTheArray) {
  const NpyArray x = Array(DType::kInt16, {4}, 3), y = Array(DType::kFloat64, {2, 2}, 9);
  const NpyArray wide = Array(DType::kFloat64, {2, 3}, 9);
  Npz("s0.npz", {{"x", &x}, {"y", &y}}, false);
  Npz("s1.npz", {{"x", &x}, {"y", &wide}}, false);
  auto rep = Convert("out.parquet");
  ASSERT_FALSE(rep.ok());
  const std::string m = rep.status().ToString();
  EXPECT_NE(m.find("s1.npz"), std::string::npos) << m;
  EXPECT_NE(m.find("'y'"), std::string::npos) << m;
  EXPECT_NE(m.find("s0.npz"), std::string::npos) << m;
  EXPECT_NE(m.find("[2, 3]"), std::string::npos) << m;
  EXPECT_FALSE(fsys::exists(dir_ + "/out.parquet"));

  // A member missing from a later archive is named, with the first archive's members.
  Npz("s1.npz", {{"x", &x}}, false);
  rep = Convert("out2.parquet");
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().ToString().find("s1.npz: no array 'y' ('s0.npz' has 'x', 'y')"), std::string::npos)
      << rep.status().ToString();
}

TEST_F(NpySourceTest, AMemberNamedLikeAStokeColumnIsRefused) {
  const NpyArray a = Array(DType::kUInt8, {3}, 0);
  Npz("s0.npz", {{"file", &a}}, false);
  auto set = Plan();
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(set.status().ToString().find("s0.npz: array 'file'"), std::string::npos) << set.status().ToString();
  fsys::remove(src_ + "/s0.npz");
  Npy("a.npy", a);
  set = Plan("id");  // a .npy column named "id"
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.status().ToString().find("a.npy: array 'id'"), std::string::npos) << set.status().ToString();
}

TEST_F(NpySourceTest, ATruncatedFirstFileIsAnErrorNamingIt) {
  const NpyArray a = Array(DType::kFloat32, {8}, 0);
  Npy("a.npy", a);
  fsys::resize_file(src_ + "/a.npy", 140);  // the 128-byte header intact, 12 of the 32 data bytes
  auto set = Plan();
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), StatusCode::kCorruption) << set.status().ToString();
  EXPECT_NE(set.status().ToString().find("a.npy"), std::string::npos) << set.status().ToString();
}

}  // namespace
}  // namespace stoke
