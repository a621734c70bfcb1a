// Deletion vectors (PROTOCOL.md "Deletion Vectors", "Deletion Vector Descriptor Schema", "Deletion
// Vector Format"): the descriptor an add or remove action carries, the Z85 text it uses, the
// RoaringBitmapArray serialization of a set of row indexes, and the DV files that hold them.
//
// Scans, counts and the loader apply them (table/scan.h, DeletedRows). Everything here is pure or
// goes through a Storage; all functions are thread-safe.
//
// Decisions recorded here because readers of the code need them:
// - The 64-bit bitmap is read in the protocol's "portable" layout (magic 1681511377) and also in the
//   "native" layout delta-spark reads too (magic 1681511376: a 32-bit bitmap count, then each
//   bitmap's byte length and the bitmap, its index being its key). The protocol's inline example
//   ("JSON Example 3") holds neither: its header is the native layout written big-endian, which
//   delta-spark's little-endian reader refuses too, and so does this one (Corruption naming the
//   magic). The same rows in the portable layout are "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L".
// - An on-disk DV whose offset is absent starts right after the file's version byte (byte 1), as
//   delta-kernel-rs reads it; the protocol's "interpret as 0" would put it on the version byte.
// - Decoding is strict beyond what the reference readers check: a container's offset-header entry
//   must be where the container starts, run containers must be ordered and disjoint, array values
//   strictly ascending, every cardinality must match the content, and no byte may follow the last
//   bucket. Every writer we know produces such bitmaps; anything else is Corruption.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/buffer.h"
#include "io/storage.h"
#include "stoke/status.h"

namespace stoke::delta {

// storageType values (PROTOCOL.md "Deletion Vector Descriptor Schema").
inline constexpr char kDvStorageRelativeUuid = 'u';  // a file in the table directory named by a UUID
inline constexpr char kDvStorageInline = 'i';        // the bitmap itself, Z85-encoded, in the log
inline constexpr char kDvStorageAbsolutePath = 'p';  // a file at an absolute path or URI

// The first four bytes (little-endian) of a serialized RoaringBitmapArray ("Deletion Vector Format").
inline constexpr uint32_t kRoaringBitmapArrayPortableMagic = 1681511377;  // the protocol's format
inline constexpr uint32_t kRoaringBitmapArrayNativeMagic = 1681511376;    // delta-spark's other format
// Byte 0 of a DV file ("Deletion Vector File Storage Format").
inline constexpr uint8_t kDeletionVectorFileVersion = 1;
// The most rows one decoded DV may hold: delta-spark's own limit (RoaringBitmapArray.toArray
// requires a cardinality of at most Int.MaxValue). A run container of 14 bytes can stand for 65,536
// rows, so the limit, not the input's size, is what bounds the output of a small hostile input.
inline constexpr uint64_t kMaxDeletionVectorRows = (uint64_t{1} << 31) - 1;

// One "deletionVector" object of an add or remove action.
struct DeletionVectorDescriptor {
  char storage_type = kDvStorageRelativeUuid;  // 'u', 'i' or 'p'
  // 'u': <random prefix, optional><20 characters of Z85: the file's UUID>; 'i': the Z85 text of the
  // serialized bitmap; 'p': the file's absolute path or URI, percent-encoded as add paths are.
  std::string path_or_inline_dv;
  std::optional<int32_t> offset;  // where the DV's framing starts in its file; never set for 'i'
  int32_t size_in_bytes = 0;      // bytes of the serialized bitmap (before Z85 for 'i')
  int64_t cardinality = 0;        // rows the DV deletes
  // delta-spark's optional "maxRowIndex": when present, no deleted row index may exceed it.
  std::optional<int64_t> max_row_index;

  // The protocol's derived uniqueId: "<storageType><pathOrInlineDv>", with "@<offset>" appended
  // when the offset is present.
  std::string UniqueId() const;
};

// Reads a deletionVector object. JSON null counts as absent (a checkpoint row, read as JSON, holds
// the same field names with nulls for unset optional fields); unknown fields are ignored, as the
// protocol requires of readers. Corruption naming `context` and the field for: a field missing or
// of the wrong type, storageType other than "u", "i" or "p", a negative offset, size or count, an
// offset on an inline DV, a 'u' path whose last 20 characters are no Z85 UUID or whose prefix is
// no plain directory name (see DeletionVectorFilePath), and inline text whose length is no multiple
// of 5 or does not fit sizeInBytes. REQUIRES: the caller has checked that the deletionVector itself
// is not null.
Result<DeletionVectorDescriptor> ParseDeletionVectorDescriptor(const nlohmann::json& j, std::string_view context);

// The checks ParseDeletionVectorDescriptor makes beyond the JSON types, for a descriptor read from
// typed columns (a checkpoint's deletionVector struct): Corruption naming `context` and the field.
Status CheckDeletionVectorDescriptor(const DeletionVectorDescriptor& dv, std::string_view context);

// The descriptor as Spark writes it: storageType, pathOrInlineDv, offset (when present),
// sizeInBytes, cardinality, maxRowIndex (when present).
nlohmann::ordered_json DeletionVectorDescriptorJson(const DeletionVectorDescriptor& dv);

// Z85 (ZeroMQ RFC 32): every 5 characters give 4 bytes, big-endian. Corruption, naming the
// character offset, for a length that is no multiple of 5, a character outside the alphabet, or a
// group whose value is 2^32 or more.
Result<std::string> Z85Decode(std::string_view text);
// Z85 of `bytes`. RFC 32 takes a multiple of 4 bytes; other lengths are padded with zero bytes to
// the next multiple, as Delta's inline DVs are (their sizeInBytes keeps the true length).
std::string Z85Encode(std::string_view bytes);

// The file a 'u' or 'p' DV lives in, as a path for the Storage that holds `table_dir`:
// - 'u': "<table_dir>/<prefix>/deletion_vector_<uuid>.bin", or without "<prefix>/" when there is
//   none; the UUID is the last 20 characters decoded from Z85, in lowercase canonical form. The
//   prefix must be a plain directory name (no '/' or '\', not "." or ".."): Corruption otherwise.
// - 'p': the path percent-decoded (as add paths are). "file:/p", "file:///p" and
//   "file://localhost/p" give the local path "/p"; "/p" is kept; a URI with another scheme
//   ("s3://bucket/key") is returned as it is, for ResolveStorageLocation. A relative path or a
//   file: URI naming another host is Corruption.
// - 'i': InvalidArgument (an inline DV has no file).
Result<std::string> DeletionVectorFilePath(const DeletionVectorDescriptor& dv, std::string_view table_dir);

// The row indexes of a serialized RoaringBitmapArray (either magic), ascending and distinct.
// Corruption naming `context` and the byte offset within `bytes` for anything the format does not
// allow (see the decisions above); a length or count is checked against the bytes left before it
// is used, so nothing is allocated beyond what the input accounts for. Unsupported for more than
// kMaxDeletionVectorRows rows.
Result<std::vector<uint64_t>> DecodeRoaringBitmapArray(ByteView bytes, std::string_view context);

// The portable RoaringBitmapArray of `sorted_rows` (sorted and deduplicated first when they are
// not), one bucket per distinct high 32 bits: array containers for sparse chunks, bitmap containers
// for dense ones, run containers where they are smaller. For tests and fixtures. A row of 2^63 or
// more is written as given, with a key that DecodeRoaringBitmapArray refuses (the protocol wants
// keys below 2^31).
std::string EncodeRoaringBitmapArray(const std::vector<uint64_t>& sorted_rows);

// The row indexes a DV deletes, ascending and distinct, from the log ('i') or from its file ('u',
// 'p', read through `storage`; `table_dir` as DeletionVectorFilePath takes it). A file holds the
// version byte 1, and at the DV's offset a 4-byte big-endian size, the bitmap and the bitmap's
// CRC-32, big-endian; an inline DV is the bitmap alone. Corruption naming the file (or the inline
// DV) and the byte offset when: the version byte is not 1 (Unsupported when it is above), the file
// is too short, the stored size differs from size_in_bytes, the CRC differs, the bitmap does not
// decode, the row count differs from cardinality, or a row exceeds max_row_index. A 'p' URI with a
// scheme other than file: is Unsupported (it needs its own Storage); a missing file is NotFound.
Result<std::vector<uint64_t>> ReadDeletionVector(Storage& storage, std::string_view table_dir,
                                                 const DeletionVectorDescriptor& dv);

// Writes each of `dvs` (the rows of one DV each, ascending, distinct, below 2^63; InvalidArgument
// otherwise) into one new 'u' DV file, as a DELETE that touches many data files writes them, and
// returns their descriptors in order: the same path, each at its own offset. `prefix` as below.
Result<std::vector<DeletionVectorDescriptor>> WriteDeletionVectorsFile(Storage& storage, std::string_view table_dir,
                                                                       const std::vector<std::vector<uint64_t>>& dvs,
                                                                       std::string_view prefix);
// For tests: writes `rows` (ascending, distinct, below 2^63; InvalidArgument otherwise) as a 'u' DV
// file with a fresh random UUID under `table_dir` (in the directory `prefix` when it is not empty;
// a plain directory name, InvalidArgument otherwise), published atomically, and returns its
// descriptor (offset 1).
Result<DeletionVectorDescriptor> WriteDeletionVectorFile(Storage& storage, std::string_view table_dir,
                                                         const std::vector<uint64_t>& rows, std::string_view prefix);

}  // namespace stoke::delta
