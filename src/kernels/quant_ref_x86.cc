// Scalar vec-dots that take their float sums in exactly the order of cohort's AVX2 kernels,
// which follow llama.cpp's x86 CPU backend (vec_dot_avx2.cc, vec_dot_avx2_k.cc; the AVX-512
// and AVX-VNNI kernels give the same bits). On x86 builds the scalar level runs these, so
// that COHORT_SIMD=scalar reproduces the same logits as every SIMD level, bit for bit, and
// the goldens (made by x86 llama.cpp) hold there too; ggml's generic order (quant_ref_*.cc)
// differs in the last bits, which a near-tie in a later quantization can magnify.
//
// The integer parts are exact in any order; what decides the bits is where the integers are
// converted to float and how the floats are summed. An AVX2 kernel keeps 8 float lanes: lane
// m receives, per block, the integer sum of elements 4m..4m+3 of every 32-element chunk (the
// maddubs/madd and dpbusd lane layout), scaled by one fused multiply-add; the lanes are then
// reduced as HorizontalSum (simd_x86.h) reduces them. Scalar `a += b * c` in those kernels is
// compiled as a fused multiply-add (GCC contracts it under the AVX2 target), so it is
// std::fma here; this file is compiled with -ffp-contract=off so that nothing else is fused.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

constexpr int kLanes = 8;

// HorizontalSum(__m256): lanes m and m + 4 first, then (0 + 2) and (1 + 3), then those two.
float ReduceLanes(const float (&l)[kLanes]) {
  const float s0 = l[0] + l[4], s1 = l[1] + l[5], s2 = l[2] + l[6], s3 = l[3] + l[7];
  return (s0 + s2) + (s1 + s3);
}

// The lane an element of a 32-element chunk lands in.
constexpr int LaneOf(int element) { return (element % 32) / 4; }

// lanes[m] = fma(d, lane_sums[m], lanes[m]), as _mm256_fmadd_ps(set1(d), cvt(sums), acc).
void AccumulateLanes(float d, const int (&lane_sums)[kLanes], float (&lanes)[kLanes]) {
  for (int m = 0; m < kLanes; ++m) lanes[m] = std::fma(d, static_cast<float>(lane_sums[m]), lanes[m]);
}

// ---- plain types ----

enum class Plain { kF16, kBF16 };

template <Plain kKind>
float ElementOf(const void* row, int64_t i) {
  uint16_t h;
  std::memcpy(&h, static_cast<const uint8_t*>(row) + 2 * i, 2);
  return kKind == Plain::kF16 ? Fp16ToFp32(h) : Bf16ToFp32(h);
}

// (F32 takes ggml's own order at every x86 level: quant.cc, F32InGgmlOrder.)
// VecDotPlain: 4 accumulators of 8 lanes over steps of 32, steps of 8 into the first, a
// fused scalar tail; the accumulators added (0 + 1) + (2 + 3), then reduced.
template <Plain kKind>
float VecDotPlain(const void* w, const void* a, int64_t n) {
  float acc[4][kLanes] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < kLanes; ++j) {
        const int64_t e = i + 8 * k + j;
        acc[k][j] = std::fma(ElementOf<kKind>(w, e), ElementOf<kKind>(a, e), acc[k][j]);
      }
    }
  }
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < kLanes; ++j) {
      acc[0][j] = std::fma(ElementOf<kKind>(w, i + j), ElementOf<kKind>(a, i + j), acc[0][j]);
    }
  }
  float tail = 0;
  for (; i < n; ++i) tail = std::fma(ElementOf<kKind>(w, i), ElementOf<kKind>(a, i), tail);
  float sum[kLanes];
  for (int j = 0; j < kLanes; ++j) sum[j] = (acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j]);
  return ReduceLanes(sum) + tail;
}

// ---- legacy 32-element blocks ----

// The weight quant of element j (signed for Q4_0/Q5_0/Q8_0, unsigned for Q4_1/Q5_1).
int LegacyQuant(const BlockQ4_0& b, int j) { return (j < 16 ? b.qs[j] & 0xf : b.qs[j - 16] >> 4) - 8; }
int LegacyQuant(const BlockQ4_1& b, int j) { return j < 16 ? b.qs[j] & 0xf : b.qs[j - 16] >> 4; }
int FifthBit(const uint8_t (&qh)[4], int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1);
}
int LegacyQuant(const BlockQ5_0& b, int j) {
  const int low = j < 16 ? b.qs[j] & 0xf : b.qs[j - 16] >> 4;
  return (low | (FifthBit(b.qh, j) << 4)) - 16;
}
int LegacyQuant(const BlockQ5_1& b, int j) {
  const int low = j < 16 ? b.qs[j] & 0xf : b.qs[j - 16] >> 4;
  return low | (FifthBit(b.qh, j) << 4);
}
int LegacyQuant(const BlockQ8_0& b, int j) { return b.qs[j]; }

template <typename WBlock, typename ABlock>
void LegacyLaneSums(const WBlock& x, const ABlock& y, int (&sums)[kLanes]) {
  for (int m = 0; m < kLanes; ++m) sums[m] = 0;
  for (int j = 0; j < 32; ++j) sums[LaneOf(j)] += LegacyQuant(x, j) * y.qs[j];
}

// Q4_0 follows llama.cpp's repacked q4_0_8x8 kernels: one fused step per block with the
// block's whole integer sum.
float VecDotQ4_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += LegacyQuant(x[i], j) * y[i].qs[j];
    acc = std::fma(static_cast<float>(sum), Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d), acc);
  }
  return acc;
}

// Q5_0 and Q8_0: 8 lanes.
template <typename WBlock>
float VecDotSigned(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const WBlock*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float lanes[kLanes] = {};
  int sums[kLanes];
  for (int64_t i = 0; i < n / kQK; ++i) {
    LegacyLaneSums(x[i], y[i], sums);
    AccumulateLanes(Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d), sums, lanes);
  }
  return ReduceLanes(lanes);
}

// Q4_1 and Q5_1: 8 lanes, plus the minimum against Q8_1's d * sum(q), fused, block by block.
template <typename WBlock>
float VecDotAffine(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const WBlock*>(w);
  const auto* y = static_cast<const BlockQ8_1*>(a);
  float lanes[kLanes] = {};
  float sum_min = 0;
  int sums[kLanes];
  for (int64_t i = 0; i < n / kQK; ++i) {
    LegacyLaneSums(x[i], y[i], sums);
    AccumulateLanes(Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d), sums, lanes);
    sum_min = std::fma(Fp16ToFp32(x[i].m), Fp16ToFp32(y[i].s), sum_min);
  }
  return ReduceLanes(lanes) + sum_min;
}

// ---- K-quants ----

template <DType kType>
constexpr int kSub = (kType == DType::kQ4_K || kType == DType::kQ5_K) ? 32 : 16;

// Lane sums of scale * q * y over a super-block, q signed as UnpackK gives it.
template <DType kType>
void KLaneSums(const UnpackedK& u, const BlockQ8_K& y, int (&sums)[kLanes]) {
  for (int m = 0; m < kLanes; ++m) sums[m] = 0;
  for (int e = 0; e < kQK_K; ++e) sums[LaneOf(e)] += u.scale[e / kSub<kType>] * u.q[e] * y.qs[e];
}

// Sum over the 16 groups of 16 activations of bsums[g] * the min of g's sub-block.
template <DType kType>
int MinSum(const UnpackedK& u, const BlockQ8_K& y) {
  int sum = 0;
  for (int g = 0; g < 16; ++g) sum += y.bsums[g] * u.min[g * 16 / kSub<kType>];
  return sum;
}

// Q2_K, Q3_K, Q5_K: 8 lanes; the mins (Q2_K, Q5_K) in one fused float per super-block.
template <DType kType>
float VecDotKLanes(const void* w, const void* a, int64_t n) {
  constexpr bool kHasMin = kType != DType::kQ3_K;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int64_t block_bytes = Traits(kType).type_size;
  float lanes[kLanes] = {};
  float acc_min = 0;
  UnpackedK u;
  int sums[kLanes];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    UnpackK(kType, wb + i * block_bytes, &u);
    if constexpr (kHasMin) {
      acc_min = std::fma(u.dmin * y[i].d, static_cast<float>(MinSum<kType>(u, y[i])), acc_min);
    }
    KLaneSums<kType>(u, y[i], sums);
    AccumulateLanes(u.d * y[i].d, sums, lanes);
  }
  return kHasMin ? ReduceLanes(lanes) - acc_min : ReduceLanes(lanes);
}

// Q6_K, as ggml's AVX2 kernel: lane m holds scale * u * y with the unsigned u = q + 32 over
// its elements, less 32 * (bsums[2m] * s[2m] + bsums[2m+1] * s[2m+1]), so that lane's
// integer is not the plain scale * q * y of its elements.
float VecDotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int64_t block_bytes = Traits(DType::kQ6_K).type_size;
  float lanes[kLanes] = {};
  UnpackedK u;
  int sums[kLanes];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    UnpackK(DType::kQ6_K, wb + i * block_bytes, &u);
    for (int m = 0; m < kLanes; ++m) {
      sums[m] = -32 * (y[i].bsums[2 * m] * u.scale[2 * m] + y[i].bsums[2 * m + 1] * u.scale[2 * m + 1]);
    }
    for (int e = 0; e < kQK_K; ++e) sums[LaneOf(e)] += u.scale[e / 16] * (u.q[e] + 32) * y[i].qs[e];
    AccumulateLanes(y[i].d * u.d, sums, lanes);
  }
  return ReduceLanes(lanes);
}

// Q4_K, as llama.cpp's repacked q4_K_8x8 kernels: two fused floats per row, fed whole
// integer sums once per super-block (GEMV) or once per pair of sub-blocks (GEMM, kPerPair).
template <bool kPerPair>
float VecDotQ4_K(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int64_t block_bytes = Traits(DType::kQ4_K).type_size;
  float acc = 0;
  float acc_min = 0;
  UnpackedK u;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    UnpackK(DType::kQ4_K, wb + i * block_bytes, &u);
    const float d = u.d * y[i].d;
    const float dmin = u.dmin * y[i].d;
    int sum = 0;
    int min_sum = 0;
    for (int c = 0; c < 4; ++c) {  // pairs of sub-blocks: 64 elements
      for (int e = 64 * c; e < 64 * (c + 1); ++e) sum += u.scale[e / 32] * u.q[e] * y[i].qs[e];
      const int pair_min = Q4KPairMinSum(y[i], u.min, c);
      if constexpr (kPerPair) {
        acc = std::fma(static_cast<float>(sum), d, acc);
        acc_min = std::fma(static_cast<float>(pair_min), dmin, acc_min);
        sum = 0;
      } else {
        min_sum += pair_min;
      }
    }
    if constexpr (!kPerPair) {
      acc = std::fma(static_cast<float>(sum), d, acc);
      acc_min = std::fma(static_cast<float>(min_sum), dmin, acc_min);
    }
  }
  return acc - acc_min;
}

}  // namespace

VecDotFn GetX86OrderVecDot(DType weight) {
  switch (weight) {
    case DType::kF16: return VecDotPlain<Plain::kF16>;
    case DType::kBF16: return VecDotPlain<Plain::kBF16>;
    case DType::kQ4_0: return VecDotQ4_0;
    case DType::kQ4_1: return VecDotAffine<BlockQ4_1>;
    case DType::kQ5_0: return VecDotSigned<BlockQ5_0>;
    case DType::kQ5_1: return VecDotAffine<BlockQ5_1>;
    case DType::kQ8_0: return VecDotSigned<BlockQ8_0>;
    case DType::kQ2_K: return VecDotKLanes<DType::kQ2_K>;
    case DType::kQ3_K: return VecDotKLanes<DType::kQ3_K>;
    case DType::kQ4_K: return VecDotQ4_K<false>;
    case DType::kQ5_K: return VecDotKLanes<DType::kQ5_K>;
    case DType::kQ6_K: return VecDotQ6_K;
    case DType::kMXFP4: return VecDotMxfp4Q8_0Repacked;
    default: return nullptr;
  }
}

VecDotFn GetX86OrderVecDotGrouped(DType weight) {
  return weight == DType::kQ4_K ? VecDotQ4_K<true> : GetX86OrderVecDot(weight);
}

}  // namespace cohort::kernels::ref
