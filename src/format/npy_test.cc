#include "format/npy.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <numeric>

namespace stoke {
namespace {

// The bytes of `values` in host (little-endian) order.
template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

template <typename T>
std::vector<T> Values(const NpyArray& array) {
  std::vector<T> out(array.data.size() / sizeof(T));
  std::memcpy(out.data(), array.data.data(), array.data.size());
  return out;
}

// An .npy image with `dict` as the header text, padded with spaces and '\n' to 64 bytes as numpy
// pads, followed by `data`.
std::string NpyImage(std::string_view dict, std::string_view data = "", int major = 1) {
  const size_t length_size = major == 1 ? 2 : 4;
  std::string header(dict);
  header.append(63 - (8 + length_size + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t length = static_cast<uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&length), length_size);
  return out + header + std::string(data);
}

// The exact header numpy 1.24 writes for np.save(f, np.zeros((2, 3), np.float32)).
const std::string kNumpyFloat32x2x3Header = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                                            std::string(58, ' ') + "\n";

class NpyFileTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string dir = testing::TempDir() + "npy_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(std::string_view file) const { return dir_ + "/" + std::string(file); }

  std::string dir_;
};

TEST(Npy, EncodesHeaderExactlyAsNumpy124) {
  const int64_t shape[] = {2, 3};
  ASSERT_EQ(kNumpyFloat32x2x3Header.size(), 128u);
  EXPECT_EQ(EncodeNpyHeader(DType::kFloat32, shape), kNumpyFloat32x2x3Header);
  EXPECT_EQ(EncodeNpyHeader(DType::kInt8, {}), std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                                   "{'descr': '|i1', 'fortran_order': False, 'shape': (), }" +
                                                   std::string(62, ' ') + "\n");
  const int64_t one_d[] = {5};
  EXPECT_EQ(EncodeNpyHeader(DType::kBool, one_d), std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                                      "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }" +
                                                      std::string(60, ' ') + "\n");
}

TEST(Npy, EncodedHeadersEndOnA64ByteBoundary) {
  std::vector<int64_t> shape;
  for (int dims = 0; dims <= 64; ++dims) {
    const std::string header = EncodeNpyHeader(DType::kUInt16, shape);
    EXPECT_EQ(header.size() % kNpyHeaderAlignment, 0u) << dims;
    EXPECT_EQ(header.back(), '\n');
    ASSERT_TRUE(ParseNpyHeader(AsBytes(header), "x.npy").ok()) << header;
    EXPECT_EQ(ParseNpyHeader(AsBytes(header), "x.npy")->shape, shape);
    shape.push_back(dims == 0 ? 123456789 : 1);
  }
}

TEST(Npy, DecodesHeaderWrittenByNumpy124) {
  const std::string image = kNumpyFloat32x2x3Header + Bytes<float>({1, 2, 3, 4, 5, 6});
  Result<NpyHeader> header = ParseNpyHeader(AsBytes(image), "a.npy");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->major_version, 1);
  EXPECT_EQ(header->minor_version, 0);
  EXPECT_EQ(header->dtype, DType::kFloat32);
  EXPECT_FALSE(header->big_endian);
  EXPECT_FALSE(header->fortran_order);
  EXPECT_EQ(header->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(header->data_offset, 128u);
  EXPECT_EQ(header->data_size, 24u);

  Result<NpyArray> array = DecodeNpy(AsBytes(image), "a.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dtype, DType::kFloat32);
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array->num_elements(), 6);
  EXPECT_EQ(array->num_bytes(), 24u);
  EXPECT_EQ(Values<float>(*array), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, ParseNeedsOnlyTheBytesUpToTheData) {
  Result<NpyHeader> header = ParseNpyHeader(AsBytes(kNumpyFloat32x2x3Header), "a.npy");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->data_size, 24u);
}

TEST_F(NpyFileTest, RoundTripsEveryDtype) {
  const int64_t shape[] = {2, 3};
  for (int i = 0; i <= static_cast<int>(DType::kFloat64); ++i) {
    const DType dtype = static_cast<DType>(i);
    std::string data(6 * DTypeSize(dtype), '\0');
    for (size_t b = 0; b < data.size(); ++b) data[b] = static_cast<char>(b * 37 + i);
    const std::string path = Path(std::string(DTypeName(dtype)) + ".npy");
    ASSERT_TRUE(WriteNpyFile(LocalStorage(), path, dtype, shape, AsBytes(data)).ok());
    Result<NpyArray> array = ReadNpyFile(LocalStorage(), path);
    ASSERT_TRUE(array.ok()) << array.status().ToString();
    EXPECT_EQ(array->dtype, dtype);
    EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(AsChars(array->data.view()), data) << DTypeName(dtype);
  }
}

TEST_F(NpyFileTest, RoundTripsZeroDimensionalAndEmptyArrays) {
  const std::string path = Path("scalar.npy");
  ASSERT_TRUE(WriteNpyFile(LocalStorage(), path, DType::kFloat64, {}, AsBytes(Bytes<double>({2.5}))).ok());
  Result<NpyArray> scalar = ReadNpyFile(LocalStorage(), path);
  ASSERT_TRUE(scalar.ok()) << scalar.status().ToString();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements(), 1);
  EXPECT_EQ(Values<double>(*scalar), std::vector<double>{2.5});

  const int64_t shape[] = {0, 5};
  ASSERT_TRUE(WriteNpyFile(LocalStorage(), path, DType::kInt16, shape, {}).ok());
  Result<NpyArray> empty = ReadNpyFile(LocalStorage(), path);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->shape, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(empty->num_bytes(), 0u);
  EXPECT_TRUE(empty->data.empty());
}

TEST(Npy, ReadsBigEndianInt32AsLittleEndian) {
  const std::string image = NpyImage("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }",
                                     std::string("\x00\x00\x01\x02\xff\xff\xff\xfe", 8));
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "be.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dtype, DType::kInt32);
  EXPECT_EQ(Values<int32_t>(*array), (std::vector<int32_t>{0x0102, -2}));
}

TEST(Npy, ReadsBigEndianOfEveryWidth) {
  Result<NpyArray> u16 = DecodeNpy(
      AsBytes(NpyImage("{'descr': '>u2', 'fortran_order': False, 'shape': (1,), }", std::string("\x12\x34", 2))),
      "u16.npy");
  ASSERT_TRUE(u16.ok()) << u16.status().ToString();
  EXPECT_EQ(Values<uint16_t>(*u16), std::vector<uint16_t>{0x1234});

  std::string be_double = Bytes<double>({-1.5});
  std::reverse(be_double.begin(), be_double.end());
  Result<NpyArray> f64 =
      DecodeNpy(AsBytes(NpyImage("{'descr': '>f8', 'fortran_order': False, 'shape': (), }", be_double)), "f64.npy");
  ASSERT_TRUE(f64.ok()) << f64.status().ToString();
  EXPECT_EQ(Values<double>(*f64), std::vector<double>{-1.5});

  Result<NpyArray> i8 = DecodeNpy(
      AsBytes(NpyImage("{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }", std::string("\x01\xff", 2))),
      "i8.npy");
  ASSERT_TRUE(i8.ok()) << i8.status().ToString();
  EXPECT_EQ(Values<int8_t>(*i8), (std::vector<int8_t>{1, -1}));
}

TEST(Npy, TransposesFortranOrder2d) {
  // [[1, 2, 3], [4, 5, 6]] stored column by column.
  const std::string image =
      NpyImage("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }", Bytes<int16_t>({1, 4, 2, 5, 3, 6}));
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "f.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values<int16_t>(*array), (std::vector<int16_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, TransposesFortranOrder3d) {
  // Element (i, j, k) of a 2x3x4 array has value 100i + 10j + k; Fortran order puts it at
  // i + 2j + 6k.
  std::vector<int32_t> fortran(24);
  std::vector<int32_t> expected;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) {
        fortran[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
        expected.push_back(100 * i + 10 * j + k);
      }
    }
  }
  const std::string image =
      NpyImage("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }",
               std::string(reinterpret_cast<const char*>(fortran.data()), fortran.size() * sizeof(int32_t)));
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "f3.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(Values<int32_t>(*array), expected);
}

TEST(Npy, TransposesBigEndianFortranOrder) {
  const std::string image = NpyImage("{'descr': '>u2', 'fortran_order': True, 'shape': (2, 2), }",
                                     std::string("\x00\x01\x00\x03\x00\x02\x00\x04", 8));
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "fb.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(Values<uint16_t>(*array), (std::vector<uint16_t>{1, 2, 3, 4}));
}

TEST(Npy, FortranOrderOfZeroAndOneDimensionIsUnchanged) {
  Result<NpyArray> one_d =
      DecodeNpy(AsBytes(NpyImage("{'descr': '|u1', 'fortran_order': True, 'shape': (3,), }", "abc")), "f1.npy");
  ASSERT_TRUE(one_d.ok()) << one_d.status().ToString();
  EXPECT_EQ(AsChars(one_d->data.view()), "abc");
  Result<NpyArray> zero_d =
      DecodeNpy(AsBytes(NpyImage("{'descr': '|u1', 'fortran_order': True, 'shape': (), }", "z")), "f0.npy");
  ASSERT_TRUE(zero_d.ok()) << zero_d.status().ToString();
  EXPECT_EQ(AsChars(zero_d->data.view()), "z");
  Result<NpyArray> empty =
      DecodeNpy(AsBytes(NpyImage("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 0), }")), "fe.npy");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->data.empty());
}

TEST(Npy, TransposeFortranToCHandlesAnyElementSize) {
  // A 2x3x2 array of 3-byte elements; element (i, j, k) is "ijk" and sits at i + 2j + 6k.
  const int64_t shape[] = {2, 3, 2};
  std::string fortran(36, '\0');
  std::string expected;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 2; ++k) {
        const std::string element = {static_cast<char>('0' + i), static_cast<char>('0' + j),
                                     static_cast<char>('0' + k)};
        fortran.replace(3 * (i + 2 * j + 6 * k), 3, element);
        expected += element;
      }
    }
  }
  std::string c_order(36, '\0');
  TransposeFortranToC(AsBytes(fortran), shape, 3,
                      MutableByteView(reinterpret_cast<uint8_t*>(c_order.data()), c_order.size()));
  EXPECT_EQ(c_order, expected);
}

TEST(Npy, ParsesVersion2Header) {
  const std::string image =
      NpyImage("{'descr': '<u4', 'fortran_order': False, 'shape': (1,), }", Bytes<uint32_t>({7}), /*major=*/2);
  Result<NpyHeader> header = ParseNpyHeader(AsBytes(image), "v2.npy");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->major_version, 2);
  EXPECT_EQ(header->data_offset, 128u);
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "v2.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(Values<uint32_t>(*array), std::vector<uint32_t>{7});
}

TEST(Npy, ParsesVersion3Utf8Header) {
  const std::string image =
      NpyImage("{\"descr\": \"<f2\", \"shape\": (2,), \"fortran_order\": False}", Bytes<uint16_t>({0x3c00, 0x4000}), 3);
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "v3.npy");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(array->dtype, DType::kFloat16);
  EXPECT_EQ(Values<uint16_t>(*array), (std::vector<uint16_t>{0x3c00, 0x4000}));
  EXPECT_EQ(ParseNpyHeader(AsBytes(image), "v3.npy")->major_version, 3);
}

TEST(Npy, AcceptsAnyKeyOrderQuotingAndSpacing) {
  const std::string data = Bytes<int64_t>({1, 2, 3, 4, 5, 6});
  for (std::string_view dict : {
           "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i8'}",
           "{\"descr\":\"<i8\",\"fortran_order\":False,\"shape\":(2,3)}",
           " {\n\t'descr' : '=i8' ,\r\n 'fortran_order' :False, 'shape' : ( 2 , 3 , ) , } ",
           "{'fortran_order': False, 'descr': '<i8', 'shape': (2, 3,),}",
       }) {
    Result<NpyArray> array = DecodeNpy(AsBytes(NpyImage(dict, data)), "k.npy");
    ASSERT_TRUE(array.ok()) << dict << ": " << array.status().ToString();
    EXPECT_EQ(array->dtype, DType::kInt64);
    EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(Values<int64_t>(*array), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  }
  Result<NpyHeader> one =
      ParseNpyHeader(AsBytes(NpyImage("{'descr': '|u1', 'fortran_order': False, 'shape': ( 5 , ), }")), "o.npy");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->shape, std::vector<int64_t>{5});
}

// What numpy also reads: Python 2's long dimensions, (2L, 3L), and a dtype name as the descr.
TEST(Npy, AcceptsPython2LongDimensionsAndDtypeNames) {
  const std::string data = Bytes<int64_t>({1, 2, 3, 4, 5, 6});
  for (std::string_view dict : {"{'descr': '<i8', 'fortran_order': False, 'shape': (2L, 3L), }",
                                "{'descr': 'int64', 'fortran_order': False, 'shape': (2, 3), }"}) {
    Result<NpyArray> array = DecodeNpy(AsBytes(NpyImage(dict, data)), "p.npy");
    ASSERT_TRUE(array.ok()) << dict << ": " << array.status().ToString();
    EXPECT_EQ(array->dtype, DType::kInt64);
    EXPECT_EQ(array->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(Values<int64_t>(*array), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  }
  Result<NpyHeader> f = ParseNpyHeader(AsBytes(NpyImage("{'descr': 'float32', 'fortran_order': False, 'shape': (6L,), }")),
                                       "f.npy");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->dtype, DType::kFloat32);
  // An order character belongs to type codes only; 'LL' is no dimension.
  EXPECT_EQ(ParseNpyHeader(AsBytes(NpyImage("{'descr': '<float32', 'fortran_order': False, 'shape': (1,), }")), "g.npy")
                .status()
                .code(),
            StatusCode::kUnsupported);
  EXPECT_FALSE(
      ParseNpyHeader(AsBytes(NpyImage("{'descr': '<f4', 'fortran_order': False, 'shape': (2LL,), }")), "h.npy").ok());
}

TEST(Npy, RejectsUnsupportedDtype) {
  for (std::string_view descr : {"<c8", "|O", "<U10", "|S5", "<M8[ns]", "<m8[s]", "|V16", "<f16", "<i3", "f"}) {
    const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (1,), }}", descr);
    Result<NpyHeader> header = ParseNpyHeader(AsBytes(NpyImage(dict)), "u.npy");
    ASSERT_FALSE(header.ok()) << descr;
    EXPECT_EQ(header.status().code(), StatusCode::kUnsupported) << header.status().ToString();
    EXPECT_NE(header.status().message().find(fmt::format("dtype '{}' in u.npy", descr)), std::string::npos)
        << header.status().ToString();
  }
  Result<NpyHeader> structured = ParseNpyHeader(
      AsBytes(NpyImage("{'descr': [('a', '<f4'), ('b]', '<i4', (2,))], 'fortran_order': False, 'shape': (3,), }")),
      "s.npy");
  ASSERT_FALSE(structured.ok());
  EXPECT_EQ(structured.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(structured.status().message().find("dtype '[('a', '<f4'), ('b]', '<i4', (2,))]' in s.npy"),
            std::string::npos)
      << structured.status().ToString();
}

TEST(Npy, ErrorNamesFileOffsetAndExpectation) {
  Result<NpyHeader> header = ParseNpyHeader(
      AsBytes(NpyImage("{'descr': '<f4'x 'fortran_order': False, 'shape': (2,), }")), "volume_000001.npy");
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(header.status().message(),
            "volume_000001.npy: offset 25: npy header: expected ',' or '}' after value, found 'x'");
}

TEST(Npy, RejectsMalformedHeaders) {
  const struct {
    std::string_view dict;
    std::string_view message;
  } kCases[] = {
      {"{'descr': '<f4', 'fortran_order': False, }", "missing key 'shape'"},
      {"{'descr': '<f4', 'shape': (1,), }", "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", "expected True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (5), }", "expected ',' after the only dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [5], }", "expected '(' starting the 'shape' tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
       "expected a non-negative integer dimension, found '-'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3 4), }", "expected ',' or ')' in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.5,), }",
       "expected ',' after the only dimension (a 1-tuple is written (n,)), found '.'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "dimension does not fit in int64"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "more bytes than fit in int64"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }",
       "more bytes than fit in int64"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }", "expected ',' or '}' after value, found 'f'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), '", "unterminated string"},
      {"{'descr': <f4, 'fortran_order': False, 'shape': (1,), }", "expected a dtype string for 'descr', found '<'"},
      {"{'descr': [('a', '<f4'), 'fortran_order': False, 'shape': (1,), }", "expected a closing bracket in 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x",
       "expected only space padding after the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", "expected a quoted key or '}', found end of header"},
      {"{'descr': '<f4',, 'fortran_order': False, 'shape': (1,)}", "expected a quoted key or '}', found ','"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "expected ':' after key"},
      {"'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "expected '{' starting the header dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\x01", "found byte 0x01"},
      {"", "expected '{' starting the header dict, found end of header"},
  };
  for (const auto& c : kCases) {
    Result<NpyHeader> header = ParseNpyHeader(AsBytes(NpyImage(c.dict)), "m.npy");
    ASSERT_FALSE(header.ok()) << c.dict;
    EXPECT_EQ(header.status().code(), StatusCode::kCorruption) << header.status().ToString();
    EXPECT_NE(header.status().message().find(c.message), std::string::npos) << header.status().ToString();
    EXPECT_TRUE(header.status().message().starts_with("m.npy: offset ")) << header.status().ToString();
  }
}

TEST(Npy, RejectsMoreThan64Dimensions) {
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 65; ++i) dict += "1, ";
  dict += "), }";
  Result<NpyHeader> header = ParseNpyHeader(AsBytes(NpyImage(dict)), "d.npy");
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), StatusCode::kCorruption);
  EXPECT_NE(header.status().message().find("65 dimensions"), std::string::npos) << header.status().ToString();
}

TEST(Npy, RejectsTruncatedData) {
  const std::string image = kNumpyFloat32x2x3Header + Bytes<float>({1, 2, 3, 4, 5});
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "t.npy");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(array.status().message(),
            "t.npy: offset 128: expected 24 bytes of float32 data for shape (2, 3), found 20");
}

TEST(Npy, RejectsTrailingData) {
  const std::string image = kNumpyFloat32x2x3Header + Bytes<float>({1, 2, 3, 4, 5, 6, 7});
  Result<NpyArray> array = DecodeNpy(AsBytes(image), "t.npy");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), StatusCode::kCorruption);
  EXPECT_NE(array.status().message().find("found 28 (trailing bytes)"), std::string::npos) << array.status().ToString();
}

TEST(Npy, RejectsHeaderLengthPastBuffer) {
  std::string v1 = kNumpyFloat32x2x3Header;
  v1[8] = '\x80';  // header length 0x0080 + 10 > 128
  Result<NpyHeader> header = ParseNpyHeader(AsBytes(v1), "h.npy");
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), StatusCode::kCorruption);
  EXPECT_NE(header.status().message().find("h.npy: offset 8: header length says the data starts at offset 138"),
            std::string::npos)
      << header.status().ToString();

  const std::string v2 = std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
  Result<NpyArray> array = DecodeNpy(AsBytes(v2), "h2.npy");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), StatusCode::kCorruption);
  EXPECT_NE(array.status().message().find("offset 4294967307"), std::string::npos) << array.status().ToString();
}

TEST(Npy, RejectsBadMagicAndUnknownVersion) {
  std::string image = kNumpyFloat32x2x3Header + Bytes<float>({1, 2, 3, 4, 5, 6});
  std::string bad_magic = image;
  bad_magic[1] = 'n';
  Result<NpyArray> array = DecodeNpy(AsBytes(bad_magic), "b.npy");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(array.status().message(),
            "b.npy: offset 0: expected the npy magic \"\\x93NUMPY\", found 93 6e 55 4d 50 59");

  for (auto [major, minor] : {std::pair{4, 0}, std::pair{0, 0}, std::pair{1, 1}}) {
    std::string version = image;
    version[6] = static_cast<char>(major);
    version[7] = static_cast<char>(minor);
    array = DecodeNpy(AsBytes(version), "v.npy");
    ASSERT_FALSE(array.ok());
    EXPECT_EQ(array.status().code(), StatusCode::kUnsupported) << array.status().ToString();
    EXPECT_NE(array.status().message().find(fmt::format("version {}.{}", major, minor)), std::string::npos);
  }
}

TEST(Npy, RejectsEveryTruncation) {
  const std::string image =
      NpyImage("{'descr': '<u2', 'fortran_order': True, 'shape': (2, 2), }", Bytes<uint16_t>({1, 2, 3, 4}));
  const size_t data_offset = ParseNpyHeader(AsBytes(image), "p.npy")->data_offset;
  for (size_t length = 0; length < image.size(); ++length) {
    const ByteView prefix = AsBytes(std::string_view(image).substr(0, length));
    Result<NpyArray> array = DecodeNpy(prefix, "p.npy");
    ASSERT_FALSE(array.ok()) << length;
    EXPECT_EQ(array.status().code(), StatusCode::kCorruption) << array.status().ToString();
    EXPECT_EQ(ParseNpyHeader(prefix, "p.npy").ok(), length >= data_offset) << length;
  }
  EXPECT_TRUE(DecodeNpy(AsBytes(image), "p.npy").ok());
}

TEST_F(NpyFileTest, WriteRejectsDataThatDoesNotMatchTheShape) {
  const int64_t shape[] = {2, 3};
  Status status = WriteNpyFile(LocalStorage(), Path("w.npy"), DType::kFloat32, shape, AsBytes(Bytes<float>({1, 2})));
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("8 bytes of data for a float32 array of shape (2, 3), expected 24"),
            std::string::npos)
      << status.ToString();
  const int64_t negative[] = {-1};
  EXPECT_EQ(WriteNpyFile(LocalStorage(), Path("w.npy"), DType::kInt8, negative, {}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(Path("w.npy")));
}

TEST_F(NpyFileTest, ReadFileHandlesHeaderLongerThanTheFirstRead) {
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  dict.append(10000, ' ');
  const std::string image = NpyImage(dict, Bytes<int32_t>({-7, 9}));
  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("long.npy"), AsBytes(image)).ok());
  Result<NpyArray> array = ReadNpyFile(LocalStorage(), Path("long.npy"));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ(Values<int32_t>(*array), (std::vector<int32_t>{-7, 9}));

  ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("cut.npy"), AsBytes(image.substr(0, 6000))).ok());
  array = ReadNpyFile(LocalStorage(), Path("cut.npy"));
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), StatusCode::kCorruption);
  EXPECT_NE(array.status().message().find("past the end of the 6000 bytes present"), std::string::npos)
      << array.status().ToString();
}

TEST_F(NpyFileTest, ReadFileRejectsTruncatedFilesAndReportsMissingOnes) {
  EXPECT_EQ(ReadNpyFile(LocalStorage(), Path("missing.npy")).status().code(), StatusCode::kNotFound);
  const std::string image = kNumpyFloat32x2x3Header + Bytes<float>({1, 2, 3, 4, 5, 6});
  for (size_t length : {size_t{0}, size_t{9}, size_t{100}, size_t{130}}) {
    ASSERT_TRUE(WriteFileAtomically(LocalStorage(), Path("cut.npy"), AsBytes(image.substr(0, length))).ok());
    Result<NpyArray> array = ReadNpyFile(LocalStorage(), Path("cut.npy"));
    ASSERT_FALSE(array.ok()) << length;
    EXPECT_EQ(array.status().code(), StatusCode::kCorruption) << array.status().ToString();
    EXPECT_NE(array.status().message().find(Path("cut.npy")), std::string::npos);
  }
}

}  // namespace
}  // namespace stoke
