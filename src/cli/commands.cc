// See commands.h.
#include "cli/commands.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace stoke::cli {
namespace {

constexpr int kExitError = 1;

}  // namespace

namespace {

// The flags of the parameters that library messages name (RenameParameters).
constexpr std::pair<std::string_view, std::string_view> kParameterFlags[] = {
    {"table_dir", "--table"}, {"tensor_column", "--tensor-column"}, {"mode", "--mode"},
    {"on_changed", "--on-changed"}, {"format", "--format"}, {"datasets", "--dataset"},
    {"hdf5_samples", "--hdf5-samples"}, {"decode", "--decode"}, {"where", "--where"},
    {"partition_by", "--partition-by"}, {"rows_per_file", "--rows-per-file"}, {"shard", "--shard"},
    {"out", "--out"}, {"target_file_bytes", "--target-file-size"}, {"row_group_bytes", "--row-group-size"},
    {"retain_hours", "--retain"}, {"limit", "--limit"}, {"offset", "--offset"}, {"sort_by", "--sort-by"},
    {"images", "--images"}, {"classes", "--classes"}, {"min_size", "--min-size"}, {"max_size", "--max-size"},
    {"quality", "--quality"}, {"png_fraction", "--png-fraction"}, {"samples", "--samples"}, {"shape", "--shape"},
    {"channels", "--channels"}, {"epochs", "--epochs"}, {"batches", "--batches"},
    {"warmup_batches", "--warmup-batches"}, {"compute_ms", "--compute-ms"}, {"cold", "--cold"},
};

}  // namespace

int Fail(const Status& s) {
  std::fprintf(stderr, "stoke: error: %s\n", RenameParameters(s.ToString(), kParameterFlags).c_str());
  return kExitError;
}

namespace {

// A validator of finite numbers that `ok` accepts, saying `want` ("> 0") of the others; `description`
// is what --help shows after the option's type.
CLI::Validator NumberCheck(bool (*ok)(double), const char* want, const char* description) {
  return CLI::Validator(
      [ok, want](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return fmt::format("must be a number {}, got '{}'", want, text);
        if (!std::isfinite(value) || !ok(value)) return fmt::format("must be a finite number {}, got {}", want, text);
        return {};
      },
      description);
}

}  // namespace

const CLI::Validator& Positive() {
  static const CLI::Validator v = NumberCheck([](double x) { return x > 0; }, "> 0", "POSITIVE");
  return v;
}

const CLI::Validator& NonNegative() {
  static const CLI::Validator v = NumberCheck([](double x) { return x >= 0; }, ">= 0", "NONNEGATIVE");
  return v;
}

std::string Mb(int64_t bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

std::vector<std::string> ColumnList(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    out.push_back(text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}


std::vector<int64_t> ParseShape(const std::string& s, const char* option, const char* example) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find_first_of(",x", pos);
    std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    try {
      size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size()) throw std::invalid_argument(part);
      out.push_back(v);
    } catch (const std::exception&) {
      throw CLI::ValidationError(option, fmt::format("expected sizes separated by commas, e.g. {}", example));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace stoke::cli
