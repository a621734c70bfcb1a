#include <gtest/gtest.h>

#include "stoke/loader.h"

namespace stoke {
namespace {

using O = LoaderOptions;

TEST(LoaderOptionNames, EveryChoiceReadsBackAndOtherTextNamesTheChoices) {
  for (O::Shuffle v : {O::Shuffle::kNone, O::Shuffle::kGlobal, O::Shuffle::kBlock}) {
    EXPECT_EQ(*ParseShuffle(ShuffleName(v)), v);
  }
  for (O::Backend v : {O::Backend::kAuto, O::Backend::kIoUring, O::Backend::kPread}) {
    EXPECT_EQ(*ParseBackend(BackendName(v)), v);
  }
  for (O::OnError v : {O::OnError::kRaise, O::OnError::kSkip}) EXPECT_EQ(*ParseOnError(OnErrorName(v)), v);
  for (O::TransformsOn v : {O::TransformsOn::kCpu, O::TransformsOn::kCuda}) {
    EXPECT_EQ(*ParseTransformsOn(TransformsOnName(v)), v);
  }
  EXPECT_NE(ParseTransformsOn("gpu").status().message().find("expected one of cpu, cuda"), std::string::npos);
  EXPECT_EQ(ShuffleName(O{}.shuffle), "global");
  EXPECT_EQ(BackendName(O{}.backend), "auto");
  EXPECT_EQ(OnErrorName(O{}.on_error), "raise");
  auto bad = ParseShuffle("sideways");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "shuffle: unknown value 'sideways' (expected one of none, global, block)");
  EXPECT_EQ(ParseBackend("").status().message(), "backend: unknown value '' (expected one of auto, io_uring, pread)");
  EXPECT_EQ(ParseOnError("Skip").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoke
