#include "format/npz.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zip.h>

#include <cstring>
#include <filesystem>

namespace stoke {
namespace {

NpyArray MakeArray(DType dtype, std::vector<int64_t> shape, uint8_t seed) {
  NpyArray array;
  array.dtype = dtype;
  array.shape = std::move(shape);
  array.data.Resize(array.num_bytes());
  // Repetitive bytes, so deflate has something to gain.
  for (size_t i = 0; i < array.data.size(); ++i) array.data.data()[i] = static_cast<uint8_t>(seed + i % 7);
  return array;
}

// A zip archive built with libzip directly, for members WriteNpzFile would never write.
std::string ZipOf(const std::vector<std::pair<std::string, std::string>>& members) {
  zip_source_t* output = zip_source_buffer_create(nullptr, 0, 0, nullptr);
  zip_t* archive = zip_open_from_source(output, ZIP_TRUNCATE, nullptr);
  zip_source_keep(output);
  for (const auto& [name, content] : members) {
    zip_source_t* source = zip_source_buffer(archive, content.data(), content.size(), 0);
    EXPECT_GE(zip_file_add(archive, name.c_str(), source, 0), 0);
  }
  EXPECT_EQ(zip_close(archive), 0);
  zip_stat_t stat;
  EXPECT_EQ(zip_source_stat(output, &stat), 0);
  std::string bytes(stat.size, '\0');
  EXPECT_EQ(zip_source_open(output), 0);
  EXPECT_EQ(zip_source_read(output, bytes.data(), bytes.size()), static_cast<zip_int64_t>(bytes.size()));
  zip_source_close(output);
  zip_source_free(output);
  return bytes;
}

class NpzTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string dir = testing::TempDir() + "npz_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(std::string_view file) const { return dir_ + "/" + std::string(file); }

  // Writes three arrays, reads them back, checks them, and returns the archive's bytes.
  std::string RoundTrip(bool compress) {
    const NpyArray a = MakeArray(DType::kFloat32, {2, 3}, 1);
    const NpyArray b = MakeArray(DType::kInt64, {}, 2);
    const NpyArray c = MakeArray(DType::kUInt16, {100, 0}, 3);
    const NpyArray d = MakeArray(DType::kInt16, {50, 40}, 4);
    const std::string path = Path(compress ? "deflated.npz" : "stored.npz");
    Status status =
        WriteNpzFile(LocalStorage(), path, {{"a", &a}, {"scalar", &b}, {"empty", &c}, {"x/y", &d}}, compress);
    EXPECT_TRUE(status.ok()) << status.ToString();
    auto arrays = ReadNpzFile(LocalStorage(), path);
    EXPECT_TRUE(arrays.ok()) << arrays.status().ToString();
    if (!arrays.ok()) return "";
    const std::pair<std::string, const NpyArray*> expected[] = {{"a", &a}, {"scalar", &b}, {"empty", &c}, {"x/y", &d}};
    EXPECT_EQ(arrays->size(), std::size(expected));
    for (size_t i = 0; i < std::min(arrays->size(), std::size(expected)); ++i) {
      const auto& [key, array] = (*arrays)[i];
      EXPECT_EQ(key, expected[i].first);
      EXPECT_EQ(array.dtype, expected[i].second->dtype) << key;
      EXPECT_EQ(array.shape, expected[i].second->shape) << key;
      EXPECT_EQ(AsChars(array.data.view()), AsChars(expected[i].second->data.view())) << key;
    }
    return ReadFileToString(LocalStorage(), path).value();
  }

  std::string dir_;
};

// The compression method of every member of `bytes`.
std::vector<int> CompressionMethods(const std::string& bytes) {
  zip_source_t* source = zip_source_buffer_create(bytes.data(), bytes.size(), 0, nullptr);
  zip_t* archive = zip_open_from_source(source, ZIP_RDONLY, nullptr);
  std::vector<int> methods;
  for (zip_int64_t i = 0; i < zip_get_num_entries(archive, 0); ++i) {
    zip_stat_t stat;
    zip_stat_index(archive, i, 0, &stat);
    methods.push_back(stat.comp_method);
  }
  zip_discard(archive);
  return methods;
}

TEST_F(NpzTest, RoundTripsStored) {
  const std::string bytes = RoundTrip(/*compress=*/false);
  EXPECT_EQ(CompressionMethods(bytes), std::vector<int>(4, ZIP_CM_STORE));
}

TEST_F(NpzTest, RoundTripsDeflated) {
  const std::string bytes = RoundTrip(/*compress=*/true);
  EXPECT_EQ(CompressionMethods(bytes), std::vector<int>(4, ZIP_CM_DEFLATE));
  EXPECT_LT(bytes.size(), RoundTrip(/*compress=*/false).size());
}

TEST_F(NpzTest, RoundTripsEmptyArchive) {
  ASSERT_TRUE(WriteNpzFile(LocalStorage(), Path("none.npz"), {}, true).ok());
  EXPECT_EQ(ReadFileToString(LocalStorage(), Path("none.npz")).value().size(), 22u);
  auto arrays = ReadNpzFile(LocalStorage(), Path("none.npz"));
  ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
  EXPECT_TRUE(arrays->empty());
}

TEST_F(NpzTest, WriteRejectsBadArraysAndDuplicateKeys) {
  const NpyArray good = MakeArray(DType::kUInt8, {4}, 0);
  NpyArray short_data = MakeArray(DType::kFloat64, {3}, 0);
  short_data.data.Resize(8);
  const NpyArray other = MakeArray(DType::kUInt8, {}, 0);
  NpyArray bad_shape = MakeArray(DType::kUInt8, {}, 0);
  bad_shape.shape = {-1};
  const struct {
    std::vector<std::pair<std::string, const NpyArray*>> arrays;
    std::string_view message;
  } kCases[] = {
      {{{"a", &good}, {"b", &short_data}}, "array 'b' has 8 bytes of data, its dtype and shape need 24"},
      {{{"n", nullptr}}, "array 'n' is null"},
      {{{"s", &bad_shape}}, "negative dimension"},
      {{{"a", &good}, {"a", &other}}, "cannot add member 'a.npy'"},
  };
  for (const auto& c : kCases) {
    Status status = WriteNpzFile(LocalStorage(), Path("bad.npz"), c.arrays, false);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.ToString();
  }
  EXPECT_FALSE(std::filesystem::exists(Path("bad.npz")));
}

TEST(Npz, RejectsNonNpyMember) {
  const NpyArray array = MakeArray(DType::kUInt8, {2}, 0);
  const std::string npy = EncodeNpyHeader(array.dtype, array.shape) + std::string(AsChars(array.data.view()));
  const std::string bytes = ZipOf({{"ok.npy", npy}, {"readme.txt", "hello"}});
  auto arrays = DecodeNpz(AsBytes(bytes), "m.npz");
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(arrays.status().message(), "m.npz: member 'readme.txt' is not an .npy file");
}

TEST(Npz, NamesArchiveAndMemberInMemberErrors) {
  const std::string bytes = ZipOf({{"bad.npy", std::string("\x93NUMPY\x01\x00\x04\x00{}x\n", 14)}});
  auto arrays = DecodeNpz(AsBytes(bytes), "m.npz");
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(arrays.status().message(),
            "m.npz:bad.npy: offset 12: npy header: expected only space padding after the header dict, found 'x'");
}

TEST(Npz, RejectsDuplicateMembers) {
  const NpyArray array = MakeArray(DType::kUInt8, {2}, 0);
  const std::string npy = EncodeNpyHeader(array.dtype, array.shape) + std::string(AsChars(array.data.view()));
  std::string bytes = ZipOf({{"a.npy", npy}, {"b.npy", npy}});
  // Rename b.npy to a.npy in both the local header and the central directory.
  for (size_t pos = 0; (pos = bytes.find("b.npy", pos)) != std::string::npos;) bytes[pos] = 'a';
  auto arrays = DecodeNpz(AsBytes(bytes), "d.npz");
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption) << arrays.status().ToString();
}

TEST(Npz, RejectsGarbageAndEmptyInput) {
  for (std::string_view bytes : {std::string_view(), std::string_view("not a zip file at all")}) {
    auto arrays = DecodeNpz(AsBytes(bytes), "g.npz");
    ASSERT_FALSE(arrays.ok());
    EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption) << arrays.status().ToString();
    EXPECT_TRUE(arrays.status().message().starts_with("g.npz: ")) << arrays.status().ToString();
  }
}

TEST_F(NpzTest, RejectsCorruptedMemberData) {
  std::string bytes = RoundTrip(/*compress=*/false);
  // The data of array "a" follows its 128-byte npy header; flip one of its bytes.
  const size_t header = bytes.find("{'descr': '<f4'");
  ASSERT_NE(header, std::string::npos);
  bytes[header + 128 - 10 + 3] ^= 0x40;
  auto arrays = DecodeNpz(AsBytes(bytes), "c.npz");
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption);
  EXPECT_NE(arrays.status().message().find("c.npz:a.npy: CRC error"), std::string::npos) << arrays.status().ToString();
}

TEST_F(NpzTest, RejectsMemberSizeBeyondDeflateLimit) {
  std::string bytes = RoundTrip(/*compress=*/true);
  // Claim 2 GiB for the first member in its local header (offset 22) and its central directory
  // entry (offset 24), keeping the two consistent.
  const uint32_t huge = 0x7fffffff;
  const size_t local = bytes.find("PK\x03\x04");
  const size_t central = bytes.find("PK\x01\x02");
  ASSERT_NE(local, std::string::npos);
  ASSERT_NE(central, std::string::npos);
  std::memcpy(bytes.data() + local + 22, &huge, 4);
  std::memcpy(bytes.data() + central + 24, &huge, 4);
  auto arrays = DecodeNpz(AsBytes(bytes), "z.npz");
  ASSERT_FALSE(arrays.ok());
  EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption);
  EXPECT_NE(arrays.status().message().find("z.npz:a.npy: member declares 2147483647 bytes"), std::string::npos)
      << arrays.status().ToString();
}

TEST_F(NpzTest, RejectsEveryTruncation) {
  for (bool compress : {false, true}) {
    const std::string bytes = RoundTrip(compress);
    for (size_t length = 0; length < bytes.size(); ++length) {
      auto arrays = DecodeNpz(AsBytes(std::string_view(bytes).substr(0, length)), "t.npz");
      ASSERT_FALSE(arrays.ok()) << length;
      EXPECT_EQ(arrays.status().code(), StatusCode::kCorruption) << arrays.status().ToString();
    }
  }
}

}  // namespace
}  // namespace stoke
