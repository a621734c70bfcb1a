#include "table/predicate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <atomic>

namespace stoke {
namespace {

// The canonical form of `text`, or "ERROR <status>" when it does not parse.
std::string Canon(std::string_view text) {
  auto p = Predicate::Parse(text);
  if (!p.ok()) return "ERROR " + p.status().ToString();
  return p->ToString();
}

Status ParseError(std::string_view text) {
  auto p = Predicate::Parse(text);
  if (p.ok()) return Status::Internal("parsed: " + p->ToString());
  return p.status();
}

template <typename T>
ColumnValues Col(const std::vector<std::optional<T>>& rows) {
  ColumnValues c;
  std::vector<T> values;
  bool any_null = false;
  for (const auto& r : rows) {
    c.defined.push_back(r.has_value() ? 1 : 0);
    if (r) values.push_back(*r);
    any_null = any_null || !r;
  }
  if (!any_null) c.defined.clear();
  c.values = std::move(values);
  return c;
}

ColumnSpec Spec(std::string name, parquet::Type type, bool is_string = false) {
  ColumnSpec s;
  s.name = std::move(name);
  s.type = type;
  s.optional = true;
  s.is_string = is_string;
  return s;
}

constexpr auto kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::nullopt_t kNull = std::nullopt;

// ---------------------------------------------------------------------------------------------
// Parsing and the canonical form.

TEST(PredicateParse, NotBindsTighterThanAndTighterThanOr) {
  EXPECT_EQ(Canon("a = 1 OR b = 2 AND NOT c = 3"), "((a = 1) OR ((b = 2) AND (NOT (c = 3))))");
  EXPECT_EQ(Canon("NOT a = 1 AND b = 2"), "((NOT (a = 1)) AND (b = 2))");
  EXPECT_EQ(Canon("a = 1 AND b = 2 AND c = 3 OR d = 4"), "(((a = 1) AND (b = 2) AND (c = 3)) OR (d = 4))");
}

TEST(PredicateParse, ParenthesesOverridePrecedence) {
  EXPECT_EQ(Canon("(a = 1 OR b = 2) AND c = 3"), "(((a = 1) OR (b = 2)) AND (c = 3))");
  EXPECT_EQ(Canon("NOT (a = 1 OR b = 2)"), "(NOT ((a = 1) OR (b = 2)))");
  EXPECT_EQ(Canon("((((a = 1))))"), "(a = 1)");
}

TEST(PredicateParse, AllOperators) {
  EXPECT_EQ(Canon("x = 1"), "(x = 1)");
  EXPECT_EQ(Canon("x != 1"), "(x != 1)");
  EXPECT_EQ(Canon("x <> 1"), "(x != 1)");
  EXPECT_EQ(Canon("x < 1"), "(x < 1)");
  EXPECT_EQ(Canon("x <= 1"), "(x <= 1)");
  EXPECT_EQ(Canon("x > 1"), "(x > 1)");
  EXPECT_EQ(Canon("x >= 1"), "(x >= 1)");
  EXPECT_EQ(Canon("x<-1"), "(x < -1)");
  EXPECT_EQ(Canon("x IN (1, 2.5, 'a', NULL, TRUE)"), "(x IN (1, 2.5, 'a', NULL, TRUE))");
  EXPECT_EQ(Canon("x NOT IN (1)"), "(NOT (x IN (1)))");
  EXPECT_EQ(Canon("x IS NULL"), "(x IS NULL)");
  EXPECT_EQ(Canon("x IS NOT NULL"), "(NOT (x IS NULL))");
  EXPECT_EQ(Canon("x BETWEEN 1 AND 5"), "(x BETWEEN 1 AND 5)");
  EXPECT_EQ(Canon("x NOT BETWEEN 1 AND 5 AND y = 2"), "((NOT (x BETWEEN 1 AND 5)) AND (y = 2))");
}

TEST(PredicateParse, KeywordsAreCaseInsensitive) {
  EXPECT_EQ(Canon("x in (1) and y is not null or not z between 1 aNd 2"),
            "(((x IN (1)) AND (NOT (y IS NULL))) OR (NOT (z BETWEEN 1 AND 2)))");
  EXPECT_EQ(Canon("flag = true OR flag = False OR flag = nUlL"), "((flag = TRUE) OR (flag = FALSE) OR (flag = NULL))");
}

TEST(PredicateParse, QuotedIdentifiersAndStrings) {
  EXPECT_EQ(Canon("\"weird name\" = 'a''b'"), "(\"weird name\" = 'a''b')");
  EXPECT_EQ(Canon("\"and\" = 1"), "(\"and\" = 1)");
  EXPECT_EQ(Canon("\"a\"\"b\" = ''"), "(\"a\"\"b\" = '')");
  EXPECT_EQ(Canon("\"plain\" = 'x'"), "(plain = 'x')");
  EXPECT_EQ(Canon("meta.label_2 = 1"), "(meta.label_2 = 1)");
  EXPECT_EQ(Canon("\"1x\" = 1"), "(\"1x\" = 1)");
  auto p = Predicate::Parse("\"weird name\" = 'it''s' AND \"q\"\"\" IS NULL");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->columns(), (std::vector<std::string>{"q\"", "weird name"}));
}

TEST(PredicateParse, LiteralOnTheLeftIsFlipped) {
  EXPECT_EQ(Canon("5 < x"), "(x > 5)");
  EXPECT_EQ(Canon("5 <= x"), "(x >= 5)");
  EXPECT_EQ(Canon("5 > x"), "(x < 5)");
  EXPECT_EQ(Canon("5 >= x"), "(x <= 5)");
  EXPECT_EQ(Canon("'a' = s"), "(s = 'a')");
  EXPECT_EQ(Canon("'a' <> s"), "(s != 'a')");
}

TEST(PredicateParse, Literals) {
  EXPECT_EQ(Canon("x = -12"), "(x = -12)");
  EXPECT_EQ(Canon("x = 1.5"), "(x = 1.5)");
  EXPECT_EQ(Canon("x = 2e3"), "(x = 2000.0)");
  EXPECT_EQ(Canon("x = 2E-3"), "(x = 0.002)");
  EXPECT_EQ(Canon("x = 1.0"), "(x = 1.0)");
  EXPECT_EQ(Canon("x = -0.0"), "(x = -0.0)");
  EXPECT_EQ(Canon("x = 1e300"), "(x = 1e+300)");
  EXPECT_EQ(Canon("x = 007"), "(x = 7)");
  EXPECT_EQ(Canon("x = 9223372036854775807"), "(x = 9223372036854775807)");
  EXPECT_EQ(Canon("x = -9223372036854775808"), "(x = -9223372036854775808)");
  EXPECT_EQ(Canon("x = 0.1"), "(x = 0.1)");
}

TEST(PredicateParse, ColumnsAreSortedAndUnique) {
  auto p = Predicate::Parse("z = 1 AND a = 2 OR m IS NULL AND a IN (1) AND 3 < z");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->columns(), (std::vector<std::string>{"a", "m", "z"}));
}

TEST(PredicateParse, ToStringReparsesToTheSameTree) {
  for (std::string_view text : {
           "a = 1 OR b = 2 AND NOT c = 3",
           "(a = 1 OR b = 2) AND c = 3",
           "((a = 1 AND b = 2) AND c = 3)",
           "x NOT IN (1, NULL, -2.5e-7) OR \"sp ace\" BETWEEN 'a''' AND 'z'",
           "NOT NOT NOT x IS NOT NULL",
           "x = 123456789.125 AND y = -1e-300 AND z = 4.9e-324",
           "s = 'new\nline' AND \"tab\tcol\" = '\"'",
       }) {
    auto p = Predicate::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status().ToString();
    std::string once = p->ToString();
    auto q = Predicate::Parse(once);
    ASSERT_TRUE(q.ok()) << once << ": " << q.status().ToString();
    EXPECT_EQ(q->ToString(), once);
    EXPECT_EQ(q->columns(), p->columns());
  }
}

// ---------------------------------------------------------------------------------------------
// Parse errors.

void ExpectError(std::string_view text, StatusCode code, std::string_view message) {
  Status s = ParseError(text);
  EXPECT_EQ(s.code(), code) << text << " -> " << s.ToString();
  EXPECT_NE(s.message().find(message), std::string::npos) << text << " -> " << s.ToString();
}

TEST(PredicateParse, ErrorsNameTheOffsetAndWhatWasExpected) {
  const auto kInvalid = StatusCode::kInvalidArgument;
  ExpectError("label = 1 AND x < ", kInvalid,
              "`where`: offset 18: expected a value after '<', found end of input");
  ExpectError("x = 'abc", kInvalid, "offset 4: unterminated string literal");
  ExpectError("\"abc = 1", kInvalid, "offset 0: unterminated quoted column name");
  ExpectError("\"\" = 1", kInvalid, "offset 0: empty quoted column name");
  ExpectError("x = 1 # 2", kInvalid, "offset 6: unexpected character '#'");
  ExpectError("x = \x01", kInvalid, "offset 4: unexpected byte 0x01");
  ExpectError("x ! 1", kInvalid, "offset 2: unexpected character '!'");
  ExpectError("x = 1 y", kInvalid, "offset 6: expected AND, OR or end of input, found 'y'");
  ExpectError("x = 1)", kInvalid, "offset 5: expected AND, OR or end of input, found ')'");
  ExpectError("", kInvalid, "offset 0: expected a column name, a value, NOT or '(', found end of input");
  ExpectError("   ", kInvalid, "offset 3: expected a column name");
  ExpectError("x = 1 AND", kInvalid, "offset 9: expected a column name, a value, NOT or '(', found end of input");
  ExpectError("x", kInvalid, "offset 1: expected a comparison operator, IN, BETWEEN or IS after 'x'");
  ExpectError("x = = 1", kInvalid, "offset 4: expected a value after '=', found '='");
  ExpectError("5 < ", kInvalid, "offset 4: expected a column name after '<'");
  ExpectError("(x = 1", kInvalid, "offset 6: expected ')' to close the '(' at offset 0, found end of input");
  ExpectError("x IN ()", kInvalid, "offset 6: expected a value in the IN list, found ')'");
  ExpectError("x IN 1", kInvalid, "offset 5: expected '(' after IN");
  ExpectError("x IN (1 2)", kInvalid, "offset 8: expected ',' or ')' in the IN list, found '2'");
  ExpectError("x IN (1, y)", kInvalid, "offset 9: expected a value in the IN list, found 'y'");
  ExpectError("x BETWEEN 1 OR 2", kInvalid, "offset 12: expected AND after BETWEEN 1, found 'OR'");
  ExpectError("x BETWEEN y AND 2", kInvalid, "offset 10: expected a value after BETWEEN");
  ExpectError("x IS 5", kInvalid, "offset 5: expected NULL or NOT NULL after IS, found '5'");
  ExpectError("x IS NOT 5", kInvalid, "offset 9: expected NULL after IS NOT");
  ExpectError("x NOT 5", kInvalid, "offset 6: expected IN or BETWEEN after NOT");
  ExpectError("x = 1.", kInvalid, "offset 4: malformed number '1.'");
  ExpectError("x = 12abc", kInvalid, "offset 4: malformed number '12abc'");
  ExpectError("x = 1e", kInvalid, "offset 4: malformed number '1e'");
  ExpectError("x = - 1", kInvalid, "offset 4: expected a digit after '-'");
  ExpectError("x = 9223372036854775808", kInvalid, "offset 4: integer literal");
  ExpectError("x = 1e999", kInvalid, "offset 4: real literal '1e999' is out of range");
}

TEST(PredicateParse, UnsupportedComparisons) {
  const auto kUnsupported = StatusCode::kUnsupported;
  ExpectError("x = y", kUnsupported, "offset 4: comparing column 'x' with column 'y' is not supported");
  ExpectError("1 = 1", kUnsupported, "offset 0: comparing value '1' with value '1'");
  ExpectError("1 IN (1)", kUnsupported, "offset 0: IN needs a column on its left");
  ExpectError("NULL IS NULL", kUnsupported, "IS needs a column on its left");
}

TEST(PredicateParse, RejectsDepthBombs) {
  std::string parens = std::string(100000, '(') + "x = 1" + std::string(100000, ')');
  ExpectError(parens, StatusCode::kInvalidArgument, "limit is 65536");
  parens = std::string(20000, '(') + "x = 1" + std::string(20000, ')');
  ExpectError(parens, StatusCode::kInvalidArgument, "offset 200: parentheses and NOTs nested deeper than 200");
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "NOT ";
  ExpectError(nots + "x = 1", StatusCode::kInvalidArgument, "nested deeper than");
  ExpectError(std::string(40000, '('), StatusCode::kInvalidArgument, "nested deeper than");
}

TEST(PredicateParse, TreeDepthLimitIsExact) {
  std::string nots;
  for (int i = 0; i < Predicate::kMaxDepth - 1; ++i) nots += "NOT ";
  auto p = Predicate::Parse(nots + "x = 1");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto q = Predicate::Parse(p->ToString());  // the canonical form nests deeper, and still parses
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->ToString(), p->ToString());
  ExpectError("NOT " + nots + "x = 1", StatusCode::kInvalidArgument,
              "offset 0: expression nested deeper than 100 levels");
}

TEST(PredicateParse, LongFlatConjunctionsAreFine) {
  std::string text = "x = 0";
  for (int i = 1; i < 3000; ++i) text += " AND x = " + std::to_string(i);
  auto p = Predicate::Parse(text);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->columns(), std::vector<std::string>{"x"});
}

TEST(PredicateParse, CanonicalFormOverTheLimitIsRejected) {
  // "1e5" prints as "100000.0": the input fits, the canonical form would not.
  std::string text = "x IN (1e5";
  while (text.size() < Predicate::kMaxTextBytes - 10) text += ",1e5";
  text += ")";
  ExpectError(text, StatusCode::kInvalidArgument, "canonical form");
}

// ---------------------------------------------------------------------------------------------
// Bind.

std::vector<ColumnSpec> Schema() {
  std::vector<ColumnSpec> s = {Spec("id", parquet::Type::kInt64), Spec("file", parquet::Type::kByteArray, true),
                               Spec("label", parquet::Type::kInt32), Spec("x", parquet::Type::kFloat),
                               Spec("y", parquet::Type::kDouble)};
  return s;
}

Status BindText(std::string_view text, const std::vector<ColumnSpec>& schema) {
  auto p = Predicate::Parse(text);
  if (!p.ok()) return p.status();
  return p->Bind(schema);
}

TEST(PredicateBind, UnknownColumnListsTheSchema) {
  Status s = BindText("lable = 1", Schema());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "`where`: unknown column 'lable' (columns: id, file, label, x, y)");
}

TEST(PredicateBind, ChecksLiteralTypesAgainstColumnTypes) {
  auto schema = Schema();
  schema.push_back(Spec("flag", parquet::Type::kBoolean));
  schema.push_back(Spec("blob", parquet::Type::kByteArray));
  ColumnSpec volume = Spec("volume", parquet::Type::kByteArray);
  volume.tensor = TensorSpec{DType::kFloat32, {2, 2}};
  schema.push_back(volume);

  EXPECT_TRUE(BindText("id = 1 AND label IN (1, 2.5) AND x < 3 AND y >= -1e9", schema).ok());
  EXPECT_TRUE(BindText("file = 'a' AND file BETWEEN 'a' AND 'b' AND flag = TRUE", schema).ok());
  EXPECT_TRUE(BindText("id = NULL OR file IN (NULL) OR flag IS NULL OR blob IS NULL", schema).ok());

  Status s = BindText("label = 'one'", schema);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("column 'label' is INT32; it cannot be compared with 'one'"), std::string::npos)
      << s.ToString();
  s = BindText("file = 1", schema);
  EXPECT_NE(s.message().find("column 'file' is BYTE_ARRAY (STRING); it cannot be compared with 1"),
            std::string::npos)
      << s.ToString();
  s = BindText("flag = 1", schema);
  EXPECT_NE(s.message().find("column 'flag' is BOOLEAN"), std::string::npos) << s.ToString();
  s = BindText("id BETWEEN 1 AND TRUE", schema);
  EXPECT_NE(s.message().find("column 'id' is INT64; it cannot be compared with TRUE"), std::string::npos)
      << s.ToString();
  EXPECT_TRUE(BindText("volume IS NOT NULL", schema).ok());  // IS NULL is not a comparison
  s = BindText("volume = 'x'", schema);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("column 'volume' holds tensors"), std::string::npos) << s.ToString();
  s = BindText("blob = 'x'", schema);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("column 'blob' is BYTE_ARRAY without a STRING annotation"), std::string::npos)
      << s.ToString();
}

TEST(PredicateBind, EvaluateRequiresBind) {
  auto p = Predicate::Parse("x = 1");
  ASSERT_TRUE(p.ok());
  ColumnValues x = Col<int64_t>({1});
  std::vector<uint8_t> keep;
  EXPECT_EQ(p->Evaluate({{"x", &x}}, 1, &keep).code(), StatusCode::kInternal);
  ASSERT_TRUE(p->Bind({Spec("x", parquet::Type::kInt64)}).ok());
  EXPECT_TRUE(p->Evaluate({{"x", &x}}, 1, &keep).ok());
  EXPECT_FALSE(p->Bind({Spec("y", parquet::Type::kInt64)}).ok());
  EXPECT_EQ(p->Evaluate({{"x", &x}}, 1, &keep).code(), StatusCode::kInternal);
}

// ---------------------------------------------------------------------------------------------
// Evaluate.

class PredicateEvaluate : public ::testing::Test {
 protected:
  // 6 rows.
  ColumnValues x_ = Col<int32_t>({1, kNull, 3, 1, kNull, 7});
  ColumnValues s_ = Col<std::string>({"a", "b", kNull, "", "\xff", "ab"});
  ColumnValues f_ = Col<double>({0.5, kNaN, -1.0, 2.5, 1e300, 3.0});
  ColumnValues g_ = Col<float>({0.5f, 0.1f, kNull, 1.0f, -2.0f, 16777217.0f});
  ColumnValues b_ = Col<uint8_t>({1, 0, 1, 0, kNull, 0});
  ColumnValues big_ = Col<int64_t>({9007199254740993, std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(), -9007199254740993, 0, 1});
  std::vector<ColumnSpec> schema_ = {Spec("x", parquet::Type::kInt32), Spec("s", parquet::Type::kByteArray, true),
                                     Spec("f", parquet::Type::kDouble), Spec("g", parquet::Type::kFloat),
                                     Spec("b", parquet::Type::kBoolean), Spec("big", parquet::Type::kInt64)};

  std::vector<uint8_t> Keep(std::string_view text) {
    auto p = Predicate::Parse(text);
    EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
    if (!p.ok()) return {};
    Status s = p->Bind(schema_);
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::map<std::string, const ColumnValues*> cols = {{"x", &x_}, {"s", &s_}, {"f", &f_},
                                                       {"g", &g_}, {"b", &b_}, {"big", &big_}};
    std::vector<uint8_t> keep(3, 7);
    s = p->Evaluate(cols, 6, &keep);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return keep;
  }
  using K = std::vector<uint8_t>;
};

TEST_F(PredicateEvaluate, ComparisonsWithNullAreNotTrue) {
  EXPECT_EQ(Keep("x = 1"), (K{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(Keep("NOT (x = 1)"), (K{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(Keep("x != 1"), (K{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(Keep("x = 1 OR NOT x = 1"), (K{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(Keep("x = NULL"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("NOT x = NULL"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("x > 1"), (K{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(Keep("2 < x"), (K{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(Keep("x <= 3"), (K{1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(Keep("x >= 3.5"), (K{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(Keep("x < 1.5"), (K{1, 0, 0, 1, 0, 0}));
}

TEST_F(PredicateEvaluate, IsNull) {
  EXPECT_EQ(Keep("x IS NULL"), (K{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(Keep("x IS NOT NULL"), (K{1, 0, 1, 1, 0, 1}));
  EXPECT_EQ(Keep("x IS NULL OR x = 7"), (K{0, 1, 0, 0, 1, 1}));
  EXPECT_EQ(Keep("f IS NULL"), (K{0, 0, 0, 0, 0, 0}));  // NaN is not NULL
}

TEST_F(PredicateEvaluate, InWithNull) {
  EXPECT_EQ(Keep("x IN (1, 7)"), (K{1, 0, 0, 1, 0, 1}));
  EXPECT_EQ(Keep("x IN (1, NULL)"), (K{1, 0, 0, 1, 0, 0}));
  EXPECT_EQ(Keep("x NOT IN (1)"), (K{0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(Keep("x NOT IN (1, NULL)"), (K{0, 0, 0, 0, 0, 0}));  // 3 NOT IN (1, NULL) is NULL
  EXPECT_EQ(Keep("x IN (NULL)"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("s IN ('', 'ab')"), (K{0, 0, 0, 1, 0, 1}));
}

TEST_F(PredicateEvaluate, Between) {
  EXPECT_EQ(Keep("x BETWEEN 1 AND 3"), (K{1, 0, 1, 1, 0, 0}));
  EXPECT_EQ(Keep("x NOT BETWEEN 1 AND 3"), (K{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(Keep("x BETWEEN 3 AND 1"), (K{0, 0, 0, 0, 0, 0}));
  // x BETWEEN NULL AND 2 is NULL AND (x <= 2): FALSE where x > 2, so its negation keeps those rows.
  EXPECT_EQ(Keep("x BETWEEN NULL AND 2"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("NOT x BETWEEN NULL AND 2"), (K{0, 0, 1, 0, 0, 1}));
}

TEST_F(PredicateEvaluate, AndOrFollowThreeValuedLogic) {
  // NULL AND FALSE is FALSE, so its negation is TRUE on null-x rows where b is FALSE.
  EXPECT_EQ(Keep("NOT (x = 1 AND b = TRUE)"), (K{0, 1, 1, 1, 0, 1}));
  // NULL OR TRUE is TRUE.
  EXPECT_EQ(Keep("x = 1 OR b = FALSE"), (K{1, 1, 0, 1, 0, 1}));
  EXPECT_EQ(Keep("NOT (x = 1 OR b = FALSE)"), (K{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(Keep("b = TRUE AND x > 1"), (K{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(Keep("b > FALSE"), (K{1, 0, 1, 0, 0, 0}));
}

TEST_F(PredicateEvaluate, StringsCompareAsUnsignedBytes) {
  EXPECT_EQ(Keep("s > 'a'"), (K{0, 1, 0, 0, 1, 1}));  // "\xff" sorts after ASCII
  EXPECT_EQ(Keep("s < 'b'"), (K{1, 0, 0, 1, 0, 1}));
  EXPECT_EQ(Keep("s = ''"), (K{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(Keep("s >= 'ab'"), (K{0, 1, 0, 0, 1, 1}));
}

TEST_F(PredicateEvaluate, NaNIsNeverTrue) {
  EXPECT_EQ(Keep("f > 0"), (K{1, 0, 0, 1, 1, 1}));
  EXPECT_EQ(Keep("f != 0"), (K{1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(Keep("NOT f > 0"), (K{0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(Keep("f = 1e300"), (K{0, 0, 0, 0, 1, 0}));
}

TEST_F(PredicateEvaluate, IntegersAndRealsCompareByExactValue) {
  EXPECT_EQ(Keep("big = 9007199254740993"), (K{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("big = 9007199254740992"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("big > 9007199254740992.0"), (K{1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("big = 9007199254740992.0"), (K{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("big < -9007199254740992.0"), (K{0, 0, 1, 1, 0, 0}));
  EXPECT_EQ(Keep("big < 9223372036854775807.0"), (K{1, 1, 1, 1, 1, 1}));  // the literal is 2^63
  EXPECT_EQ(Keep("big = 9223372036854775807"), (K{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("big >= -9223372036854775808.0"), (K{1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(Keep("big > -9223372036854775808.0"), (K{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(Keep("big > 0.5"), (K{1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Keep("big < 1e300"), (K{1, 1, 1, 1, 1, 1}));
  // FLOAT values widen exactly to double.
  EXPECT_EQ(Keep("g = 0.5"), (K{1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(Keep("g = 0.1"), (K{0, 0, 0, 0, 0, 0}));  // 0.1f != 0.1
  EXPECT_EQ(Keep("g = 16777216"), (K{0, 0, 0, 0, 0, 1}));  // 16777217f rounds to 2^24
  EXPECT_EQ(Keep("g >= -2"), (K{1, 1, 0, 1, 1, 1}));
}

TEST_F(PredicateEvaluate, RejectsMissingOrMisshapenColumns) {
  auto p = Predicate::Parse("x = 1 AND s = 'a'");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Bind(schema_).ok());
  std::vector<uint8_t> keep;
  Status st = p->Evaluate({{"x", &x_}}, 6, &keep);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("column 's' was not provided"), std::string::npos) << st.ToString();
  st = p->Evaluate({{"x", &x_}, {"s", nullptr}}, 6, &keep);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  st = p->Evaluate({{"x", &x_}, {"s", &s_}}, 5, &keep);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("has 6 rows, expected 5"), std::string::npos) << st.ToString();
  ColumnValues bad = s_;
  bad.defined.assign(6, 1);  // claims 6 present values; there are 5
  st = p->Evaluate({{"x", &x_}, {"s", &bad}}, 6, &keep);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(p->Evaluate({{"x", &x_}, {"s", &s_}}, 6, &keep).ok());
  EXPECT_EQ(keep, (K{1, 0, 0, 0, 0, 0}));
}

TEST_F(PredicateEvaluate, ZeroRows) {
  auto p = Predicate::Parse("x = 1");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Bind(schema_).ok());
  ColumnValues empty = Col<int32_t>({});
  std::vector<uint8_t> keep(4, 1);
  ASSERT_TRUE(p->Evaluate({{"x", &empty}}, 0, &keep).ok());
  EXPECT_TRUE(keep.empty());
}

TEST_F(PredicateEvaluate, ConcurrentEvaluateCallsAgree) {
  auto p = Predicate::Parse("(x IN (1, 7) OR s > 'a') AND NOT f IS NULL");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Bind(schema_).ok());
  std::map<std::string, const ColumnValues*> cols = {{"x", &x_}, {"s", &s_}, {"f", &f_}};
  std::vector<uint8_t> expected;
  ASSERT_TRUE(p->Evaluate(cols, 6, &expected).ok());
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        std::vector<uint8_t> keep;
        if (!p->Evaluate(cols, 6, &keep).ok() || keep != expected) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---------------------------------------------------------------------------------------------
// MayMatch.

using Stats = std::map<std::string, Predicate::ColumnStats>;

bool May(std::string_view text, const Stats& stats, int64_t num_rows = 100) {
  auto p = Predicate::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
  return p.ok() && p->MayMatch(stats, num_rows);
}

Predicate::ColumnStats Range(Value min, Value max, std::optional<int64_t> nulls = 0) {
  return {std::move(min), std::move(max), nulls};
}

Value V(int64_t i) { return Value{i}; }

bool Must(std::string_view text, const Stats& stats, const std::vector<ColumnSpec>& schema, int64_t num_rows = 100) {
  auto p = Predicate::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
  if (!p.ok()) return false;
  Status bound = p->Bind(schema);
  EXPECT_TRUE(bound.ok()) << text << ": " << bound.ToString();
  return p->MustMatch(stats, num_rows);
}

TEST(PredicateMustMatch, DecidesEveryRowOnlyWhenNoRowCanBeFalseOrNull) {
  std::vector<ColumnSpec> schema = {Spec("x", parquet::Type::kInt64), Spec("f", parquet::Type::kDouble)};
  Stats one = {{"x", Range(V(1), V(1))}};
  EXPECT_TRUE(Must("x = 1", one, schema));
  EXPECT_TRUE(Must("x IN (0, 1)", one, schema));
  EXPECT_TRUE(Must("x BETWEEN 0 AND 5", one, schema));
  EXPECT_TRUE(Must("x IS NOT NULL", one, schema));
  EXPECT_TRUE(Must("NOT x = 2", one, schema));
  EXPECT_TRUE(Must("x = 1 OR x = 7", one, schema));
  EXPECT_FALSE(Must("x = 2", one, schema));
  EXPECT_FALSE(Must("x IN (2, NULL)", one, schema));  // NULL for x = 1: not TRUE
  EXPECT_FALSE(Must("x = NULL", one, schema));
  Stats range = {{"x", Range(V(10), V(20))}};
  EXPECT_TRUE(Must("x >= 10", range, schema));
  EXPECT_TRUE(Must("x < 21 AND x > 9", range, schema));
  EXPECT_FALSE(Must("x > 10", range, schema));
  EXPECT_FALSE(Must("x = 15", range, schema));
  // Nulls: a comparison is NULL on them; unknown null counts decide nothing.
  EXPECT_FALSE(Must("x = 1", {{"x", Range(V(1), V(1), 3)}}, schema));
  EXPECT_FALSE(Must("x = 1", {{"x", Range(V(1), V(1), std::nullopt)}}, schema));
  EXPECT_TRUE(Must("x IS NULL", {{"x", Predicate::ColumnStats{std::nullopt, std::nullopt, 100}}}, schema));
  EXPECT_FALSE(Must("x = 1", {}, schema));
  // A DOUBLE may hold NaN, which min/max leave out: comparisons on it never decide every row.
  EXPECT_FALSE(Must("f = 1", {{"f", Range(Value{1.0}, Value{1.0})}}, schema));
  EXPECT_TRUE(Must("f IS NOT NULL", {{"f", Range(Value{1.0}, Value{1.0})}}, schema));
  // Zero rows: trivially all; unknown row count: never.
  EXPECT_TRUE(Must("x = 2", one, schema, 0));
  EXPECT_FALSE(Must("x = 1", one, schema, -1));
  // Before Bind, nothing is decided.
  auto p = Predicate::Parse("x = 1");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->MustMatch(one, 100));
}

TEST(PredicateMayMatch, Comparisons) {
  Stats st = {{"x", Range(V(10), V(20))}};
  EXPECT_FALSE(May("x = 5", st));
  EXPECT_TRUE(May("x = 10", st));
  EXPECT_TRUE(May("x = 15", st));
  EXPECT_TRUE(May("x = 20", st));
  EXPECT_FALSE(May("x = 25", st));
  EXPECT_TRUE(May("x != 10", st));
  EXPECT_FALSE(May("x != 10", {{"x", Range(V(10), V(10))}}));
  EXPECT_FALSE(May("x < 10", st));
  EXPECT_TRUE(May("x < 11", st));
  EXPECT_TRUE(May("x <= 10", st));
  EXPECT_FALSE(May("x <= 9", st));
  EXPECT_FALSE(May("x > 20", st));
  EXPECT_TRUE(May("x > 19", st));
  EXPECT_FALSE(May("x >= 21", st));
  EXPECT_TRUE(May("x >= 20", st));
  EXPECT_FALSE(May("25 < x", st));
  EXPECT_TRUE(May("15 < x", st));
  EXPECT_FALSE(May("x = NULL", st));
  EXPECT_FALSE(May("x > 20.5", st));
  EXPECT_TRUE(May("x > 19.5", st));
  EXPECT_FALSE(May("x = 10.5", {{"x", Range(V(10), V(10))}}));
  // Double statistics against integer literals.
  Stats d = {{"y", Range(Value{0.5}, Value{1.5})}};
  EXPECT_FALSE(May("y < 0", d));
  EXPECT_TRUE(May("y < 1", d));
  EXPECT_FALSE(May("y >= 2", d));
  // Strings by unsigned bytes.
  Stats s = {{"s", Range(Value{std::string("b")}, Value{std::string("d")})}};
  EXPECT_FALSE(May("s < 'b'", s));
  EXPECT_TRUE(May("s < 'ba'", s));
  EXPECT_FALSE(May("s > 'd'", s));
  EXPECT_TRUE(May("s > 'c\xff'", s));
  EXPECT_FALSE(May("s >= '\xff'", s));
  // Booleans.
  Stats b = {{"b", Range(Value{false}, Value{false})}};
  EXPECT_FALSE(May("b = TRUE", b));
  EXPECT_TRUE(May("b = FALSE", b));
}

TEST(PredicateMayMatch, InAndBetween) {
  Stats st = {{"x", Range(V(10), V(20))}};
  EXPECT_FALSE(May("x IN (1, 2, 30)", st));
  EXPECT_TRUE(May("x IN (1, 15)", st));
  EXPECT_FALSE(May("x IN (NULL)", st));
  EXPECT_TRUE(May("x NOT IN (10)", st));
  EXPECT_FALSE(May("x NOT IN (10)", {{"x", Range(V(10), V(10))}}));
  EXPECT_FALSE(May("x NOT IN (1, NULL)", st));
  EXPECT_FALSE(May("x BETWEEN 21 AND 30", st));
  EXPECT_FALSE(May("x BETWEEN 0 AND 9", st));
  EXPECT_TRUE(May("x BETWEEN 15 AND 30", st));
  EXPECT_TRUE(May("x BETWEEN 0 AND 10", st));
  EXPECT_FALSE(May("x BETWEEN 12 AND 11", st));
  EXPECT_FALSE(May("x NOT BETWEEN 0 AND 30", st));
  EXPECT_TRUE(May("x NOT BETWEEN 0 AND 15", st));
  EXPECT_FALSE(May("x BETWEEN NULL AND 30", st));
  EXPECT_FALSE(May("NOT x BETWEEN NULL AND 30", st));
  EXPECT_TRUE(May("NOT x BETWEEN NULL AND 15", st));
}

TEST(PredicateMayMatch, NullCounts) {
  EXPECT_FALSE(May("x IS NULL", {{"x", Range(V(1), V(2), 0)}}));
  EXPECT_TRUE(May("x IS NULL", {{"x", Range(V(1), V(2), 5)}}));
  EXPECT_TRUE(May("x IS NULL", {{"x", Range(V(1), V(2), std::nullopt)}}));
  EXPECT_FALSE(May("x IS NOT NULL", {{"x", {std::nullopt, std::nullopt, 100}}}));
  EXPECT_TRUE(May("x IS NOT NULL", {{"x", {std::nullopt, std::nullopt, 99}}}));
  EXPECT_TRUE(May("x IS NOT NULL", {{"x", {std::nullopt, std::nullopt, std::nullopt}}}));
  // All-null: every comparison is NULL, and so is its negation.
  Stats all_null = {{"x", {std::nullopt, std::nullopt, 100}}};
  EXPECT_FALSE(May("x = 1", all_null));
  EXPECT_FALSE(May("NOT x = 1", all_null));
  EXPECT_FALSE(May("x NOT IN (1)", all_null));
  EXPECT_TRUE(May("x IS NULL", all_null));
  // Unknown row count: null_count alone does not say all rows are null.
  EXPECT_TRUE(May("x = 1", all_null, -1));
  EXPECT_FALSE(May("x IS NULL", {{"x", Range(V(1), V(2), 0)}}, -1));
}

TEST(PredicateMayMatch, NotAndOrAreConservativeAndCorrect) {
  Stats st = {{"x", Range(V(10), V(20))}, {"s", Range(Value{std::string("a")}, Value{std::string("c")})}};
  EXPECT_TRUE(May("NOT x = 15", st));
  EXPECT_FALSE(May("NOT x > 5", st));  // every value is > 5
  EXPECT_TRUE(May("NOT x > 15", st));
  EXPECT_FALSE(May("NOT NOT x = 5", st));
  EXPECT_TRUE(May("x = 5 OR x = 15", st));
  EXPECT_FALSE(May("x = 5 OR x = 25", st));
  EXPECT_FALSE(May("x = 15 AND s = 'z'", st));
  EXPECT_TRUE(May("x = 15 AND s = 'b'", st));
  EXPECT_FALSE(May("NOT (x > 5 OR s = 'z')", st));
  EXPECT_TRUE(May("NOT (x > 5 AND s = 'z')", st));
  EXPECT_TRUE(May("NOT (x > 15 AND s >= 'a')", st));
  EXPECT_FALSE(May("NOT (x >= 10 AND s >= 'a')", st));
  EXPECT_FALSE(May("(x < 10 OR x > 20) AND s = 'b'", st));
}

TEST(PredicateMayMatch, UnknownStatisticsAreConservative) {
  EXPECT_TRUE(May("x = 5", {}));
  EXPECT_TRUE(May("x = 5", {{"x", {V(10), std::nullopt, 0}}}));
  EXPECT_TRUE(May("x = 5", {{"x", {std::nullopt, V(1), 0}}}));
  EXPECT_TRUE(May("x = 5", {{"x", Range(Value{std::string("a")}, Value{std::string("b")})}}));  // kinds differ
  EXPECT_TRUE(May("x = 5", {{"x", Range(V(20), V(10))}}));                                     // min > max
  EXPECT_TRUE(May("x = 5", {{"x", Range(Value{kNaN}, Value{kNaN})}}));
  EXPECT_TRUE(May("NOT x = 5", {{"x", Range(Value{}, Value{})}}));
  EXPECT_FALSE(May("x = 5", {}, 0));  // no rows at all
  EXPECT_FALSE(May("x IS NULL", {}, 0));
}

// ---------------------------------------------------------------------------------------------
// Property: statistics-based skipping never skips a row that Evaluate keeps.

struct RandomTable {
  size_t rows = 0;
  std::map<std::string, ColumnValues> cols;
  std::vector<ColumnSpec> schema;
};

RandomTable MakeTable(std::mt19937_64& rng) {
  RandomTable t;
  t.rows = rng() % 7;
  auto maybe_null = [&](int pct) { return static_cast<int>(rng() % 100) < pct; };
  int null_pct = static_cast<int>(rng() % 4) * 30;  // 0, 30, 60, 90
  std::vector<std::optional<int64_t>> i;
  std::vector<std::optional<int32_t>> j;
  std::vector<std::optional<double>> d;
  std::vector<std::optional<std::string>> s;
  std::vector<std::optional<uint8_t>> b;
  const char* kStrings[] = {"", "a", "ab", "b", "\xff", "ba"};
  for (size_t r = 0; r < t.rows; ++r) {
    i.push_back(maybe_null(null_pct) ? std::nullopt : std::optional<int64_t>(static_cast<int64_t>(rng() % 9) - 4));
    j.push_back(static_cast<int32_t>(rng() % 5));
    double dv = static_cast<double>(static_cast<int>(rng() % 9) - 4) / 2;
    if (rng() % 8 == 0) dv = kNaN;
    d.push_back(maybe_null(null_pct) ? std::nullopt : std::optional<double>(dv));
    s.push_back(maybe_null(null_pct) ? std::nullopt : std::optional<std::string>(kStrings[rng() % 6]));
    b.push_back(maybe_null(null_pct) ? std::nullopt : std::optional<uint8_t>(rng() % 2));
  }
  t.cols["i"] = Col<int64_t>(i);
  t.cols["j"] = Col<int32_t>(j);
  t.cols["d"] = Col<double>(d);
  t.cols["s"] = Col<std::string>(s);
  t.cols["b"] = Col<uint8_t>(b);
  t.schema = {Spec("i", parquet::Type::kInt64), Spec("j", parquet::Type::kInt32), Spec("d", parquet::Type::kDouble),
              Spec("s", parquet::Type::kByteArray, true), Spec("b", parquet::Type::kBoolean)};
  return t;
}

// Min/max over present non-NaN values and the null count, as a Parquet writer records them; each
// statistic is sometimes dropped (unknown).
Stats StatsOf(const RandomTable& t, std::mt19937_64& rng) {
  Stats out;
  for (const auto& [name, col] : t.cols) {
    Predicate::ColumnStats st;
    std::vector<Value> present;
    std::visit(
        [&](const auto& values) {
          for (const auto& v : values) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, uint8_t>) {
              present.push_back(Value{v != 0});
            } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
              present.push_back(Value{static_cast<int64_t>(v)});
            } else if constexpr (std::is_same_v<T, double>) {
              if (!std::isnan(v)) present.push_back(Value{v});
            } else if constexpr (std::is_same_v<T, std::string>) {
              present.push_back(Value{v});
            }
          }
        },
        col.values);
    if (!present.empty()) {
      // Sort by re-parsing each value's comparison through a predicate would be circular; sort natively.
      auto less = [](const Value& a, const Value& b) {
        if (auto* x = std::get_if<std::string>(&a.v)) {
          const auto& y = std::get<std::string>(b.v);
          return std::lexicographical_compare(x->begin(), x->end(), y.begin(), y.end(),
                                              [](char p, char q) { return static_cast<unsigned char>(p) <
                                                                          static_cast<unsigned char>(q); });
        }
        return a.v < b.v;
      };
      auto [mn, mx] = std::minmax_element(present.begin(), present.end(), less);
      if (rng() % 5 != 0) st.min = *mn;
      if (rng() % 5 != 0) st.max = *mx;
    }
    if (rng() % 5 != 0) st.null_count = static_cast<int64_t>(t.rows - col.num_values());
    out[name] = st;
  }
  return out;
}

std::string RandomLiteral(std::mt19937_64& rng, const std::string& column) {
  if (rng() % 12 == 0) return "NULL";
  if (column == "s") {
    const char* k[] = {"''", "'a'", "'ab'", "'b'", "'\xff'", "'c'", "'a'''"};
    return k[rng() % 7];
  }
  if (column == "b") return rng() % 2 ? "TRUE" : "FALSE";
  int v = static_cast<int>(rng() % 11) - 5;
  if (rng() % 3 == 0) return std::to_string(v) + ".5";
  return std::to_string(v);
}

std::string RandomPredicate(std::mt19937_64& rng, int depth) {
  const char* kColumns[] = {"i", "j", "d", "s", "b"};
  int choice = static_cast<int>(rng() % (depth > 0 ? 10 : 6));
  std::string c = kColumns[rng() % 5];
  const char* kOps[] = {"=", "!=", "<>", "<", "<=", ">", ">="};
  switch (choice) {
    case 0:
    case 1:
      if (rng() % 4 == 0) return RandomLiteral(rng, c) + " " + kOps[rng() % 7] + " " + c;
      return c + " " + kOps[rng() % 7] + " " + RandomLiteral(rng, c);
    case 2: {
      std::string s = c + (rng() % 3 == 0 ? " NOT IN (" : " IN (") + RandomLiteral(rng, c);
      for (int n = static_cast<int>(rng() % 3); n > 0; --n) s += ", " + RandomLiteral(rng, c);
      return s + ")";
    }
    case 3: return c + (rng() % 2 ? " IS NULL" : " IS NOT NULL");
    case 4:
      return c + (rng() % 3 == 0 ? " NOT BETWEEN " : " BETWEEN ") + RandomLiteral(rng, c) + " AND " +
             RandomLiteral(rng, c);
    case 5: return c + " " + kOps[rng() % 7] + " " + RandomLiteral(rng, c);
    case 6: return "NOT (" + RandomPredicate(rng, depth - 1) + ")";
    case 7:
    case 8: return "(" + RandomPredicate(rng, depth - 1) + " AND " + RandomPredicate(rng, depth - 1) + ")";
    default: return "(" + RandomPredicate(rng, depth - 1) + " OR " + RandomPredicate(rng, depth - 1) + ")";
  }
}

TEST(PredicateProperty, SkippingFromStatisticsNeverDropsAMatchingRow) {
  std::mt19937_64 rng(20240607);
  int skipped = 0, kept_rows = 0, counted = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    RandomTable t = MakeTable(rng);
    std::string text = RandomPredicate(rng, 3);
    auto p = Predicate::Parse(text);
    ASSERT_TRUE(p.ok()) << text << ": " << p.status().ToString();
    ASSERT_TRUE(p->Bind(t.schema).ok()) << text;
    std::map<std::string, const ColumnValues*> cols;
    for (const auto& [name, col] : t.cols) cols[name] = &col;
    std::vector<uint8_t> keep;
    ASSERT_TRUE(p->Evaluate(cols, t.rows, &keep).ok()) << text;
    ASSERT_EQ(keep.size(), t.rows);
    size_t kept = static_cast<size_t>(std::count(keep.begin(), keep.end(), 1));
    kept_rows += static_cast<int>(kept);

    Stats stats = StatsOf(t, rng);
    bool may = p->MayMatch(stats, static_cast<int64_t>(t.rows));
    if (!may) {
      ++skipped;
      EXPECT_EQ(kept, 0u) << text << " was skipped but keeps " << kept << " of " << t.rows << " rows";
    }
    if (p->MustMatch(stats, static_cast<int64_t>(t.rows))) {
      ++counted;
      EXPECT_EQ(kept, t.rows) << text << " was counted from statistics but keeps " << kept << " of " << t.rows << " rows";
    }

    // The canonical form means the same thing.
    auto q = Predicate::Parse(p->ToString());
    ASSERT_TRUE(q.ok()) << p->ToString();
    EXPECT_EQ(q->ToString(), p->ToString());
    ASSERT_TRUE(q->Bind(t.schema).ok());
    std::vector<uint8_t> keep_q;
    ASSERT_TRUE(q->Evaluate(cols, t.rows, &keep_q).ok());
    EXPECT_EQ(keep_q, keep) << text;

    // A row is never kept by both p and NOT p.
    auto n = Predicate::Parse("NOT (" + text + ")");
    ASSERT_TRUE(n.ok());
    ASSERT_TRUE(n->Bind(t.schema).ok());
    std::vector<uint8_t> keep_n;
    ASSERT_TRUE(n->Evaluate(cols, t.rows, &keep_n).ok());
    for (size_t r = 0; r < t.rows; ++r) EXPECT_FALSE(keep[r] && keep_n[r]) << text << " row " << r;
  }
  // The test exercises both outcomes.
  EXPECT_GT(skipped, 200);
  EXPECT_GT(counted, 50);
  EXPECT_GT(kept_rows, 1000);
}

// ---------------------------------------------------------------------------------------------
// Dates, timestamps and decimals.


ColumnSpec LogicalSpec(const std::string& name, parquet::Type type, LogicalType logical, int32_t precision = 0,
                       int32_t scale = 0) {
  ColumnSpec c = Spec(name, type);
  c.optional = true;
  c.logical = logical;
  c.precision = precision;
  c.scale = scale;
  return c;
}

std::vector<ColumnSpec> LogicalSchema() {
  return {LogicalSpec("d", parquet::Type::kInt32, LogicalType::kDate),
          LogicalSpec("ts", parquet::Type::kInt64, LogicalType::kTimestamp),
          LogicalSpec("price", parquet::Type::kInt64, LogicalType::kDecimal, 10, 2),
          LogicalSpec("wide", parquet::Type::kFixedLenByteArray, LogicalType::kDecimal, 30, 2),
          LogicalSpec("date", parquet::Type::kInt32, LogicalType::kShort)};
}

std::vector<uint8_t> KeepLogical(std::string_view text) {
  auto p = Predicate::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status().ToString();
  if (!p.ok()) return {};
  Status s = p->Bind(LogicalSchema());
  EXPECT_TRUE(s.ok()) << text << ": " << s.ToString();
  if (!s.ok()) return {};
  // 2024-01-30, 2024-01-31, 2024-02-01 (days); midnight, noon, next midnight of 2024-01-31 (micros);
  // 12.49, 12.50, 12.51 (unscaled at scale 2).
  ColumnValues d = Col<int32_t>({19752, 19753, 19754});
  ColumnValues ts = Col<int64_t>({1706659200000000, 1706702400000000, 1706745600000000});
  ColumnValues price = Col<int64_t>({1249, 1250, 1251});
  ColumnValues date = Col<int32_t>({1, 2, 3});
  std::vector<uint8_t> keep;
  s = p->Evaluate({{"d", &d}, {"ts", &ts}, {"price", &price}, {"date", &date}}, 3, &keep);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return keep;
}


TEST(PredicateLogical, TypedLiteralsParseAndPrintBack) {
  EXPECT_EQ(Canon("d = DATE '2024-01-31'"), "(d = DATE '2024-01-31')");
  EXPECT_EQ(Canon("ts >= timestamp   '2024-01-31 12:00:00'"), "(ts >= TIMESTAMP '2024-01-31 12:00:00')");
  EXPECT_EQ(Canon("d IN (DATE '2024-01-31', NULL)"), "(d IN (DATE '2024-01-31', NULL))");
  EXPECT_EQ(Canon("DATE '2024-01-31' < d"), "(d > DATE '2024-01-31')");
  // Elsewhere the words are column names.
  EXPECT_EQ(Canon("date = 1 AND timestamp IS NULL"), "((date = 1) AND (timestamp IS NULL))");
  EXPECT_EQ(Canon("d BETWEEN DATE '2024-01-01' AND DATE '2024-12-31'"),
            "(d BETWEEN DATE '2024-01-01' AND DATE '2024-12-31')");
}

TEST(PredicateLogical, DatesTimestampsAndDecimalsCompareByValue) {
  using K = std::vector<uint8_t>;
  EXPECT_EQ(KeepLogical("d = DATE '2024-01-31'"), (K{0, 1, 0}));
  EXPECT_EQ(KeepLogical("d >= '2024-01-31'"), (K{0, 1, 1}));  // a string names a date too
  EXPECT_EQ(KeepLogical("ts > TIMESTAMP '2024-01-31 00:00:00'"), (K{0, 1, 1}));
  EXPECT_EQ(KeepLogical("ts < DATE '2024-02-01'"), (K{1, 1, 0}));
  EXPECT_EQ(KeepLogical("ts = '2024-01-31T13:00:00+01:00'"), (K{0, 1, 0}));
  EXPECT_EQ(KeepLogical("price = 12.50"), (K{0, 1, 0}));
  EXPECT_EQ(KeepLogical("price = 12.5"), (K{0, 1, 0}));
  EXPECT_EQ(KeepLogical("price = 12.505"), (K{0, 0, 0}));  // no value of scale 2 equals it
  EXPECT_EQ(KeepLogical("price > 12.505"), (K{0, 0, 1}));
  EXPECT_EQ(KeepLogical("price <= 12.505"), (K{1, 1, 0}));
  EXPECT_EQ(KeepLogical("price BETWEEN 12 AND 12.5"), (K{1, 1, 0}));
  EXPECT_EQ(KeepLogical("date = 2"), (K{0, 1, 0}));  // a short named 'date'
}

TEST(PredicateLogical, MismatchedLiteralsAreRefusedNamingTheColumnsType) {
  auto refused = [](std::string_view text, std::string_view expected) {
    Status s = BindText(text, LogicalSchema());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.message().find(expected), std::string::npos) << text << ": " << s.message();
  };
  refused("d = 5", "column 'd' is date; it cannot be compared with 5");
  refused("d = '2024-02-30'", "not a date");
  refused("d = TIMESTAMP '2024-01-31 00:00:00'", "column 'd' is date");
  refused("ts = 'yesterday'", "not a timestamp");
  refused("price = 'a'", "column 'price' is decimal(10,2)");
  refused("price = 1e40", "out of the decimal's range");
  refused("wide = 1", "decimals above 18 digits");
  refused("date = DATE '2024-01-31'", "cannot be compared with DATE '2024-01-31'");
  EXPECT_TRUE(BindText("wide IS NULL AND d = NULL", LogicalSchema()).ok());
}

TEST(PredicateLogical, StatisticsSkipByTheBoundLiterals) {
  auto p = Predicate::Parse("d > DATE '2024-01-31' AND price < 12.50");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Bind(LogicalSchema()).ok());
  Stats before = {{"d", Range(V(19700), V(19753))}, {"price", Range(V(0), V(100))}};
  Stats after = {{"d", Range(V(19754), V(19800))}, {"price", Range(V(0), V(1249))}};
  EXPECT_FALSE(p->MayMatch(before, 10));
  EXPECT_TRUE(p->MayMatch(after, 10));
  EXPECT_TRUE(p->MustMatch(after, 10));
  EXPECT_EQ(p->ToString(), "((d > DATE '2024-01-31') AND (price < 12.5))");
}

}  // namespace
}  // namespace stoke
