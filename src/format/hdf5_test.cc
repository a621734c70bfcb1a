// Files are written with libhdf5's own API here (h5py writes the Python tests' files): what is read
// back must be exactly what was written, through both read paths (the library's H5Dread and raw
// chunks decompressed outside it).
#include "format/hdf5.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "format/hdf5_testing.h"

namespace stoke {
namespace {

using testing_support::DatasetSpec;
using testing_support::NumberAttribute;
using testing_support::StringAttribute;
using testing_support::WriteDataset;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_hdf5_XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// h5py's bool: an enum over int8 with FALSE = 0 and TRUE = 1.
hid_t BoolType() {
  hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
  int8_t f = 0, v = 1;
  H5Tenum_insert(t, "FALSE", &f);
  H5Tenum_insert(t, "TRUE", &v);
  return t;
}

// h5py's float16: an IEEE half laid out as a custom float type.
hid_t HalfType() {
  hid_t t = H5Tcopy(H5T_IEEE_F32LE);
  H5Tset_fields(t, 15, 10, 5, 0, 10);
  H5Tset_size(t, 2);
  H5Tset_ebias(t, 15);
  H5Tset_precision(t, 16);
  return t;
}

// The fixture: several layouts, types and attributes in one file.
struct Fixture {
  std::vector<float> images;        // (10, 6, 5) float32, chunked (3, 4, 2), shuffle + deflate
  std::vector<int16_t> be;          // (10,) big-endian int16, contiguous
  std::vector<uint8_t> flags;       // (10,) bool
  std::vector<uint16_t> halves;     // (10, 2) float16 bits
  std::vector<int32_t> partial;     // (8, 2) int32 chunked (2, 2), only written rows... see below
  double scalar = 2.5;
  std::string path;
};

Fixture WriteFixture(const TempDir& dir) {
  Fixture f;
  f.path = dir.File("fixture.h5");
  for (int i = 0; i < 10 * 6 * 5; ++i) f.images.push_back(static_cast<float>(i) * 0.25f - 7.0f);
  for (int i = 0; i < 10; ++i) f.be.push_back(static_cast<int16_t>(i * 1000 - 4000));
  for (int i = 0; i < 10; ++i) f.flags.push_back(i % 3 == 0);
  // 1.0 = 0x3C00, 2.0 = 0x4000, -0.5 = 0xB800.
  for (int i = 0; i < 20; ++i) f.halves.push_back(i % 3 == 0 ? 0x3C00 : i % 3 == 1 ? 0x4000 : 0xB800);
  hid_t file = H5Fcreate(f.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(file, 0);
  hid_t bool_type = BoolType(), half_type = HalfType();
  WriteDataset(file, {"images", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {10, 6, 5}, {3, 4, 2}, true, 6, false, f.images.data()});
  WriteDataset(file, {"group/be", H5T_STD_I16BE, H5T_NATIVE_INT16, {10}, {}, false, -1, false, f.be.data()});
  WriteDataset(file, {"flags", bool_type, bool_type, {10}, {}, false, -1, false, f.flags.data()});
  WriteDataset(file, {"halves", half_type, half_type, {10, 2}, {5, 2}, false, 4, false, f.halves.data()});
  WriteDataset(file, {"scalar", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, {}, false, -1, false, &f.scalar});
  WriteDataset(file, {"checksummed", H5T_STD_U8LE, H5T_NATIVE_UINT8, {10}, {4}, false, -1, true, f.flags.data()});
  // Rows 0..3 written, rows 4..7 never: those chunks do not exist and read as the fill value 0.
  WriteDataset(file, {"partial", H5T_STD_I32LE, H5T_NATIVE_INT32, {8, 2}, {2, 2}, true, 1, false, nullptr});
  {
    hid_t ds = H5Dopen2(file, "partial", H5P_DEFAULT);
    hsize_t start[2] = {0, 0}, count[2] = {4, 2};
    hid_t fs = H5Dget_space(ds);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t ms = H5Screate_simple(2, count, nullptr);
    std::vector<int32_t> rows = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_GE(H5Dwrite(ds, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, rows.data()), 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    f.partial = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0};
  }
  // Unsupported element types: listed, not read.
  {
    hid_t compound = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(compound, "a", 0, H5T_NATIVE_INT32);
    H5Tinsert(compound, "b", 4, H5T_NATIVE_FLOAT);
    WriteDataset(file, {"records", compound, compound, {3}, {}, false, -1, false, nullptr});
    H5Tclose(compound);
    hid_t vstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(vstr, H5T_VARIABLE);
    WriteDataset(file, {"names", vstr, vstr, {2}, {}, false, -1, false, nullptr});
    H5Tclose(vstr);
  }
  StringAttribute(file, "site", "Grane", /*variable=*/true);
  StringAttribute(file, "unit", "m", /*variable=*/false);
  NumberAttribute<int32_t>(file, "count", H5T_NATIVE_INT32, -7);
  NumberAttribute<double>(file, "scale", H5T_NATIVE_DOUBLE, 0.125);
  NumberAttribute<uint64_t>(file, "big", H5T_NATIVE_UINT64, 1ull << 40);
  NumberAttribute<int8_t>(file, "ok", bool_type, 1);
  H5Tclose(bool_type);
  H5Tclose(half_type);
  H5Fclose(file);
  return f;
}

template <typename T>
std::vector<T> Rows(Hdf5File& file, const std::string& name, int64_t first, int64_t count, DType as, size_t row_elements) {
  std::vector<T> out(static_cast<size_t>(count) * row_elements);
  Status s = file.ReadRows(name, first, count, as, MutableByteView(reinterpret_cast<uint8_t*>(out.data()), out.size() * sizeof(T)));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(Hdf5File, ListsDatasetsWithTypesShapesChunksAndFilters) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  auto file = Hdf5File::Open(f.path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto list = (*file)->ListDatasets();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> names;
  for (const auto& d : *list) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"checksummed", "flags", "group/be", "halves", "images", "names", "partial",
                                              "records", "scalar"}));
  auto find = [&](const std::string& n) { return *std::find_if(list->begin(), list->end(), [&](auto& d) { return d.name == n; }); };
  const Hdf5Dataset images = find("images");
  EXPECT_EQ(images.dtype, DType::kFloat32);
  EXPECT_EQ(images.shape, (std::vector<int64_t>{10, 6, 5}));
  EXPECT_EQ(images.chunk, (std::vector<int64_t>{3, 4, 2}));
  EXPECT_EQ(images.filters, (std::vector<std::string>{"shuffle", "deflate"}));
  EXPECT_EQ(find("group/be").dtype, DType::kInt16);
  EXPECT_TRUE(find("group/be").big_endian);
  EXPECT_EQ(find("flags").dtype, DType::kBool);
  EXPECT_EQ(find("halves").dtype, DType::kFloat16);
  EXPECT_EQ(find("scalar").dtype, DType::kFloat64);
  EXPECT_TRUE(find("scalar").shape.empty());
  EXPECT_FALSE(find("records").dtype.has_value());
  EXPECT_EQ(find("records").unsupported, "a compound type");
  EXPECT_EQ(find("names").unsupported, "variable-length strings");
  EXPECT_EQ(find("checksummed").filters, (std::vector<std::string>{"fletcher32"}));
}

TEST(Hdf5File, ReadsRootAttributes) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  auto file = Hdf5File::Open(f.path);
  ASSERT_TRUE(file.ok());
  auto attrs = (*file)->RootAttributes();
  ASSERT_TRUE(attrs.ok()) << attrs.status().ToString();
  ASSERT_EQ(attrs->size(), 6u);
  const auto& a = *attrs;  // sorted: big, count, ok, scale, site, unit
  EXPECT_EQ(a[0].name, "big");
  EXPECT_EQ(a[0].dtype, DType::kUInt64);
  EXPECT_EQ(a[0].int_value, int64_t{1} << 40);
  EXPECT_EQ(a[1].int_value, -7);
  EXPECT_EQ(a[2].dtype, DType::kBool);
  EXPECT_EQ(a[2].int_value, 1);
  EXPECT_EQ(a[3].float_value, 0.125);
  EXPECT_TRUE(a[4].is_string);
  EXPECT_EQ(a[4].string_value, "Grane");
  EXPECT_EQ(a[5].string_value, "m");  // NUL padding removed
}

TEST(Hdf5File, ArrayAttributesAreRefusedNamingFileAndAttribute) {
  TempDir dir;
  const std::string path = dir.File("arr.h5");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  NumberAttribute<int32_t>(file, "shape", H5T_NATIVE_INT32, 3, 2);
  H5Fclose(file);
  auto f = Hdf5File::Open(path);
  ASSERT_TRUE(f.ok());
  auto attrs = (*f)->RootAttributes();
  ASSERT_FALSE(attrs.ok());
  EXPECT_EQ(attrs.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(attrs.status().message().find(path), std::string::npos);
  EXPECT_NE(attrs.status().message().find("'shape'"), std::string::npos) << attrs.status().message();
}

TEST(Hdf5File, ReadsRowRangesThroughBothPathsAlike) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  for (bool outside : {true, false}) {
    auto file = Hdf5File::Open(f.path, Hdf5ReadOptions{.decompress_outside_library = outside});
    ASSERT_TRUE(file.ok());
    // Every range of rows: chunk-aligned or not, within one chunk or across several, edge chunks
    // included (6 x 5 is not a multiple of the 4 x 2 chunks).
    for (int64_t first = 0; first < 10; ++first) {
      for (int64_t count = 0; first + count <= 10; ++count) {
        auto got = Rows<float>(**file, "images", first, count, DType::kFloat32, 30);
        std::vector<float> want(f.images.begin() + first * 30, f.images.begin() + (first + count) * 30);
        ASSERT_EQ(got, want) << "rows " << first << "+" << count << (outside ? " (raw chunks)" : " (H5Dread)");
      }
    }
    EXPECT_EQ(Rows<int16_t>(**file, "group/be", 2, 5, DType::kInt16, 1),
              std::vector<int16_t>(f.be.begin() + 2, f.be.begin() + 7));  // byte-swapped to little-endian
    EXPECT_EQ(Rows<uint8_t>(**file, "flags", 0, 10, DType::kBool, 1), f.flags);
    EXPECT_EQ(Rows<uint16_t>(**file, "halves", 3, 6, DType::kFloat16, 2),
              std::vector<uint16_t>(f.halves.begin() + 6, f.halves.begin() + 18));
    EXPECT_EQ(Rows<double>(**file, "scalar", 0, 1, DType::kFloat64, 1), std::vector<double>{2.5});
    EXPECT_EQ(Rows<int32_t>(**file, "partial", 0, 8, DType::kInt32, 2), f.partial);  // unwritten chunks: fill value
    EXPECT_EQ(Rows<int32_t>(**file, "partial", 3, 3, DType::kInt32, 2), std::vector<int32_t>({7, 8, 0, 0, 0, 0}));
    EXPECT_EQ(Rows<uint8_t>(**file, "checksummed", 1, 9, DType::kUInt8, 1),
              std::vector<uint8_t>(f.flags.begin() + 1, f.flags.end()));
  }
}

TEST(Hdf5File, WidensOnRequest) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  auto file = Hdf5File::Open(f.path);
  ASSERT_TRUE(file.ok());
  auto wide = Rows<int64_t>(**file, "group/be", 0, 10, DType::kInt64, 1);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(wide[i], f.be[i]);
  EXPECT_EQ(Rows<float>(**file, "halves", 0, 1, DType::kFloat32, 2), std::vector<float>({1.0f, 2.0f}));
  std::vector<int32_t> out(10);
  MutableByteView view(reinterpret_cast<uint8_t*>(out.data()), 40);
  EXPECT_EQ((*file)->ReadRows("flags", 0, 10, DType::kInt32, view).code(), StatusCode::kInvalidArgument);  // bools stay bools
  std::vector<int32_t> row(30);
  EXPECT_EQ((*file)->ReadRows("images", 0, 1, DType::kInt32, MutableByteView(reinterpret_cast<uint8_t*>(row.data()), 120)).code(),
            StatusCode::kInvalidArgument);  // floats are not read as integers
}

TEST(Hdf5File, BadRequestsAndMissingDatasetsNameTheFileAndDataset) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  auto file = Hdf5File::Open(f.path);
  ASSERT_TRUE(file.ok());
  std::vector<uint8_t> buf(4096);
  auto read = [&](const std::string& name, int64_t first, int64_t count, DType as, size_t bytes) {
    return (*file)->ReadRows(name, first, count, as, MutableByteView(buf.data(), bytes));
  };
  Status s = read("nope", 0, 1, DType::kFloat32, 4);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("'nope'"), std::string::npos);
  EXPECT_NE(s.message().find(f.path), std::string::npos);
  EXPECT_EQ(read("group/nope/x", 0, 1, DType::kFloat32, 4).code(), StatusCode::kNotFound);
  EXPECT_EQ(read("images", 8, 3, DType::kFloat32, 3 * 120).code(), StatusCode::kInvalidArgument);  // past the end
  EXPECT_EQ(read("images", -1, 1, DType::kFloat32, 120).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read("images", 0, 1, DType::kFloat32, 100).code(), StatusCode::kInvalidArgument);  // buffer size
  s = read("records", 0, 1, DType::kInt32, 8);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("'records'"), std::string::npos) << s.message();
  EXPECT_EQ(read("scalar", 1, 1, DType::kFloat64, 8).code(), StatusCode::kInvalidArgument);
}

TEST(Hdf5File, NonHdf5AndTruncatedFilesAreErrorsNamingTheFile) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  std::ifstream in(f.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string text = dir.File("text.h5"), cut = dir.File("cut.h5"), empty = dir.File("empty.h5");
  std::ofstream(text) << "not an HDF5 file at all\n";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  std::ofstream(empty, std::ios::binary).flush();
  for (const std::string& p : {text, cut, empty, dir.File("missing.h5")}) {
    auto file = Hdf5File::Open(p);
    ASSERT_FALSE(file.ok()) << p;
    EXPECT_NE(file.status().message().find(p), std::string::npos) << file.status().message();
  }
  // A file cut after its superblock may open; reading what is gone must then fail, not crash.
  for (size_t keep : {size_t{800}, size_t{2048}, bytes.size() / 2, bytes.size() - 100}) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << bytes.substr(0, keep);
    auto file = Hdf5File::Open(cut);
    if (!file.ok()) continue;
    auto list = (*file)->ListDatasets();
    if (!list.ok()) continue;
    std::vector<uint8_t> buf(10 * 30 * 4);
    for (const auto& d : *list) {
      if (!d.dtype || d.name != "images") continue;
      Status s = (*file)->ReadRows("images", 0, 10, DType::kFloat32, MutableByteView(buf.data(), buf.size()));
      if (!s.ok()) {
        EXPECT_NE(s.message().find(cut), std::string::npos) << s.message();
      }
    }
  }
}

TEST(Hdf5File, ThreadsReadTheirOwnFilesConcurrently) {
  TempDir dir;
  const Fixture f = WriteFixture(dir);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto file = Hdf5File::Open(f.path);
      if (!file.ok()) return;
      bool same = true;
      for (int k = 0; k < 50 && same; ++k) {
        std::vector<float> out(300);
        Status s = (*file)->ReadRows("images", 0, 10, DType::kFloat32, MutableByteView(reinterpret_cast<uint8_t*>(out.data()), 1200));
        same = s.ok() && out == f.images;
      }
      ok[t] = same;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
  EXPECT_TRUE(Hdf5LibraryIsThreadSafe());  // Debian's libhdf5-dev (serial) is built thread-safe
}

}  // namespace
}  // namespace stoke
