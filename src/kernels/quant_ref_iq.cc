// The scalar reference for the 4-bit non-linear i-quants, IQ4_NL (GGML type 20, 32 values per
// 18-byte block) and IQ4_XS (type 23, 256 values per 136-byte super-block): dequantization,
// ggml's quantizer (quantize_iq4_nl / quantize_iq4_xs without an importance matrix, which is
// what llama-quantize runs for them: the same bytes), and the dot product with the activation
// row in two orders: ggml's generic one, and the one of llama.cpp's x86 CPU backend, which x86
// builds run at the scalar level so that every x86 level gives llama.cpp's bits.
// Compiled with -ffp-contract=off: each fused step of the x86 kernels is written as std::fma.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS
constexpr int kTries = 7;               // the scale search's range, as llama-quantize runs it

// The index of the table value nearest x (ggml's best_index_int8: a tie takes the upper one).
int BestIndex(float x) {
  const int8_t* val = kIq4NlValues;
  if (x <= val[0]) return 0;
  if (x >= val[15]) return 15;
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) mu = mav; else ml = mav;
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// The error weights of one block of 32 (quantize_row_iq4_nl_impl): x^2 without an importance
// matrix, else importance[j] * sqrt(sigma2 + x^2), sigma2 twice the mean square of the
// super-block (Sigma2; IQ4_NL's super-block is the block itself).
void BlockWeights(const float* x, const float* importance, float sigma2, float* weight) {
  for (int j = 0; j < 32; ++j) {
    weight[j] = importance != nullptr ? importance[j] * std::sqrt(sigma2 + x[j] * x[j]) : x[j] * x[j];
  }
}

float Sigma2(const float* x, int n) {
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  return sigma2 * (2.f / static_cast<float>(n));
}

// ggml's scale search for one block of 32 (the part of quantize_row_iq4_nl_impl inside its
// block loop): the best scale of the tried ones, 0 for an all-zero block.
float BlockScale(const float* x, const float* weight) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0;
  const int8_t* values = kIq4NlValues;
  float d = -max / values[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const float q = values[BestIndex(id * x[j])];
    sumqx += weight[j] * q * x[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -kTries; itry <= kTries; ++itry) {
    id = (itry + values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = values[BestIndex(id * x[j])];
      sumqx += weight[j] * q * x[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices into the 16 packed bytes (element j low nibble of byte j, j + 16 the high one).
void PackIndices(const float* x, float inverse_scale, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(BestIndex(inverse_scale * x[j]) | (BestIndex(inverse_scale * x[j + 16]) << 4));
  }
}

// importance: the block's values' importance (llama-imatrix's), or null.
void QuantizeIq4NlBlock(const float* x, const float* importance, BlockIq4Nl* y) {
  float weight[32];
  BlockWeights(x, importance, Sigma2(x, 32), weight);
  const float d = BlockScale(x, weight);
  y->d = Fp32ToFp16(d);
  PackIndices(x, d ? 1 / d : 0, y->qs);
}

void QuantizeIq4XsBlock(const float* x, const float* importance, BlockIq4Xs* y) {
  float scales[8];
  float max_scale = 0, amax_scale = 0;
  const float sigma2 = Sigma2(x, 256);
  for (int ib = 0; ib < 8; ++ib) {
    float weight[32];
    BlockWeights(x + 32 * ib, importance != nullptr ? importance + 32 * ib : nullptr, sigma2, weight);
    scales[ib] = BlockScale(x + 32 * ib, weight);
    if (std::fabs(scales[ib]) > amax_scale) {
      amax_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  // The sub-block scales in units of d = -max/32 (so the largest is -32), as 6-bit codes.
  const float d = -max_scale / 32;
  y->d = Fp32ToFp16(d);
  y->scales_h = 0;
  std::memset(y->scales_l, 0, sizeof y->scales_l);
  const float id = d ? 1 / d : 0.f;
  for (int ib = 0; ib < 8; ++ib) {
    int l = NearestInt(id * scales[ib]);
    l = std::max(-32, std::min(31, l));
    const float dl = d * l;
    PackIndices(x + 32 * ib, dl ? 1 / dl : 0.f, y->qs + 16 * ib);
    l += 32;
    y->scales_l[ib / 2] |= static_cast<uint8_t>((l & 0xf) << (4 * (ib % 2)));
    y->scales_h |= static_cast<uint16_t>((l >> 4) << (2 * ib));
  }
}

// The integer dot of 32 indices (packed as above) with 32 activations: ggml's generic sums.
int BlockDot(const uint8_t* qs, const int8_t* q8) {
  int sum1 = 0, sum2 = 0;
  for (int j = 0; j < 16; ++j) {
    sum1 += q8[j] * kIq4NlValues[qs[j] & 0xf];
    sum2 += q8[j + 16] * kIq4NlValues[qs[j] >> 4];
  }
  return sum1 + sum2;
}

// ggml_vec_dot_iq4_nl_q8_0_generic: sumf += d * block sum.
float VecDotIq4NlGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(y[i].d) * Fp16ToFp32(x[i].d);
    sum += d * static_cast<float>(BlockDot(x[i].qs, y[i].qs));
  }
  return sum;
}

// ggml_vec_dot_iq4_xs_q8_K_generic: sumf += (d * scale) * sub-block sum, sub-block by sub-block.
float VecDotIq4XsGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d4d8 = Fp16ToFp32(x[i].d) * y[i].d;
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d4d8 * static_cast<float>(Iq4XsScale(x[i], ib));
      sum += dl * static_cast<float>(BlockDot(x[i].qs + 16 * ib, y[i].qs + 32 * ib));
    }
  }
  return sum;
}

// llama.cpp's x86 IQ4_NL: every matrix with a multiple of 8 rows is repacked (iq4_nl_8x8, the
// kernel Q4_0 and MXFP4 share), whose GEMV and GEMM alike add each block's integer sum times
// d_w * d_a to one float per row by a fused multiply-add.
float VecDotIq4NlX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    acc = std::fma(static_cast<float>(BlockDot(x[i].qs, y[i].qs)), Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d), acc);
  }
  return acc;
}

// llama.cpp's AVX2 ggml_vec_dot_iq4_xs_q8_K (not repacked): 8 float lanes; lane m takes, per
// super-block, sum over sub-blocks of scale * (products of elements 4m..4m+3), by one fused
// multiply-add with d_w * d_a; then the lanes reduced as hsum_float_8.
float VecDotIq4XsX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sums[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* qs = x[i].qs + 16 * ib;
      const int8_t* q8 = y[i].qs + 32 * ib;
      const int scale = Iq4XsScale(x[i], ib);
      for (int e = 0; e < 32; ++e) {
        const int index = e < 16 ? qs[e] & 0xf : qs[e - 16] >> 4;
        sums[e / 4] += scale * X86Product(kIq4NlValues[index], q8[e]);
      }
    }
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(d, static_cast<float>(sums[m]), lanes[m]);
  }
  return X86HorizontalSum8(lanes);
}

// llama.cpp's x86 IQ4_XS for batches of >= 8 tokens (iqp.cpp: the weights decoded into 8-row
// int8 panels, a GEMM over them): per super-block the whole integer sum (scales applied, true
// products: the AVX-512 VNNI build feeds activations + 128 unsigned and subtracts a bias),
// added into one float per output by fma(sum, d_w * d_a, acc).
float VecDotIq4XsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sum = 0;
    for (int ib = 0; ib < 8; ++ib) sum += Iq4XsScale(x[i], ib) * BlockDot(x[i].qs + 16 * ib, y[i].qs + 32 * ib);
    acc = std::fma(static_cast<float>(sum), Fp16ToFp32(x[i].d) * y[i].d, acc);
  }
  return acc;
}

}  // namespace

bool IsIqType(DType type) {
  return type == DType::kIQ4_NL || type == DType::kIQ4_XS || IsIqGridType(type) || IsIq3Type(type);
}

void DequantizeIqRow(DType type, const void* src, float* dst, int64_t n) {
  if (IsIq3Type(type)) return DequantizeIq3Row(type, src, dst, n);
  if (IsIqGridType(type)) return DequantizeIqGridRow(type, src, dst, n);
  if (type == DType::kIQ4_NL) {
    const auto* x = static_cast<const BlockIq4Nl*>(src);
    for (int64_t i = 0; i < n / kQK; ++i) {
      const float d = Fp16ToFp32(x[i].d);
      for (int j = 0; j < 16; ++j) {
        dst[i * kQK + j] = d * kIq4NlValues[x[i].qs[j] & 0xf];
        dst[i * kQK + j + 16] = d * kIq4NlValues[x[i].qs[j] >> 4];
      }
    }
    return;
  }
  COHORT_CHECK(type == DType::kIQ4_XS);
  const auto* x = static_cast<const BlockIq4Xs*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const float dl = d * static_cast<float>(Iq4XsScale(x[i], ib));
      float* out = dst + i * kQK_K + 32 * ib;
      for (int j = 0; j < 16; ++j) {
        out[j] = dl * kIq4NlValues[x[i].qs[16 * ib + j] & 0xf];
        out[j + 16] = dl * kIq4NlValues[x[i].qs[16 * ib + j] >> 4];
      }
    }
  }
}

void QuantizeIqRow(DType type, const float* src, void* dst, int64_t n) {
  if (IsIq3Type(type)) return QuantizeIq3Row(type, src, dst, n);
  if (IsIqGridType(type)) return QuantizeIqGridRow(type, src, dst, n);
  QuantizeIq4Row(type, src, dst, n, nullptr);
}

void QuantizeIq4Row(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  const auto at = [&](int64_t offset) { return importance != nullptr ? importance + offset : nullptr; };
  if (type == DType::kIQ4_NL) {
    auto* y = static_cast<BlockIq4Nl*>(dst);
    for (int64_t i = 0; i < n / kQK; ++i) QuantizeIq4NlBlock(src + i * kQK, at(i * kQK), y + i);
    return;
  }
  COHORT_CHECK(type == DType::kIQ4_XS);
  auto* y = static_cast<BlockIq4Xs*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) QuantizeIq4XsBlock(src + i * kQK_K, at(i * kQK_K), y + i);
}

VecDotFn GetIqVecDot(DType weight) {
  if (IsIq3Type(weight)) return GetIq3VecDot(weight);
  switch (weight) {
    case DType::kIQ4_NL: return VecDotIq4NlGeneric;
    case DType::kIQ4_XS: return VecDotIq4XsGeneric;
    default: return GetIqGridVecDot(weight);
  }
}

VecDotFn GetIqX86OrderVecDotGrouped(DType weight) {
  if (IsIq3Type(weight)) return GetIq3X86OrderVecDotGrouped(weight);
  if (weight == DType::kIQ4_XS) return VecDotIq4XsPanel;
  if (VecDotFn fn = GetIqGridX86OrderVecDotGrouped(weight)) return fn;
  return GetIqX86OrderVecDot(weight);
}

VecDotFn GetIqX86OrderVecDot(DType weight) {
  if (IsIq3Type(weight)) return GetIq3X86OrderVecDot(weight);
  switch (weight) {
    case DType::kIQ4_NL: return VecDotIq4NlX86;
    case DType::kIQ4_XS: return VecDotIq4XsX86;
    default: return GetIqGridX86OrderVecDot(weight);
  }
}

}  // namespace cohort::kernels::ref
