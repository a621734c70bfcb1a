#include "format/csv.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(Csv, ParsesHeaderAndRows) {
  auto t = ParseCsv("file,label,x\na.npy,1,0.5\nb.npy,0,-2\n", "labels.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->header, (std::vector<std::string>{"file", "label", "x"}));
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[1], (std::vector<std::string>{"b.npy", "0", "-2"}));
}

TEST(Csv, HandlesQuotesCrlfBomAndBlankLines) {
  auto t = ParseCsv("\xEF\xBB\xBF" "name,note\r\n\"a,b\",\"say \"\"hi\"\"\"\r\n\r\nc,\"multi\nline\"\r\n", "x.csv");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->header[0], "name");
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0][0], "a,b");
  EXPECT_EQ(t->rows[0][1], "say \"hi\"");
  EXPECT_EQ(t->rows[1][1], "multi\nline");
}

TEST(Csv, KeepsEmptyFields) {
  auto t = ParseCsv("a,b,c\n1,,3\n", "x.csv");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rows[0], (std::vector<std::string>{"1", "", "3"}));
}

TEST(Csv, RejectsRowWithWrongFieldCountNamingTheLine) {
  auto t = ParseCsv("a,b\n1,2\n3\n", "labels.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kCorruption);
  EXPECT_NE(t.status().message().find("labels.csv: line 3"), std::string::npos) << t.status().message();
}

TEST(Csv, RejectsUnterminatedQuote) {
  auto t = ParseCsv("a,b\n\"1,2\n", "x.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("unterminated"), std::string::npos);
}

TEST(Csv, RejectsQuoteInsideUnquotedField) {
  EXPECT_FALSE(ParseCsv("a\nx\"y\n", "x.csv").ok());
  EXPECT_FALSE(ParseCsv("a\n\"x\"y\n", "x.csv").ok());
}

TEST(Csv, RejectsEmptyAndDuplicateHeaders) {
  EXPECT_FALSE(ParseCsv("", "x.csv").ok());
  EXPECT_FALSE(ParseCsv("a,,b\n", "x.csv").ok());
  EXPECT_FALSE(ParseCsv("a,a\n", "x.csv").ok());
}

}  // namespace
}  // namespace stoke
