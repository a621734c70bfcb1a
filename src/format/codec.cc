#include "format/codec.h"

#include "core/text.h"
#include <brotli/decode.h>
#include <fmt/format.h>
#include <isa-l/crc.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <climits>

namespace stoke {

using parquet::Codec;

Result<Codec> CodecFromName(std::string_view name) {
  const std::string n = AsciiLower(name);
  if (n == "zstd") return Codec::kZstd;
  if (n == "snappy") return Codec::kSnappy;
  if (n == "lz4_raw" || n == "lz4") return Codec::kLz4Raw;
  if (n == "gzip") return Codec::kGzip;
  if (n == "none" || n == "uncompressed") return Codec::kUncompressed;
  return Status::InvalidArgument(
      fmt::format("unknown codec '{}' (expected zstd, snappy, lz4_raw, gzip or uncompressed)", name));
}

bool CodecSupported(Codec codec) {
  switch (codec) {
    case Codec::kUncompressed:
    case Codec::kSnappy:
    case Codec::kGzip:
    case Codec::kZstd:
    case Codec::kLz4Raw:
    case Codec::kLz4:
    case Codec::kBrotli: return true;
    default: return false;
  }
}

bool CodecWritable(Codec codec) {
  return CodecSupported(codec) && codec != Codec::kLz4 && codec != Codec::kBrotli;
}

namespace {

// One zstd context per thread, reused: ZSTD_compress and ZSTD_decompress allocate and initialise a
// context on every call (hundreds of KiB), which dominated compressing one-row column chunks and
// decompressing small pages.
struct ZstdContexts {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  ~ZstdContexts() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }
};

ZstdContexts& ThreadZstdContexts() {
  thread_local ZstdContexts contexts;
  return contexts;
}

}  // namespace

Status Compress(Codec codec, ByteView in, int level, AlignedBuffer* out) {
  size_t start = out->size();
  switch (codec) {
    case Codec::kUncompressed:
      out->Append(in);
      return Status::OK();
    case Codec::kZstd: {
      size_t bound = ZSTD_compressBound(in.size());
      out->Resize(start + bound);
      ZstdContexts& z = ThreadZstdContexts();
      if (z.cctx == nullptr && (z.cctx = ZSTD_createCCtx()) == nullptr) return Status::Internal("zstd: out of memory");
      size_t n = ZSTD_compressCCtx(z.cctx, out->data() + start, bound, in.data(), in.size(), level == 0 ? 1 : level);
      if (ZSTD_isError(n)) return Status::Internal(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
      out->Resize(start + n);
      return Status::OK();
    }
    case Codec::kLz4Raw: {
      if (in.size() > LZ4_MAX_INPUT_SIZE) return Status::InvalidArgument("LZ4_RAW: page larger than 2 GB");
      int bound = LZ4_compressBound(static_cast<int>(in.size()));
      out->Resize(start + bound);
      int n = LZ4_compress_default(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out->data() + start),
                                   static_cast<int>(in.size()), bound);
      if (n <= 0) return Status::Internal("LZ4_RAW compression failed");
      out->Resize(start + n);
      return Status::OK();
    }
    case Codec::kSnappy: {
      size_t bound = snappy_max_compressed_length(in.size());
      out->Resize(start + bound);
      size_t n = bound;
      if (snappy_compress(reinterpret_cast<const char*>(in.data()), in.size(),
                          reinterpret_cast<char*>(out->data() + start), &n) != SNAPPY_OK) {
        return Status::Internal("snappy compression failed");
      }
      out->Resize(start + n);
      return Status::OK();
    }
    case Codec::kGzip: {
      z_stream zs{};
      // windowBits 15 + 16: a gzip member, as Parquet's GZIP codec requires.
      if (deflateInit2(&zs, level == 0 ? 6 : level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return Status::Internal("deflateInit2 failed");
      }
      size_t bound = deflateBound(&zs, in.size());
      out->Resize(start + bound);
      zs.next_in = const_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(in.size());
      zs.next_out = out->data() + start;
      zs.avail_out = static_cast<uInt>(bound);
      int rc = deflate(&zs, Z_FINISH);
      size_t n = zs.total_out;
      deflateEnd(&zs);
      if (rc != Z_STREAM_END) return Status::Internal("gzip compression failed");
      out->Resize(start + n);
      return Status::OK();
    }
    default:
      return Status::Unsupported(fmt::format("writing codec {}", parquet::CodecName(codec)));
  }
}

namespace {

Status DecompressLz4Block(ByteView in, MutableByteView out, const char* what) {
  if (in.size() > INT_MAX || out.size() > INT_MAX) return Status::Corruption(fmt::format("{} page larger than 2 GB", what));
  int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                              static_cast<int>(in.size()), static_cast<int>(out.size()));
  if (n < 0) return Status::Corruption(fmt::format("{}: malformed block", what));
  if (static_cast<size_t>(n) != out.size()) {
    return Status::Corruption(fmt::format("{} produced {} bytes, expected {}", what, n, out.size()));
  }
  return Status::OK();
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Hadoop's framing of LZ4 (parquet-mr's LZ4 codec): frames of [decompressed size, compressed size]
// (big-endian u32 each) followed by one LZ4 block, until the input ends. False where the input is
// not in that framing or the frames do not decompress to exactly `out`.
bool DecompressHadoopLz4(ByteView in, MutableByteView out) {
  size_t pos = 0, written = 0;
  while (pos < in.size()) {
    if (in.size() - pos < 8) return false;
    uint32_t raw = BigEndian32(in.data() + pos), packed = BigEndian32(in.data() + pos + 4);
    pos += 8;
    if (packed > in.size() - pos || raw > out.size() - written) return false;
    if (!DecompressLz4Block(in.subspan(pos, packed), out.subspan(written, raw), "LZ4").ok()) return false;
    pos += packed;
    written += raw;
  }
  return written == out.size();
}

// The deprecated LZ4 codec (Compression.md): Hadoop's framing where it fits, else one raw LZ4 block
// (what older Arrow versions wrote), as Arrow and parquet-mr read it.
Status DecompressLegacyLz4(ByteView in, MutableByteView out) {
  if (DecompressHadoopLz4(in, out)) return Status::OK();
  return DecompressLz4Block(in, out, "LZ4");
}

// GZIP: one gzip member, or several concatenated (a valid gzip file; some writers emit them).
Status DecompressGzip(ByteView in, MutableByteView out) {
  z_stream zs{};
  // 15 + 32: accept gzip and zlib headers (some writers emit zlib streams under GZIP).
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Status::Internal("inflateInit2 failed");
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  // An empty result still has a gzip header and trailer to consume; give inflate a byte of room so
  // it can make progress (any byte it writes makes the size check below fail).
  uint8_t spare = 0;
  zs.next_out = out.empty() ? &spare : out.data();
  zs.avail_out = out.empty() ? 1 : static_cast<uInt>(out.size());
  int rc = inflate(&zs, Z_FINISH);
  // Another member follows where the rest starts with gzip's magic; other trailing bytes (padding)
  // are ignored, as zlib-based readers always did.
  while (rc == Z_STREAM_END && zs.avail_in >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b &&
         inflateReset(&zs) == Z_OK) {
    rc = inflate(&zs, Z_FINISH);
  }
  size_t n = (out.empty() ? 1 : out.size()) - zs.avail_out;  // total_out restarts with each member
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) {
    return Status::Corruption(fmt::format("gzip: malformed or longer stream (zlib code {})", rc));
  }
  if (n != out.size()) return Status::Corruption(fmt::format("gzip produced {} bytes, expected {}", n, out.size()));
  return Status::OK();
}

Status DecompressBrotli(ByteView in, MutableByteView out) {
  size_t n = out.size();
  uint8_t spare = 0;
  if (BrotliDecoderDecompress(in.size(), in.data(), &n, out.empty() ? &spare : out.data()) !=
      BROTLI_DECODER_RESULT_SUCCESS) {
    return Status::Corruption("brotli: malformed or longer stream");
  }
  if (n != out.size()) return Status::Corruption(fmt::format("brotli produced {} bytes, expected {}", n, out.size()));
  return Status::OK();
}

}  // namespace

Status Decompress(Codec codec, ByteView in, MutableByteView out) {
  switch (codec) {
    case Codec::kUncompressed:
      if (in.size() != out.size()) {
        return Status::Corruption(fmt::format("uncompressed page holds {} bytes, header says {}", in.size(), out.size()));
      }
      std::copy(in.begin(), in.end(), out.begin());
      return Status::OK();
    case Codec::kZstd: {
      ZstdContexts& z = ThreadZstdContexts();
      if (z.dctx == nullptr && (z.dctx = ZSTD_createDCtx()) == nullptr) return Status::Internal("zstd: out of memory");
      size_t n = ZSTD_decompressDCtx(z.dctx, out.data(), out.size(), in.data(), in.size());
      if (ZSTD_isError(n)) return Status::Corruption(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
      if (n != out.size()) return Status::Corruption(fmt::format("zstd produced {} bytes, expected {}", n, out.size()));
      return Status::OK();
    }
    case Codec::kLz4Raw: return DecompressLz4Block(in, out, "LZ4_RAW");
    case Codec::kLz4: return DecompressLegacyLz4(in, out);
    case Codec::kBrotli: return DecompressBrotli(in, out);
    case Codec::kSnappy: {
      size_t expected = 0;
      if (snappy_uncompressed_length(reinterpret_cast<const char*>(in.data()), in.size(), &expected) != SNAPPY_OK) {
        return Status::Corruption("snappy: malformed length preamble");
      }
      if (expected != out.size()) {
        return Status::Corruption(fmt::format("snappy block holds {} bytes, expected {}", expected, out.size()));
      }
      size_t n = out.size();
      if (snappy_uncompress(reinterpret_cast<const char*>(in.data()), in.size(), reinterpret_cast<char*>(out.data()),
                            &n) != SNAPPY_OK) {
        return Status::Corruption("snappy: malformed block");
      }
      return Status::OK();
    }
    case Codec::kGzip: return DecompressGzip(in, out);
    default:
      return Status::Unsupported(fmt::format("codec {}", parquet::CodecName(codec)));
  }
}

uint32_t Crc32(ByteView data, uint32_t crc) {
  return crc32_gzip_refl(crc, data.data(), data.size());
}

uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  return static_cast<uint32_t>(crc32_combine64(crc_a, crc_b, static_cast<z_off64_t>(length_b)));
}

}  // namespace stoke
