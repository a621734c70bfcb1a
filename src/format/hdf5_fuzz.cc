// libFuzzer target: what planning an HDF5 source does (open, list the datasets, describe them, read
// the root attributes) and a few rows of every readable dataset, on arbitrary bytes written to a
// temporary file (libhdf5 reads through file names). stoke's code must return a Status, never crash
// or hang. libhdf5 1.10.8 itself overflows buffers on some crafted files (docs/format.md, "HDF5
// sources"; inputs in tests/data/hdf5_libhdf5_crashes/): scripts/fuzz.sh runs this target so that
// it goes on after a crash and tells crashes inside libhdf5 from crashes in stoke.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "format/hdf5.h"

namespace {

// Rows read per dataset, and the most bytes one read may take (datasets declare any size).
constexpr int64_t kRows = 4;
constexpr int64_t kMaxReadBytes = int64_t{1} << 20;

std::string TempPath() {
  static const std::string path = "/tmp/stoke_hdf5_fuzz_" + std::to_string(::getpid()) + ".h5";
  return path;
}

}  // namespace

// libhdf5 1.10.8 (Debian) leaks a few hundred bytes on some of its own error paths for malformed
// files (an H5Dopen that fails on "bad version number for fill value message" loses 848 bytes
// allocated inside the library; recorded in docs/format.md). Leaks allocated inside libhdf5 are
// therefore not reported; stoke's own allocations still are.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }

// On some damaged files libhdf5's metadata cache (H5C_protect) asks malloc for about 2^64 bytes and
// handles the failure itself (stoke reports "memory allocation failed for on disk image buffer");
// AddressSanitizer would abort on the request instead of failing it.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 20)) return 0;
  const std::string path = TempPath();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  {
    auto file = stoke::Hdf5File::Open(path);
    if (file.ok()) {
      (void)(*file)->RootAttributes();
      auto datasets = (*file)->ListDatasets();
      stoke::AlignedBuffer buffer;
      for (const stoke::Hdf5Dataset& d : datasets.ok() ? *datasets : std::vector<stoke::Hdf5Dataset>{}) {
        if (!d.dtype) continue;
        int64_t row_elements = 1;
        bool small = true;
        for (size_t a = 1; a < d.shape.size() && small; ++a) small = !__builtin_mul_overflow(row_elements, d.shape[a], &row_elements);
        const int64_t rows = d.shape.empty() ? 1 : std::min<int64_t>(kRows, d.shape[0]);
        const int64_t esize = static_cast<int64_t>(stoke::DTypeSize(*d.dtype));
        if (!small || row_elements > kMaxReadBytes / esize / std::max<int64_t>(rows, 1)) continue;
        buffer.Resize(static_cast<size_t>(rows * row_elements * esize));
        (void)(*file)->ReadRows(d.name, 0, rows, *d.dtype, buffer.mutable_view());
      }
    }
  }
  ::unlink(path.c_str());
  return 0;
}
