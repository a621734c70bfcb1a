#include "table/identity_columns.h"

#include <gtest/gtest.h>

#include <limits>

namespace stoke::delta {
namespace {

constexpr char kSchema[] = R"({"type":"struct","fields":[
  {"name":"id","type":"long","nullable":true,"metadata":{"delta.identity.start":1,"delta.identity.step":3,"delta.identity.highWaterMark":7,"comment":"kept"}},
  {"name":"x","type":"long","nullable":true,"metadata":{}},
  {"name":"y","type":"long","nullable":true,"metadata":{"delta.identity.start":5,"delta.identity.step":1,"delta.identity.allowExplicitInsert":true}}]})";

TEST(IdentityColumns, ReadFromTheSchema) {
  auto columns = IdentityColumns(kSchema, "t");
  ASSERT_TRUE(columns.ok()) << columns.status().ToString();
  ASSERT_EQ(columns->size(), 2u);
  EXPECT_EQ((*columns)[0].name, "id");
  EXPECT_EQ((*columns)[0].step, 3);
  EXPECT_EQ((*columns)[0].high_water_mark, 7);
  EXPECT_FALSE((*columns)[0].allow_explicit_insert);
  EXPECT_EQ((*columns)[1].name, "y");
  EXPECT_FALSE((*columns)[1].high_water_mark.has_value());
  EXPECT_TRUE((*columns)[1].allow_explicit_insert);
  // Metadata that only mentions the keys declares nothing.
  EXPECT_TRUE(IdentityColumns(R"({"type":"struct","fields":[{"name":"x","type":"long","nullable":true,)"
                              R"("metadata":{"delta.identity.comment":"none"}}]})",
                              "t")
                  ->empty());
}

TEST(IdentityColumns, MalformedDeclarationsAreCorruption) {
  for (const char* md : {R"({"delta.identity.start":1,"delta.identity.step":0})",
                         R"({"delta.identity.start":"1","delta.identity.step":1})",
                         R"({"delta.identity.start":1,"delta.identity.step":1.5})",
                         R"({"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":null})",
                         R"({"delta.identity.start":1,"delta.identity.step":1,"delta.identity.highWaterMark":9223372036854775808})"}) {
    const std::string schema =
        std::string(R"({"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":)") + md + "}]}";
    auto columns = IdentityColumns(schema, "table 't'");
    EXPECT_EQ(columns.status().code(), StatusCode::kCorruption) << md;
    EXPECT_NE(columns.status().message().find("table 't': column 'id'"), std::string::npos) << columns.status().message();
  }
}

TEST(IdentityColumns, NextValuesLieOnTheStepBeyondTheMarkAndTheUsedValues) {
  IdentityColumn c{.name = "id", .start = 1, .step = 3, .high_water_mark = 7};
  EXPECT_EQ(*FirstIdentityValue(c, -1, 5, "t"), 10);  // 1, 4, 7 generated
  EXPECT_EQ(*FirstIdentityValue(c, 11, 5, "t"), 13);  // an explicit 11 in the column
  c.high_water_mark.reset();
  EXPECT_EQ(*FirstIdentityValue(c, -1, 1, "t"), 1);
  EXPECT_EQ(*FirstIdentityValue(c, 0, 1, "t"), 1);
  EXPECT_EQ(*FirstIdentityValue(c, 1, 1, "t"), 4);
}

TEST(IdentityColumns, OverflowAndCountingDownAreRefused) {
  IdentityColumn c{.name = "id", .start = 0, .step = 1 << 30, .high_water_mark = std::numeric_limits<int64_t>::max() - 5};
  auto first = FirstIdentityValue(c, 0, 2, "ingest into 't'");
  EXPECT_EQ(first.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(first.status().message().find("overflow 64 bits; nothing was written"), std::string::npos);
  IdentityColumn down{.name = "id", .start = -1, .step = -1};
  EXPECT_EQ(FirstIdentityValue(down, 0, 1, "t").status().code(), StatusCode::kUnsupported);
}

TEST(IdentityColumns, TheHighWaterMarkIsSetKeepingTheRest) {
  const std::string out = WithHighWaterMark(kSchema, "id", 40);
  auto columns = IdentityColumns(out, "t");
  ASSERT_TRUE(columns.ok());
  EXPECT_EQ((*columns)[0].high_water_mark, 40);
  EXPECT_NE(out.find(R"("comment":"kept")"), std::string::npos);
  EXPECT_FALSE((*columns)[1].high_water_mark.has_value());
  EXPECT_EQ(WithHighWaterMark("not json", "id", 1), "not json");
}

}  // namespace
}  // namespace stoke::delta
