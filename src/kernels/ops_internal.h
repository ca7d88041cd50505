// Internal interface between the public ops.h dispatchers and the per-ISA kernel files: the
// scalar reference of every op that has a SIMD form (the yardstick the SIMD kernels are tested
// against, and the path ops.cc takes without AVX2) and the AVX2 and AVX-512 kernels. Not for
// use outside src/kernels and its tests.
#pragma once

#include <cstdint>

namespace cohort::kernels {

// The scalar loops of ops.cc, callable whatever the CPU has; each computes what ops.h says of
// the op of the same name. The SIMD forms must equal them bit for bit, except Dot and DotF16,
// whose double additions they may reorder.
namespace ref {
void Softmax(float* x, int64_t n);
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
void AddScaled(const float* x, float s, int64_t n, float* y);
void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y);
float Dot(const float* a, const float* b, int64_t n);
float DotF16(const uint16_t* a, const float* b, int64_t n);
}  // namespace ref

namespace avx512 {

// ops_avx512.cc; call only when BestSimdLevel() is kAvx512.
float Dot(const float* a, const float* b, int64_t n);
float DotF16(const uint16_t* a, const float* b, int64_t n);
void AddScaled(const float* x, float s, int64_t n, float* y);
void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y);
void DotsF16Heads(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q, int64_t q_stride,
                  int n_heads, int64_t n, float scale, float* scores, int64_t scores_stride);
void WeightedRowSumF16Heads(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                            int64_t row_stride, int64_t n_rows, int64_t n, float* out, int64_t out_stride);
// max(x[0..n)), NaNs ignored as std::max(acc, x) ignores them: Softmax's first pass.
float Max(const float* x, int64_t n);
// Softmax's chunked part: x[0..16 * n_chunks) = ExpPoly(x - max), returning the sum of the
// chunks' pairwise sums in double, as the scalar loop does.
double ExpChunks(float* x, int64_t n_chunks, float max);
// SwiGlu's chunked part over 16 * n_chunks values.
void SwiGluChunks(const float* gate, const float* up, int64_t n_chunks, float* out);

}  // namespace avx512

namespace avx2 {

// ops_avx2.cc; call only when HasAvx2(BestSimdLevel()). The same ops with the same promises
// as avx512:: above (and the same chunks of 16 values for Softmax and SwiGlu).
float Dot(const float* a, const float* b, int64_t n);
float DotF16(const uint16_t* a, const float* b, int64_t n);
void AddScaled(const float* x, float s, int64_t n, float* y);
void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y);
void DotsF16Heads(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q, int64_t q_stride,
                  int n_heads, int64_t n, float scale, float* scores, int64_t scores_stride);
void WeightedRowSumF16Heads(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                            int64_t row_stride, int64_t n_rows, int64_t n, float* out, int64_t out_stride);
float Max(const float* x, int64_t n);
double ExpChunks(float* x, int64_t n_chunks, float max);
void SwiGluChunks(const float* gate, const float* up, int64_t n_chunks, float* out);

}  // namespace avx2
}  // namespace cohort::kernels
