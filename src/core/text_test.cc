#include "core/text.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace stoke {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80"));  // ï, €, U+1F600
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));
}

TEST(Utf8, RejectsMalformedSequences) {
  for (const char* bad : {"\xff", "caf\xe9", "\xc3", "\xe2\x82", "\xc0\xaf" /* overlong '/' */,
                          "\xed\xa0\x80" /* surrogate */, "\xf4\x90\x80\x80" /* past U+10FFFF */, "\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << EscapeNonUtf8(bad);
  }
}

TEST(Utf8, EscapesOnlyTheBadBytes) {
  EXPECT_EQ(EscapeNonUtf8("volume_\xff\xfe.npy"), "volume_\\xff\\xfe.npy");
  EXPECT_EQ(EscapeNonUtf8("na\xc3\xafve"), "na\xc3\xafve");
  EXPECT_EQ(EscapeNonUtf8("caf\xe9!"), "caf\\xe9!");
  EXPECT_EQ(EscapeNonUtf8("\xe2\x82"), "\\xe2\\x82");  // a truncated sequence: each byte escaped
  EXPECT_TRUE(IsValidUtf8(EscapeNonUtf8("\x80\xff\xc0\xaf")));
}

TEST(RandomUuid, IsVersion4AndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string u = RandomUuid();
    ASSERT_EQ(u.size(), 36u);
    EXPECT_EQ(u[14], '4');
    EXPECT_TRUE(u[19] == '8' || u[19] == '9' || u[19] == 'a' || u[19] == 'b') << u;
    EXPECT_TRUE(seen.insert(u).second) << u;
  }
}

}  // namespace
}  // namespace stoke
