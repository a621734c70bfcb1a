// NumPy .npz archives: a zip file with one .npy member per array, as numpy.savez (stored) and
// numpy.savez_compressed (deflate) write them. Zip handling is libzip's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "format/npy.h"
#include "io/storage.h"
#include "stoke/status.h"

namespace stoke {

// Deflate cannot expand data more than 1032:1 (zlib's technical details, "Maximum compression
// factor"), so a member that declares more is damaged or hostile; and all members together cannot
// legitimately exceed this multiple of the archive's size.
inline constexpr uint64_t kNpzMaxExpansion = 1032;

// Decodes every member of an in-memory .npz archive, in central-directory order, as (key, array)
// with key the member name without ".npy". `name` is the file name used in error messages; a
// member's errors name it as "<name>:<member>".
// Corruption for a damaged archive or member, duplicate member names, and sizes beyond the
// kNpzMaxExpansion bounds (checked before anything is allocated); Unsupported for a member whose
// name does not end in ".npy", an encrypted member, or compression other than stored and deflate.
// Memory: each member is inflated into a buffer and then decoded into its array, so the peak is
// the archive, the arrays decoded so far, and twice the member being decoded.
Result<std::vector<std::pair<std::string, NpyArray>>> DecodeNpz(ByteView bytes, std::string_view name);

// Reads a whole .npz file into memory and decodes it with DecodeNpz.
Result<std::vector<std::pair<std::string, NpyArray>>> ReadNpzFile(Storage& storage, const std::string& path);

// Writes the arrays as "<key>.npy" members, stored or deflated, built in memory and then written
// with WriteFileAtomically (so the peak memory is about twice the archive's size). An empty list
// writes an empty zip archive, as numpy.savez does.
// InvalidArgument for a null array, an array whose data size does not match its dtype and shape,
// or a duplicate key.
Status WriteNpzFile(Storage& storage, const std::string& path,
                    const std::vector<std::pair<std::string, const NpyArray*>>& arrays, bool compress);

}  // namespace stoke
