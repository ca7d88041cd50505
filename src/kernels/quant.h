// Quantized row formats (ggml's block layouts) and the operations on them: dequantize a row,
// quantize a row, and take the dot product of a weight row with an activation row that was
// quantized to the weight type's vec-dot type, all as ggml's CPU backend computes them.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"

namespace cohort::kernels {

// Instruction sets a kernel may be written for. kScalar is the reference every other level is
// tested against. x86: kAvx2 (AVX2 + FMA + F16C); kAvxVnni, the same plus the 256-bit VEX
// vpdpbusd (Alder Lake and later, Zen 5); kAvx512 (F, BW, VL and VNNI), which includes AVX2
// (it takes the AVX2 kernels where it has none of its own) but not AVX-VNNI. ARM: kNeonDot
// (AArch64 NEON with the dot-product extension) and kNeonI8mm, the same plus the int8 matrix
// multiply (smmla: Apple M2 and later, Graviton 3). The values are stable names, not an order.
enum class SimdLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeonDot = 3, kAvxVnni = 4, kNeonI8mm = 5 };

constexpr bool HasAvx2(SimdLevel level) {
  return level == SimdLevel::kAvx2 || level == SimdLevel::kAvxVnni || level == SimdLevel::kAvx512;
}
constexpr bool HasAvxVnni(SimdLevel level) { return level == SimdLevel::kAvxVnni; }
constexpr bool HasAvx512(SimdLevel level) { return level == SimdLevel::kAvx512; }
constexpr bool HasNeonDot(SimdLevel level) { return level == SimdLevel::kNeonDot || level == SimdLevel::kNeonI8mm; }
constexpr bool HasNeonI8mm(SimdLevel level) { return level == SimdLevel::kNeonI8mm; }
// Whether fused multiply-add is one instruction at this level (F32 dots then follow ggml's
// lanes, written with std::fma; without it std::fma is a slow library call).
constexpr bool HasFmaUnit(SimdLevel level) { return HasAvx2(level) || HasNeonDot(level); }

// The level the kernels run at: the best this CPU runs, or the one COHORT_SIMD names (scalar,
// avx2, avx_vnni, avx512, neon, neon_i8mm) when the CPU runs it. Read once, at the first call.
SimdLevel BestSimdLevel();
// All levels this CPU runs, kScalar first and its best last (whatever COHORT_SIMD says).
std::span<const SimdLevel> SupportedSimdLevels();
// Ok, or why COHORT_SIMD cannot be honoured (an unknown name, or a level this CPU lacks; the
// kernels then run at the CPU's best level). Programs check it at start and refuse to run.
Status SimdOverrideStatus();
const char* SimdLevelName(SimdLevel level);
// The level of a COHORT_SIMD name (SimdLevelName's, or "neon-dotprod"); false if none.
bool ParseSimdLevel(std::string_view name, SimdLevel* level);

// True for the types DequantizeRow/QuantizeRow accept: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q8_1, Q2_K..Q6_K, Q8_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4.
bool IsRowType(DType type);
// True for the weight types VecDot and MatMul accept (IsRowType less Q8_1 and Q8_K).
bool IsWeightType(DType type);

// The type ggml quantizes activations to before a dot product with a row of `weight`:
// Q4_0/Q5_0/Q8_0/IQ4_NL/MXFP4 -> Q8_0, Q4_1/Q5_1 -> Q8_1, Q2_K..Q6_K/IQ1_S/IQ1_M/IQ2_XXS/IQ2_XS/IQ2_S/IQ4_XS
// -> Q8_K, plain types -> themselves; TQ1_0/TQ2_0 -> Q8_K.
DType VecDotType(DType weight);

// dst[0..n) = the values of the row. n must be a multiple of the type's block size.
void DequantizeRow(DType type, const void* src, float* dst, int64_t n);

// Writes RowBytes(type, n) bytes. Q8_0, Q8_1 and Q8_K are bit-exact with the activation
// quantizers of ggml's x86 CPU backend; Q4_0..Q5_1 follow ggml's reference formulas; the
// K-quant weight types use a simple (not ggml's searching) quantizer that gives valid blocks.
void QuantizeRow(DType type, const float* src, void* dst, int64_t n);

// Whether QuantizeRowWeighted takes an importance matrix for `type`: the types whose quantizer
// is ggml's own (IQ4_NL, IQ4_XS); the other i-quants' quantizers are simpler searches that
// take none.
bool TakesImportance(DType type);

// QuantizeRow weighing each value's error by its column's importance (llama-imatrix's mean
// squared activation, `importance[j]` for value j), as ggml's quantizer does under
// llama-quantize --imatrix: importance[j] * sqrt(sigma2 + x_j^2), sigma2 twice the super-block's
// mean square. The same bytes as llama-quantize's. TakesImportance(type) must hold.
void QuantizeRowWeighted(DType type, const float* src, void* dst, int64_t n, const float* importance);

// The dot product of a row of `weight` with a row already in VecDotType(weight), computed
// block by block with integer sums as ggml does, at the best SIMD level.
float VecDot(DType weight, const void* w_row, const void* act_row, int64_t n);

// One vec-dot kernel: (weight row, activation row, n elements) -> dot product.
using VecDotFn = float (*)(const void* w_row, const void* act_row, int64_t n);

// The kernel for `weight` at exactly `level`, or at the best level at or below it that has
// one (every type has a scalar kernel). Fetch once and call it in loops.
VecDotFn GetVecDot(DType weight, SimdLevel level);

// llama.cpp's CPU backend (AVX2 and up) sums some products in an order that depends on the
// batch, and cohort follows it: Q4_K weights are repacked, and the repacked GEMM, which takes
// each full group of 4 tokens, sums differently from the GEMV, which takes single tokens and a
// batch's last n % 4; F32 weights go through llamafile's sgemm for batches of >= 2 tokens and
// through ggml_vec_dot_f32 (GetVecDot's F32 kernel at AVX2 and up) for one; IQ4_XS and IQ2_XXS weights (x86)
// (and IQ1_S, IQ1_M) are decoded into int8 panels for batches of >= 8 tokens, whose GEMM adds
// each super-block's integer sum into one float (the vec-dot of fewer tokens keeps 8 float lanes). Tokens
// [0, GroupedTokens(weight, n)) of a batch of n use this kernel, the rest GetVecDot's; for every
// other type and level it is GetVecDot's.
VecDotFn GetVecDotGrouped(DType weight, SimdLevel level);
inline int64_t GroupedTokens(DType weight, int64_t n_tokens) {
  if (weight == DType::kF32) return n_tokens >= 2 ? n_tokens : 0;
  // IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S: llama.cpp's x86 panel GEMM (iqp.cpp) takes whole batches of
  // >= 8 tokens.
  if (weight == DType::kIQ4_XS || weight == DType::kIQ2_XXS) return n_tokens >= 8 ? n_tokens : 0;
  if (weight == DType::kIQ2_XS || weight == DType::kIQ2_S) return n_tokens >= 8 ? n_tokens : 0;
  // IQ1_S, IQ1_M: the same panel GEMM.
  if (weight == DType::kIQ1_S || weight == DType::kIQ1_M) return n_tokens >= 8 ? n_tokens : 0;
  // IQ3_XXS, IQ3_S: the same panel GEMM (x86); on aarch64 its kernel is GetVecDot's.
  if (weight == DType::kIQ3_XXS || weight == DType::kIQ3_S) return n_tokens >= 8 ? n_tokens : 0;
  return n_tokens - n_tokens % 4;
}

}  // namespace cohort::kernels
