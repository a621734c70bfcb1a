// The names of LoaderOptions' choices (include/stoke/loader.h): one table per enum, read both ways.
#include <fmt/format.h>

#include <array>
#include <string>
#include <utility>

#include "stoke/loader.h"

namespace stoke {
namespace {

using O = LoaderOptions;

constexpr std::array<std::pair<std::string_view, O::Shuffle>, 3> kShuffles{
    {{"none", O::Shuffle::kNone}, {"global", O::Shuffle::kGlobal}, {"block", O::Shuffle::kBlock}}};
constexpr std::array<std::pair<std::string_view, O::Backend>, 3> kBackends{
    {{"auto", O::Backend::kAuto}, {"io_uring", O::Backend::kIoUring}, {"pread", O::Backend::kPread}}};
constexpr std::array<std::pair<std::string_view, O::OnError>, 2> kOnErrors{
    {{"raise", O::OnError::kRaise}, {"skip", O::OnError::kSkip}}};
constexpr std::array<std::pair<std::string_view, O::TransformsOn>, 2> kTransformsOn{
    {{"cpu", O::TransformsOn::kCpu}, {"cuda", O::TransformsOn::kCuda}}};

template <typename E, size_t N>
std::string_view NameIn(const std::array<std::pair<std::string_view, E>, N>& names, E value) {
  for (const auto& [name, e] : names) {
    if (e == value) return name;
  }
  return "unknown";
}

template <typename E, size_t N>
Result<E> ParseIn(const std::array<std::pair<std::string_view, E>, N>& names, std::string_view option,
                  std::string_view text) {
  std::string choices;
  for (const auto& [name, e] : names) {
    if (name == text) return e;
    choices += choices.empty() ? "" : ", ";
    choices += name;
  }
  return Status::InvalidArgument(fmt::format("{}: unknown value '{}' (expected one of {})", option, text, choices));
}

}  // namespace

std::string_view ShuffleName(O::Shuffle shuffle) { return NameIn(kShuffles, shuffle); }
Result<O::Shuffle> ParseShuffle(std::string_view name) { return ParseIn(kShuffles, "shuffle", name); }
std::string_view BackendName(O::Backend backend) { return NameIn(kBackends, backend); }
Result<O::Backend> ParseBackend(std::string_view name) { return ParseIn(kBackends, "backend", name); }
std::string_view OnErrorName(O::OnError on_error) { return NameIn(kOnErrors, on_error); }
Result<O::OnError> ParseOnError(std::string_view name) { return ParseIn(kOnErrors, "on_error", name); }
std::string_view TransformsOnName(O::TransformsOn on) { return NameIn(kTransformsOn, on); }
Result<O::TransformsOn> ParseTransformsOn(std::string_view name) {
  return ParseIn(kTransformsOn, "transforms_on", name);
}

}  // namespace stoke
