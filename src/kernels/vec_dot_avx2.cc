// AVX2 (+FMA, F16C) vec-dot kernels for the plain types and the legacy 32-element blocks,
// compiled for generic x86-64 with per-function target attributes and chosen at run time
// (quant.cc). Each computes what its scalar reference in quant_ref_legacy.cc computes, with
// per-block products accumulated in 8 float lanes (as ggml's AVX2 kernels do); the tests
// check every kernel against the reference on odd sizes and misaligned rows.
#include <cmath>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::DotSignedBytes;
using x86::DotUnsignedBytes;
using x86::HorizontalSum;
using x86::Load32;

// ---- plain types: 4 independent accumulators hide the FMA latency ----

enum class Plain { kF32, kF16, kBF16 };

// 8 consecutive elements from element i of a row, as floats.
template <Plain kKind>
COHORT_TARGET_AVX2 inline __m256 Load8(const uint8_t* row, int64_t i) {
  if constexpr (kKind == Plain::kF32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  } else if constexpr (kKind == Plain::kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
}

template <Plain kKind>
float ScalarElement(const uint8_t* row, int64_t i) {
  if constexpr (kKind == Plain::kF32) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    return kKind == Plain::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
  }
}

template <Plain kKind>
COHORT_TARGET_AVX2 float VecDotPlain(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const uint8_t*>(a);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      acc[k] = _mm256_fmadd_ps(Load8<kKind>(x, i + 8 * k), Load8<kKind>(y, i + 8 * k), acc[k]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(Load8<kKind>(x, i), Load8<kKind>(y, i), acc[0]);
  float tail = 0;
  for (; i < n; ++i) tail += ScalarElement<kKind>(x, i) * ScalarElement<kKind>(y, i);
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
  return HorizontalSum(sum) + tail;
}

// ---- legacy blocks against Q8_0 / Q8_1 ----

// On AVX2 machines llama.cpp repacks Q4_0 weights 8 rows at a time (ggml's q4_0_8x8 GEMV and
// GEMM, batch or single token alike); those kernels take each block's whole integer sum and
// accumulate one float per row, block after block: acc = fma(sum_b, d_w * d_a, acc).
COHORT_TARGET_AVX2 float VecDotQ4_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d);
    const __m256i qx = _mm256_sub_epi8(x86::UnpackNibbles16(x[i].qs), _mm256_set1_epi8(8));
    const int sum = x86::HorizontalSum(DotSignedBytes(qx, Load32(y[i].qs)));
    acc = std::fma(static_cast<float>(sum), d, acc);
  }
  return acc;
}

COHORT_TARGET_AVX2 float VecDotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d));
    const __m256i sum = DotSignedBytes(Load32(x[i].qs), Load32(y[i].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc);
}

// Q5_0 quants are nibble + 16 * bit - 16: as signed bytes, nibble | 0xf0 where the bit is 0.
COHORT_TARGET_AVX2 float VecDotQ5_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d));
    const __m256i high = _mm256_andnot_si256(x86::BitsToBytes32(x[i].qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    const __m256i qx = _mm256_or_si256(x86::UnpackNibbles16(x[i].qs), high);
    const __m256i sum = DotSignedBytes(qx, Load32(y[i].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc);
}

// Q4_1 / Q5_1: unsigned quants; the minimum meets Q8_1's precomputed d * sum(q).
template <bool kFiveBits, typename Block>
COHORT_TARGET_AVX2 float VecDotAffine(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  float sum_min = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d));
    __m256i qx = x86::UnpackNibbles16(x[i].qs);
    if constexpr (kFiveBits) {
      const __m256i high = _mm256_and_si256(x86::BitsToBytes32(x[i].qh), _mm256_set1_epi8(0x10));
      qx = _mm256_or_si256(qx, high);
    }
    const __m256i sum = DotUnsignedBytes(qx, Load32(y[i].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
    sum_min += x86::HalfToFloat(x[i].m) * x86::HalfToFloat(y[i].s);
  }
  return HorizontalSum(acc) + sum_min;
}

}  // namespace

VecDotFn GetVecDot(DType weight) {
  switch (weight) {
    case DType::kF32: return VecDotPlain<Plain::kF32>;
    case DType::kF16: return VecDotPlain<Plain::kF16>;
    case DType::kBF16: return VecDotPlain<Plain::kBF16>;
    case DType::kQ4_0: return VecDotQ4_0;
    case DType::kQ8_0: return VecDotQ8_0;
    case DType::kQ5_0: return VecDotQ5_0;
    case DType::kQ4_1: return VecDotAffine<false, BlockQ4_1>;
    case DType::kQ5_1: return VecDotAffine<true, BlockQ5_1>;
    default: return GetKVecDot(weight);
  }
}

#else  // not x86: no AVX2 kernels

VecDotFn GetVecDot(DType) { return nullptr; }
VecDotFn GetKVecDot(DType) { return nullptr; }
VecDotFn GetKVecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
