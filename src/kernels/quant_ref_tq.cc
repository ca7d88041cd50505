// The scalar reference for the ternary types TQ1_0 and TQ2_0: dequantization, ggml's
// quantizer (the bytes llama-quantize writes), and the dot product with a Q8_K row in three
// orders: ggml's generic one, llama.cpp's x86 kernel (8 float lanes) and its ARM NEON kernel
// (one float sum). Compiled with -ffp-contract=off: each fused step of those kernels is
// written as std::fma, and no other.
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/quant_tq.h"

namespace cohort::kernels::ref {
namespace {

// A block's 256 digits t + 1 (0, 1 or 2), in value order.
void Digits(const BlockTq1_0& b, uint8_t* u) {
  for (int m = 0; m < 32; ++m) {
    for (int n = 0; n < 5; ++n) u[m + 32 * n] = static_cast<uint8_t>(Tq1Trit(b.qs[m], n));
  }
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 5; ++n) u[160 + m + 16 * n] = static_cast<uint8_t>(Tq1Trit(b.qs[32 + m], n));
  }
  for (int j = 0; j < 4; ++j) {
    for (int n = 0; n < 4; ++n) u[240 + j + 4 * n] = static_cast<uint8_t>(Tq1Trit(b.qh[j], n));
  }
}

void Digits(const BlockTq2_0& b, uint8_t* u) {
  for (int c = 0; c < 2; ++c) {
    for (int l = 0; l < 4; ++l) {
      for (int m = 0; m < 32; ++m) u[128 * c + 32 * l + m] = (b.qs[32 * c + m] >> (2 * l)) & 3;
    }
  }
}

// ggml: per block d = max |x|, each value lroundf(x / d) + 1 (x times the float 1 / d).
template <class Block>
float BlockScale(const float* x, Block* y, float* inverse) {
  float amax = 0;
  for (int j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  y->d = Fp32ToFp16(amax);
  *inverse = amax != 0 ? 1.0f / amax : 0.0f;
  return amax;
}
int Digit(float x, float inverse) { return static_cast<int>(std::lround(x * inverse)) + 1; }

// `count` digits of x[0], x[stride], ... as a base-3 number (the first leading), then
// `pad` more zero digits, scaled to a byte by ceiling division: ceil(number * 256 / 243).
uint8_t PackDigits(const float* x, int stride, int count, int pad, float inverse) {
  int q = 0;
  for (int n = 0; n < count; ++n) q = 3 * q + Digit(x[n * stride], inverse);
  for (int n = 0; n < pad; ++n) q *= 3;
  return static_cast<uint8_t>((q * 256 + 242) / 243);
}

void QuantizeBlock(const float* x, BlockTq1_0* y) {
  float inverse;
  BlockScale(x, y, &inverse);
  for (int m = 0; m < 32; ++m) y->qs[m] = PackDigits(x + m, 32, 5, 0, inverse);
  for (int m = 0; m < 16; ++m) y->qs[32 + m] = PackDigits(x + 160 + m, 16, 5, 0, inverse);
  for (int j = 0; j < 4; ++j) y->qh[j] = PackDigits(x + 240 + j, 4, 4, 1, inverse);
}

void QuantizeBlock(const float* x, BlockTq2_0* y) {
  float inverse;
  BlockScale(x, y, &inverse);
  for (int c = 0; c < 2; ++c) {
    for (int m = 0; m < 32; ++m) {
      int byte = 0;
      for (int l = 0; l < 4; ++l) byte |= (Digit(x[128 * c + 32 * l + m], inverse) & 3) << (2 * l);
      y->qs[32 * c + m] = static_cast<uint8_t>(byte);
    }
  }
}

template <class Block>
void DequantizeRowOf(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const Block*>(src);
  uint8_t u[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    Digits(x[i], u);
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = static_cast<float>(u[j] - 1) * d;
  }
}

template <class Block>
void QuantizeRowOf(const float* src, void* dst, int64_t n) {
  auto* y = static_cast<Block*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) QuantizeBlock(src + i * kQK_K, y + i);
}

// The sum of the 16-value activation sums of values [32 m, 32 m + 32): what the kernels
// subtract for the digits' + 1.
int PairBlockSum(const BlockQ8_K& y, int m) { return y.bsums[2 * m] + y.bsums[2 * m + 1]; }

template <class Block>
float VecDotGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  uint8_t u[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Digits(x[i], u);
    int sum = 0;
    for (int j = 0; j < kQK_K; ++j) sum += (u[j] - 1) * y[i].qs[j];
    sumf += static_cast<float>(sum) * (Fp16ToFp32(x[i].d) * y[i].d);
  }
  return sumf;
}

// llama.cpp's AVX2 ggml_vec_dot_tq{1,2}_0_q8_K: maddubs of the digits with the activations
// and the 16-bit sums less the block sums give lane m the products at bytes 4m..4m+3 of every
// 32 values, less the sums of values [32 m, 32 m + 32); no 16-bit sum can overflow.
template <class Block>
float VecDotX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  uint8_t u[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Digits(x[i], u);
    int sums[8];
    for (int m = 0; m < 8; ++m) sums[m] = -PairBlockSum(y[i], m);
    for (int j = 0; j < kQK_K; ++j) sums[(j % 32) / 4] += u[j] * y[i].qs[j];
    const float d = y[i].d * Fp16ToFp32(x[i].d);
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(static_cast<float>(sums[m]), d, lanes[m]);
  }
  return X86HorizontalSum8(lanes);
}

// llama.cpp's ARM NEON ggml_vec_dot_tq{1,2}_0_q8_K (dotprod): the block's integer sum of the
// digits times the activations less all 16 block sums, one fma per block.
template <class Block>
float VecDotArm(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  uint8_t u[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Digits(x[i], u);
    int sum = 0;
    for (int j = 0; j < kQK_K; ++j) sum += u[j] * y[i].qs[j];
    for (int m = 0; m < 8; ++m) sum -= PairBlockSum(y[i], m);
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, static_cast<float>(sum), sumf);
  }
  return sumf;
}

}  // namespace

bool IsTernaryType(DType type) { return type == DType::kTQ1_0 || type == DType::kTQ2_0; }

void DequantizeTernaryRow(DType type, const void* src, float* dst, int64_t n) {
  COHORT_CHECK(IsTernaryType(type));
  if (type == DType::kTQ1_0) {
    DequantizeRowOf<BlockTq1_0>(src, dst, n);
  } else {
    DequantizeRowOf<BlockTq2_0>(src, dst, n);
  }
}

void QuantizeTernaryRow(DType type, const float* src, void* dst, int64_t n) {
  COHORT_CHECK(IsTernaryType(type));
  if (type == DType::kTQ1_0) {
    QuantizeRowOf<BlockTq1_0>(src, dst, n);
  } else {
    QuantizeRowOf<BlockTq2_0>(src, dst, n);
  }
}

VecDotFn GetTernaryVecDot(DType weight) {
  if (weight == DType::kTQ1_0) return VecDotGeneric<BlockTq1_0>;
  return weight == DType::kTQ2_0 ? VecDotGeneric<BlockTq2_0> : nullptr;
}
VecDotFn GetTernaryX86OrderVecDot(DType weight) {
  if (weight == DType::kTQ1_0) return VecDotX86<BlockTq1_0>;
  return weight == DType::kTQ2_0 ? VecDotX86<BlockTq2_0> : nullptr;
}
VecDotFn GetTernaryArmOrderVecDot(DType weight) {
  if (weight == DType::kTQ1_0) return VecDotArm<BlockTq1_0>;
  return weight == DType::kTQ2_0 ? VecDotArm<BlockTq2_0> : nullptr;
}

}  // namespace cohort::kernels::ref
