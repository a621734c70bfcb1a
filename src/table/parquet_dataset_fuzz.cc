// libFuzzer target: what a plain Parquet dataset takes from outside: a Hugging Face metadata value
// (JSON from a file's footer) for its class names and array shapes, and glob patterns matched
// against paths (the input split at its first NUL into pattern and path).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "table/parquet_dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)stoke::HuggingFaceClassNames(text);
  (void)stoke::HuggingFaceArrayShapes(text);
  const size_t nul = text.find('\0');
  if (nul != std::string::npos && text.size() < 256) {
    (void)stoke::MatchesGlob(std::string_view(text).substr(0, nul), std::string_view(text).substr(nul + 1));
  }
  return 0;
}
