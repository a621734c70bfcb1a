#include "format/thrift_compact.h"

#include <gtest/gtest.h>

#include "format/parquet_metadata.h"

namespace stoke {
namespace {

using thrift::CompactReader;
using thrift::CompactWriter;

TEST(ThriftCompact, RoundTripsFieldsOfEveryKind) {
  std::string buf;
  CompactWriter w(&buf);
  w.BeginStruct();
  w.FieldI32(1, -5);
  w.FieldI64(2, int64_t{1} << 40);
  w.FieldBinary(3, "hello");
  w.FieldBool(4, true);
  w.FieldBool(5, false);
  w.FieldDouble(6, 2.5);
  w.FieldI16(40, -300);  // delta > 15: long-form field header
  w.BeginListField(41, thrift::kI64, 20);  // size >= 15: long-form list header
  for (int i = 0; i < 20; ++i) w.ElementI64(i * 1000);
  w.EndStruct();

  CompactReader r(AsBytes(buf), "test");
  int32_t a = 0;
  int64_t b = 0;
  std::string c;
  bool d = false, e = true;
  double f = 0;
  int16_t g = 0;
  std::vector<int64_t> list;
  ASSERT_TRUE(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
                 switch (id) {
                   case 1: return r.ReadI32(t, &a);
                   case 2: return r.ReadI64(t, &b);
                   case 3: return r.ReadBinary(t, &c);
                   case 4: return r.ReadBool(t, &d);
                   case 5: return r.ReadBool(t, &e);
                   case 6: return r.ReadDouble(t, &f);
                   case 40: return r.ReadI16(t, &g);
                   case 41: return r.ReadI64List(t, &list);
                   default: return r.Skip(t);
                 }
               }).ok());
  EXPECT_EQ(a, -5);
  EXPECT_EQ(b, int64_t{1} << 40);
  EXPECT_EQ(c, "hello");
  EXPECT_TRUE(d);
  EXPECT_FALSE(e);
  EXPECT_EQ(f, 2.5);
  EXPECT_EQ(g, -300);
  ASSERT_EQ(list.size(), 20u);
  EXPECT_EQ(list[19], 19000);
  EXPECT_EQ(r.position(), buf.size());
}

TEST(ThriftCompact, SkipsUnknownFieldsIncludingNestedOnes) {
  std::string buf;
  CompactWriter w(&buf);
  w.BeginStruct();
  w.BeginStructField(7);
  w.FieldBinary(1, "x");
  w.BeginListField(2, thrift::kBoolTrue, 3);
  w.ElementBool(true);
  w.ElementBool(false);
  w.ElementBool(true);
  w.EndStruct();
  w.FieldI32(8, 42);
  w.EndStruct();
  CompactReader r(AsBytes(buf), "test");
  int32_t v = 0;
  ASSERT_TRUE(r.ReadStruct([&](int16_t id, uint8_t t) -> Status {
                 if (id == 8) return r.ReadI32(t, &v);
                 return r.Skip(t);
               }).ok());
  EXPECT_EQ(v, 42);
}

TEST(ThriftCompact, RejectsHugeListSize) {
  // struct { 1: list<i32> } with a declared size of 2^31 but three bytes of data.
  const uint8_t bytes[] = {0x19, 0xF5, 0x80, 0x80, 0x80, 0x80, 0x08, 0x02, 0x04, 0x06, 0x00};
  CompactReader r(ByteView(bytes, sizeof(bytes)), "hostile.parquet footer");
  std::vector<int32_t> v;
  Status s = r.ReadStruct([&](int16_t, uint8_t t) { return r.ReadI32List(t, &v); });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("hostile.parquet footer: offset"), std::string::npos) << s.message();
}

TEST(ThriftCompact, RejectsDeepNestingWithoutOverflowingTheStack) {
  // 100,000 nested struct fields (field id 1, type struct), never closed.
  std::string buf(100000, static_cast<char>(0x1C));
  CompactReader r(AsBytes(buf), "deep");
  Status s = r.ReadStruct([&](int16_t, uint8_t t) { return r.Skip(t); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("nested deeper"), std::string::npos) << s.message();
}

TEST(ThriftCompact, RejectsBinaryLongerThanTheBuffer) {
  const uint8_t bytes[] = {0x18, 0xFF, 0x01, 'a', 'b'};  // 1: binary of 255 bytes, 2 present
  CompactReader r(ByteView(bytes, sizeof(bytes)), "x");
  std::string v;
  Status s = r.ReadStruct([&](int16_t, uint8_t t) { return r.ReadBinary(t, &v); });
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
}

TEST(ThriftCompact, RejectsWrongWireType) {
  std::string buf;
  CompactWriter w(&buf);
  w.BeginStruct();
  w.FieldBinary(1, "not an int");
  w.EndStruct();
  CompactReader r(AsBytes(buf), "x");
  int32_t v;
  Status s = r.ReadStruct([&](int16_t, uint8_t t) { return r.ReadI32(t, &v); });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expected i32"), std::string::npos) << s.message();
}

TEST(ThriftCompact, EveryTruncationOfAFooterFailsCleanly) {
  parquet::FileMetaData m;
  m.schema.push_back({.name = "schema", .num_children = 1});
  m.schema.push_back({.type = parquet::Type::kInt64, .repetition = parquet::Repetition::kRequired, .name = "id"});
  m.num_rows = 3;
  parquet::RowGroup rg;
  parquet::ColumnChunk cc;
  cc.meta_data = parquet::ColumnMetaData{.type = parquet::Type::kInt64, .encodings = {parquet::Encoding::kPlain},
                                         .path_in_schema = {"id"}, .num_values = 3, .data_page_offset = 4};
  rg.columns.push_back(cc);
  rg.num_rows = 3;
  m.row_groups.push_back(rg);
  m.created_by = "test";
  m.key_value_metadata.push_back({"k", "v"});
  std::string buf;
  parquet::SerializeFileMetaData(m, &buf);
  parquet::FileMetaData back;
  ASSERT_TRUE(parquet::ParseFileMetaData(AsBytes(buf), "f", 0, &back).ok());
  EXPECT_EQ(back.num_rows, 3);
  EXPECT_EQ(back.schema[1].name, "id");
  EXPECT_EQ(back.row_groups[0].columns[0].meta_data->path_in_schema[0], "id");
  for (size_t n = 0; n < buf.size(); ++n) {
    Status s = parquet::ParseFileMetaData(AsBytes(buf).subspan(0, n), "f", 0, &back);
    EXPECT_FALSE(s.ok()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(ThriftCompact, MissingRequiredFieldIsNamed) {
  std::string buf;
  CompactWriter w(&buf);
  w.BeginStruct();
  w.FieldI32(1, 2);  // version only
  w.EndStruct();
  parquet::FileMetaData m;
  Status s = parquet::ParseFileMetaData(AsBytes(buf), "f", 0, &m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'schema'"), std::string::npos) << s.message();
}

TEST(ThriftCompact, PageIndexesRoundTrip) {
  parquet::OffsetIndex oi;
  oi.page_locations = {{4, 100, 0}, {104, 200, 1}, {304, 50, 2}};
  std::string a;
  parquet::SerializeOffsetIndex(oi, &a);
  parquet::OffsetIndex oi2;
  ASSERT_TRUE(parquet::ParseOffsetIndex(AsBytes(a), "oi", 0, &oi2).ok());
  ASSERT_EQ(oi2.page_locations.size(), 3u);
  EXPECT_EQ(oi2.page_locations[1].offset, 104);
  EXPECT_EQ(oi2.page_locations[2].first_row_index, 2);

  parquet::ColumnIndex ci;
  ci.null_pages = {false, true};
  ci.min_values = {"a", ""};
  ci.max_values = {"z", ""};
  ci.null_counts = {0, 5};
  ci.boundary_order = parquet::BoundaryOrder::kAscending;
  std::string b;
  parquet::SerializeColumnIndex(ci, &b);
  parquet::ColumnIndex ci2;
  ASSERT_TRUE(parquet::ParseColumnIndex(AsBytes(b), "ci", 0, &ci2).ok());
  EXPECT_EQ(ci2.null_pages, ci.null_pages);
  EXPECT_EQ(ci2.max_values[0], "z");
  EXPECT_EQ(ci2.null_counts[1], 5);
  EXPECT_EQ(ci2.boundary_order, parquet::BoundaryOrder::kAscending);
}

}  // namespace
}  // namespace stoke
