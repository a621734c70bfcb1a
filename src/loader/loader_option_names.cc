// The names of LoaderOptions' choices (include/stoke/loader.h): one table per enum, read both ways.
#include "core/enum_names.h"
#include "stoke/loader.h"

namespace stoke {
namespace {

using O = LoaderOptions;

constexpr EnumNames<O::Shuffle, 3> kShuffles{
    {{"none", O::Shuffle::kNone}, {"global", O::Shuffle::kGlobal}, {"block", O::Shuffle::kBlock}}};
constexpr EnumNames<O::Backend, 3> kBackends{
    {{"auto", O::Backend::kAuto}, {"io_uring", O::Backend::kIoUring}, {"pread", O::Backend::kPread}}};
constexpr EnumNames<O::OnError, 2> kOnErrors{
    {{"raise", O::OnError::kRaise}, {"skip", O::OnError::kSkip}}};
constexpr EnumNames<O::TransformsOn, 2> kTransformsOn{
    {{"cpu", O::TransformsOn::kCpu}, {"cuda", O::TransformsOn::kCuda}}};

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
