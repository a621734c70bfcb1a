#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loader/transform.h"

namespace stoke {
namespace {

using Kind = TransformSpec::Kind;

TEST(TransformKind, Names) {
  EXPECT_EQ(TransformKindName(Kind::kCast), "cast");
  EXPECT_EQ(TransformKindName(Kind::kNormalize), "normalize");
  EXPECT_EQ(TransformKindName(Kind::kRandomFlip), "random_flip");
  EXPECT_EQ(TransformKindName(Kind::kRandomRot90), "random_rot90");
  EXPECT_EQ(TransformKindName(Kind::kRandomCrop), "random_crop");
  EXPECT_EQ(TransformKindName(Kind::kCenterCrop), "center_crop");
  EXPECT_EQ(TransformKindName(Kind::kChannelsFirst), "channels_first");
  EXPECT_EQ(TransformKindName(Kind::kChannelsLast), "channels_last");
  EXPECT_EQ(TransformKindName(Kind::kRandomResizedCrop), "random_resized_crop");
  EXPECT_EQ(TransformKindName(Kind::kResize), "resize");
  EXPECT_EQ(TransformKindName(Kind::kRandomHorizontalFlip), "random_horizontal_flip");
  EXPECT_EQ(TransformKindName(Kind::kColorJitter), "color_jitter");
  EXPECT_EQ(TransformKindName(Kind::kToTensor), "to_tensor");
  for (int k = 0; k <= static_cast<int>(Kind::kToTensor); ++k) {
    auto back = ParseTransformKind(TransformKindName(static_cast<Kind>(k)));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, static_cast<Kind>(k));
  }
  auto bad = ParseTransformKind("rotate");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("random_resized_crop"), std::string::npos) << bad.status().message();
}

TEST(TransformText, ParsesEachKindWithItsMainValueAndKeys) {
  auto rrc = ParseTransformText("random_resized_crop:224x192,scale=0.25/1,ratio=0.5/2");
  ASSERT_TRUE(rrc.ok()) << rrc.status().message();
  EXPECT_EQ(rrc->kind, Kind::kRandomResizedCrop);
  EXPECT_EQ(rrc->size, (std::vector<int64_t>{224, 192}));
  EXPECT_EQ(rrc->scale, (std::vector<double>{0.25, 1.0}));
  EXPECT_EQ(rrc->ratio, (std::vector<double>{0.5, 2.0}));
  auto plain = ParseTransformText("random_resized_crop:224");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->size, (std::vector<int64_t>{224}));
  EXPECT_EQ(plain->scale, (std::vector<double>{0.08, 1.0}));  // the defaults stay
  auto flip = ParseTransformText("hflip");
  ASSERT_TRUE(flip.ok());
  EXPECT_EQ(flip->kind, Kind::kRandomHorizontalFlip);
  EXPECT_EQ(flip->p, 0.5);
  EXPECT_EQ(ParseTransformText("random_horizontal_flip:0.25")->p, 0.25);
  auto norm = ParseTransformText("normalize:mean=0.485/0.456/0.406,std=0.229/0.224/0.225");
  ASSERT_TRUE(norm.ok());
  EXPECT_EQ(norm->mean, (std::vector<double>{0.485, 0.456, 0.406}));
  EXPECT_EQ(norm->std, (std::vector<double>{0.229, 0.224, 0.225}));
  EXPECT_EQ(norm->axis, TransformSpec::kChannelAxis);
  EXPECT_EQ(ParseTransformText("to_tensor:float16")->dtype, DType::kFloat16);
  EXPECT_EQ(ParseTransformText("to_tensor")->dtype, DType::kFloat32);
  auto jitter = ParseTransformText("color_jitter:brightness=0.4,contrast=0.5/1.5");
  ASSERT_TRUE(jitter.ok());
  EXPECT_EQ(jitter->brightness, (std::vector<double>{0.6, 1.4}));
  EXPECT_EQ(jitter->contrast, (std::vector<double>{0.5, 1.5}));
  EXPECT_TRUE(ParseTransformText("color_jitter:brightness=0")->brightness.empty());
  auto crop = ParseTransformText("random_crop:8x8,axes=0/1");
  ASSERT_TRUE(crop.ok());
  EXPECT_EQ(crop->axes, (std::vector<int>{0, 1}));
  EXPECT_EQ(ParseTransformText("random_rot90")->axes, (std::vector<int>{0, 1}));
  EXPECT_EQ(ParseTransformText("channels_last")->axis, 0);
}

TEST(TransformText, BadTextNamesTheTransformAndThePart) {
  for (const char* text : {"rotate:90", "resize:", "resize:2x3x4", "resize:abc", "hflip:x", "normalize:0.5",
                           "resize:8,bogus=1", "resize:8,9", "color_jitter:brightness=-1", "to_tensor:float99",
                           "normalize:mean=0.5/,std=1"}) {
    auto r = ParseTransformText(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace stoke
