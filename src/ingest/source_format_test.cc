#include "stoke/source_format.h"

#include <gtest/gtest.h>

namespace stoke {
namespace {

TEST(SourceFormatNames, ReadBackAndAnUnknownNameSaysWhatIsExpected) {
  for (SourceFormat f : {SourceFormat::kAuto, SourceFormat::kNpy, SourceFormat::kNpz, SourceFormat::kHdf5,
                         SourceFormat::kImages, SourceFormat::kParquet}) {
    auto parsed = ParseSourceFormat(SourceFormatName(f));
    ASSERT_TRUE(parsed.ok()) << SourceFormatName(f);
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_EQ(*ParseSourceFormat(""), SourceFormat::kAuto);  // as the CLI and Python took it before "auto"
  auto bad = ParseSourceFormat("tiff");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "`format` must be auto, npy, npz, hdf5, images or parquet, not 'tiff'");
}

TEST(Hdf5SamplesNames, ReadBackAndAnUnknownNameSaysWhatIsExpected) {
  for (Hdf5Samples h : {Hdf5Samples::kAuto, Hdf5Samples::kAxis0, Hdf5Samples::kFile}) {
    auto parsed = ParseHdf5Samples(Hdf5SamplesName(h));
    ASSERT_TRUE(parsed.ok()) << Hdf5SamplesName(h);
    EXPECT_EQ(*parsed, h);
  }
  auto bad = ParseHdf5Samples("rows");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "`hdf5_samples` must be auto, axis0 or file, not 'rows'");
}

}  // namespace
}  // namespace stoke
