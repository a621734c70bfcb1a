#include "core/progress.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(ProgressBar, IsOffWhenNotATerminalAndRendersRatesAndEta) {
  ProgressBar bar("convert", 200, "files");  // tests run with stdout piped
  EXPECT_FALSE(bar.enabled());
  bar.Add(50, 50 * 360000);
  std::string line = bar.Render();
  EXPECT_NE(line.find("convert  50/200 files  25.0%"), std::string::npos) << line;
  EXPECT_NE(line.find("MB/s"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;
  EXPECT_EQ(bar.items(), 50u);
}

TEST(Units, FormatsBytesAndDurations) {
  EXPECT_EQ(FormatBytes(12), "12 B");
  EXPECT_EQ(FormatBytes(360000), "351.6 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(185), "3m05s");
  EXPECT_EQ(FormatDuration(2.5), "2.5s");
}

}  // namespace
}  // namespace stoke
