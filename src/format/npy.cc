#include "format/npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <optional>

namespace stoke {
namespace {

// Preamble layout: magic, major and minor version bytes, then the header length field.
constexpr size_t kVersionOffset = kNpyMagic.size();
constexpr size_t kHeaderLengthOffset = kVersionOffset + 2;
// numpy.save leaves room in the header for the first axis to grow to this many digits in place
// (numpy.lib.format.GROWTH_AXIS_MAX_DIGITS, since 1.24).
constexpr size_t kGrowthAxisMaxDigits = 21;
// Enough for the header of any array numpy writes with a plain dtype (128 bytes unless the shape
// is long), so ReadNpyFile reads nearly every header in one call.
constexpr size_t kHeaderReadSize = 4096;

// The descr type codes stoke reads and writes, without the byte-order character.
struct DescrCode {
  std::string_view code;
  DType dtype;
};
constexpr DescrCode kDescrCodes[] = {
    {"b1", DType::kBool},   {"i1", DType::kInt8},    {"i2", DType::kInt16},   {"i4", DType::kInt32},
    {"i8", DType::kInt64},  {"u1", DType::kUInt8},   {"u2", DType::kUInt16},  {"u4", DType::kUInt32},
    {"u8", DType::kUInt64}, {"f2", DType::kFloat16}, {"f4", DType::kFloat32}, {"f8", DType::kFloat64},
};

// The dtype of a descr string such as "<f4", or nullopt when stoke does not support it.
// '<' is little-endian, '>' big-endian, '=' native (little) and '|' not applicable.
std::optional<DType> DescrToDType(std::string_view descr, bool* big_endian) {
  char order = '=';
  if (!descr.empty() && std::string_view("<>=|").find(descr[0]) != std::string_view::npos) {
    order = descr[0];
    descr.remove_prefix(1);
  }
  for (const DescrCode& c : kDescrCodes) {
    if (c.code == descr) {
      *big_endian = order == '>';
      return c.dtype;
    }
  }
  // numpy reads a dtype name too (np.dtype("float32")), native byte order; np.save never writes one.
  if (order == '=') {
    for (const DescrCode& c : kDescrCodes) {
      if (DTypeName(c.dtype) == descr) {
        *big_endian = false;
        return c.dtype;
      }
    }
  }
  return std::nullopt;
}

// The descr numpy writes for a little-endian array: "|" for one-byte types, "<" otherwise.
std::string DTypeToDescr(DType dtype) {
  const auto* c = std::find_if(std::begin(kDescrCodes), std::end(kDescrCodes),
                               [dtype](const DescrCode& d) { return d.dtype == dtype; });
  return fmt::format("{}{}", DTypeSize(dtype) == 1 ? '|' : '<', c->code);
}

// A shape as Python writes a tuple: (), (5,), (2, 3).
std::string ShapeRepr(std::span<const int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// Parser for the header's dict literal: the subset of Python literal syntax that npy writers
// produce. Reads only `text`; byte offsets in messages are from the start of the file.
class HeaderDictParser {
 public:
  HeaderDictParser(std::string_view text, size_t file_offset, std::string_view name)
      : text_(text), file_offset_(file_offset), name_(name) {}

  // Fills header->fortran_order and header->shape and returns the raw descr: the string's
  // contents, or the source text of a list or tuple descr (which no caller supports).
  Result<std::string_view> Parse(NpyHeader* header) {
    static constexpr std::string_view kKeys[] = {"descr", "fortran_order", "shape"};
    bool seen[std::size(kKeys)] = {};
    std::string_view descr;
    SkipSpace();
    if (!Consume('{')) return Error("'{' starting the header dict");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      const size_t key_pos = pos_;
      STOKE_ASSIGN_OR_RETURN(std::string_view key, ParseString("a quoted key or '}'"));
      const size_t k = std::find(std::begin(kKeys), std::end(kKeys), key) - std::begin(kKeys);
      if (k == std::size(kKeys)) {
        return ErrorAt(key_pos, fmt::format("unexpected key '{}' (expected 'descr', 'fortran_order', 'shape')", key));
      }
      if (seen[k]) return ErrorAt(key_pos, fmt::format("duplicate key '{}'", key));
      seen[k] = true;
      SkipSpace();
      if (!Consume(':')) return Error("':' after key");
      SkipSpace();
      if (kKeys[k] == "descr") {
        STOKE_ASSIGN_OR_RETURN(descr, ParseDescr());
      } else if (kKeys[k] == "fortran_order") {
        STOKE_ASSIGN_OR_RETURN(header->fortran_order, ParseBool());
      } else {
        STOKE_ASSIGN_OR_RETURN(header->shape, ParseShape());
      }
      SkipSpace();
      if (Consume(',')) continue;
      if (Consume('}')) break;
      return Error("',' or '}' after value");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("only space padding after the header dict");
    for (size_t k = 0; k < std::size(kKeys); ++k) {
      if (!seen[k]) return ErrorAt(0, fmt::format("missing key '{}'", kKeys[k]));
    }
    return descr;
  }

 private:
  Status ErrorAt(size_t pos, std::string_view message) const {
    return Status::Corruption(fmt::format("{}: offset {}: npy header: {}", name_, file_offset_ + pos, message));
  }
  // "expected <expected>, found <what is at the current position>".
  Status Error(std::string_view expected) const {
    std::string found = "end of header";
    if (pos_ < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      found = c >= 0x20 && c < 0x7f ? fmt::format("'{}'", static_cast<char>(c)) : fmt::format("byte 0x{:02x}", c);
    }
    return ErrorAt(pos_, fmt::format("expected {}, found {}", expected, found));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipSpace() {
    while (!AtEnd() && std::string_view(" \t\r\n").find(text_[pos_]) != std::string_view::npos) ++pos_;
  }
  bool Consume(char c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(std::string_view word) {
    if (!text_.substr(pos_).starts_with(word)) return false;
    pos_ += word.size();
    return true;
  }

  // A '...' or "..." literal without escapes (no key or supported descr contains one).
  Result<std::string_view> ParseString(std::string_view expected) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error(expected);
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return ErrorAt(pos_, "unterminated string");
    std::string_view s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }

  // A descr string, or a list (structured dtype) or tuple (sub-array dtype) descr, which is
  // skipped by bracket depth and returned as source text.
  Result<std::string_view> ParseDescr() {
    if (Peek() != '[' && Peek() != '(') return ParseString("a dtype string for 'descr'");
    const size_t start = pos_;
    int depth = 0;
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '\'' || c == '"') {
        STOKE_RETURN_IF_ERROR(ParseString("a string"));
        continue;
      }
      ++pos_;
      if (c == '[' || c == '(') {
        ++depth;
      } else if ((c == ']' || c == ')') && --depth == 0) {
        return text_.substr(start, pos_ - start);
      }
    }
    return Error("a closing bracket in 'descr'");
  }

  Result<bool> ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    return Error("True or False for 'fortran_order'");
  }

  // A tuple of non-negative integers: (), (5,), (2, 3) or (2, 3,).
  Result<std::vector<int64_t>> ParseShape() {
    if (!Consume('(')) return Error("'(' starting the 'shape' tuple");
    std::vector<int64_t> shape;
    SkipSpace();
    if (Consume(')')) return shape;
    while (true) {
      STOKE_ASSIGN_OR_RETURN(int64_t dim, ParseDimension());
      shape.push_back(dim);
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
        if (Consume(')')) return shape;
        continue;
      }
      // (5) is the integer 5 in Python, not a tuple.
      if (shape.size() > 1 && Consume(')')) return shape;
      return Error(shape.size() == 1 ? "',' after the only dimension (a 1-tuple is written (n,))"
                                     : "',' or ')' in 'shape'");
    }
  }

  Result<int64_t> ParseDimension() {
    const size_t start = pos_;
    if (Peek() < '0' || Peek() > '9') return Error("a non-negative integer dimension");
    int64_t value = 0;
    while (Peek() >= '0' && Peek() <= '9') {
      if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, Peek() - '0', &value)) {
        return ErrorAt(start, "dimension does not fit in int64");
      }
      ++pos_;
    }
    // Python 2's numpy wrote long integers with an 'L' suffix, (2L, 3L); numpy still reads them.
    if (Peek() == 'L') ++pos_;
    return value;
  }

  std::string_view text_;
  size_t file_offset_;
  std::string_view name_;
  size_t pos_ = 0;
};

// Where the header text and the data start, from the preamble alone.
struct NpyPreamble {
  int major_version;
  int minor_version;
  size_t header_offset;
  size_t data_offset;  // may lie past the end of the bytes given
};

Result<NpyPreamble> ParseNpyPreamble(ByteView bytes, std::string_view name) {
  if (bytes.size() < kHeaderLengthOffset) {
    return Status::Corruption(fmt::format("{}: offset 0: expected the npy magic and version ({} bytes), found {} bytes",
                                          name, kHeaderLengthOffset, bytes.size()));
  }
  if (AsChars(bytes.first(kNpyMagic.size())) != kNpyMagic) {
    return Status::Corruption(fmt::format("{}: offset 0: expected the npy magic \"\\x93NUMPY\", found {:02x}", name,
                                          fmt::join(bytes.first(kNpyMagic.size()), " ")));
  }
  NpyPreamble p;
  p.major_version = bytes[kVersionOffset];
  p.minor_version = bytes[kVersionOffset + 1];
  if (p.major_version < 1 || p.major_version > 3 || p.minor_version != 0) {
    return Status::Unsupported(fmt::format("{}: npy format version {}.{} (stoke reads 1.0, 2.0 and 3.0)", name,
                                           p.major_version, p.minor_version));
  }
  const size_t length_size = p.major_version == 1 ? 2 : 4;
  p.header_offset = kHeaderLengthOffset + length_size;
  if (bytes.size() < p.header_offset) {
    return Status::Corruption(fmt::format("{}: offset {}: expected a {}-byte header length, found end of file", name,
                                          kHeaderLengthOffset, length_size));
  }
  const uint8_t* length = bytes.data() + kHeaderLengthOffset;
  p.data_offset = p.header_offset + (length_size == 2 ? LoadLE<uint16_t>(length) : LoadLE<uint32_t>(length));
  return p;
}

// A header length pointing past the end of the file is corruption.
Status CheckDataOffset(const NpyPreamble& preamble, uint64_t file_size, std::string_view name) {
  if (preamble.data_offset <= file_size) return Status::OK();
  return Status::Corruption(fmt::format(
      "{}: offset {}: header length says the data starts at offset {}, past the end of the {} bytes present", name,
      kHeaderLengthOffset, preamble.data_offset, file_size));
}

// The bytes after data_offset must be exactly the data the header describes: fewer is a
// truncated file, more is trailing garbage.
Status CheckDataSize(const NpyHeader& header, size_t file_size, std::string_view name) {
  const size_t present = file_size - header.data_offset;
  if (present == header.data_size) return Status::OK();
  return Status::Corruption(fmt::format("{}: offset {}: expected {} bytes of {} data for shape {}, found {}{}", name,
                                        header.data_offset, header.data_size, DTypeName(header.dtype),
                                        ShapeRepr(header.shape), present,
                                        present > header.data_size ? " (trailing bytes)" : ""));
}

inline uint16_t ByteSwap(uint16_t v) { return __builtin_bswap16(v); }
inline uint32_t ByteSwap(uint32_t v) { return __builtin_bswap32(v); }
inline uint64_t ByteSwap(uint64_t v) { return __builtin_bswap64(v); }

template <typename T>
void ByteSwapEach(MutableByteView data) {
  for (size_t i = 0; i < data.size(); i += sizeof(T)) StoreLE(data.data() + i, ByteSwap(LoadLE<T>(data.data() + i)));
}

// Turns data as stored (header.data_size bytes) into little-endian C-order data.
NpyArray ToLittleEndianCOrder(const NpyHeader& header, AlignedBuffer data) {
  const size_t element_size = DTypeSize(header.dtype);
  if (header.big_endian) {
    if (element_size == 2) ByteSwapEach<uint16_t>(data.mutable_view());
    if (element_size == 4) ByteSwapEach<uint32_t>(data.mutable_view());
    if (element_size == 8) ByteSwapEach<uint64_t>(data.mutable_view());
  }
  if (header.fortran_order && header.shape.size() > 1) {
    AlignedBuffer c_order(data.size());
    TransposeFortranToC(data.view(), header.shape, element_size, c_order.mutable_view());
    data = std::move(c_order);
  }
  return NpyArray{header.dtype, header.shape, std::move(data)};
}

// kFixedSize is element_size when that is known at compile time (so the copy is one load and
// store), 0 otherwise. REQUIRES: shape.size() >= 2, src non-empty.
template <size_t kFixedSize>
void TransposeFortranToCImpl(ByteView src, std::span<const int64_t> shape, size_t element_size, MutableByteView dst) {
  const size_t size = kFixedSize != 0 ? kFixedSize : element_size;
  const size_t last = shape.size() - 1;
  // Byte strides of the Fortran layout: axis 0 varies fastest.
  std::vector<size_t> stride(shape.size());
  for (size_t k = 0, s = size; k <= last; s *= static_cast<size_t>(shape[k]), ++k) stride[k] = s;
  // Walk dst in C order one row (the last axis) at a time; `index` and `offset` track the
  // position of the row's first element in src.
  std::vector<int64_t> index(last, 0);
  size_t offset = 0;
  const size_t row_elements = static_cast<size_t>(shape[last]);
  uint8_t* out = dst.data();
  for (size_t rows = dst.size() / (size * row_elements); rows > 0; --rows) {
    const uint8_t* in = src.data() + offset;
    for (size_t i = 0; i < row_elements; ++i, in += stride[last], out += size) std::memcpy(out, in, size);
    for (size_t k = last; k-- > 0;) {
      offset += stride[k];
      if (++index[k] < shape[k]) break;
      index[k] = 0;
      offset -= static_cast<size_t>(shape[k]) * stride[k];
    }
  }
}

}  // namespace

int64_t NpyArray::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<size_t> NpyDataSize(DType dtype, std::span<const int64_t> shape) {
  if (shape.size() > kNpyMaxDims) {
    return Status::InvalidArgument(fmt::format("{} dimensions, more than the {} allowed", shape.size(), kNpyMaxDims));
  }
  int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0) return Status::InvalidArgument(fmt::format("negative dimension in shape {}", ShapeRepr(shape)));
    if (d == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(bytes, d, &bytes)) {
      return Status::InvalidArgument(
          fmt::format("{} array of shape {} has more bytes than fit in int64", DTypeName(dtype), ShapeRepr(shape)));
    }
  }
  return empty ? size_t{0} : static_cast<size_t>(bytes);
}

Result<NpyHeader> ParseNpyHeader(ByteView bytes, std::string_view name) {
  STOKE_ASSIGN_OR_RETURN(NpyPreamble preamble, ParseNpyPreamble(bytes, name));
  STOKE_RETURN_IF_ERROR(CheckDataOffset(preamble, bytes.size(), name));
  NpyHeader header;
  header.major_version = preamble.major_version;
  header.minor_version = preamble.minor_version;
  header.data_offset = preamble.data_offset;
  // 1.0 and 2.0 headers are latin-1, 3.0 headers utf-8; both are ASCII outside string literals,
  // and no supported descr has a non-ASCII character, so one byte-level parser serves all three.
  const std::string_view text =
      AsChars(bytes.subspan(preamble.header_offset, preamble.data_offset - preamble.header_offset));
  HeaderDictParser parser(text, preamble.header_offset, name);
  STOKE_ASSIGN_OR_RETURN(std::string_view descr, parser.Parse(&header));
  std::optional<DType> dtype = DescrToDType(descr, &header.big_endian);
  if (!dtype) {
    return Status::Unsupported(
        fmt::format("unsupported npy dtype '{}' in {} (stoke reads bool, int8..int64, "
                    "uint8..uint64, float16, float32, float64)",
                    descr, name));
  }
  header.dtype = *dtype;
  Result<size_t> data_size = NpyDataSize(header.dtype, header.shape);
  if (!data_size.ok()) {
    return Status::Corruption(
        fmt::format("{}: offset {}: npy header: {}", name, preamble.header_offset, data_size.status().message()));
  }
  header.data_size = *data_size;
  return header;
}

Result<NpyArray> DecodeNpy(ByteView bytes, std::string_view name) {
  STOKE_ASSIGN_OR_RETURN(NpyHeader header, ParseNpyHeader(bytes, name));
  STOKE_RETURN_IF_ERROR(CheckDataSize(header, bytes.size(), name));
  AlignedBuffer data(header.data_size);
  std::copy(bytes.begin() + header.data_offset, bytes.end(), data.data());
  return ToLittleEndianCOrder(header, std::move(data));
}

Result<NpyArray> ReadNpyFile(Storage& storage, const std::string& path, AlignedBuffer reuse) {
  STOKE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, storage.OpenForRead(path));
  const uint64_t file_size = file->size();
  std::vector<uint8_t> head(std::min<uint64_t>(file_size, kHeaderReadSize));
  STOKE_RETURN_IF_ERROR(file->ReadAt(0, head));
  STOKE_ASSIGN_OR_RETURN(NpyPreamble preamble, ParseNpyPreamble(head, path));
  STOKE_RETURN_IF_ERROR(CheckDataOffset(preamble, file_size, path));
  if (preamble.data_offset > head.size()) {
    head.resize(preamble.data_offset);
    STOKE_RETURN_IF_ERROR(file->ReadAt(0, head));
  }
  STOKE_ASSIGN_OR_RETURN(NpyHeader header, ParseNpyHeader(head, path));
  STOKE_RETURN_IF_ERROR(CheckDataSize(header, file_size, path));
  AlignedBuffer data = std::move(reuse);
  data.Resize(header.data_size);
  STOKE_RETURN_IF_ERROR(file->ReadAt(header.data_offset, data.mutable_view()));
  return ToLittleEndianCOrder(header, std::move(data));
}

std::string EncodeNpyHeader(DType dtype, std::span<const int64_t> shape) {
  // numpy.save: the dict's repr with sorted keys, then room for the first axis to grow.
  std::string dict =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", DTypeToDescr(dtype), ShapeRepr(shape));
  if (!shape.empty()) dict.append(kGrowthAxisMaxDigits - fmt::formatted_size("{}", shape[0]), ' ');
  // numpy writes 2.0 only when a 1.0 header would exceed 65535 bytes, which takes a structured
  // dtype with thousands of fields. Here: under 64 bytes of fixed text, at most 21 per dimension
  // (19 digits and ", "), the growth room and the padding.
  static_assert(64 + kNpyMaxDims * 21 + kGrowthAxisMaxDigits + kNpyHeaderAlignment <= UINT16_MAX);
  constexpr size_t kPreambleSize = kHeaderLengthOffset + 2;
  // Spaces so that preamble + dict + spaces + '\n' is a multiple of 64: 1 to 64 of them, as numpy.
  const size_t padding = kNpyHeaderAlignment - (kPreambleSize + dict.size() + 1) % kNpyHeaderAlignment;
  uint8_t preamble[kPreambleSize];
  std::memcpy(preamble, kNpyMagic.data(), kNpyMagic.size());
  preamble[kVersionOffset] = 1;
  preamble[kVersionOffset + 1] = 0;
  StoreLE<uint16_t>(preamble + kHeaderLengthOffset, static_cast<uint16_t>(dict.size() + padding + 1));
  std::string out(AsChars(ByteView(preamble)));
  out += dict;
  out.append(padding, ' ');
  out += '\n';
  return out;
}

Status WriteNpyFile(Storage& storage, const std::string& path, DType dtype, std::span<const int64_t> shape,
                    ByteView data) {
  Result<size_t> size = NpyDataSize(dtype, shape);
  if (!size.ok()) return size.status().WithContext(path);
  if (data.size() != *size) {
    return Status::InvalidArgument(fmt::format("{}: {} bytes of data for a {} array of shape {}, expected {}", path,
                                               data.size(), DTypeName(dtype), ShapeRepr(shape), *size));
  }
  std::string image = EncodeNpyHeader(dtype, shape);
  image.append(AsChars(data));
  return WriteFileAtomically(storage, path, AsBytes(image));
}

void TransposeFortranToC(ByteView src, std::span<const int64_t> shape, size_t element_size, MutableByteView dst) {
  if (shape.size() < 2 || src.empty()) {
    std::copy(src.begin(), src.end(), dst.begin());
    return;
  }
  switch (element_size) {
    case 1:
      return TransposeFortranToCImpl<1>(src, shape, element_size, dst);
    case 2:
      return TransposeFortranToCImpl<2>(src, shape, element_size, dst);
    case 4:
      return TransposeFortranToCImpl<4>(src, shape, element_size, dst);
    case 8:
      return TransposeFortranToCImpl<8>(src, shape, element_size, dst);
    default:
      return TransposeFortranToCImpl<0>(src, shape, element_size, dst);
  }
}

}  // namespace stoke
