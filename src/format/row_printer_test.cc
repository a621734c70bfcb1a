#include "format/row_printer.h"

#include <gtest/gtest.h>

#include <string>

namespace stoke {
namespace {

TEST(RowFormats, EveryNameReadsBackAndOthersAreRefusedByName) {
  for (RowFormat f : {RowFormat::kTable, RowFormat::kCsv, RowFormat::kJson}) {
    auto parsed = ParseRowFormat(RowFormatName(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  for (DescriptionFormat f : {DescriptionFormat::kText, DescriptionFormat::kJson}) {
    auto parsed = ParseDescriptionFormat(DescriptionFormatName(f));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  for (CellKind k : {CellKind::kInteger, CellKind::kFloat, CellKind::kBoolean, CellKind::kText, CellKind::kJson}) {
    auto parsed = ParseCellKind(CellKindName(k));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, k);
  }
  EXPECT_EQ(ParseRowFormat("yaml").status().message(), "format: unknown value 'yaml' (expected one of table, csv, json)");
  EXPECT_EQ(ParseDescriptionFormat("xml").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCellKind("").status().message(),
            "cell kind: unknown value '' (expected one of integer, float, boolean, text, json)");
}

// Two rows of every kind of cell, one with nulls.
TextRows Sample() {
  TextRows rows;
  rows.columns = {{"id", CellKind::kInteger}, {"x", CellKind::kFloat},  {"ok", CellKind::kBoolean},
                  {"name", CellKind::kText},  {"s", CellKind::kJson}};
  rows.rows.push_back({"1", "-0", "true", "a,\"b\"", R"({"k":[1,2]})"});
  rows.rows.push_back({"-20", "nan", std::nullopt, std::nullopt, std::nullopt});
  return rows;
}

TEST(RowsText, PrintsEachFormAsStokeCatDoes) {
  const TextRows rows = Sample();
  EXPECT_EQ(RowsText(rows, RowFormat::kJson),
            "{\"id\":1,\"x\":-0.0,\"ok\":true,\"name\":\"a,\\\"b\\\"\",\"s\":{\"k\":[1,2]}}\n"
            "{\"id\":-20,\"x\":\"nan\",\"ok\":null,\"name\":null,\"s\":null}\n");
  EXPECT_EQ(RowsText(rows, RowFormat::kCsv), "id,x,ok,name,s\n1,-0,true,\"a,\"\"b\"\"\",\"{\"\"k\"\":[1,2]}\"\n-20,nan,,,\n");
  EXPECT_EQ(RowsText(rows, RowFormat::kTable, "; a footer"),
            "id   x    ok    name   s          \n"
            "  1   -0  true  a,\"b\"  {\"k\":[1,2]}\n"
            "-20  nan  null  null   null       \n"
            "(2 rows; a footer)\n");
  EXPECT_EQ(RowsText(TextRows{{{"id", CellKind::kInteger}}, {{"7"}}}, RowFormat::kTable), "id\n 7\n(1 row)\n");
}

}  // namespace
}  // namespace stoke
