#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>

#include "format/npy.h"
#include "format/npz.h"
#include "format/parquet_reader.h"
#include "io/storage.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

namespace fsys = std::filesystem;

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fsys::temp_directory_path() / "stoke_convert_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    src_ = dir_ + "/src";
    ASSERT_TRUE(LocalStorage().CreateDirectories(src_).ok());
  }
  void TearDown() override { fsys::remove_all(dir_); }

  // n int16 arrays of shape (4, 5, 6); file i holds the values i*1000 + k.
  std::vector<std::string> WriteArrays(int n, std::vector<int64_t> shape = {4, 5, 6}) {
    std::vector<std::string> payloads;
    for (int i = 0; i < n; ++i) {
      std::vector<int16_t> v(120);
      for (size_t k = 0; k < v.size(); ++k) v[k] = static_cast<int16_t>(i * 1000 + k);
      ByteView bytes(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 2);
      char name[32];
      std::snprintf(name, sizeof(name), "s_%03d.npy", i);
      EXPECT_TRUE(WriteNpyFile(LocalStorage(), src_ + "/" + name, DType::kInt16, shape, bytes).ok());
      payloads.emplace_back(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    }
    return payloads;
  }
  void WriteLabels(const std::string& text) {
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), src_ + "/labels.csv", AsBytes(text)).ok());
  }
  std::vector<std::string> ParquetFiles(const std::string& d) {
    std::vector<std::string> out;
    for (const auto& e : fsys::directory_iterator(d)) out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_, src_;
};

// Only plain decimal numbers are numbers (spaces around them allowed): hex-looking codes stay strings,
// '+5' is an integer, and integers beyond INT64 stay strings rather than lose digits as DOUBLE.
TEST_F(ConvertTest, LabelCellsAreNumbersOnlyInDecimalNotation) {
  WriteArrays(3);
  WriteLabels(
      "file,code,plus,big,real,padded,special\n"
      "s_000.npy,0x10,+5,12345678901234567891,+1.5,\" 7\",inf\n"
      "s_001.npy,0x1A,+6,1,-2e3,8 ,nan\n"
      "s_002.npy,0xff,7,2,.5,9,-inf\n");
  ConvertOptions o;
  o.source_dir = src_;
  o.labels_csv = src_ + "/labels.csv";
  o.out = dir_ + "/out";
  o.tensor_column = "arr";
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  auto files = ParquetFiles(o.out);
  ASSERT_EQ(files.size(), 1u);
  auto r = ParquetReader::Open(LocalStorage(), files[0]);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& cols = (*r)->columns();
  ASSERT_EQ(cols.size(), 9u);
  EXPECT_TRUE(cols[2].is_string);                    // code
  EXPECT_EQ(cols[3].type, parquet::Type::kInt32);    // plus
  EXPECT_TRUE(cols[4].is_string);                    // big
  EXPECT_EQ(cols[5].type, parquet::Type::kDouble);   // real
  EXPECT_EQ(cols[6].type, parquet::Type::kInt32);    // padded: spaces around a number, as pandas reads it
  EXPECT_EQ(cols[7].type, parquet::Type::kDouble);   // special
  EXPECT_EQ(std::get<std::vector<std::string>>((*r)->ReadColumn(2)->values),
            (std::vector<std::string>{"0x10", "0x1A", "0xff"}));
  EXPECT_EQ(std::get<std::vector<int32_t>>((*r)->ReadColumn(3)->values), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(std::get<std::vector<std::string>>((*r)->ReadColumn(4)->values),
            (std::vector<std::string>{"12345678901234567891", "1", "2"}));
  EXPECT_EQ(std::get<std::vector<double>>((*r)->ReadColumn(5)->values), (std::vector<double>{1.5, -2000, 0.5}));
  auto special = std::get<std::vector<double>>((*r)->ReadColumn(7)->values);
  ASSERT_EQ(special.size(), 3u);
  EXPECT_TRUE(std::isinf(special[0]) && special[0] > 0);
  EXPECT_TRUE(std::isnan(special[1]));
  EXPECT_TRUE(std::isinf(special[2]) && special[2] < 0);
}

TEST_F(ConvertTest, JoinsLabelsInfersTypesAndKeepsEveryByte) {
  auto payloads = WriteArrays(30);
  std::string csv = "file,label,x,name,flag\n";
  for (int i = 29; i >= 0; --i) {  // CSV order differs from file order
    char line[128];
    std::snprintf(line, sizeof(line), "s_%03d.npy,%d,%s,%s,%s\n", i, i % 2, i == 5 ? "" : std::to_string(i * 0.5).c_str(),
                  i % 3 ? "a" : "b", i % 4 ? "true" : "false");
    csv += line;
  }
  WriteLabels(csv);
  ConvertOptions o;
  o.source_dir = src_;
  o.labels_csv = src_ + "/labels.csv";
  o.out = dir_ + "/out";
  o.tensor_column = "arr";
  o.row_group_bytes = 1000;     // 4 rows per row group
  o.target_file_bytes = 2000;   // 8 rows per file
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->rows, 30);
  EXPECT_EQ(rep->files_out.size(), 4u);
  auto files = ParquetFiles(o.out);
  ASSERT_EQ(files.size(), 4u);  // nothing but the finished part files

  int64_t row = 0;
  for (const auto& f : files) {
    auto r = ParquetReader::Open(LocalStorage(), f);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto& cols = (*r)->columns();
    ASSERT_EQ(cols.size(), 7u);
    EXPECT_EQ(cols[0].name, "id");
    EXPECT_EQ(cols[2].type, parquet::Type::kInt32);   // label
    EXPECT_EQ(cols[3].type, parquet::Type::kDouble);  // x, with a null
    EXPECT_EQ(cols[3].max_definition_level, 1);
    EXPECT_TRUE(cols[4].is_string);                   // name
    EXPECT_EQ(cols[5].type, parquet::Type::kBoolean); // flag
    ASSERT_TRUE(cols[6].tensor.has_value());
    EXPECT_EQ(cols[6].tensor->shape, (std::vector<int64_t>{4, 5, 6}));
    auto ids = std::get<std::vector<int64_t>>((*r)->ReadColumn(0)->values);
    auto labels = std::get<std::vector<int32_t>>((*r)->ReadColumn(2)->values);
    auto names = std::get<std::vector<std::string>>((*r)->ReadColumn(1)->values);
    auto x = (*r)->ReadColumn(3);
    for (int64_t k = 0; k < (*r)->num_rows(); ++k, ++row) {
      EXPECT_EQ(ids[k], row);
      EXPECT_EQ(labels[k], row % 2);
      char name[32];
      std::snprintf(name, sizeof(name), "s_%03d.npy", static_cast<int>(row));
      EXPECT_EQ(names[k], name);
      EXPECT_EQ(x->defined[k], row == 5 ? 0 : 1);
      AlignedBuffer cell;
      ASSERT_TRUE((*r)->ReadBinaryCell(k, 6, &cell).ok());
      EXPECT_EQ(AsChars(cell.view()), payloads[row]) << "row " << row;
    }
  }
  EXPECT_EQ(row, 30);
}

TEST_F(ConvertTest, WritesOneFileWhenOutEndsInParquet) {
  WriteArrays(5);
  ConvertOptions o;
  o.source_dir = src_;
  o.out = dir_ + "/new/dir/one.parquet";  // directories that do not exist yet are created
  o.progress = false;
  o.codec = Codec::kSnappy;
  auto rep = ConvertSources(o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  ASSERT_EQ(rep->files_out, std::vector<std::string>{o.out});
  auto r = ParquetReader::Open(LocalStorage(), o.out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->num_rows(), 5);
  EXPECT_EQ((*r)->columns().back().name, "data");
}

TEST_F(ConvertTest, ShapeMismatchNamesTheFileAndLeavesNoPartialOutput) {
  WriteArrays(12);
  std::vector<int16_t> v(60);
  ASSERT_TRUE(WriteNpyFile(LocalStorage(), src_ + "/s_999.npy", DType::kInt16, std::vector<int64_t>{60},
                           ByteView(reinterpret_cast<const uint8_t*>(v.data()), 120)).ok());
  ConvertOptions o;
  o.source_dir = src_;
  o.out = dir_ + "/out";
  o.row_group_bytes = 500;
  o.target_file_bytes = 1000;
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("s_999.npy"), std::string::npos) << rep.status().message();
  EXPECT_NE(rep.status().message().find("int16[60]"), std::string::npos) << rep.status().message();
  for (const auto& f : ParquetFiles(o.out)) {
    EXPECT_EQ(f.find(".inprogress"), std::string::npos) << f;
  }
}

TEST_F(ConvertTest, RejectsLabelsWithoutARowForAFile) {
  WriteArrays(3);
  WriteLabels("file,label\ns_000.npy,1\ns_002.npy,0\n");
  ConvertOptions o;
  o.source_dir = src_;
  o.labels_csv = src_ + "/labels.csv";
  o.out = dir_ + "/out";
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("no row for source file 's_001.npy'"), std::string::npos) << rep.status().message();
}

TEST_F(ConvertTest, RejectsBadLabelFilesAndEmptySources) {
  ConvertOptions o;
  o.source_dir = src_;
  o.out = dir_ + "/out";
  o.progress = false;
  EXPECT_EQ(ConvertSources(o).status().code(), StatusCode::kInvalidArgument);  // no files
  WriteArrays(2);
  WriteLabels("name,label\na,1\n");
  o.labels_csv = src_ + "/labels.csv";
  EXPECT_NE(ConvertSources(o).status().message().find("'file' column"), std::string::npos);
  WriteLabels("file,id\ns_000.npy,1\ns_001.npy,2\n");
  EXPECT_NE(ConvertSources(o).status().message().find("clashes"), std::string::npos);
  // Delta readers match names ignoring case: 'Id' would be stoke's 'id' to them, 'Arr' the tensor.
  WriteLabels("file,Id\ns_000.npy,1\ns_001.npy,2\n");
  EXPECT_NE(ConvertSources(o).status().message().find("'Id' clashes"), std::string::npos);
  WriteLabels("file,Arr\ns_000.npy,1\ns_001.npy,2\n");
  o.tensor_column = "arr";
  EXPECT_NE(ConvertSources(o).status().message().find("'Arr' clashes"), std::string::npos)
      << ConvertSources(o).status().ToString();
  WriteLabels("file,Label,LABEL\ns_000.npy,1,2\ns_001.npy,2,3\n");
  EXPECT_NE(ConvertSources(o).status().message().find("differ only in case"), std::string::npos)
      << ConvertSources(o).status().ToString();
}

TEST_F(ConvertTest, NpzMembersBecomeColumns) {
  for (int i = 0; i < 4; ++i) {
    NpyArray a{.dtype = DType::kFloat32, .shape = {3}, .data = AlignedBuffer(12)};
    NpyArray b{.dtype = DType::kUInt8, .shape = {2, 2}, .data = AlignedBuffer(4)};
    std::memset(a.data.data(), i, 12);
    std::memset(b.data.data(), 100 + i, 4);
    // Members in either order: an archive is matched by member name, as numpy reads it.
    std::vector<std::pair<std::string, const NpyArray*>> members = {{"image", &a}, {"mask", &b}};
    if (i == 1) std::swap(members[0], members[1]);
    ASSERT_TRUE(WriteNpzFile(LocalStorage(), src_ + "/f" + std::to_string(i) + ".npz", members,
                             /*compress=*/i % 2 == 0).ok());
  }
  ConvertOptions o;
  o.source_dir = src_;
  o.out = dir_ + "/z.parquet";
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  auto r = ParquetReader::Open(LocalStorage(), o.out);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ((*r)->columns().size(), 4u);
  EXPECT_EQ((*r)->columns()[2].name, "image");
  EXPECT_EQ((*r)->columns()[3].name, "mask");
  AlignedBuffer cell;
  ASSERT_TRUE((*r)->ReadBinaryCell(3, 3, &cell).ok());
  EXPECT_EQ(AsChars(cell.view()), std::string(4, static_cast<char>(103)));
  ASSERT_TRUE((*r)->ReadBinaryCell(1, 2, &cell).ok());  // f1.npz, written mask first
  EXPECT_EQ(AsChars(cell.view()), std::string(12, static_cast<char>(1)));
  ASSERT_TRUE((*r)->ReadBinaryCell(1, 3, &cell).ok());
  EXPECT_EQ(AsChars(cell.view()), std::string(4, static_cast<char>(101)));

  // A member missing, or one the first archive does not have, is named.
  NpyArray a{.dtype = DType::kFloat32, .shape = {3}, .data = AlignedBuffer(12)};
  NpyArray c{.dtype = DType::kUInt8, .shape = {1}, .data = AlignedBuffer(1)};
  ASSERT_TRUE(WriteNpzFile(LocalStorage(), src_ + "/f4.npz", {{"image", &a}}, false).ok());
  o.out = dir_ + "/z2.parquet";
  auto missing = ConvertSources(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("f4.npz: no array 'mask' ('f0.npz' has 'image', 'mask')"), std::string::npos)
      << missing.status().message();
  ASSERT_TRUE(WriteNpzFile(LocalStorage(), src_ + "/f4.npz", {{"image", &a}, {"extra", &c}}, false).ok());
  auto extra = ConvertSources(o);
  ASSERT_FALSE(extra.ok());
  EXPECT_NE(extra.status().message().find("f4.npz: array 'extra' is not in 'f0.npz'"), std::string::npos)
      << extra.status().message();
  // An archive without arrays gives no tensor column: an error, not a table of ids.
  std::filesystem::remove_all(src_);
  std::filesystem::create_directories(src_);
  ASSERT_TRUE(WriteNpzFile(LocalStorage(), src_ + "/e.npz", {}, false).ok());
  auto empty = ConvertSources(o);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("holds no arrays"), std::string::npos) << empty.status().message();
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST_F(ConvertTest, RejectsLabelStringsThatAreNotUtf8) {
  WriteArrays(2);
  WriteLabels("file,note\ns_000.npy,caf\xe9\ns_001.npy,ok\n");  // Latin-1 e-acute
  ConvertOptions o;
  o.source_dir = src_;
  o.labels_csv = src_ + "/labels.csv";
  o.out = dir_ + "/out.parquet";
  o.progress = false;
  auto rep = ConvertSources(o);
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("not valid UTF-8"), std::string::npos) << rep.status().message();
  EXPECT_NE(rep.status().message().find("s_000.npy"), std::string::npos) << rep.status().message();
  WriteLabels("file,note\ns_000.npy,caf\xc3\xa9\ns_001.npy,\xf0\x9f\x8c\x8a\n");  // valid UTF-8 passes
  EXPECT_TRUE(ConvertSources(o).ok());
}

}  // namespace
}  // namespace stoke
