#include "io/crc32_copy.h"

#include <isa-l/crc.h>

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoke {
namespace {

#if defined(__x86_64__)
#define STOKE_FOLD_TARGET __attribute__((target("avx2,pclmul,vpclmulqdq")))

// Folding constants of the reflected CRC-32 polynomial 0x04C11DB7 (Intel, "Fast CRC Computation
// for Generic Polynomials Using PCLMULQDQ Instruction", 2009): a 128-bit lane D bits before the
// bytes it is folded into is replaced by its low 64 bits times K(D + 32) xor its high 64 bits times
// K(D - 32), where K(e) = reflect32(x^e mod P) << 1. The lane's value modulo P, at its new place, is
// unchanged. Checked against ISA-L in crc32_copy_test.cc.
constexpr int64_t kFold1024Low = 0x1e88ef372;  // K(1056): four 256-bit registers ahead
constexpr int64_t kFold1024High = 0x14a7fe880;  // K(992)
constexpr int64_t kFold256Low = 0x0f1da05aa;  // K(288): one register ahead
constexpr int64_t kFold256High = 0x15a546366;  // K(224)
constexpr int64_t kFold128Low = 0x1751997d0;  // K(160): one lane ahead
constexpr int64_t kFold128High = 0x0ccaa009e;  // K(96)

// Each 128-bit lane of `acc` multiplied forward by the distance `k` stands for.
STOKE_FOLD_TARGET inline __m256i Fold(__m256i acc, __m256i k) {
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(acc, k, 0x00), _mm256_clmulepi64_epi128(acc, k, 0x11));
}

STOKE_FOLD_TARGET inline __m256i Load(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

STOKE_FOLD_TARGET inline void Store(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// The four registers' eight lanes folded into one 128-bit value that is congruent, modulo the
// polynomial, to the bytes they stand for, stored to `out`.
STOKE_FOLD_TARGET void Reduce(__m256i x0, __m256i x1, __m256i x2, __m256i x3, uint8_t out[16]) {
  const __m256i k256 = _mm256_set_epi64x(kFold256High, kFold256Low, kFold256High, kFold256Low);
  x1 = _mm256_xor_si256(Fold(x0, k256), x1);
  x2 = _mm256_xor_si256(Fold(x1, k256), x2);
  x3 = _mm256_xor_si256(Fold(x2, k256), x3);
  const __m128i k128 = _mm_set_epi64x(kFold128High, kFold128Low);
  const __m128i first = _mm256_castsi256_si128(x3);
  const __m128i folded = _mm_xor_si128(_mm_clmulepi64_si128(first, k128, 0x00), _mm_clmulepi64_si128(first, k128, 0x11));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_xor_si128(folded, _mm256_extracti128_si256(x3, 1)));
}

// n >= 128: copies and folds the 128-byte blocks in four registers, then the rest with ISA-L. The
// CRC register (~crc, as ISA-L keeps it) is xored into the first 4 bytes; the 16 bytes that Reduce
// leaves then have, from a zero register, the CRC register of everything folded.
STOKE_FOLD_TARGET uint32_t FoldingCopy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
  __m256i x0 = Load(src), x1 = Load(src + 32), x2 = Load(src + 64), x3 = Load(src + 96);
  Store(dst, x0), Store(dst + 32, x1), Store(dst + 64, x2), Store(dst + 96, x3);
  x0 = _mm256_xor_si256(x0, _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(~crc))));
  const __m256i k1024 = _mm256_set_epi64x(kFold1024High, kFold1024Low, kFold1024High, kFold1024Low);
  size_t done = 128;
  for (; done + 128 <= n; done += 128) {
    const __m256i y0 = Load(src + done), y1 = Load(src + done + 32);
    const __m256i y2 = Load(src + done + 64), y3 = Load(src + done + 96);
    Store(dst + done, y0), Store(dst + done + 32, y1), Store(dst + done + 64, y2), Store(dst + done + 96, y3);
    x0 = _mm256_xor_si256(Fold(x0, k1024), y0);
    x1 = _mm256_xor_si256(Fold(x1, k1024), y1);
    x2 = _mm256_xor_si256(Fold(x2, k1024), y2);
    x3 = _mm256_xor_si256(Fold(x3, k1024), y3);
  }
  alignas(16) uint8_t folded[16];
  Reduce(x0, x1, x2, x3, folded);
  // ISA-L's seed ~0 is a zero register.
  uint32_t result = crc32_gzip_refl(~uint32_t{0}, folded, sizeof(folded));
  if (done < n) {
    std::memcpy(dst + done, src + done, n - done);
    result = crc32_gzip_refl(result, dst + done, n - done);
  }
  return result;
}

bool CpuFolds() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
         __builtin_cpu_supports("vpclmulqdq");
}
#endif

}  // namespace

#if defined(__x86_64__)
// Decided when the program loads, not at the first copy: a function-local static would take a lock
// the first time, possibly inside MappedFile's SIGBUS guard.
const bool kCpuFolds = CpuFolds();
#endif

bool Crc32CopyFolds() {
#if defined(__x86_64__)
  return kCpuFolds;
#else
  return false;
#endif
}

uint32_t Crc32CopyPlain(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
  if (n == 0) return crc;
  std::memcpy(dst, src, n);
  return crc32_gzip_refl(crc, dst, n);
}

uint32_t Crc32Copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t crc) {
#if defined(__x86_64__)
  if (n >= kCrc32CopyFoldBytes && Crc32CopyFolds()) return FoldingCopy(dst, src, n, crc);
#endif
  return Crc32CopyPlain(dst, src, n, crc);
}

}  // namespace stoke
