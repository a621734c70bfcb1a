// The names of the transform kinds and the text form of a transform ("random_crop=64,64"), as the
// command line and Python take them (transform.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "loader/transform.h"

namespace stoke {

using Kind = TransformSpec::Kind;

std::string_view TransformKindName(TransformSpec::Kind kind) {
  switch (kind) {
    case Kind::kCast: return "cast";
    case Kind::kNormalize: return "normalize";
    case Kind::kRandomFlip: return "random_flip";
    case Kind::kRandomRot90: return "random_rot90";
    case Kind::kRandomCrop: return "random_crop";
    case Kind::kCenterCrop: return "center_crop";
    case Kind::kChannelsFirst: return "channels_first";
    case Kind::kChannelsLast: return "channels_last";
    case Kind::kRandomResizedCrop: return "random_resized_crop";
    case Kind::kResize: return "resize";
    case Kind::kRandomHorizontalFlip: return "random_horizontal_flip";
    case Kind::kColorJitter: return "color_jitter";
    case Kind::kToTensor: return "to_tensor";
  }
  return "unknown";
}

Result<TransformSpec::Kind> ParseTransformKind(std::string_view name) {
  std::string names;
  for (int k = 0; k <= static_cast<int>(Kind::kToTensor); ++k) {
    const std::string_view n = TransformKindName(static_cast<Kind>(k));
    if (n == name) return static_cast<Kind>(k);
    names += names.empty() ? "" : ", ";
    names += n;
  }
  return Status::InvalidArgument(fmt::format("unknown transform '{}' (expected one of {})", name, names));
}

namespace {

std::vector<std::string_view> SplitText(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  for (size_t start = 0;;) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

template <typename T>
bool ParseList(std::string_view s, char sep, std::vector<T>* out) {
  out->clear();
  for (std::string_view part : SplitText(s, sep)) {
    T v{};
    if (!ParseNumber(part, &v)) return false;
    out->push_back(v);
  }
  return true;
}

}  // namespace

Result<TransformSpec> ParseTransformText(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  auto bad = [&](std::string_view what) {
    return Status::InvalidArgument(fmt::format("transform '{}': {}", text, what));
  };
  TransformSpec t;
  if (name == "hflip") {
    t.kind = Kind::kRandomHorizontalFlip;
  } else {
    auto kind = ParseTransformKind(name);
    if (!kind.ok()) return bad(kind.status().message());
    t.kind = *kind;
  }
  // The defaults the Python classes give.
  if (t.kind == Kind::kNormalize) t.axis = TransformSpec::kChannelAxis;
  if (t.kind == Kind::kChannelsLast) t.axis = 0;
  if (t.kind == Kind::kRandomRot90) t.axes = {0, 1};
  if (colon == std::string_view::npos) return t;
  const std::vector<std::string_view> args = SplitText(text.substr(colon + 1), ',');
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view key, value;
    const size_t eq = args[i].find('=');
    if (eq != std::string_view::npos) {
      key = args[i].substr(0, eq);
      value = args[i].substr(eq + 1);
    } else if (i == 0) {
      value = args[i];
      switch (t.kind) {
        case Kind::kRandomResizedCrop: case Kind::kResize: case Kind::kCenterCrop: case Kind::kRandomCrop:
          key = "size"; break;
        case Kind::kRandomFlip: case Kind::kRandomHorizontalFlip: key = "p"; break;
        case Kind::kCast: case Kind::kToTensor: key = "dtype"; break;
        default: return bad(fmt::format("'{}' is not key=value ({} has no main value)", args[i], name));
      }
    } else {
      return bad(fmt::format("'{}' is not key=value", args[i]));
    }
    bool ok = true;
    if (key == "size") {
      ok = ParseList(value, 'x', &t.size) && t.size.size() <= 2;
    } else if (key == "p") {
      ok = ParseNumber(value, &t.p);
    } else if (key == "dtype") {
      auto d = ParseDType(value);
      if (!d.ok()) return bad(d.status().message());
      t.dtype = *d;
    } else if (key == "mean") {
      ok = ParseList(value, '/', &t.mean);
    } else if (key == "std") {
      ok = ParseList(value, '/', &t.std);
    } else if (key == "axis") {
      ok = ParseNumber(value, &t.axis);
    } else if (key == "axes") {
      ok = ParseList(value, '/', &t.axes);
    } else if (key == "scale") {
      ok = ParseList(value, '/', &t.scale);
    } else if (key == "ratio") {
      ok = ParseList(value, '/', &t.ratio);
    } else if (key == "brightness" || key == "contrast") {
      std::vector<double>& range = key == "brightness" ? t.brightness : t.contrast;
      ok = ParseList(value, '/', &range) && (range.size() == 1 || range.size() == 2);
      if (ok && range.size() == 1) {
        const double b = range[0];
        ok = b >= 0;
        range = b == 0 ? std::vector<double>{} : std::vector<double>{std::max(0.0, 1.0 - b), 1.0 + b};
      }
    } else {
      return bad(fmt::format("unknown key '{}'", key));
    }
    if (!ok) return bad(fmt::format("bad value '{}' for '{}'", value, key));
  }
  return t;
}

}  // namespace stoke
