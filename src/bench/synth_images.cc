// The image workload: an ImageFolder of generated JPEGs (and optionally PNGs), sized like the photos
// of common classification datasets: sides drawn in [min_size, max_size] px, content textured enough
// that a ~350 px JPEG at quality 92 (the default) is about 110 KB (ImageNet's mean file size). Each image is a
// class-coloured background gradient with a few random shapes and per-pixel noise; deterministic for
// a seed.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "core/clock.h"
#include "core/progress.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "format/image.h"
#include "io/storage.h"
#include "io/uri.h"
#include "stoke/tools.h"

namespace stoke {
namespace {

// Noise amplitude (uniform, +-kNoise per channel) that puts a 350 px JPEG at quality 92 near 110 KB
// (108 KB measured over 100 images).
constexpr double kNoise = 105.0;

uint8_t Clamp8(double v) { return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0)); }

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height rows of width * 3 bytes
};

Image Generate(const SynthImagesOptions& o, int64_t cls, Rng& rng) {
  Image im;
  const int64_t span = o.max_size - o.min_size + 1;
  im.width = static_cast<int>(o.min_size + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(span))));
  im.height = static_cast<int>(o.min_size + static_cast<int64_t>(rng.Below(static_cast<uint64_t>(span))));
  im.rgb.resize(static_cast<size_t>(im.width) * static_cast<size_t>(im.height) * 3);
  // The class sets the hue of the background; each image varies it.
  const double hue = 6.283 * static_cast<double>(cls) / static_cast<double>(std::max<int64_t>(o.classes, 1));
  double base[3], slope_x[3], slope_y[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = 128 + 90 * std::cos(hue + 2.094 * c) + (rng.Uniform() - 0.5) * 40;
    slope_x[c] = (rng.Uniform() - 0.5) * 120 / im.width;
    slope_y[c] = (rng.Uniform() - 0.5) * 120 / im.height;
  }
  for (int y = 0; y < im.height; ++y) {
    uint8_t* row = im.rgb.data() + static_cast<size_t>(y) * im.width * 3;
    for (int x = 0; x < im.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        row[x * 3 + c] = Clamp8(base[c] + slope_x[c] * x + slope_y[c] * y + (rng.Uniform() - 0.5) * 2 * kNoise);
      }
    }
  }
  // A few filled ellipses of random colours.
  const int shapes = 2 + static_cast<int>(rng.Below(5));
  for (int s = 0; s < shapes; ++s) {
    const double cx = rng.Uniform() * im.width, cy = rng.Uniform() * im.height;
    const double rx = (0.05 + 0.25 * rng.Uniform()) * im.width, ry = (0.05 + 0.25 * rng.Uniform()) * im.height;
    double colour[3];
    for (double& v : colour) v = rng.Uniform() * 255;
    const int y0 = std::max(0, static_cast<int>(cy - ry)), y1 = std::min(im.height, static_cast<int>(cy + ry) + 1);
    const int x0 = std::max(0, static_cast<int>(cx - rx)), x1 = std::min(im.width, static_cast<int>(cx + rx) + 1);
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const double dx = (x - cx) / rx, dy = (y - cy) / ry;
        if (dx * dx + dy * dy > 1) continue;
        uint8_t* p = im.rgb.data() + (static_cast<size_t>(y) * im.width + x) * 3;
        for (int c = 0; c < 3; ++c) p[c] = Clamp8(colour[c] + (rng.Uniform() - 0.5) * 2 * kNoise);
      }
    }
  }
  return im;
}

}  // namespace

Result<SynthReport> SynthImages(const SynthImagesOptions& o) {
  if (o.out_dir.empty()) return Status::InvalidArgument("synth images: an output directory is required");
  if (o.images <= 0 || o.classes <= 0 || o.classes > 100000) {
    return Status::InvalidArgument(fmt::format("synth images: `images` must be positive and `classes` in [1, 100000], got {} "
                                               "and {}", o.images, o.classes));
  }
  if (o.min_size < 8 || o.max_size < o.min_size || o.max_size > 8192) {
    return Status::InvalidArgument(fmt::format("synth images: sizes must satisfy 8 <= `min_size` <= `max_size` <= 8192, got {} "
                                               "and {}", o.min_size, o.max_size));
  }
  if (o.quality < 1 || o.quality > 100) return Status::InvalidArgument("synth images: `quality` must lie in [1, 100]");
  if (o.png_fraction < 0 || o.png_fraction > 1) return Status::InvalidArgument("synth images: `png_fraction` must lie in [0, 1]");
  STOKE_RETURN_IF_ERROR(CreateContainerFor(o.out_dir));
  STOKE_ASSIGN_OR_RETURN(StorageLocation out, ResolveStorageLocation(o.out_dir));
  Storage& fs = *out.storage;
  const int class_digits = std::max<int>(3, static_cast<int>(std::to_string(o.classes - 1).size()));
  const int digits = std::max<int>(6, static_cast<int>(std::to_string(o.images - 1).size()));
  auto class_dir = [&](int64_t k) { return JoinPath(out.path, fmt::format("class_{:0{}}", k, class_digits)); };
  for (int64_t k = 0; k < o.classes; ++k) STOKE_RETURN_IF_ERROR(fs.CreateDirectories(class_dir(k)));

  Stopwatch watch;
  ProgressBar bar("synth images", static_cast<uint64_t>(o.images), "files",
                  o.progress ? ProgressBar::Mode::kAuto : ProgressBar::Mode::kOff);
  std::atomic<int64_t> bytes{0};
  // Object stores: one PUT per file, so many in flight hide the per-request latency.
  ThreadPool pool(o.threads != 0 ? o.threads : fs.remote() ? fs.parallelism() : 0);
  STOKE_RETURN_IF_ERROR(ParallelFor(pool, static_cast<size_t>(o.images), [&](size_t i) -> Status {
    const int64_t index = static_cast<int64_t>(i);
    Rng rng(SplitMix64(o.seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index)));
    const int64_t cls = index % o.classes;
    const bool png = rng.Uniform() < o.png_fraction;
    const Image im = Generate(o, cls, rng);
    const ByteView pixels(im.rgb.data(), im.rgb.size());
    STOKE_ASSIGN_OR_RETURN(std::string encoded, png ? EncodePng(pixels, im.width, im.height, 3)
                                                    : EncodeJpeg(pixels, im.width, im.height, 3, o.quality));
    const std::string path = JoinPath(class_dir(cls), fmt::format("{:0{}}.{}", index, digits, png ? "png" : "jpg"));
    STOKE_ASSIGN_OR_RETURN(auto file, fs.Create(path));
    STOKE_RETURN_IF_ERROR(file->Append(AsBytes(encoded)));
    STOKE_RETURN_IF_ERROR(file->Close());
    bytes += static_cast<int64_t>(encoded.size());
    bar.Add(1, encoded.size());
    return Status::OK();
  }));
  bar.Finish();
  SynthReport report;
  report.files = o.images;
  report.bytes = bytes;
  report.seconds = watch.Seconds();
  return report;
}

}  // namespace stoke
