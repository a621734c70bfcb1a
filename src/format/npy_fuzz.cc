// libFuzzer target: DecodeNpy and DecodeNpz on arbitrary bytes return a Status; they never crash,
// read out of bounds, or allocate without bound.
#include <cstddef>
#include <cstdint>

#include "format/npy.h"
#include "format/npz.h"

namespace {

// DecodeNpy allocates at most the input's size and DecodeNpz at most kNpzMaxExpansion times it,
// so this cap keeps every input under 64 MiB of declared data.
constexpr size_t kMaxInputSize = (size_t{64} << 20) / stoke::kNpzMaxExpansion;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > kMaxInputSize) return 0;
  const stoke::ByteView bytes(data, size);
  stoke::Result<stoke::NpyArray> npy = stoke::DecodeNpy(bytes, "fuzz.npy");
  if (npy.ok() && npy->data.size() != npy->num_bytes()) __builtin_trap();
  auto npz = stoke::DecodeNpz(bytes, "fuzz.npz");
  if (npz.ok()) {
    for (const auto& [key, array] : *npz) {
      if (array.data.size() != array.num_bytes()) __builtin_trap();
    }
  }
  return 0;
}
