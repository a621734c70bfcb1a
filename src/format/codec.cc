#include "format/codec.h"

#include "core/text.h"
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
    case Codec::kLz4Raw: return true;
    default: return false;
  }
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
    case Codec::kLz4Raw: {
      if (in.size() > INT_MAX || out.size() > INT_MAX) return Status::Corruption("LZ4_RAW page larger than 2 GB");
      int n = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                  static_cast<int>(in.size()), static_cast<int>(out.size()));
      if (n < 0) return Status::Corruption("LZ4_RAW: malformed block");
      if (static_cast<size_t>(n) != out.size()) {
        return Status::Corruption(fmt::format("LZ4_RAW produced {} bytes, expected {}", n, out.size()));
      }
      return Status::OK();
    }
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
    case Codec::kGzip: {
      z_stream zs{};
      // 15 + 32: accept gzip and zlib headers (some writers emit zlib streams under GZIP).
      if (inflateInit2(&zs, 15 + 32) != Z_OK) return Status::Internal("inflateInit2 failed");
      zs.next_in = const_cast<Bytef*>(in.data());
      zs.avail_in = static_cast<uInt>(in.size());
      // An empty result still has a gzip header and trailer to consume; give inflate a byte of
      // room so it can make progress (any byte it writes makes the size check below fail).
      uint8_t spare = 0;
      zs.next_out = out.empty() ? &spare : out.data();
      zs.avail_out = out.empty() ? 1 : static_cast<uInt>(out.size());
      int rc = inflate(&zs, Z_FINISH);
      size_t n = zs.total_out;
      inflateEnd(&zs);
      if (rc != Z_STREAM_END) return Status::Corruption(fmt::format("gzip: malformed or longer stream (zlib code {})", rc));
      if (n != out.size()) return Status::Corruption(fmt::format("gzip produced {} bytes, expected {}", n, out.size()));
      return Status::OK();
    }
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
