// Decoding the values section of a Parquet data or dictionary page into a column's ValueVector, by
// the page's encoding (PLAIN, dictionary indices, RLE booleans, the DELTA encodings,
// BYTE_STREAM_SPLIT) and the column's physical type.
#pragma once

#include <cstddef>

#include "core/buffer.h"
#include "format/parquet_reader.h"
#include "stoke/status.h"

namespace stoke {

// Decodes `count` values encoded `encoding` from `data`, appending to `out` (which holds the column's
// physical type). `dict`: the chunk's dictionary, for dictionary-encoded pages (else null). Malformed
// data is Corruption; an encoding the column's type cannot have is Unsupported.
Status DecodeValues(const LeafColumn& col, parquet::Encoding encoding, ByteView data, size_t count,
                    const ValueVector* dict, ValueVector* out);

}  // namespace stoke
