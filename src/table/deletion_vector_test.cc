#include "table/deletion_vector.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/random.h"
#include "format/codec.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;

// The protocol's "JSON Example 3": rows 3, 4, 7, 11, 18, 29 in the native layout written
// big-endian, and the same rows in the portable layout, as delta-spark and delta-kernel-rs read them.
constexpr std::string_view kProtocolInlineExample = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L";
constexpr std::string_view kPortableInlineExample = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L";
const std::vector<uint64_t> kExampleRows = {3, 4, 7, 11, 18, 29};

// Little-endian bytes built by hand, for bitmaps the encoder would not write.
class Bytes {
 public:
  Bytes& U16(uint16_t v) { return Put(v, 2); }
  Bytes& U32(uint32_t v) { return Put(v, 4); }
  Bytes& U64(uint64_t v) { return Put(v, 8); }
  Bytes& Raw(std::string_view s) {
    s_ += s;
    return *this;
  }
  const std::string& str() const { return s_; }
  ByteView view() const { return AsBytes(s_); }

 private:
  Bytes& Put(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
    return *this;
  }
  std::string s_;
};

// A 32-bit bitmap without run containers: cookie, count, keys/cardinalities, offsets, array bodies.
std::string Roaring32Arrays(const std::vector<std::pair<uint16_t, std::vector<uint16_t>>>& containers) {
  Bytes b;
  b.U32(12346).U32(static_cast<uint32_t>(containers.size()));
  for (const auto& [key, values] : containers) b.U16(key).U16(static_cast<uint16_t>(values.size() - 1));
  uint32_t at = 8 + 8 * static_cast<uint32_t>(containers.size());
  for (const auto& c : containers) {
    b.U32(at);
    at += 2 * static_cast<uint32_t>(c.second.size());
  }
  for (const auto& c : containers) {
    for (uint16_t v : c.second) b.U16(v);
  }
  return b.str();
}

// The portable header of one bucket with key `key` holding `roaring32`.
std::string PortableOneBucket(uint32_t key, const std::string& roaring32) {
  return Bytes().U32(kRoaringBitmapArrayPortableMagic).U64(1).U32(key).Raw(roaring32).str();
}

std::string BigEndian32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// A DV file: the version byte, then each bitmap framed by its size and CRC.
std::string FramedFile(const std::vector<std::string>& bitmaps, uint8_t version = 1) {
  std::string file(1, static_cast<char>(version));
  for (const std::string& b : bitmaps)
    file += BigEndian32(static_cast<uint32_t>(b.size())) + b + BigEndian32(Crc32(AsBytes(b)));
  return file;
}

void WriteBytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The status of decoding `bytes`, which must fail.
Status DecodeError(const std::string& bytes) {
  auto r = DecodeRoaringBitmapArray(AsBytes(bytes), "bitmap");
  EXPECT_FALSE(r.ok()) << "decoded " << r->size() << " rows";
  return r.ok() ? Status::OK() : r.status();
}

#define EXPECT_CORRUPTION(status, text)                                                             \
  do {                                                                                              \
    const Status s_ = (status);                                                                     \
    EXPECT_EQ(s_.code(), StatusCode::kCorruption) << s_.ToString();                                 \
    EXPECT_NE(s_.message().find(text), std::string::npos) << s_.ToString() << " lacks: " << (text); \
  } while (false)

class DeletionVectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = std::filesystem::temp_directory_path() / "stoke_dv_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

// ---------------------------------------------------------------------------------------------
// Z85

TEST(Z85Test, MatchesTheRfcExample) {
  const std::string bytes("\x86\x4F\xD2\x6F\xB5\x59\xF7\x5B", 8);
  EXPECT_EQ(Z85Encode(bytes), "HelloWorld");
  auto decoded = Z85Decode("HelloWorld");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, bytes);
}

TEST(Z85Test, RoundTripsEveryByteValue) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  bytes += std::string(4, '\xFF');  // the largest group, "%nSc0"
  auto decoded = Z85Decode(Z85Encode(bytes));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, bytes);
  EXPECT_EQ(Z85Encode(std::string(4, '\xFF')), "%nSc0");
}

TEST(Z85Test, EncodePadsToWholeGroups) {
  EXPECT_EQ(Z85Encode(""), "");
  EXPECT_EQ(Z85Encode("abc"), Z85Encode(std::string("abc\0", 4)));
  EXPECT_EQ(Z85Encode("abcde").size(), 10u);
}

TEST(Z85Test, DecodeRejectsBadLengthCharactersAndOverflow) {
  EXPECT_CORRUPTION(Z85Decode("HelloWorl").status(), "9 characters");
  EXPECT_CORRUPTION(Z85Decode("Hello Worl").status(), "offset 5");
  EXPECT_CORRUPTION(Z85Decode("Hell~").status(), "offset 4");
  EXPECT_CORRUPTION(Z85Decode(std::string("Hel\0o", 5)).status(), "offset 3");
  EXPECT_CORRUPTION(Z85Decode("%nSc1").status(), "offset 0");  // 2^32
  EXPECT_CORRUPTION(Z85Decode("00000#####").status(), "offset 5");
}

// ---------------------------------------------------------------------------------------------
// Descriptors

TEST(DeletionVectorDescriptorTest, ParsesTheProtocolExamples) {
  auto u =
      ParseDeletionVectorDescriptor(json::parse(R"({"storageType" : "u", "pathOrInlineDv" : "ab^-aqEH.-t@S}K{vb[*k^",
                                                         "offset" : 4, "sizeInBytes" : 40, "cardinality" : 6})"),
                                    "example 1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->storage_type, 'u');
  EXPECT_EQ(u->offset, 4);
  EXPECT_EQ(u->size_in_bytes, 40);
  EXPECT_EQ(u->cardinality, 6);
  EXPECT_FALSE(u->max_row_index);
  EXPECT_EQ(u->UniqueId(), "uab^-aqEH.-t@S}K{vb[*k^@4");
  auto path = DeletionVectorFilePath(*u, "s3://mytable/");
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin");

  auto p = ParseDeletionVectorDescriptor(
      json::parse(R"({"storageType" : "p", "offset" : 4, "sizeInBytes" : 40, "cardinality" : 6,
                      "pathOrInlineDv" : "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"})"),
      "example 2");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*DeletionVectorFilePath(*p, "ignored"),
            "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin");

  auto i = ParseDeletionVectorDescriptor(
      json{{"storageType", "i"}, {"pathOrInlineDv", kProtocolInlineExample}, {"sizeInBytes", 40}, {"cardinality", 6}},
      "example 3");
  ASSERT_TRUE(i.ok()) << i.status().ToString();
  EXPECT_FALSE(i->offset);
  EXPECT_EQ(i->UniqueId(), "i" + std::string(kProtocolInlineExample));
  EXPECT_EQ(DeletionVectorFilePath(*i, "t").status().code(), StatusCode::kInvalidArgument);
}

TEST(DeletionVectorDescriptorTest, SerializesInSparksFieldOrder) {
  const std::string line =
      R"({"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","offset":1,"sizeInBytes":36,"cardinality":2})";
  auto dv = ParseDeletionVectorDescriptor(json::parse(line), "corpus");
  ASSERT_TRUE(dv.ok()) << dv.status().ToString();
  EXPECT_EQ(DeletionVectorDescriptorJson(*dv).dump(), line);
  dv->offset.reset();
  dv->max_row_index = 99;
  EXPECT_EQ(
      DeletionVectorDescriptorJson(*dv).dump(),
      R"({"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","sizeInBytes":36,"cardinality":2,"maxRowIndex":99})");
  auto again = ParseDeletionVectorDescriptor(json::parse(DeletionVectorDescriptorJson(*dv).dump()), "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->max_row_index, 99);
  EXPECT_FALSE(again->offset);
}

TEST(DeletionVectorDescriptorTest, AcceptsACheckpointRowWithNullsAndUnknownFields) {
  auto dv = ParseDeletionVectorDescriptor(
      json::parse(R"({"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","offset":null,"sizeInBytes":36,
                      "cardinality":2,"maxRowIndex":null,"futureField":{"x":1}})"),
      "checkpoint row 3");
  ASSERT_TRUE(dv.ok()) << dv.status().ToString();
  EXPECT_FALSE(dv->offset);
  EXPECT_FALSE(dv->max_row_index);
  EXPECT_EQ(dv->UniqueId(), "uvBn[lx{q8@P<9BNH/isA");
}

TEST(DeletionVectorDescriptorTest, RejectsEachMalformedField) {
  const std::string uuid = "vBn[lx{q8@P<9BNH/isA";
  auto with = [&](const std::string& key, json value) {
    json j = {{"storageType", "u"}, {"pathOrInlineDv", uuid}, {"offset", 1}, {"sizeInBytes", 36}, {"cardinality", 2}};
    if (value.is_discarded()) {
      j.erase(key);
    } else {
      j[key] = value;
    }
    return j;
  };
  const json kMissing = json(json::value_t::discarded);
  const std::vector<std::pair<json, std::string>> cases = {
      {with("storageType", kMissing), "\"storageType\" is missing"},
      {with("storageType", 5), "\"storageType\" must be a string"},
      {with("storageType", "x"), "\"storageType\" is \"x\""},
      {with("storageType", "uu"), "\"storageType\" is \"uu\""},
      {with("pathOrInlineDv", kMissing), "\"pathOrInlineDv\" is missing"},
      {with("pathOrInlineDv", 3), "\"pathOrInlineDv\" must be a string"},
      {with("pathOrInlineDv", "short"), "\"pathOrInlineDv\" 'short' is shorter"},
      {with("pathOrInlineDv", "vBn[lx{q8@P<9BNH/is~"), "\"pathOrInlineDv\" UUID of"},
      {with("pathOrInlineDv", ".." + uuid), "random prefix '..'"},
      {with("pathOrInlineDv", "a/b" + uuid), "random prefix 'a/b'"},
      {with("offset", "1"), "\"offset\" must be an integer in [0, 2147483647]"},
      {with("offset", -1), "\"offset\" must be an integer"},
      {with("offset", 2147483648LL), "\"offset\" must be an integer"},
      {with("sizeInBytes", kMissing), "\"sizeInBytes\" is missing"},
      {with("sizeInBytes", 1.5), "\"sizeInBytes\" must be an integer"},
      {with("cardinality", kMissing), "\"cardinality\" is missing"},
      {with("cardinality", -2), "\"cardinality\" must be an integer"},
      {with("cardinality", 18446744073709551615ULL), "\"cardinality\" must be an integer"},
      {with("maxRowIndex", "x"), "\"maxRowIndex\" must be an integer"},
      {json{{"storageType", "i"},
            {"pathOrInlineDv", kPortableInlineExample},
            {"offset", 1},
            {"sizeInBytes", 44},
            {"cardinality", 6}},
       "\"offset\" must be absent"},
      {json{{"storageType", "i"}, {"pathOrInlineDv", "abcd"}, {"sizeInBytes", 4}, {"cardinality", 6}},
       "no multiple of 5"},
      {json{{"storageType", "i"}, {"pathOrInlineDv", kPortableInlineExample}, {"sizeInBytes", 40}, {"cardinality", 6}},
       "\"sizeInBytes\" is 40, but the inline DV's 55 characters hold 44 bytes"},
      {json{{"storageType", "p"}, {"pathOrInlineDv", ""}, {"sizeInBytes", 4}, {"cardinality", 6}},
       "\"pathOrInlineDv\" is empty"},
  };
  for (const auto& [j, text] : cases) {
    auto r = ParseDeletionVectorDescriptor(j, "log 7 line 2");
    ASSERT_FALSE(r.ok()) << j.dump();
    EXPECT_CORRUPTION(r.status(), text);
    EXPECT_NE(r.status().message().find("log 7 line 2"), std::string::npos) << r.status().ToString();
  }
  EXPECT_CORRUPTION(ParseDeletionVectorDescriptor(json::array(), "ctx").status(),
                    "ctx: deletionVector must be an object");
}

TEST(DeletionVectorDescriptorTest, FilePathsOfRelativeAndAbsoluteDvs) {
  DeletionVectorDescriptor dv;
  dv.path_or_inline_dv = "vBn[lx{q8@P<9BNH/isA";
  EXPECT_EQ(*DeletionVectorFilePath(dv, "/t"), "/t/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin");
  EXPECT_EQ(*DeletionVectorFilePath(dv, ""), "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin");
  dv.path_or_inline_dv = "x7" + dv.path_or_inline_dv;
  EXPECT_EQ(*DeletionVectorFilePath(dv, "/t/"), "/t/x7/deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin");

  dv.storage_type = kDvStorageAbsolutePath;
  const std::vector<std::pair<std::string, std::string>> local = {
      {"/data/dv.bin", "/data/dv.bin"},
      {"file:/data/dv.bin", "/data/dv.bin"},
      {"file:///data/dv.bin", "/data/dv.bin"},
      {"file://localhost/data/dv.bin", "/data/dv.bin"},
      {"/data/a%20b.bin", "/data/a b.bin"},
      {"abfss://c@a.dfs.core.windows.net/t/dv.bin", "abfss://c@a.dfs.core.windows.net/t/dv.bin"},
  };
  for (const auto& [stored, expected] : local) {
    dv.path_or_inline_dv = stored;
    auto path = DeletionVectorFilePath(dv, "/ignored");
    ASSERT_TRUE(path.ok()) << stored << ": " << path.status().ToString();
    EXPECT_EQ(*path, expected);
  }
  for (const std::string stored :
       {"file://otherhost/data/dv.bin", "data/dv.bin", "file:data/dv.bin", "/data/%zz.bin"}) {
    dv.path_or_inline_dv = stored;
    EXPECT_EQ(DeletionVectorFilePath(dv, "/t").status().code(), StatusCode::kCorruption) << stored;
  }
}

// ---------------------------------------------------------------------------------------------
// RoaringBitmapArray

void ExpectRoundTrip(const std::vector<uint64_t>& rows) {
  const std::string bytes = EncodeRoaringBitmapArray(rows);
  auto decoded = DecodeRoaringBitmapArray(AsBytes(bytes), "round trip");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(*decoded, rows);
}

TEST(RoaringBitmapArrayTest, RoundTripsSparseDenseRunAndMultiBucketSets) {
  ExpectRoundTrip({});
  ExpectRoundTrip({0});
  ExpectRoundTrip(kExampleRows);
  std::vector<uint64_t> dense(100000);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = i;
  ExpectRoundTrip(dense);  // run containers
  std::vector<uint64_t> every_other;
  for (uint64_t i = 0; i < 300000; i += 2) every_other.push_back(i);
  ExpectRoundTrip(every_other);  // bitmap containers
  ExpectRoundTrip({1, 65535, 65536, (uint64_t{1} << 32) - 1, uint64_t{1} << 32, (uint64_t{1} << 32) + 5,
                   uint64_t{1} << 40, (uint64_t{1} << 62) + 1, (uint64_t{1} << 63) - 1});
  Rng rng(7);
  std::vector<uint64_t> mixed;  // arrays, bitmaps and runs in one bitmap: the offset header with runs
  for (uint64_t key = 0; key < 9; ++key) {
    for (uint64_t low = 0; low < 65536; ++low) {
      const bool keep = key % 3 == 0 ? rng.Below(1000) == 0 : key % 3 == 1 ? rng.Below(2) == 0 : low < 30000;
      if (keep) mixed.push_back((key << 16) | low);
    }
  }
  ExpectRoundTrip(mixed);
}

TEST(RoaringBitmapArrayTest, EncoderMatchesDeltaSparksBytesForTheProtocolRows) {
  const std::string bytes = EncodeRoaringBitmapArray(kExampleRows);
  EXPECT_EQ(bytes.size(), 44u);
  EXPECT_EQ(Z85Encode(bytes), kPortableInlineExample);
  EXPECT_EQ(EncodeRoaringBitmapArray({29, 3, 4, 4, 7, 18, 11}), bytes);  // sorted and deduplicated first
}

TEST(RoaringBitmapArrayTest, RefusesTheProtocolsBigEndianInlineExample) {
  auto bytes = Z85Decode(kProtocolInlineExample);
  ASSERT_TRUE(bytes.ok());
  ASSERT_EQ(bytes->size(), 40u);
  EXPECT_CORRUPTION(DecodeError(*bytes), "bitmap: byte 0: magic number");
}

TEST(RoaringBitmapArrayTest, ReadsEmptyBucketsAndTheNativeLayout) {
  // delta-spark writes an empty bitmap for every key below the largest.
  const std::string empty32 = Bytes().U32(12346).U32(0).str();
  const std::string five = Roaring32Arrays({{0, {5}}});
  const std::string portable =
      Bytes().U32(kRoaringBitmapArrayPortableMagic).U64(2).U32(0).Raw(empty32).U32(1).Raw(five).str();
  auto rows = DecodeRoaringBitmapArray(AsBytes(portable), "gaps");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, std::vector<uint64_t>({(uint64_t{1} << 32) + 5}));

  const std::string one_two = Roaring32Arrays({{0, {1, 2}}}), seven = Roaring32Arrays({{1, {7}}});
  const std::string native = Bytes()
                                 .U32(kRoaringBitmapArrayNativeMagic)
                                 .U32(3)
                                 .U32(static_cast<uint32_t>(one_two.size()))
                                 .Raw(one_two)
                                 .U32(static_cast<uint32_t>(empty32.size()))
                                 .Raw(empty32)
                                 .U32(static_cast<uint32_t>(seven.size()))
                                 .Raw(seven)
                                 .str();
  rows = DecodeRoaringBitmapArray(AsBytes(native), "native");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, std::vector<uint64_t>({1, 2, (uint64_t{2} << 32) | 65543}));
}

TEST(RoaringBitmapArrayTest, RejectsMalformedHeaders) {
  EXPECT_CORRUPTION(DecodeError(""), "bitmap: byte 0: the RoaringBitmapArray magic number needs 4 bytes, 0 are left");
  EXPECT_CORRUPTION(DecodeError(Bytes().U32(1681511378).U64(0).str()), "magic number 1681511378");
  EXPECT_CORRUPTION(DecodeError(Bytes().U32(kRoaringBitmapArrayPortableMagic).str()),
                    "byte 4: the bucket count needs 8 bytes");
  EXPECT_CORRUPTION(
      DecodeError(
          Bytes().U32(kRoaringBitmapArrayPortableMagic).U64(uint64_t{1} << 60).Raw(std::string(100, '\0')).str()),
      "byte 4: 1152921504606846976 buckets cannot fit in the 100 bytes left");
  const std::string empty32 = Bytes().U32(12346).U32(0).str();
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0x80000000u, empty32)),
                    "byte 12: bucket key 0x80000000 has its top bit set");
  EXPECT_CORRUPTION(DecodeError(EncodeRoaringBitmapArray({uint64_t{1} << 63})), "top bit set");
  EXPECT_CORRUPTION(
      DecodeError(Bytes().U32(kRoaringBitmapArrayPortableMagic).U64(2).U32(3).Raw(empty32).U32(3).Raw(empty32).str()),
      "byte 24: bucket key 3 does not follow 3");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Bytes().U32(12345).U32(0).str())), "byte 16: cookie 0x00003039");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Bytes().U32(12346).U32(70000).Raw(std::string(16, '\0')).str())),
                    "byte 20: 70000 containers");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Bytes().U32(12346).U32(2).U32(0).str())),
                    "byte 24: the keys and cardinalities of 2 containers needs 8 bytes, 4 are left");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Bytes().U32(12346).U32(1).U16(0).U16(0).str())),
                    "the offsets of 1 containers needs 4 bytes");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Bytes().U32(0xFFFF0000u | 12347).U32(0).str())),
                    "byte 20: the run-container flags needs 8192 bytes, 4 are left");
  const std::string trailing = EncodeRoaringBitmapArray(kExampleRows) + "x";
  EXPECT_CORRUPTION(DecodeError(trailing), "byte 44: 1 bytes follow the last bitmap");
}

TEST(RoaringBitmapArrayTest, RejectsContainersThatDisagreeWithTheirHeaders) {
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Roaring32Arrays({{2, {1}}, {1, {1}}}))),
                    "byte 28: container key 1 does not follow 2");
  std::string bad_offset = Roaring32Arrays({{0, {1}}, {1, {1}}});
  bad_offset[20] = 2;  // the second container's offset entry (cookie 4, count 4, keys 8, first offset 4)
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, bad_offset)),
                    "byte 36: container 1 is at offset 26 of its bitmap, the offset header says 2");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Roaring32Arrays({{0, {1, 5, 5}}}))),
                    "array container value 5 does not follow 5");
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, Roaring32Arrays({{0, {9, 5}}}))),
                    "array container value 5 does not follow 9");
  std::string truncated = PortableOneBucket(0, Roaring32Arrays({{0, {1, 2, 3}}}));
  truncated.resize(truncated.size() - 1);
  EXPECT_CORRUPTION(DecodeError(truncated), "an array container of 3 values needs 6 bytes, 5 are left");

  // A bitmap container claiming 5000 values with 4999 bits set.
  std::string bits(8192, '\0');
  for (int i = 0; i < 4999; ++i) bits[i / 8] = static_cast<char>(bits[i / 8] | (1 << (i % 8)));
  const std::string bitmap32 = Bytes().U32(12346).U32(1).U16(0).U16(4999).U32(16).Raw(bits).str();
  EXPECT_CORRUPTION(DecodeError(PortableOneBucket(0, bitmap32)),
                    "byte 32: bitmap container has 4999 bits set, its header says 5000");
  std::string short_bitmap = PortableOneBucket(0, bitmap32);
  short_bitmap.resize(short_bitmap.size() - 100);
  EXPECT_CORRUPTION(DecodeError(short_bitmap), "a bitmap container needs 8192 bytes");

  // Run containers: cookie 12347 with one container (no offset header), flag byte 1.
  auto runs = [](uint16_t card_minus_1, std::vector<std::pair<uint16_t, uint16_t>> pairs) {
    Bytes b;
    b.U32(12347).Raw(std::string(1, '\1')).U16(0).U16(card_minus_1).U16(static_cast<uint16_t>(pairs.size()));
    for (auto [start, len] : pairs) b.U16(start).U16(len);
    return PortableOneBucket(0, b.str());
  };
  auto ok = DecodeRoaringBitmapArray(AsBytes(runs(4, {{3, 1}, {10, 2}})), "runs");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, std::vector<uint64_t>({3, 4, 10, 11, 12}));
  EXPECT_CORRUPTION(DecodeError(runs(9, {{65530, 9}})), "byte 27: run 0 from 65530 to 65539 passes 65535");
  EXPECT_CORRUPTION(DecodeError(runs(5, {{3, 2}, {5, 1}})), "run 1 starts at 5, not after the previous run's end 5");
  EXPECT_CORRUPTION(DecodeError(runs(5, {{10, 2}, {3, 1}})), "run 1 starts at 3");
  EXPECT_CORRUPTION(DecodeError(runs(7, {{3, 1}, {10, 2}})), "run container holds 5 values, its header says 8");
  EXPECT_CORRUPTION(DecodeError(runs(0, {})), "run container holds 0 values, its header says 1");
  std::string cut = runs(4, {{3, 1}, {10, 2}});
  cut.resize(cut.size() - 2);
  EXPECT_CORRUPTION(DecodeError(cut), "a run container of 2 runs needs 8 bytes, 6 are left");
}

TEST(RoaringBitmapArrayTest, RejectsNativeLengthsThatDisagree) {
  const std::string one = Roaring32Arrays({{0, {1}}});
  auto native = [&](uint32_t count, uint32_t length) {
    return Bytes().U32(kRoaringBitmapArrayNativeMagic).U32(count).U32(length).Raw(one).str();
  };
  EXPECT_CORRUPTION(DecodeError(native(0xFFFFFFFF, static_cast<uint32_t>(one.size()))),
                    "byte 4: 4294967295 bitmaps cannot fit");
  EXPECT_CORRUPTION(DecodeError(native(1, static_cast<uint32_t>(one.size()) + 2)),
                    "bitmap 0 needs 20 bytes, 18 are left");
  const std::string longer = Bytes().U32(kRoaringBitmapArrayNativeMagic).U32(1).U32(20).Raw(one).U16(0).str();
  EXPECT_CORRUPTION(DecodeError(longer), "byte 8: bitmap 0 takes 18 bytes, its length says 20");
  EXPECT_CORRUPTION(DecodeError(native(1, 10)), "the keys and cardinalities of 1 containers needs 4 bytes, 2 are left");
}

TEST(RoaringBitmapArrayTest, EveryTruncationAndByteFlipFailsCleanlyOrDecodesSortedRows) {
  std::vector<uint64_t> rows = {1, 2, 3, 70000, 70002, uint64_t{5} << 32};
  for (uint64_t i = 0; i < 5000; ++i) rows.push_back((uint64_t{5} << 32) + 65536 + 2 * i);  // a bitmap container
  std::sort(rows.begin(), rows.end());
  const std::string bytes = EncodeRoaringBitmapArray(rows);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = DecodeRoaringBitmapArray(AsBytes(bytes).first(n), "cut");
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  }
  for (size_t at = 0; at < bytes.size(); at += (at < 200 ? 1 : 97)) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[at] = static_cast<char>(flipped[at] ^ (1 << bit));
      auto r = DecodeRoaringBitmapArray(AsBytes(flipped), "flip");
      if (r.ok()) {
        EXPECT_TRUE(std::adjacent_find(r->begin(), r->end(), std::greater_equal<uint64_t>()) == r->end())
            << at << " " << bit;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// DV files and inline DVs

TEST_F(DeletionVectorTest, WritesAndReadsFilesWithAndWithoutPrefix) {
  std::vector<uint64_t> rows = {0, 9, 10, 11, 12, 100000, uint64_t{3} << 32};
  for (const std::string prefix : {"", "ab"}) {
    auto dv = WriteDeletionVectorFile(LocalStorage(), dir_, rows, prefix);
    ASSERT_TRUE(dv.ok()) << dv.status().ToString();
    EXPECT_EQ(dv->storage_type, 'u');
    EXPECT_EQ(dv->path_or_inline_dv.size(), prefix.size() + 20);
    EXPECT_EQ(dv->offset, 1);
    EXPECT_EQ(dv->cardinality, 7);
    const std::string path = *DeletionVectorFilePath(*dv, dir_);
    EXPECT_EQ(path.rfind(prefix.empty() ? dir_ + "/deletion_vector_" : dir_ + "/ab/deletion_vector_", 0), 0u) << path;
    const std::string file = ReadBytes(path);
    ASSERT_EQ(file.size(), 1 + 4 + static_cast<size_t>(dv->size_in_bytes) + 4);
    EXPECT_EQ(file[0], '\1');
    EXPECT_EQ(file.substr(1, 4), BigEndian32(dv->size_in_bytes));
    auto read = ReadDeletionVector(LocalStorage(), dir_, *dv);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, rows);
  }
  EXPECT_EQ(WriteDeletionVectorFile(LocalStorage(), dir_, {3, 2}, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteDeletionVectorFile(LocalStorage(), dir_, {2, 2}, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteDeletionVectorFile(LocalStorage(), dir_, {uint64_t{1} << 63}, "").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteDeletionVectorFile(LocalStorage(), dir_, {1}, "a/b").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteDeletionVectorFile(LocalStorage(), dir_, {1}, "..").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(DeletionVectorTest, WritesSeveralDvsIntoOneFileAtTheirOffsets) {
  const std::vector<std::vector<uint64_t>> dvs = {{1, 2}, {}, kExampleRows, {7}};
  auto written = WriteDeletionVectorsFile(LocalStorage(), dir_, dvs, "xy");
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  ASSERT_EQ(written->size(), dvs.size());
  int32_t offset = 1;
  for (size_t i = 0; i < dvs.size(); ++i) {
    const DeletionVectorDescriptor& dv = (*written)[i];
    EXPECT_EQ(dv.path_or_inline_dv, written->front().path_or_inline_dv);  // one file
    EXPECT_EQ(dv.offset, offset);
    EXPECT_EQ(dv.cardinality, static_cast<int64_t>(dvs[i].size()));
    offset += 4 + dv.size_in_bytes + 4;
    auto rows = ReadDeletionVector(LocalStorage(), dir_, dv);
    ASSERT_TRUE(rows.ok()) << rows.status().ToString();
    EXPECT_EQ(*rows, dvs[i]);
  }
  EXPECT_EQ(ReadBytes(*DeletionVectorFilePath(written->front(), dir_)).size(), static_cast<size_t>(offset));
  EXPECT_EQ(WriteDeletionVectorsFile(LocalStorage(), dir_, {{1}, {3, 2}}, "").status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(DeletionVectorTest, ReadsSeveralDvsOfOneFileByAbsolutePath) {
  const std::string a = EncodeRoaringBitmapArray({1, 2}), b = EncodeRoaringBitmapArray(kExampleRows);
  const std::string path = dir_ + "/two dvs.bin";
  WriteBytes(path, FramedFile({a, b}));
  DeletionVectorDescriptor dv;
  dv.storage_type = kDvStorageAbsolutePath;
  dv.path_or_inline_dv = "file:" + dir_ + "/two%20dvs.bin";
  dv.offset = static_cast<int32_t>(1 + 4 + a.size() + 4);
  dv.size_in_bytes = static_cast<int32_t>(b.size());
  dv.cardinality = 6;
  auto rows = ReadDeletionVector(LocalStorage(), "/elsewhere", dv);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, kExampleRows);
  dv.offset.reset();  // absent: the first DV, right after the version byte
  dv.size_in_bytes = static_cast<int32_t>(a.size());
  dv.cardinality = 2;
  rows = ReadDeletionVector(LocalStorage(), "/elsewhere", dv);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, std::vector<uint64_t>({1, 2}));
  dv.offset = 5000;  // past the end: read with a separate version byte read, then refused
  EXPECT_CORRUPTION(ReadDeletionVector(LocalStorage(), "/", dv).status(), "past the file's");
  dv.path_or_inline_dv = "s3://bucket/dv.bin";
  EXPECT_EQ(ReadDeletionVector(LocalStorage(), "/", dv).status().code(), StatusCode::kUnsupported);
}

TEST_F(DeletionVectorTest, ReadsADvFarIntoItsFile) {
  const std::string bitmap = EncodeRoaringBitmapArray({42});
  std::string file =
      FramedFile({std::string(6000, 'x')}) + BigEndian32(bitmap.size()) + bitmap + BigEndian32(Crc32(AsBytes(bitmap)));
  WriteBytes(dir_ + "/far.bin", file);
  DeletionVectorDescriptor dv;
  dv.storage_type = kDvStorageAbsolutePath;
  dv.path_or_inline_dv = dir_ + "/far.bin";
  dv.offset = 1 + 4 + 6000 + 4;
  dv.size_in_bytes = static_cast<int32_t>(bitmap.size());
  dv.cardinality = 1;
  auto rows = ReadDeletionVector(LocalStorage(), "", dv);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*rows, std::vector<uint64_t>({42}));
  file[0] = 2;
  WriteBytes(dir_ + "/far.bin", file);
  EXPECT_EQ(ReadDeletionVector(LocalStorage(), "", dv).status().code(), StatusCode::kUnsupported);
}

TEST_F(DeletionVectorTest, RejectsFramingCrcAndCardinalityMismatches) {
  auto dv = WriteDeletionVectorFile(LocalStorage(), dir_, kExampleRows, "");
  ASSERT_TRUE(dv.ok()) << dv.status().ToString();
  const std::string path = *DeletionVectorFilePath(*dv, dir_);
  const std::string good = ReadBytes(path);
  auto read_with = [&](const std::string& bytes, DeletionVectorDescriptor d) {
    WriteBytes(path, bytes);
    return ReadDeletionVector(LocalStorage(), dir_, d).status();
  };
  std::string bad = good;
  bad[0] = 0;
  EXPECT_CORRUPTION(read_with(bad, *dv), path + ": byte 0: DV file version 0, expected 1");
  bad = good;
  bad[4] = static_cast<char>(bad[4] + 1);
  EXPECT_CORRUPTION(read_with(bad, *dv), path + ": byte 1: the DV's stored size is 45, its sizeInBytes 44");
  bad = good;
  bad[1 + 4 + 30] ^= 1;
  EXPECT_CORRUPTION(read_with(bad, *dv), path + ": byte 49: the DV's stored CRC-32");
  // A damaged cookie under a matching CRC: the decoder names the byte of the file.
  std::string bitmap = good.substr(5, 44);
  bitmap[16] = 0;
  EXPECT_CORRUPTION(read_with(FramedFile({bitmap}), *dv), path + ": byte 21: cookie");
  DeletionVectorDescriptor d = *dv;
  d.cardinality = 7;
  EXPECT_CORRUPTION(read_with(good, d), path + ": DV at byte 1: the DV holds 6 rows, its cardinality says 7");
  d = *dv;
  d.max_row_index = 28;
  EXPECT_CORRUPTION(read_with(good, d), "deletes row 29, past its maxRowIndex 28");
  d.max_row_index = 29;
  EXPECT_TRUE(read_with(good, d).ok());
  d = *dv;
  d.size_in_bytes = 100;
  EXPECT_CORRUPTION(read_with(good, d), "past the file's 53 bytes");
  d = *dv;
  d.offset = 0;
  EXPECT_CORRUPTION(read_with(good, d), "offset 0 is the file's version byte");
  std::filesystem::remove(path);
  EXPECT_EQ(ReadDeletionVector(LocalStorage(), dir_, *dv).status().code(), StatusCode::kNotFound);
}

TEST(InlineDeletionVectorTest, ReadsPaddedInlineBitmapsAndRefusesTheProtocolExample) {
  std::vector<uint64_t> rows;
  for (uint64_t r = 0; r < 10; ++r) rows.push_back(r);  // one run container: 31 bytes, padded to 32
  const std::string bitmap = EncodeRoaringBitmapArray(rows);
  ASSERT_NE(bitmap.size() % 4, 0u);
  DeletionVectorDescriptor dv;
  dv.storage_type = kDvStorageInline;
  dv.path_or_inline_dv = Z85Encode(bitmap);
  dv.size_in_bytes = static_cast<int32_t>(bitmap.size());
  dv.cardinality = 10;
  auto read = ReadDeletionVector(LocalStorage(), "unused", dv);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, rows);
  dv.size_in_bytes -= 4;
  EXPECT_CORRUPTION(ReadDeletionVector(LocalStorage(), "", dv).status(), "32 bytes of Z85 for sizeInBytes 27");

  dv.path_or_inline_dv = kPortableInlineExample;
  dv.size_in_bytes = 44;
  dv.cardinality = 6;
  read = ReadDeletionVector(LocalStorage(), "", dv);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, kExampleRows);
  dv.path_or_inline_dv = kProtocolInlineExample;
  dv.size_in_bytes = 40;
  EXPECT_CORRUPTION(ReadDeletionVector(LocalStorage(), "", dv).status(), "inline deletion vector 'wi5b=");
  dv.path_or_inline_dv = "Hello Worl";
  EXPECT_CORRUPTION(ReadDeletionVector(LocalStorage(), "", dv).status(), "offset 5");
}

// ---------------------------------------------------------------------------------------------
// Tables written by Spark and Databricks (delta-rs's test data, in the shared corpus).

const std::string kCorpus = STOKE_SOURCE_DIR "/../shared/corpus/delta-rs";

// Reads every DV that an add action of `table`'s JSON log refers to; returns them by uniqueId.
std::map<std::string, std::vector<uint64_t>> ReadCorpusDvs(const std::string& table) {
  std::map<std::string, std::vector<uint64_t>> out;
  std::vector<std::filesystem::path> commits;
  for (const auto& e : std::filesystem::directory_iterator(table + "/_delta_log")) {
    if (e.path().extension() == ".json") commits.push_back(e.path());
  }
  std::sort(commits.begin(), commits.end());
  for (const auto& commit : commits) {
    std::ifstream in(commit);
    std::string line;
    for (int line_no = 1; std::getline(in, line); ++line_no) {
      const json action = json::parse(line);
      const auto ordered = nlohmann::ordered_json::parse(line);
      if (!action.contains("add") || !action["add"].contains("deletionVector") ||
          action["add"]["deletionVector"].is_null())
        continue;
      const std::string context = fmt::format("{}:{}", commit.string(), line_no);
      auto dv = ParseDeletionVectorDescriptor(action["add"]["deletionVector"], context);
      EXPECT_TRUE(dv.ok()) << dv.status().ToString();
      if (!dv.ok()) continue;
      EXPECT_EQ(DeletionVectorDescriptorJson(*dv).dump(), ordered["add"]["deletionVector"].dump()) << context;
      auto rows = ReadDeletionVector(LocalStorage(), table, *dv);
      EXPECT_TRUE(rows.ok()) << context << ": " << rows.status().ToString();
      if (!rows.ok()) continue;
      EXPECT_EQ(rows->size(), static_cast<size_t>(dv->cardinality)) << context;
      EXPECT_TRUE(std::adjacent_find(rows->begin(), rows->end(), std::greater_equal<uint64_t>()) == rows->end())
          << context;
      if (action["add"].contains("stats")) {  // every deleted row is a row of the file
        const json stats = json::parse(action["add"]["stats"].get<std::string>());
        if (stats.contains("numRecords") && !rows->empty()) {
          EXPECT_LT(rows->back(), stats["numRecords"].get<uint64_t>()) << context;
        }
      }
      out[dv->UniqueId()] = *rows;
    }
  }
  return out;
}

TEST(DeletionVectorCorpusTest, ReadsEveryDvOfSparkAndDatabricksTables) {
  if (!std::filesystem::exists(kCorpus))
    GTEST_SKIP() << "no delta-rs corpus at " << kCorpus << "; corpus checks skipped";
  const auto small = ReadCorpusDvs(kCorpus + "/table-with-dv-small");
  ASSERT_EQ(small.size(), 1u);
  // The commit deleted "value IN (0, 9)" from a file of the values 0..9: its first and last rows.
  EXPECT_EQ(small.begin()->second, std::vector<uint64_t>({0, 9}));
  EXPECT_EQ(small.begin()->first, "uvBn[lx{q8@P<9BNH/isA@1");
  EXPECT_GE(ReadCorpusDvs(kCorpus + "/table_with_deletion_logs").size(), 2u);
  const auto cdf = ReadCorpusDvs(kCorpus + "/cdf-table-with-cdc-and-dvs");
  EXPECT_GE(cdf.size(), 8u);
  EXPECT_TRUE(cdf.count("uF0u+Uo^@EuVa@tFk))2D@43")) << "the second DV of a file of two";
}

}  // namespace
}  // namespace stoke::delta
