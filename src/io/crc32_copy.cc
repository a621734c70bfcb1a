#include "io/crc32_copy.h"

#include <isa-l/crc.h>

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoke {
namespace {

#if defined(__x86_64__)
#define STOKE_FOLD256_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq")))
#define STOKE_FOLD512_TARGET __attribute__((target("avx512f,avx2,pclmul,vpclmulqdq")))

// Folding constants of the reflected CRC-32 polynomial 0x04C11DB7 (Intel, "Fast CRC Computation
// for Generic Polynomials Using PCLMULQDQ Instruction", 2009): a 128-bit lane D bits before the
// bytes it is folded into is replaced by its low 64 bits times K(D + 32) xor its high 64 bits times
// K(D - 32), where K(e) = reflect32(x^e mod P) << 1. The lane's value modulo P, at its new place, is
// unchanged. Checked against ISA-L in crc32_copy_test.cc.
constexpr int64_t kFold2048Low = 0x11542778a;  // K(2080): four 512-bit registers ahead
constexpr int64_t kFold2048High = 0x1322d1430;  // K(2016)
constexpr int64_t kFold1024Low = 0x1e88ef372;  // K(1056): four 256-bit registers ahead
constexpr int64_t kFold1024High = 0x14a7fe880;  // K(992)
constexpr int64_t kFold512Low = 0x154442bd4;  // K(544): one 512-bit register ahead
constexpr int64_t kFold512High = 0x1c6e41596;  // K(480)
constexpr int64_t kFold256Low = 0x0f1da05aa;  // K(288): one 256-bit register ahead
constexpr int64_t kFold256High = 0x15a546366;  // K(224)
constexpr int64_t kFold128Low = 0x1751997d0;  // K(160): one lane ahead
constexpr int64_t kFold128High = 0x0ccaa009e;  // K(96)

// The source is read this far ahead of the copy (prefetched), within the copy's bytes: the copy and
// the fold keep fewer reads of memory in flight than a plain memcpy, which the prefetch makes up for
// (a 115 KB copy from memory ran 1.1x as fast with it).
constexpr size_t kPrefetchAhead = 4096;

// Each 128-bit lane of `acc` multiplied forward by the distance `k` stands for.
STOKE_FOLD256_TARGET inline __m256i Fold(__m256i acc, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(acc, k, 0x00), _mm256_clmulepi64_epi128(acc, k, 0x11));
}

// Fold(acc, k) xor y, on four lanes at once.
STOKE_FOLD512_TARGET inline __m512i FoldInto(__m512i acc, __m512i k, __m512i y) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), _mm512_clmulepi64_epi128(acc, k, 0x11), y,
                                   0x96);  // a ^ b ^ c
}

STOKE_FOLD256_TARGET inline __m256i Load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// A store that goes around the caches where kStream (p is then 32-byte aligned).
template <bool kStream>
STOKE_FOLD256_TARGET inline void Store(uint8_t* p, __m256i v) {
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
}

STOKE_FOLD512_TARGET inline __m512i Load512(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Store for 512 bits (p 64-byte aligned where kStream).
template <bool kStream>
STOKE_FOLD512_TARGET inline void Store512(uint8_t* p, __m512i v) {
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}

// Four registers' 128 bytes stored at p.
template <bool kStream>
STOKE_FOLD256_TARGET inline void Store4(uint8_t* p, __m256i a, __m256i b, __m256i c, __m256i d) {
  Store<kStream>(p, a), Store<kStream>(p + 32, b), Store<kStream>(p + 64, c), Store<kStream>(p + 96, d);
}

// Four registers' 256 bytes stored at p.
template <bool kStream>
STOKE_FOLD512_TARGET inline void Store4(uint8_t* p, __m512i a, __m512i b, __m512i c, __m512i d) {
  Store512<kStream>(p, a), Store512<kStream>(p + 64, b), Store512<kStream>(p + 128, c), Store512<kStream>(p + 192, d);
}

// The two lanes of `x` folded into one 128-bit value congruent, modulo the polynomial, to the bytes
// they stand for; returns, from a zero CRC register, the CRC register of everything folded.
STOKE_FOLD256_TARGET uint32_t ReduceLanes(__m256i x) {
  const __m128i k128 = _mm_set_epi64x(kFold128High, kFold128Low);
  const __m128i first = _mm256_castsi256_si128(x);
  const __m128i folded =
      _mm_xor_si128(_mm_clmulepi64_si128(first, k128, 0x00), _mm_clmulepi64_si128(first, k128, 0x11));
  alignas(16) uint8_t out[16];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_xor_si128(folded, _mm256_extracti128_si256(x, 1)));
  return crc32_gzip_refl(~uint32_t{0}, out, sizeof(out));  // ISA-L's seed ~0 is a zero register
}

// ReduceLanes of four consecutive 256-bit registers.
STOKE_FOLD256_TARGET uint32_t Reduce(__m256i x0, __m256i x1, __m256i x2, __m256i x3) {
  const __m256i k256 = _mm256_set_epi64x(kFold256High, kFold256Low, kFold256High, kFold256Low);
  x1 = _mm256_xor_si256(Fold(x0, k256), x1);
  x2 = _mm256_xor_si256(Fold(x1, k256), x2);
  x3 = _mm256_xor_si256(Fold(x2, k256), x3);
  return ReduceLanes(x3);
}

// ReduceLanes of four consecutive 512-bit registers.
STOKE_FOLD512_TARGET uint32_t Reduce512(__m512i x0, __m512i x1, __m512i x2, __m512i x3) {
  const __m512i k512 = _mm512_set4_epi64(kFold512High, kFold512Low, kFold512High, kFold512Low);
  x1 = FoldInto(x0, k512, x1);
  x2 = FoldInto(x1, k512, x2);
  x3 = FoldInto(x2, k512, x3);
  const __m256i k256 = _mm256_set_epi64x(kFold256High, kFold256Low, kFold256High, kFold256Low);
  // Its two halves by masked extracts: GCC 12 warns of the plain ones' undefined upper bits.
  const __m256i low = _mm512_maskz_extracti64x4_epi64(0xFF, x3, 0);
  const __m256i high = _mm512_maskz_extracti64x4_epi64(0xFF, x3, 1);
  return ReduceLanes(_mm256_xor_si256(Fold(low, k256), high));
}

// The bytes [done, n) that the kernels' blocks left: a plain copy and ISA-L's CRC continuing `crc`.
uint32_t CopyRest(uint8_t* dst, const uint8_t* src, size_t done, size_t n, uint32_t crc) {
  if (done == n) return crc;
  std::memcpy(dst + done, src + done, n - done);
  return crc32_gzip_refl(crc, dst + done, n - done);
}

// n >= 128: copies and folds the 128-byte blocks in four 256-bit registers, then the rest with
// ISA-L. The CRC register (~crc, as ISA-L keeps it) is xored into the first 4 bytes; the registers
// then stand for the CRC register of everything folded, from a zero one. kStream: the blocks' stores
// go around the caches (dst is 64-byte aligned, as Crc32CopyWith checks), fenced before it returns.
template <bool kStream>
STOKE_FOLD256_TARGET uint32_t FoldingCopy256(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
  __m256i x0 = Load(src), x1 = Load(src + 32), x2 = Load(src + 64), x3 = Load(src + 96);
  Store4<kStream>(dst, x0, x1, x2, x3);
  x0 = _mm256_xor_si256(x0, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  const __m256i k1024 = _mm256_set_epi64x(kFold1024High, kFold1024Low, kFold1024High, kFold1024Low);
  size_t done = 128;
  for (; done + 128 <= n; done += 128) {
    if (done + kPrefetchAhead + 128 <= n) {
      _mm_prefetch(reinterpret_cast<const char*>(src + done + kPrefetchAhead), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(src + done + kPrefetchAhead + 64), _MM_HINT_T0);
    }
    const __m256i y0 = Load(src + done), y1 = Load(src + done + 32);
    const __m256i y2 = Load(src + done + 64), y3 = Load(src + done + 96);
    Store4<kStream>(dst + done, y0, y1, y2, y3);
    x0 = _mm256_xor_si256(Fold(x0, k1024), y0);
    x1 = _mm256_xor_si256(Fold(x1, k1024), y1);
    x2 = _mm256_xor_si256(Fold(x2, k1024), y2);
    x3 = _mm256_xor_si256(Fold(x3, k1024), y3);
  }
  if constexpr (kStream) _mm_sfence();
  return CopyRest(dst, src, done, n, Reduce(x0, x1, x2, x3));
}

// n >= 256: FoldingCopy256 with 256-byte blocks in four 512-bit registers (dst 64-byte aligned where
// kStream).
template <bool kStream>
STOKE_FOLD512_TARGET uint32_t FoldingCopy512(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
  __m512i x0 = Load512(src), x1 = Load512(src + 64), x2 = Load512(src + 128), x3 = Load512(src + 192);
  Store4<kStream>(dst, x0, x1, x2, x3);
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  const __m512i k2048 = _mm512_set4_epi64(kFold2048High, kFold2048Low, kFold2048High, kFold2048Low);
  size_t done = 256;
  for (; done + 256 <= n; done += 256) {
    if (done + kPrefetchAhead + 256 <= n) {
      for (size_t line = 0; line < 256; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(src + done + kPrefetchAhead + line), _MM_HINT_T0);
      }
    }
    const __m512i y0 = Load512(src + done), y1 = Load512(src + done + 64);
    const __m512i y2 = Load512(src + done + 128), y3 = Load512(src + done + 192);
    Store4<kStream>(dst + done, y0, y1, y2, y3);
    x0 = FoldInto(x0, k2048, y0);
    x1 = FoldInto(x1, k2048, y1);
    x2 = FoldInto(x2, k2048, y2);
    x3 = FoldInto(x3, k2048, y3);
  }
  if constexpr (kStream) _mm_sfence();
  return CopyRest(dst, src, done, n, Reduce512(x0, x1, x2, x3));
}

Crc32CopyKernel BestKernel() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("vpclmulqdq")) {
    return Crc32CopyKernel::kPlain;
  }
  return __builtin_cpu_supports("avx512f") ? Crc32CopyKernel::kFold512 : Crc32CopyKernel::kFold256;
}
#endif

}  // namespace

#if defined(__x86_64__)
// Decided when the program loads, not at the first copy: a function-local static would take a lock
// the first time, possibly inside MappedFile's SIGBUS guard.
const Crc32CopyKernel kBestKernel = BestKernel();
#endif

Crc32CopyKernel Crc32CopyBestKernel() {
#if defined(__x86_64__)
  return kBestKernel;
#else
  return Crc32CopyKernel::kPlain;
#endif
}

uint32_t Crc32CopyWith(Crc32CopyKernel kernel, CopyStores stores, uint8_t* dst, const uint8_t* src, size_t n,
                       uint32_t crc) {
#if defined(__x86_64__)
  const bool stream = stores == CopyStores::kAroundCaches && reinterpret_cast<uintptr_t>(dst) % 64 == 0;
  if (kernel == Crc32CopyKernel::kFold512 && n >= 256) {
    return stream ? FoldingCopy512<true>(dst, src, n, crc) : FoldingCopy512<false>(dst, src, n, crc);
  }
  if (kernel == Crc32CopyKernel::kFold256 && n >= 128) {
    return stream ? FoldingCopy256<true>(dst, src, n, crc) : FoldingCopy256<false>(dst, src, n, crc);
  }
#endif
  return CopyRest(dst, src, 0, n, crc);
}

uint32_t Crc32Copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc, CopyStores stores) {
  const Crc32CopyKernel kernel = n >= kCrc32CopyFoldBytes ? Crc32CopyBestKernel() : Crc32CopyKernel::kPlain;
  return Crc32CopyWith(kernel, stores, dst, src, n, crc);
}

}  // namespace stoke
