// Deletion vectors: see deletion_vector.h. The 32-bit Roaring layout is RoaringFormatSpec's
// (github.com/RoaringBitmap/RoaringFormatSpec): a cookie, the container headers, an offset header,
// then the containers; the 64-bit "portable" layout and the RoaringBitmapArray framing are
// PROTOCOL.md's "Deletion Vector Format".
#include "table/deletion_vector.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <span>

#include "core/text.h"
#include "format/codec.h"
#include "table/delta_log.h"

namespace stoke::delta {
namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Format constants (RoaringFormatSpec; PROTOCOL.md "Deletion Vector Format").

constexpr uint32_t kSerialCookieNoRunContainer = 12346;  // the whole cookie; a container count follows
constexpr uint32_t kSerialCookie = 12347;                // low 16 bits; high 16: container count - 1
constexpr uint32_t kNoOffsetThreshold = 4;               // with run containers, an offset header only from this count
constexpr uint32_t kMaxContainers = 65536;               // one per 16-bit key
constexpr uint32_t kMaxArrayCardinality = 4096;          // above it, a non-run container is a bitmap
constexpr size_t kBitmapContainerBytes = 8192;           // 65536 bits
constexpr size_t kMinBucketBytes = 12;  // a key (or native length) and an empty bitmap's cookie and count
constexpr size_t kUuidZ85Chars = 20;    // 16 bytes
constexpr size_t kFrameBytes = 4;       // the big-endian size before a DV and the CRC after it
constexpr uint64_t kOneReadGap = 4096;  // a DV starting below this is read with the version byte
constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

// ---------------------------------------------------------------------------------------------
// Little helpers.

void PutLE16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>(v >> 8));
}
void PutLE32(std::string* out, uint32_t v) {
  PutLE16(out, static_cast<uint16_t>(v & 0xFFFF));
  PutLE16(out, static_cast<uint16_t>(v >> 16));
}
void PutLE64(std::string* out, uint64_t v) {
  PutLE32(out, static_cast<uint32_t>(v & 0xFFFFFFFF));
  PutLE32(out, static_cast<uint32_t>(v >> 32));
}
void PutBE32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xFF));
}
uint32_t LoadBE32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// `text` for an error message: at most 40 characters of it.
std::string Abbreviated(std::string_view text) {
  constexpr size_t kShown = 40;
  return text.size() <= kShown ? std::string(text) : fmt::format("{}...", text.substr(0, kShown));
}

// A random-prefix directory name: not empty, no separator, not "." or "..".
bool IsPlainDirectoryName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

// The 16 bytes of a UUID in canonical text (RandomUuid's output).
std::string UuidBytes(std::string_view text) {
  std::string bytes;
  int nibble = -1;
  for (char c : text) {
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (v < 0) continue;
    if (nibble < 0) {
      nibble = v;
    } else {
      bytes.push_back(static_cast<char>(nibble * 16 + v));
      nibble = -1;
    }
  }
  return bytes;
}

// The canonical text of a 16-byte UUID: lowercase hex, 8-4-4-4-12.
std::string UuidText(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2 + 4);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    const auto b = static_cast<uint8_t>(bytes[i]);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

// A 'u' path's parts: the random prefix (maybe empty) and the UUID's canonical text. Errors are
// Corruption without context.
struct RelativeUuidPath {
  std::string_view prefix;
  std::string uuid;
};

// The UUID's 16 bytes of a 'u' path, checked as SplitRelativeUuidPath describes.
Result<std::string> RelativeUuidBytes(std::string_view text) {
  if (text.size() < kUuidZ85Chars) {
    return Status::Corruption(
        fmt::format("'{}' is shorter than the {} characters of a Z85 UUID", Abbreviated(text), kUuidZ85Chars));
  }
  const std::string_view prefix = text.substr(0, text.size() - kUuidZ85Chars);
  if (!prefix.empty() && !IsPlainDirectoryName(prefix)) {
    return Status::Corruption(fmt::format("random prefix '{}' is not a plain directory name", Abbreviated(prefix)));
  }
  auto bytes = Z85Decode(text.substr(prefix.size()));
  if (!bytes.ok()) return bytes.status().WithContext(fmt::format("UUID of '{}'", Abbreviated(text)));
  return bytes;
}

Result<RelativeUuidPath> SplitRelativeUuidPath(std::string_view text) {
  STOKE_ASSIGN_OR_RETURN(const std::string bytes, RelativeUuidBytes(text));
  RelativeUuidPath r;
  r.prefix = text.substr(0, text.size() - kUuidZ85Chars);
  r.uuid = UuidText(bytes);
  return r;
}

// ---------------------------------------------------------------------------------------------
// Descriptor fields.

// Reads the fields of one deletionVector object; JSON null is absent. Errors name the context and
// the field.
class DescriptorFields {
 public:
  DescriptorFields(const json& obj, std::string_view context) : obj_(obj), context_(context) {}

  Status Error(std::string_view field, std::string_view what) const {
    return Status::Corruption(fmt::format("{}: deletionVector field \"{}\" {}", context_, field, what));
  }

  const json* Find(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  Status String(const char* key, std::string* out) const {
    const json* f = Find(key);
    if (f == nullptr) return Error(key, "is missing");
    if (!f->is_string()) return Error(key, "must be a string");
    *out = f->get<std::string>();
    return Status::OK();
  }

  // An integer in [0, max]; absent leaves *out empty.
  Status OptionalInt(const char* key, int64_t max, std::optional<int64_t>* out) const {
    const json* f = Find(key);
    if (f == nullptr) return Status::OK();
    const bool in_range =
        f->is_number_integer() && (f->is_number_unsigned() ? f->get<uint64_t>() <= static_cast<uint64_t>(max)
                                                           : f->get<int64_t>() >= 0 && f->get<int64_t>() <= max);
    if (!in_range) return Error(key, fmt::format("must be an integer in [0, {}]", max));
    *out = f->get<int64_t>();
    return Status::OK();
  }

  Status Int(const char* key, int64_t max, int64_t* out) const {
    std::optional<int64_t> v;
    STOKE_RETURN_IF_ERROR(OptionalInt(key, max, &v));
    if (!v) return Error(key, "is missing");
    *out = *v;
    return Status::OK();
  }

 private:
  const json& obj_;
  std::string_view context_;
};

// What the storage type asks of the other fields.
Status CheckStorageTypeFields(const DeletionVectorDescriptor& dv, const DescriptorFields& f) {
  const std::string& text = dv.path_or_inline_dv;
  switch (dv.storage_type) {
    case kDvStorageRelativeUuid: {
      auto uuid = RelativeUuidBytes(text);  // checked, not formatted: 100,000s of DVs are read this way
      return uuid.ok() ? Status::OK() : f.Error("pathOrInlineDv", uuid.status().message());
    }
    case kDvStorageInline: {
      if (dv.offset) return f.Error("offset", "must be absent for an inline DV (storageType \"i\")");
      if (text.size() % 5 != 0)
        return f.Error("pathOrInlineDv", fmt::format("has {} characters, no multiple of 5 (Z85)", text.size()));
      const uint64_t decoded = text.size() / 5 * 4;
      if (static_cast<uint64_t>(dv.size_in_bytes) > decoded || decoded - dv.size_in_bytes >= 4) {
        return f.Error("sizeInBytes", fmt::format("is {}, but the inline DV's {} characters hold {} bytes",
                                                  dv.size_in_bytes, text.size(), decoded));
      }
      return Status::OK();
    }
    default:
      return text.empty() ? f.Error("pathOrInlineDv", "is empty") : Status::OK();
  }
}

// ---------------------------------------------------------------------------------------------
// Decoding: a cursor over the bytes that names the context and the byte offset in each error.

class ByteCursor {
 public:
  // `base`: the offset of bytes[0] in what the context names (a file), for messages.
  ByteCursor(ByteView bytes, std::string_view context, uint64_t base)
      : bytes_(bytes), end_(bytes.size()), context_(context), base_(base) {}

  size_t pos() const { return pos_; }
  size_t left() const { return end_ - pos_; }

  Status Error(size_t at, std::string_view what) const {
    return Status::Corruption(fmt::format("{}: byte {}: {}", context_, base_ + at, what));
  }
  Status Need(size_t n, std::string_view what) const {
    if (n <= left()) return Status::OK();
    return Error(pos_, fmt::format("{} needs {} bytes, {} are left", what, n, left()));
  }
  // The next n bytes. REQUIRES: Need(n) passed.
  ByteView Take(size_t n) {
    ByteView v = bytes_.subspan(pos_, n);
    pos_ += n;
    return v;
  }
  uint16_t U16() { return LoadLE<uint16_t>(Take(2).data()); }
  uint32_t U32() { return LoadLE<uint32_t>(Take(4).data()); }
  uint64_t U64() { return LoadLE<uint64_t>(Take(8).data()); }
  // Lets reads reach only the next n bytes (REQUIRES: n <= left()) until RestoreEnd(returned value).
  size_t LimitTo(size_t n) {
    const size_t old = end_;
    end_ = pos_ + n;
    return old;
  }
  void RestoreEnd(size_t end) { end_ = end; }

 private:
  ByteView bytes_;
  size_t pos_ = 0;
  size_t end_;
  std::string_view context_;
  uint64_t base_;
};

// Makes room for `count` more rows at the end of *out (unless that passes kMaxDeletionVectorRows)
// and returns where they start.
Result<size_t> GrowRows(std::vector<uint64_t>* out, uint64_t count, const ByteCursor& c) {
  if (count > kMaxDeletionVectorRows - out->size()) {
    return Status::Unsupported(
        c.Error(c.pos(), fmt::format("the DV holds more than {} rows", kMaxDeletionVectorRows)).message());
  }
  const size_t first = out->size();
  out->resize(first + count);  // grows geometrically
  return first;
}

// An array container: `card` 16-bit values, strictly ascending.
Status DecodeArrayContainer(ByteCursor& c, uint64_t high, uint32_t card, std::vector<uint64_t>* out) {
  STOKE_RETURN_IF_ERROR(c.Need(2 * size_t{card}, fmt::format("an array container of {} values", card)));
  const size_t at = c.pos();
  const ByteView values = c.Take(2 * size_t{card});
  STOKE_ASSIGN_OR_RETURN(const size_t first, GrowRows(out, card, c));
  int32_t previous = -1;
  for (uint32_t i = 0; i < card; ++i) {
    const uint16_t v = LoadLE<uint16_t>(values.data() + 2 * i);
    if (v <= previous) {
      return c.Error(at + 2 * i,
                     fmt::format("array container value {} does not follow {} in ascending order", v, previous));
    }
    previous = v;
    (*out)[first + i] = high | v;
  }
  return Status::OK();
}

// A bitmap container: 65536 bits, of which `card` are set.
Status DecodeBitmapContainer(ByteCursor& c, uint64_t high, uint32_t card, std::vector<uint64_t>* out) {
  STOKE_RETURN_IF_ERROR(c.Need(kBitmapContainerBytes, "a bitmap container"));
  const size_t at = c.pos();
  const ByteView bits = c.Take(kBitmapContainerBytes);
  constexpr size_t kWords = kBitmapContainerBytes / 8;
  uint32_t set = 0;
  for (size_t w = 0; w < kWords; ++w) set += std::popcount(LoadLE<uint64_t>(bits.data() + 8 * w));
  if (set != card) return c.Error(at, fmt::format("bitmap container has {} bits set, its header says {}", set, card));
  STOKE_ASSIGN_OR_RETURN(size_t next, GrowRows(out, card, c));
  for (size_t w = 0; w < kWords; ++w) {
    for (uint64_t word = LoadLE<uint64_t>(bits.data() + 8 * w); word != 0; word &= word - 1) {
      (*out)[next++] = high | (w * 64 + static_cast<uint64_t>(std::countr_zero(word)));
    }
  }
  return Status::OK();
}

// A run container: a 16-bit run count, then per run its start and length - 1; runs ascending and
// disjoint, within 16 bits, `card` values in all.
Status DecodeRunContainer(ByteCursor& c, uint64_t high, uint32_t card, std::vector<uint64_t>* out) {
  STOKE_RETURN_IF_ERROR(c.Need(2, "a run container's run count"));
  const uint32_t runs = c.U16();
  STOKE_RETURN_IF_ERROR(c.Need(4 * size_t{runs}, fmt::format("a run container of {} runs", runs)));
  const size_t at = c.pos();
  const ByteView pairs = c.Take(4 * size_t{runs});
  uint32_t total = 0;
  int32_t previous_end = -1;
  for (uint32_t i = 0; i < runs; ++i) {
    const uint32_t start = LoadLE<uint16_t>(pairs.data() + 4 * i);
    const uint32_t end = start + LoadLE<uint16_t>(pairs.data() + 4 * i + 2);
    if (end > 0xFFFF) return c.Error(at + 4 * i, fmt::format("run {} from {} to {} passes 65535", i, start, end));
    if (static_cast<int32_t>(start) <= previous_end) {
      return c.Error(at + 4 * i,
                     fmt::format("run {} starts at {}, not after the previous run's end {}", i, start, previous_end));
    }
    previous_end = static_cast<int32_t>(end);
    total += end - start + 1;
  }
  if (total != card) return c.Error(at, fmt::format("run container holds {} values, its header says {}", total, card));
  STOKE_ASSIGN_OR_RETURN(size_t next, GrowRows(out, card, c));
  for (uint32_t i = 0; i < runs; ++i) {
    const uint32_t start = LoadLE<uint16_t>(pairs.data() + 4 * i);
    const uint32_t end = start + LoadLE<uint16_t>(pairs.data() + 4 * i + 2);
    for (uint32_t v = start; v <= end; ++v) (*out)[next++] = high | v;
  }
  return Status::OK();
}

// The part of a 32-bit bitmap before its containers.
struct Roaring32Header {
  uint32_t containers = 0;
  ByteView run_flags;  // bit i set: container i is a run container; empty without run containers
  ByteView keys;       // per container: 16-bit key, 16-bit cardinality - 1
  ByteView offsets;    // per container: its offset from the cookie (32 bits); empty when absent
  size_t keys_at = 0;  // cursor positions of `keys` and `offsets`
  size_t offsets_at = 0;
};

Result<Roaring32Header> ReadRoaring32Header(ByteCursor& c) {
  STOKE_RETURN_IF_ERROR(c.Need(4, "a 32-bit bitmap's cookie"));
  const size_t cookie_at = c.pos();
  const uint32_t cookie = c.U32();
  Roaring32Header h;
  bool has_runs = false;
  if ((cookie & 0xFFFF) == kSerialCookie) {
    has_runs = true;
    h.containers = (cookie >> 16) + 1;
    STOKE_RETURN_IF_ERROR(c.Need((h.containers + 7) / 8, "the run-container flags"));
    h.run_flags = c.Take((h.containers + 7) / 8);
  } else if (cookie == kSerialCookieNoRunContainer) {
    STOKE_RETURN_IF_ERROR(c.Need(4, "the container count"));
    const size_t count_at = c.pos();
    h.containers = c.U32();
    if (h.containers > kMaxContainers) {
      return c.Error(count_at,
                     fmt::format("{} containers; a 32-bit bitmap has at most {}", h.containers, kMaxContainers));
    }
  } else {
    return c.Error(cookie_at, fmt::format("cookie {:#010x} is neither {} nor {} with a container count", cookie,
                                          kSerialCookieNoRunContainer, kSerialCookie));
  }
  const size_t n = h.containers;
  STOKE_RETURN_IF_ERROR(c.Need(4 * n, fmt::format("the keys and cardinalities of {} containers", n)));
  h.keys_at = c.pos();
  h.keys = c.Take(4 * n);
  if (!has_runs || h.containers >= kNoOffsetThreshold) {
    STOKE_RETURN_IF_ERROR(c.Need(4 * n, fmt::format("the offsets of {} containers", n)));
    h.offsets_at = c.pos();
    h.offsets = c.Take(4 * n);
  }
  return h;
}

// One 32-bit Roaring bitmap whose values get `high32` as their upper 32 bits.
Status DecodeRoaring32(ByteCursor& c, uint64_t high32, std::vector<uint64_t>* out) {
  const size_t start = c.pos();
  STOKE_ASSIGN_OR_RETURN(const Roaring32Header h, ReadRoaring32Header(c));
  int32_t previous_key = -1;
  for (uint32_t i = 0; i < h.containers; ++i) {
    const uint16_t key = LoadLE<uint16_t>(h.keys.data() + 4 * i);
    const uint32_t card = uint32_t{LoadLE<uint16_t>(h.keys.data() + 4 * i + 2)} + 1;
    if (key <= previous_key) {
      return c.Error(h.keys_at + 4 * i,
                     fmt::format("container key {} does not follow {} in ascending order", key, previous_key));
    }
    previous_key = key;
    if (!h.offsets.empty()) {
      const uint32_t offset = LoadLE<uint32_t>(h.offsets.data() + 4 * i);
      if (offset != c.pos() - start) {
        return c.Error(h.offsets_at + 4 * i,
                       fmt::format("container {} is at offset {} of its bitmap, the offset header says {}", i,
                                   c.pos() - start, offset));
      }
    }
    const bool run = !h.run_flags.empty() && ((h.run_flags[i / 8] >> (i % 8)) & 1) != 0;
    const uint64_t high = (high32 << 32) | (uint64_t{key} << 16);
    if (run) {
      STOKE_RETURN_IF_ERROR(DecodeRunContainer(c, high, card, out));
    } else if (card <= kMaxArrayCardinality) {
      STOKE_RETURN_IF_ERROR(DecodeArrayContainer(c, high, card, out));
    } else {
      STOKE_RETURN_IF_ERROR(DecodeBitmapContainer(c, high, card, out));
    }
  }
  return Status::OK();
}

// The portable layout after the magic: a 64-bit bucket count, then per bucket its key (ascending,
// top bit clear) and a 32-bit bitmap.
Status DecodePortableBuckets(ByteCursor& c, std::vector<uint64_t>* out) {
  STOKE_RETURN_IF_ERROR(c.Need(8, "the bucket count"));
  const size_t count_at = c.pos();
  const uint64_t buckets = c.U64();
  if (buckets > c.left() / kMinBucketBytes) {
    return c.Error(count_at, fmt::format("{} buckets cannot fit in the {} bytes left", buckets, c.left()));
  }
  int64_t previous_key = -1;
  for (uint64_t b = 0; b < buckets; ++b) {
    STOKE_RETURN_IF_ERROR(c.Need(4, "a bucket key"));
    const size_t key_at = c.pos();
    const uint32_t key = c.U32();
    if ((key & 0x80000000u) != 0) {
      return c.Error(key_at, fmt::format("bucket key {:#x} has its top bit set (the protocol requires it clear)", key));
    }
    if (static_cast<int64_t>(key) <= previous_key) {
      return c.Error(key_at, fmt::format("bucket key {} does not follow {} in ascending order", key, previous_key));
    }
    previous_key = key;
    STOKE_RETURN_IF_ERROR(DecodeRoaring32(c, key, out));
  }
  return Status::OK();
}

// delta-spark's native layout after the magic: a 32-bit bitmap count, then per bitmap its byte
// length and the bitmap; the bitmap's index is its key.
Status DecodeNativeBitmaps(ByteCursor& c, std::vector<uint64_t>* out) {
  STOKE_RETURN_IF_ERROR(c.Need(4, "the bitmap count"));
  const size_t count_at = c.pos();
  const uint32_t count = c.U32();
  if (count > static_cast<uint32_t>(INT32_MAX) || count > c.left() / kMinBucketBytes) {
    return c.Error(count_at, fmt::format("{} bitmaps cannot fit in the {} bytes left", count, c.left()));
  }
  for (uint32_t index = 0; index < count; ++index) {
    STOKE_RETURN_IF_ERROR(c.Need(4, "a bitmap's length"));
    const size_t length_at = c.pos();
    const uint32_t length = c.U32();
    STOKE_RETURN_IF_ERROR(c.Need(length, fmt::format("bitmap {}", index)));
    const size_t bitmap_start = c.pos();
    const size_t end = c.LimitTo(length);
    STOKE_RETURN_IF_ERROR(DecodeRoaring32(c, index, out));
    const size_t used = c.pos() - bitmap_start;
    c.RestoreEnd(end);
    if (used != length) {
      return c.Error(length_at, fmt::format("bitmap {} takes {} bytes, its length says {}", index, used, length));
    }
  }
  return Status::OK();
}

// DecodeRoaringBitmapArray with byte offsets in messages counted from `base`.
Result<std::vector<uint64_t>> DecodeBitmapArrayAt(ByteView bytes, std::string_view context, uint64_t base) {
  ByteCursor c(bytes, context, base);
  STOKE_RETURN_IF_ERROR(c.Need(4, "the RoaringBitmapArray magic number"));
  const uint32_t magic = c.U32();
  std::vector<uint64_t> rows;
  if (magic == kRoaringBitmapArrayPortableMagic) {
    STOKE_RETURN_IF_ERROR(DecodePortableBuckets(c, &rows));
  } else if (magic == kRoaringBitmapArrayNativeMagic) {
    STOKE_RETURN_IF_ERROR(DecodeNativeBitmaps(c, &rows));
  } else {
    return c.Error(0, fmt::format("magic number {} is not a RoaringBitmapArray's ({} or {})", magic,
                                  kRoaringBitmapArrayPortableMagic, kRoaringBitmapArrayNativeMagic));
  }
  if (c.left() != 0) return c.Error(c.pos(), fmt::format("{} bytes follow the last bitmap", c.left()));
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Encoding.

enum class ContainerKind { kArray, kBitmap, kRun };

// One container to write: the rows of one 16-bit key.
struct ContainerPlan {
  uint16_t key = 0;
  std::span<const uint64_t> rows;
  uint32_t runs = 0;
  ContainerKind kind = ContainerKind::kArray;
  size_t bytes = 0;  // of its body
};

// Splits rows sharing their upper 32 bits into containers, each of the smallest kind.
std::vector<ContainerPlan> PlanContainers(std::span<const uint64_t> rows) {
  std::vector<ContainerPlan> plans;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    uint32_t runs = 1;
    while (j < rows.size() && (rows[j] >> 16) == (rows[i] >> 16)) {
      if (rows[j] != rows[j - 1] + 1) ++runs;
      ++j;
    }
    ContainerPlan p;
    p.key = static_cast<uint16_t>(rows[i] >> 16);
    p.rows = rows.subspan(i, j - i);
    p.runs = runs;
    const size_t plain = p.rows.size() <= kMaxArrayCardinality ? 2 * p.rows.size() : kBitmapContainerBytes;
    const size_t run = 2 + 4 * size_t{runs};
    p.kind = run < plain                             ? ContainerKind::kRun
             : p.rows.size() <= kMaxArrayCardinality ? ContainerKind::kArray
                                                     : ContainerKind::kBitmap;
    p.bytes = std::min(run, plain);
    plans.push_back(p);
    i = j;
  }
  return plans;
}

void AppendContainer(const ContainerPlan& p, std::string* out) {
  switch (p.kind) {
    case ContainerKind::kArray:
      for (uint64_t r : p.rows) PutLE16(out, static_cast<uint16_t>(r & 0xFFFF));
      return;
    case ContainerKind::kBitmap: {
      std::array<uint64_t, kBitmapContainerBytes / 8> words{};
      for (uint64_t r : p.rows) words[(r & 0xFFFF) / 64] |= uint64_t{1} << (r % 64);
      for (uint64_t w : words) PutLE64(out, w);
      return;
    }
    case ContainerKind::kRun:
      PutLE16(out, static_cast<uint16_t>(p.runs));
      for (size_t i = 0; i < p.rows.size();) {
        size_t j = i + 1;
        while (j < p.rows.size() && p.rows[j] == p.rows[j - 1] + 1) ++j;
        PutLE16(out, static_cast<uint16_t>(p.rows[i] & 0xFFFF));
        PutLE16(out, static_cast<uint16_t>(j - i - 1));
        i = j;
      }
      return;
  }
}

// A 32-bit Roaring bitmap of the low 32 bits of `rows` (sorted, distinct, one upper half).
void AppendRoaring32(std::span<const uint64_t> rows, std::string* out) {
  const std::vector<ContainerPlan> plans = PlanContainers(rows);
  const size_t n = plans.size();
  const bool any_run =
      std::any_of(plans.begin(), plans.end(), [](const ContainerPlan& p) { return p.kind == ContainerKind::kRun; });
  const bool offsets = !any_run || n >= kNoOffsetThreshold;
  if (any_run) {
    PutLE32(out, kSerialCookie | static_cast<uint32_t>((n - 1) << 16));
    std::string flags((n + 7) / 8, '\0');
    for (size_t i = 0; i < n; ++i) {
      if (plans[i].kind == ContainerKind::kRun) flags[i / 8] = static_cast<char>(flags[i / 8] | (1 << (i % 8)));
    }
    *out += flags;
  } else {
    PutLE32(out, kSerialCookieNoRunContainer);
    PutLE32(out, static_cast<uint32_t>(n));
  }
  for (const ContainerPlan& p : plans) {
    PutLE16(out, p.key);
    PutLE16(out, static_cast<uint16_t>(p.rows.size() - 1));
  }
  if (offsets) {
    size_t at = 4 + (any_run ? (n + 7) / 8 : 4) + 8 * n;
    for (const ContainerPlan& p : plans) {
      PutLE32(out, static_cast<uint32_t>(at));
      at += p.bytes;
    }
  }
  for (const ContainerPlan& p : plans) AppendContainer(p, out);
}

// ---------------------------------------------------------------------------------------------
// Reading DVs.

// The rows decoded must be as many as the descriptor says, and none past max_row_index.
Status CheckDecodedRows(const std::vector<uint64_t>& rows, const DeletionVectorDescriptor& dv,
                        std::string_view context) {
  if (rows.size() != static_cast<uint64_t>(dv.cardinality)) {
    return Status::Corruption(
        fmt::format("{}: the DV holds {} rows, its cardinality says {}", context, rows.size(), dv.cardinality));
  }
  if (dv.max_row_index && !rows.empty() && rows.back() > static_cast<uint64_t>(*dv.max_row_index)) {
    return Status::Corruption(
        fmt::format("{}: the DV deletes row {}, past its maxRowIndex {}", context, rows.back(), *dv.max_row_index));
  }
  return Status::OK();
}

Result<std::vector<uint64_t>> ReadInlineDeletionVector(const DeletionVectorDescriptor& dv) {
  const std::string context = fmt::format("inline deletion vector '{}'", Abbreviated(dv.path_or_inline_dv));
  auto bytes = Z85Decode(dv.path_or_inline_dv);
  if (!bytes.ok()) return bytes.status().WithContext(context);
  const uint64_t size = static_cast<uint64_t>(dv.size_in_bytes);
  if (dv.size_in_bytes < 0 || size > bytes->size() || bytes->size() - size >= 4) {
    return Status::Corruption(
        fmt::format("{}: {} bytes of Z85 for sizeInBytes {}", context, bytes->size(), dv.size_in_bytes));
  }
  STOKE_ASSIGN_OR_RETURN(std::vector<uint64_t> rows, DecodeBitmapArrayAt(AsBytes(*bytes).first(size), context, 0));
  STOKE_RETURN_IF_ERROR(CheckDecodedRows(rows, dv, context));
  return rows;
}

// The bitmap bytes of the DV at `offset` of file `path`, checked against the file's version byte,
// the stored size and the CRC.
Result<std::string> ReadFramedBitmap(Storage& storage, const std::string& path, uint64_t offset, uint64_t size) {
  if (offset == 0) return Status::Corruption(fmt::format("{}: DV offset 0 is the file's version byte", path));
  STOKE_ASSIGN_OR_RETURN(auto file, storage.OpenForRead(path));
  const uint64_t end = offset + kFrameBytes + size + kFrameBytes;
  if (file->size() < end) {
    return Status::Corruption(
        fmt::format("{}: byte {}: the DV of {} bytes with its size and CRC ends at byte {}, past the file's {} bytes",
                    path, offset, size, end, file->size()));
  }
  // Usually the DV follows the version byte: one read for both.
  const uint64_t from = offset < kOneReadGap ? 0 : offset;
  std::string buf(end - from, '\0');
  auto* data = reinterpret_cast<uint8_t*>(buf.data());
  STOKE_RETURN_IF_ERROR(file->ReadAt(from, MutableByteView(data, buf.size())));
  uint8_t version = data[0];
  if (from != 0) STOKE_RETURN_IF_ERROR(file->ReadAt(0, MutableByteView(&version, 1)));
  if (version != kDeletionVectorFileVersion) {
    std::string what =
        fmt::format("{}: byte 0: DV file version {}, expected {}", path, version, kDeletionVectorFileVersion);
    return version > kDeletionVectorFileVersion ? Status::Unsupported(what) : Status::Corruption(what);
  }
  const uint8_t* frame = data + (offset - from);
  const uint32_t stored_size = LoadBE32(frame);
  if (stored_size != size) {
    return Status::Corruption(
        fmt::format("{}: byte {}: the DV's stored size is {}, its sizeInBytes {}", path, offset, stored_size, size));
  }
  const ByteView bitmap(frame + kFrameBytes, size);
  const uint32_t stored_crc = LoadBE32(frame + kFrameBytes + size), crc = Crc32(bitmap);
  if (stored_crc != crc) {
    return Status::Corruption(fmt::format("{}: byte {}: the DV's stored CRC-32 is {:08x}, its {} bytes give {:08x}",
                                          path, offset + kFrameBytes + size, stored_crc, size, crc));
  }
  return std::string(AsChars(bitmap));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public functions.

std::string DeletionVectorDescriptor::UniqueId() const {
  std::string id = std::string(1, storage_type) + path_or_inline_dv;
  if (offset) id += fmt::format("@{}", *offset);
  return id;
}

Result<DeletionVectorDescriptor> ParseDeletionVectorDescriptor(const json& j, std::string_view context) {
  if (!j.is_object()) return Status::Corruption(fmt::format("{}: deletionVector must be an object", context));
  const DescriptorFields f(j, context);
  DeletionVectorDescriptor dv;
  std::string type;
  STOKE_RETURN_IF_ERROR(f.String("storageType", &type));
  if (type != "u" && type != "i" && type != "p") {
    return f.Error("storageType", fmt::format("is \"{}\", not \"u\", \"i\" or \"p\"", Abbreviated(type)));
  }
  dv.storage_type = type[0];
  STOKE_RETURN_IF_ERROR(f.String("pathOrInlineDv", &dv.path_or_inline_dv));
  std::optional<int64_t> offset, max_row_index;
  int64_t size = 0;
  STOKE_RETURN_IF_ERROR(f.OptionalInt("offset", INT32_MAX, &offset));
  STOKE_RETURN_IF_ERROR(f.Int("sizeInBytes", INT32_MAX, &size));
  STOKE_RETURN_IF_ERROR(f.Int("cardinality", INT64_MAX, &dv.cardinality));
  STOKE_RETURN_IF_ERROR(f.OptionalInt("maxRowIndex", INT64_MAX, &max_row_index));
  if (offset) dv.offset = static_cast<int32_t>(*offset);
  dv.size_in_bytes = static_cast<int32_t>(size);
  dv.max_row_index = max_row_index;
  STOKE_RETURN_IF_ERROR(CheckStorageTypeFields(dv, f));
  return dv;
}

Status CheckDeletionVectorDescriptor(const DeletionVectorDescriptor& dv, std::string_view context) {
  static const json kNoObject = json::object();
  const DescriptorFields f(kNoObject, context);  // for its messages only
  if (dv.storage_type != kDvStorageRelativeUuid && dv.storage_type != kDvStorageInline &&
      dv.storage_type != kDvStorageAbsolutePath) {
    return f.Error("storageType", fmt::format("is \"{}\", not \"u\", \"i\" or \"p\"", dv.storage_type));
  }
  if (dv.offset && *dv.offset < 0) return f.Error("offset", fmt::format("must be an integer in [0, {}]", INT32_MAX));
  if (dv.size_in_bytes < 0) return f.Error("sizeInBytes", fmt::format("must be an integer in [0, {}]", INT32_MAX));
  if (dv.cardinality < 0) return f.Error("cardinality", fmt::format("must be an integer in [0, {}]", INT64_MAX));
  if (dv.max_row_index && *dv.max_row_index < 0) {
    return f.Error("maxRowIndex", fmt::format("must be an integer in [0, {}]", INT64_MAX));
  }
  return CheckStorageTypeFields(dv, f);
}

ordered_json DeletionVectorDescriptorJson(const DeletionVectorDescriptor& dv) {
  ordered_json j = ordered_json::object();
  j["storageType"] = std::string(1, dv.storage_type);
  j["pathOrInlineDv"] = dv.path_or_inline_dv;
  if (dv.offset) j["offset"] = *dv.offset;
  j["sizeInBytes"] = dv.size_in_bytes;
  j["cardinality"] = dv.cardinality;
  if (dv.max_row_index) j["maxRowIndex"] = *dv.max_row_index;
  return j;
}

Result<std::string> Z85Decode(std::string_view text) {
  static const std::array<int8_t, 256> kValue = [] {
    std::array<int8_t, 256> v;
    v.fill(-1);
    for (size_t i = 0; i < kZ85Alphabet.size(); ++i) v[static_cast<uint8_t>(kZ85Alphabet[i])] = static_cast<int8_t>(i);
    return v;
  }();
  if (text.size() % 5 != 0) {
    return Status::Corruption(fmt::format("Z85 text of {} characters: the length is no multiple of 5", text.size()));
  }
  std::string out;
  out.reserve(text.size() / 5 * 4);
  for (size_t group = 0; group < text.size(); group += 5) {
    uint64_t value = 0;
    for (size_t i = group; i < group + 5; ++i) {
      const auto c = static_cast<uint8_t>(text[i]);
      if (kValue[c] < 0) {
        return Status::Corruption(fmt::format("Z85 text: byte {:#04x} at offset {} is not in the alphabet", c, i));
      }
      value = value * 85 + static_cast<uint64_t>(kValue[c]);
    }
    if (value > UINT32_MAX) {
      return Status::Corruption(fmt::format("Z85 text: the group at offset {} is {}, more than 32 bits", group, value));
    }
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xFF));
  }
  return out;
}

std::string Z85Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 3) / 4 * 5);
  for (size_t group = 0; group < bytes.size(); group += 4) {
    uint32_t value = 0;
    for (size_t i = group; i < group + 4; ++i)
      value = (value << 8) | (i < bytes.size() ? static_cast<uint8_t>(bytes[i]) : 0);
    char chars[5];
    for (int k = 4; k >= 0; --k) {
      chars[k] = kZ85Alphabet[value % 85];
      value /= 85;
    }
    out.append(chars, 5);
  }
  return out;
}

Result<std::string> DeletionVectorFilePath(const DeletionVectorDescriptor& dv, std::string_view table_dir) {
  const std::string& stored = dv.path_or_inline_dv;
  if (dv.storage_type == kDvStorageRelativeUuid) {
    auto split = SplitRelativeUuidPath(stored);
    if (!split.ok()) return split.status().WithContext("deletion vector");
    std::string dir(table_dir);
    if (!split->prefix.empty()) dir = JoinPath(dir, std::string(split->prefix));
    return JoinPath(dir, fmt::format("deletion_vector_{}.bin", split->uuid));
  }
  if (dv.storage_type != kDvStorageAbsolutePath) {
    return Status::InvalidArgument(fmt::format("deletion vector of storageType '{}' has no file", dv.storage_type));
  }
  auto decoded = DecodePath(stored);
  if (!decoded.ok()) return Status::Corruption(fmt::format("deletion vector path: {}", decoded.status().message()));
  std::string_view p = *decoded;
  if (p.starts_with("file:")) {
    p.remove_prefix(5);
    if (p.starts_with("//")) {  // file://host/path: only an empty host or localhost is this machine
      p.remove_prefix(2);
      const size_t slash = p.find('/');
      const std::string_view host = p.substr(0, slash);
      if (slash == std::string_view::npos || (!host.empty() && host != "localhost")) {
        return Status::Corruption(fmt::format("deletion vector path '{}' names no local file", Abbreviated(stored)));
      }
      p.remove_prefix(slash);
    }
  } else if (p.find("://") != std::string_view::npos) {
    return std::string(p);  // another storage's URI
  }
  if (!p.starts_with('/')) {
    return Status::Corruption(fmt::format("deletion vector path '{}' is not absolute", Abbreviated(stored)));
  }
  return std::string(p);
}

Result<std::vector<uint64_t>> DecodeRoaringBitmapArray(ByteView bytes, std::string_view context) {
  return DecodeBitmapArrayAt(bytes, context, 0);
}

std::string EncodeRoaringBitmapArray(const std::vector<uint64_t>& sorted_rows) {
  std::vector<uint64_t> copy;
  std::span<const uint64_t> rows = sorted_rows;
  if (std::adjacent_find(rows.begin(), rows.end(), std::greater_equal<uint64_t>()) != rows.end()) {
    copy = sorted_rows;
    std::sort(copy.begin(), copy.end());
    copy.erase(std::unique(copy.begin(), copy.end()), copy.end());
    rows = copy;
  }
  std::string out;
  PutLE32(&out, kRoaringBitmapArrayPortableMagic);
  uint64_t buckets = 0;
  for (size_t i = 0; i < rows.size(); ++i) buckets += i == 0 || (rows[i] >> 32) != (rows[i - 1] >> 32);
  PutLE64(&out, buckets);
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && (rows[j] >> 32) == (rows[i] >> 32)) ++j;
    PutLE32(&out, static_cast<uint32_t>(rows[i] >> 32));
    AppendRoaring32(rows.subspan(i, j - i), &out);
    i = j;
  }
  return out;
}

Result<std::vector<uint64_t>> ReadDeletionVector(Storage& storage, std::string_view table_dir,
                                                 const DeletionVectorDescriptor& dv) {
  if (dv.storage_type == kDvStorageInline) return ReadInlineDeletionVector(dv);
  STOKE_ASSIGN_OR_RETURN(const std::string path, DeletionVectorFilePath(dv, table_dir));
  if (dv.storage_type == kDvStorageAbsolutePath && path.find("://") != std::string::npos) {
    return Status::Unsupported(fmt::format("deletion vector '{}': a file of another storage than the table's", path));
  }
  if (dv.size_in_bytes < 0 || (dv.offset && *dv.offset < 0)) {
    return Status::Corruption(fmt::format("{}: deletion vector with a negative offset or size", path));
  }
  const uint64_t offset = dv.offset ? static_cast<uint64_t>(*dv.offset) : 1;  // absent: after the version byte
  STOKE_ASSIGN_OR_RETURN(const std::string bitmap, ReadFramedBitmap(storage, path, offset, dv.size_in_bytes));
  STOKE_ASSIGN_OR_RETURN(std::vector<uint64_t> rows, DecodeBitmapArrayAt(AsBytes(bitmap), path, offset + kFrameBytes));
  STOKE_RETURN_IF_ERROR(CheckDecodedRows(rows, dv, fmt::format("{}: DV at byte {}", path, offset)));
  return rows;
}

namespace {

Status CheckDeletedRows(const std::vector<uint64_t>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= (uint64_t{1} << 63) || (i > 0 && rows[i] <= rows[i - 1])) {
      return Status::InvalidArgument(
          fmt::format("deletion vector rows: row {} ({}) is not ascending or not below 2^63", i, rows[i]));
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<DeletionVectorDescriptor>> WriteDeletionVectorsFile(Storage& storage, std::string_view table_dir,
                                                                       const std::vector<std::vector<uint64_t>>& dvs,
                                                                       std::string_view prefix) {
  if (!prefix.empty() && !IsPlainDirectoryName(prefix)) {
    return Status::InvalidArgument(fmt::format("deletion vector prefix '{}' is not a plain directory name", prefix));
  }
  const std::string name = std::string(prefix) + Z85Encode(UuidBytes(RandomUuid()));
  std::string file(1, static_cast<char>(kDeletionVectorFileVersion));
  std::vector<DeletionVectorDescriptor> out;
  out.reserve(dvs.size());
  for (const std::vector<uint64_t>& rows : dvs) {
    STOKE_RETURN_IF_ERROR(CheckDeletedRows(rows));
    const std::string bitmap = EncodeRoaringBitmapArray(rows);
    if (bitmap.size() > static_cast<size_t>(INT32_MAX) || file.size() > static_cast<size_t>(INT32_MAX)) {
      return Status::InvalidArgument(
          fmt::format("deletion vectors of {} bytes: sizeInBytes and offset are 32 bits", file.size() + bitmap.size()));
    }
    DeletionVectorDescriptor dv;
    dv.storage_type = kDvStorageRelativeUuid;
    dv.path_or_inline_dv = name;
    dv.offset = static_cast<int32_t>(file.size());
    dv.size_in_bytes = static_cast<int32_t>(bitmap.size());
    dv.cardinality = static_cast<int64_t>(rows.size());
    PutBE32(&file, static_cast<uint32_t>(bitmap.size()));
    file += bitmap;
    PutBE32(&file, Crc32(AsBytes(bitmap)));
    out.push_back(std::move(dv));
  }
  DeletionVectorDescriptor named;
  named.path_or_inline_dv = name;
  STOKE_ASSIGN_OR_RETURN(const std::string path, DeletionVectorFilePath(named, table_dir));
  const std::string dir = ParentPath(path);
  if (!dir.empty()) STOKE_RETURN_IF_ERROR(storage.CreateDirectories(dir));
  STOKE_RETURN_IF_ERROR(storage.PutIfAbsent(path, AsBytes(file)));
  return out;
}

Result<DeletionVectorDescriptor> WriteDeletionVectorFile(Storage& storage, std::string_view table_dir,
                                                         const std::vector<uint64_t>& rows, std::string_view prefix) {
  STOKE_ASSIGN_OR_RETURN(std::vector<DeletionVectorDescriptor> dvs,
                         WriteDeletionVectorsFile(storage, table_dir, {rows}, prefix));
  return std::move(dvs.front());
}

}  // namespace stoke::delta
