#include "loader/image_transform.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/random.h"
#include "format/image.h"

namespace stoke {
namespace {

using TS = TransformSpec;
using Kind = TransformSpec::Kind;

std::vector<uint8_t> Noise(int w, int h, int c, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(w) * h * c);
  for (auto& v : p) v = static_cast<uint8_t>(rng.Below(256));
  return p;
}

std::string PngOf(const std::vector<uint8_t>& px, int w, int h, int c) {
  auto r = EncodePng(ByteView(px.data(), px.size()), w, h, c);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : "";
}

ImagePipeline Make(const std::vector<TransformSpec>& specs, std::optional<std::pair<int64_t, int64_t>> uniform = {},
                   std::vector<int64_t> tensor_shape = {}, ImagePipelineOptions o = {}) {
  auto p = ImagePipeline::Create(specs, o, tensor_shape, uniform);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : ImagePipeline();
}

std::vector<uint8_t> RunImage(const ImagePipeline& p, ByteView in, int64_t row = 0, Status* status = nullptr) {
  std::vector<uint8_t> out(p.out_bytes());
  ImageScratch scratch;
  Status st = p.Apply(in, MutableByteView(out.data(), out.size()), 5, 0, row, 0, &scratch, nullptr);
  if (status != nullptr) {
    *status = st;
  } else {
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return out;
}

TEST(ImagePipeline, RandomResizedCropChoicesFollowTorchvision) {
  const ImagePipeline p = Make({TS::RandomResizedCrop({16, 24})});
  EXPECT_EQ(p.out_shape(), (std::vector<int64_t>{16, 24, 3}));
  int fallbacks = 0;
  for (int64_t row = 0; row < 2000; ++row) {
    ImageGeometry g;
    auto c = p.Choices(300, 200, 1, 0, row, 0, &g);
    ASSERT_TRUE(c.ok());
    ASSERT_EQ(c->size(), 1u);
    const ImageTransformChoice& box = (*c)[0];
    ASSERT_GE(box.top, 0);
    ASSERT_GE(box.left, 0);
    ASSERT_LE(box.top + box.height, 200);
    ASSERT_LE(box.left + box.width, 300);
    const double area = static_cast<double>(box.width) * box.height / (300.0 * 200.0);
    const double ratio = static_cast<double>(box.width) / box.height;
    if (area > 1.0 + 1e-9 || ratio < 0.7 || ratio > 1.4) ++fallbacks;
    EXPECT_EQ(g.box_left, box.left);
    EXPECT_EQ(g.box_top, box.top);
    EXPECT_EQ(g.box_width, box.width);
    EXPECT_EQ(g.box_height, box.height);
    EXPECT_EQ(g.resized_width, 24);
    EXPECT_EQ(g.resized_height, 16);
  }
  EXPECT_EQ(fallbacks, 0);
  // A very wide image falls back to torchvision's centred box of ratio 4/3 when no attempt fits.
  const ImagePipeline narrow = Make({TS::RandomResizedCrop({8}, {0.9, 1.0}, {1.0, 1.0})});
  auto c = narrow.Choices(1000, 10, 0, 0, 0, 0, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].height, 10);
  EXPECT_EQ((*c)[0].width, 10);  // round(10 * 1.0)
  EXPECT_EQ((*c)[0].left, (1000 - 10) / 2);
}

TEST(ImagePipeline, DrawsDoNotDependOnTheImage) {
  // The flip after a crop sees the same random sequence whatever the image's size.
  const ImagePipeline p = Make({TS::RandomResizedCrop({8}), TS::RandomHorizontalFlip(), TS::ColorJitter(0.5, 0.5)});
  for (int64_t row = 0; row < 50; ++row) {
    auto a = p.Choices(640, 480, 3, 1, row, 0, nullptr), b = p.Choices(31, 999, 3, 1, row, 0, nullptr);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ((*a)[1].flip, (*b)[1].flip);
    EXPECT_EQ((*a)[2].brightness, (*b)[2].brightness);
    EXPECT_EQ((*a)[2].contrast, (*b)[2].contrast);
    EXPECT_EQ((*a)[2].brightness_first, (*b)[2].brightness_first);
    EXPECT_GE((*a)[2].brightness, 0.5);
    EXPECT_LE((*a)[2].brightness, 1.5);
  }
}

TEST(ImagePipeline, ResizeAndCenterCropSizesAsTorchvision) {
  const ImagePipeline p = Make({TS::Resize({256}), TS::ImageCenterCrop({224})});
  EXPECT_EQ(p.out_shape(), (std::vector<int64_t>{224, 224, 3}));
  ImageGeometry g;
  auto c = p.Choices(500, 375, 0, 0, 0, 0, &g);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].out_height, 256);
  EXPECT_EQ((*c)[0].out_width, 341);  // int(256 * 500 / 375)
  EXPECT_EQ((*c)[1].top, 16);         // round(32 / 2)
  EXPECT_EQ((*c)[1].left, 58);        // round(117 / 2) = round(58.5) = 58, half to even
  EXPECT_EQ(g.window_left, 58);
  EXPECT_EQ(g.window_width, 224);
  // Resize to one side only: every image must then have the same result size.
  EXPECT_FALSE(ImagePipeline::FixesSize({TS::Resize({256})}));
  EXPECT_TRUE(ImagePipeline::FixesSize({TS::Resize({256}), TS::ImageCenterCrop({224})}));
  EXPECT_TRUE(ImagePipeline::FixesSize({TS::Resize({32, 48})}));
  EXPECT_FALSE(ImagePipeline::FixesSize({TS::ToTensor()}));
}

TEST(ImagePipeline, ImagesOfAnotherSizeAreRefusedNamingTheFix) {
  const ImagePipeline p = Make({TS::ToTensor()}, std::make_pair(int64_t{8}, int64_t{6}));
  EXPECT_EQ(p.out_shape(), (std::vector<int64_t>{3, 8, 6}));
  const std::string ok = PngOf(Noise(6, 8, 3, 1), 6, 8, 3), other = PngOf(Noise(7, 8, 3, 1), 7, 8, 3);
  RunImage(p, AsBytes(ok));
  Status st;
  RunImage(p, AsBytes(other), 0, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("7x8"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("random_resized_crop"), std::string::npos) << st.message();
  // Without a size to hold them to, a chain that does not fix one cannot be made.
  auto none = ImagePipeline::Create({TS::ToTensor()}, {}, {}, std::nullopt);
  EXPECT_FALSE(none.ok());
}

TEST(ImagePipeline, OutputMatchesDecodeCropAndFlipByHand) {
  // center_crop and flip move pixels without resampling: compare with the decoded PNG directly.
  const int w = 9, h = 7;
  const auto px = Noise(w, h, 3, 4);
  const std::string png = PngOf(px, w, h, 3);
  const ImagePipeline p = Make({TS::ImageCenterCrop({4, 5}), TS::RandomHorizontalFlip(1.0)});
  const auto out = RunImage(p, AsBytes(png));
  const int top = 2, left = 2;  // round(3 / 2) = 2 (half to even), round(4 / 2) = 2
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) {
      for (int c = 0; c < 3; ++c) {
        ASSERT_EQ(out[(y * 5 + x) * 3 + c], px[((top + y) * w + left + 4 - x) * 3 + c]);
      }
    }
  }
  // Padding: a crop larger than the image puts it at floor((size - extent) / 2) with zeros around.
  const ImagePipeline pad = Make({TS::ImageCenterCrop({10, 12})});
  const auto padded = RunImage(pad, AsBytes(png));
  EXPECT_EQ(padded[0], 0);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(padded[((1 * 12) + 1) * 3 + c], px[c]);
}

TEST(ImagePipeline, ColorJitterExtremesAsPil) {
  const int w = 6, h = 5;
  const auto px = Noise(w, h, 3, 5);
  const std::string png = PngOf(px, w, h, 3);
  // brightness factor 0: black.
  TransformSpec dark = TS::ColorJitter(0, 0);
  dark.brightness = {0, 0};
  for (uint8_t v : RunImage(Make({dark}, std::make_pair(int64_t{h}, int64_t{w})), AsBytes(png))) ASSERT_EQ(v, 0);
  // contrast factor 0: the mean gray level int(mean + 0.5) everywhere.
  TransformSpec flat = TS::ColorJitter(0, 0);
  flat.contrast = {0, 0};
  uint64_t sum = 0;
  for (int i = 0; i < w * h; ++i) sum += (px[3 * i] * 19595u + px[3 * i + 1] * 38470u + px[3 * i + 2] * 7471u + 0x8000u) >> 16;
  const int mean = static_cast<int>(static_cast<double>(sum) / (w * h) + 0.5);
  for (uint8_t v : RunImage(Make({flat}, std::make_pair(int64_t{h}, int64_t{w})), AsBytes(png))) ASSERT_EQ(v, mean);
  // brightness 2: doubled and clipped, truncating.
  TransformSpec bright = TS::ColorJitter(0, 0);
  bright.brightness = {2, 2};
  const auto b2 = RunImage(Make({bright}, std::make_pair(int64_t{h}, int64_t{w})), AsBytes(png));
  for (size_t i = 0; i < px.size(); ++i) ASSERT_EQ(b2[i], std::min(255, px[i] * 2));
}

TEST(ImagePipeline, TensorColumnsOfPixelsTakeTheSameTransforms) {
  const int w = 40, h = 30;
  const auto px = Noise(w, h, 3, 6);
  const std::string png = PngOf(px, w, h, 3);
  const std::vector<TransformSpec> specs = {TS::RandomResizedCrop({12}), TS::RandomHorizontalFlip(), TS::ToTensor(),
                                            TS::Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})};
  const ImagePipeline encoded = Make(specs);
  const ImagePipeline pixels = Make(specs, std::nullopt, {h, w, 3});
  EXPECT_EQ(pixels.out_shape(), (std::vector<int64_t>{3, 12, 12}));
  for (int64_t row = 0; row < 20; ++row) {
    EXPECT_EQ(RunImage(encoded, AsBytes(png), row), RunImage(pixels, ByteView(px.data(), px.size()), row)) << row;
  }
  // A pixel cell of the wrong size is an error, not a read past it.
  Status st;
  RunImage(pixels, ByteView(px.data(), px.size() - 3), 0, &st);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST(ImagePipeline, DctScalingStaysCloseToTheFullDecode) {
  // A smooth 800 x 600 JPEG cropped to 64 x 64: decoded at 1/8 or so, resized, within a few levels.
  const int w = 800, h = 600;
  std::vector<uint8_t> px(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      px[(y * w + x) * 3] = static_cast<uint8_t>(128 + 100 * std::sin(x / 40.0));
      px[(y * w + x) * 3 + 1] = static_cast<uint8_t>(128 + 100 * std::cos(y / 30.0));
      px[(y * w + x) * 3 + 2] = static_cast<uint8_t>((x + y) / 6);
    }
  }
  auto jpeg = EncodeJpeg(ByteView(px.data(), px.size()), w, h, 3, 95);
  ASSERT_TRUE(jpeg.ok());
  ImagePipelineOptions full_o, scaled_o;
  full_o.jpeg_dct_scaling = false;
  const std::vector<TransformSpec> specs = {TS::Resize({64, 64})};
  const auto full = RunImage(Make(specs, {}, {}, full_o), AsBytes(*jpeg));
  const auto scaled = RunImage(Make(specs, {}, {}, scaled_o), AsBytes(*jpeg));
  double diff = 0;
  for (size_t i = 0; i < full.size(); ++i) diff += std::abs(int{full[i]} - int{scaled[i]});
  EXPECT_LT(diff / full.size(), 3.0);
  EXPECT_NE(full, scaled);  // it did take the scaled path
}

TEST(ImagePipeline, DecodingOnlyTheBoxGivesTheWholeDecodesOutput) {
  // Noisy JPEGs (every block busy), random crops with and without a resize, at full size and at DCT
  // scales: the output with the region decode (the default) equals the one from whole-image decodes.
  Rng rng(17);
  for (int k = 0; k < 4; ++k) {
    const int w = 150 + static_cast<int>(rng.Below(250)), h = 120 + static_cast<int>(rng.Below(250));
    const auto px = Noise(w, h, 3, rng.Next());
    auto jpeg = EncodeJpeg(ByteView(px.data(), px.size()), w, h, 3, 85);
    ASSERT_TRUE(jpeg.ok());
    for (bool dct : {true, false}) {
      for (const auto& specs : std::vector<std::vector<TransformSpec>>{
               {TS::RandomResizedCrop({40}), TS::RandomHorizontalFlip()},
               {TS::RandomResizedCrop({24, 32}, {0.02, 0.3})},
               {TS::Resize({48}), TS::ImageCenterCrop({40})},
               {TS::ImageCenterCrop({37, 61})}}) {
        ImagePipelineOptions region_o, whole_o;
        region_o.jpeg_dct_scaling = whole_o.jpeg_dct_scaling = dct;
        whole_o.jpeg_region_decode = false;
        const std::pair<int64_t, int64_t> uniform{h, w};
        const bool fixed = ImagePipeline::FixesSize(specs);
        const ImagePipeline with_region = Make(specs, fixed ? std::nullopt : std::make_optional(uniform), {}, region_o);
        const ImagePipeline whole = Make(specs, fixed ? std::nullopt : std::make_optional(uniform), {}, whole_o);
        for (int64_t row = 0; row < 12; ++row) {
          ASSERT_EQ(RunImage(with_region, AsBytes(*jpeg), row), RunImage(whole, AsBytes(*jpeg), row))
              << w << "x" << h << " dct " << dct << " transforms " << specs.size() << " row " << row;
        }
      }
    }
  }
}

TEST(ImagePipeline, BadChainsNameTheTransform) {
  auto bad = [](const std::vector<TransformSpec>& specs, const std::string& what) {
    auto p = ImagePipeline::Create(specs, {}, {}, std::make_pair(int64_t{8}, int64_t{8}));
    ASSERT_FALSE(p.ok()) << what;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(what), std::string::npos) << p.status().message();
  };
  bad({TS::Resize({8}), TS::RandomResizedCrop({8})}, "transforms[1] (random_resized_crop): one resampling");
  bad({TS::ColorJitter(0.2, 0), TS::ImageCenterCrop({4})}, "transforms[1] (center_crop): must come before color_jitter");
  bad({TS::ColorJitter(0, 0)}, "neither brightness nor contrast");
  bad({TS::RandomResizedCrop({8}, {0.5, 0.1})}, "scale");
  bad({TS::RandomResizedCrop({8}, {0.1, 1}, {0, 1})}, "ratio");
  bad({TS::RandomResizedCrop({0})}, "size 0x0");
  bad({TS::Resize({8, 8, 8})}, "size has 3 values");
  bad({TS::RandomHorizontalFlip(1.5)}, "p 1.5");
  bad({TS::ToTensor(), TS::Resize({8})}, "transforms[1] (resize): an image transform after a tensor transform");
  bad({TS::RandomResizedCrop({8}), TS::Normalize({1, 2}, {1})}, "transforms[1] (normalize)");
  ImagePipelineOptions two;
  two.channels = 2;
  EXPECT_FALSE(ImagePipeline::Create({}, two, {}, std::make_pair(int64_t{1}, int64_t{1})).ok());
  EXPECT_FALSE(ImagePipeline::Create({TS::Resize({8})}, {}, {4, 4}, std::nullopt).ok());  // not [H, W, C]
  // A crop that pads before a resize is refused per image.
  const ImagePipeline p = Make({TS::ImageCenterCrop({20}), TS::Resize({8, 8})});
  Status st;
  RunImage(p, AsBytes(PngOf(Noise(10, 10, 3, 1), 10, 10, 3)), 0, &st);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("pads"), std::string::npos) << st.message();
}

TEST(ImagePipeline, PublicHelpersAgreeWithThePipeline) {
  const std::string png = PngOf(Noise(50, 40, 3, 7), 50, 40, 3);
  const std::vector<TransformSpec> specs = {TS::RandomResizedCrop({10, 12}), TS::RandomHorizontalFlip(), TS::ToTensor()};
  ImageTransformOptions o;
  o.row = 17;
  o.seed = 5;
  auto image = TransformImage(std::string_view(png), "x.png", specs, o);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->dtype, DType::kFloat32);
  EXPECT_EQ(image->shape, (std::vector<int64_t>{3, 10, 12}));
  EXPECT_EQ(image->data, RunImage(Make(specs), AsBytes(png), 17));
  auto choices = PlanImageTransforms(specs, 50, 40, o);
  ASSERT_TRUE(choices.ok());
  auto direct = Make(specs).Choices(50, 40, 5, 0, 17, 0, nullptr);
  ASSERT_EQ(choices->size(), 2u);
  EXPECT_EQ((*choices)[0].left, (*direct)[0].left);
  EXPECT_EQ((*choices)[1].flip, (*direct)[1].flip);
  auto broken = TransformImage(std::string_view(png).substr(0, 40), "x.png", specs, o);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("x.png"), std::string::npos);
}

}  // namespace
}  // namespace stoke
