// NumPy .npy files: parsing, decoding and writing.
//
// Format (numpy.lib.format, "NEP 1"): the magic "\x93NUMPY", a major and a minor version byte, the
// header length (little-endian u16 for 1.0, u32 for 2.0 and 3.0), then the header: a Python dict
// literal such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces
// and ending in '\n' (latin-1 for 1.0 and 2.0, utf-8 for 3.0). The raw array data follows.
//
// Readers accept any of the three versions, keys in any order, either quote style, whitespace
// anywhere and trailing commas; they never read past the bytes given and never allocate more than
// the bytes present justify. Writers produce exactly what numpy.save (1.24) produces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.h"
#include "format/dtype.h"
#include "io/storage.h"
#include "stoke/status.h"

namespace stoke {

inline constexpr std::string_view kNpyMagic = "\x93NUMPY";
// Readers and writers reject more dimensions than this (NPY_MAXDIMS is 64 since numpy 2.0).
inline constexpr size_t kNpyMaxDims = 64;
// numpy pads the preamble plus header to a multiple of this (ARRAY_ALIGN) so the data can be mmapped.
inline constexpr size_t kNpyHeaderAlignment = 64;

// What the header of a .npy file says.
struct NpyHeader {
  int major_version = 1;
  int minor_version = 0;
  DType dtype = DType::kFloat32;
  bool big_endian = false;     // descr had '>' byte order
  bool fortran_order = false;  // data is stored column-major
  std::vector<int64_t> shape;  // empty for a 0-d array (one element)
  size_t data_offset = 0;      // bytes from file start to data
  size_t data_size = 0;        // bytes of data that dtype and shape require
};

// A decoded array: always little-endian and in C (row-major) order.
struct NpyArray {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  AlignedBuffer data;  // exactly num_bytes() bytes

  // The product of `shape` (1 for a 0-d array). REQUIRES: NpyDataSize(dtype, shape).ok().
  int64_t num_elements() const;
  size_t num_bytes() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype); }
};

// The byte size of an array's data. InvalidArgument when `shape` has more than kNpyMaxDims
// dimensions, a negative dimension, or a size that overflows int64 (zero dimensions are left out
// of the overflow check, as numpy does, so (0, 2**62, 2**62) is rejected).
Result<size_t> NpyDataSize(DType dtype, std::span<const int64_t> shape);

// Parses the preamble and header. `bytes` needs to hold only the start of the file up to
// data_offset; it may hold more. `name` is the file name used in error messages.
// Corruption for malformed input, naming the byte offset and what was expected; Unsupported for a
// dtype other than bool, (u)int8..64 and float16/32/64 (structured, object, strings, complex, ...)
// and for format versions other than 1.0, 2.0 and 3.0.
Result<NpyHeader> ParseNpyHeader(ByteView bytes, std::string_view name);

// Decodes a whole .npy image: big-endian data is byte-swapped to little-endian, Fortran-order data
// is transposed to C order. Data shorter or longer than the shape requires is Corruption.
Result<NpyArray> DecodeNpy(ByteView bytes, std::string_view name);

// Reads and decodes a .npy file. The data is read straight into the array's buffer (one copy).
// `reuse` (for example the data of the previous array read) lends its allocation when it is large
// enough, so reading many same-sized files does not fault in fresh memory for each.
Result<NpyArray> ReadNpyFile(Storage& storage, const std::string& path, AlignedBuffer reuse = {});

// The preamble and header numpy.save writes for a little-endian, C-order array, byte for byte:
// format 1.0 (numpy falls back to 2.0 only past 65535 header bytes, which kNpyMaxDims rules out),
// the dict padded with spaces (including numpy's spare room to grow the first axis) and a final
// '\n' so that the data starts at a multiple of kNpyHeaderAlignment.
// REQUIRES: NpyDataSize(dtype, shape).ok().
std::string EncodeNpyHeader(DType dtype, std::span<const int64_t> shape);

// Writes a .npy file atomically (WriteFileAtomically). `data` is little-endian, C order.
// InvalidArgument when data.size() differs from NpyDataSize(dtype, shape).
Status WriteNpyFile(Storage& storage, const std::string& path, DType dtype, std::span<const int64_t> shape,
                    ByteView data);

// Rearranges an array stored in Fortran (column-major) order into C (row-major) order. Elements
// are `element_size` opaque bytes each.
// REQUIRES: src.size() == dst.size() == element_size * product(shape); src and dst do not overlap.
void TransposeFortranToC(ByteView src, std::span<const int64_t> shape, size_t element_size, MutableByteView dst);

}  // namespace stoke
