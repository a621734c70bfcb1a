#include "stoke/status.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(Status, CarriesCodeMessageAndContext) {
  Status s = Status::IOError("disk gone", /*retryable=*/true).WithContext("reading a.parquet");
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_TRUE(s.retryable());
  EXPECT_EQ(s.ToString(), "I/O error: reading a.parquet: disk gone");
  EXPECT_EQ(Status::Unsupported("encoding X").ToString(), "unsupported: encoding X");
  EXPECT_TRUE(Status::OK().WithContext("x").ok());
}

Result<int> Half(int v) {
  if (v % 2) return Status::InvalidArgument("odd");
  return v / 2;
}

Status Quarter(int v, int* out) {
  STOKE_ASSIGN_OR_RETURN(int h, Half(v));
  STOKE_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::OK();
}

TEST(Status, FrontEndsRenameTheParametersMessagesName) {
  constexpr std::pair<std::string_view, std::string_view> flags[] = {{"shard", "--shard"}, {"mode", "--mode"}};
  EXPECT_EQ(RenameParameters("ingest: `shard` needs `mode` append", flags), "ingest: --shard needs --mode append");
  // Unknown names keep their backquotes; text without them, or with an unpaired one, is kept whole.
  EXPECT_EQ(RenameParameters("`where`: column 'x' (`mode`)", flags), "`where`: column 'x' (--mode)");
  EXPECT_EQ(RenameParameters("no parameter here", flags), "no parameter here");
  EXPECT_EQ(RenameParameters("a lone ` quote and `mode`", flags), "a lone ` quote and --mode");
  // A backquote in a value (a path, a column name) does not hide the parameters after it.
  EXPECT_EQ(RenameParameters("column 'a`b' holds structs; `where` compares; `mode`", flags),
            "column 'a`b' holds structs; `where` compares; --mode");
  EXPECT_EQ(RenameParameters("`mode``mode`", flags), "--mode--mode");
  EXPECT_EQ(RenameParameters("", flags), "");
  EXPECT_EQ(RenameParameters("ends with `", flags), "ends with `");
}

TEST(Status, MacrosPropagateErrors) {
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  EXPECT_EQ(Quarter(6, &q).code(), StatusCode::kInvalidArgument);
  Result<int> r = Status::OK();  // an OK status is not a value
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(StatusDeathTest, ValueOfAnErrorAbortsWithTheStatusMessage) {
  Result<int> r = Status::NotFound("no such table 't'");
  EXPECT_DEATH((void)r.value(), "stoke: Result::value\\(\\) on error: not found: no such table 't'");
  const Result<std::string> c = Status::Corruption("bad page at offset 12");
  EXPECT_DEATH((void)c->size(), "corruption: bad page at offset 12");
  EXPECT_DEATH((void)*Result<int>(Status::IOError("gone")), "I/O error: gone");
  EXPECT_DEATH((void)std::move(r).value(), "Result::value\\(\\) on error: not found");
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

TEST(StatusCodes, EveryNameReadsBack) {
  for (StatusCode code : {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kCorruption,
                          StatusCode::kIOError, StatusCode::kConflict, StatusCode::kUnsupported,
                          StatusCode::kAlreadyExists, StatusCode::kCancelled, StatusCode::kInternal}) {
    auto parsed = ParseStatusCode(StatusCodeName(code));
    ASSERT_TRUE(parsed.ok()) << StatusCodeName(code);
    EXPECT_EQ(*parsed, code);
  }
  auto bad = ParseStatusCode("oops");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("status code: unknown value 'oops' (expected one of OK, invalid argument,", 0),
            0u);
}

}  // namespace
}  // namespace stoke
