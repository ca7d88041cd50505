// Float sums in the exact order llama.cpp's CPU backend (AVX-512 build) takes them in the
// attention products, so that cohort's F32 attention agrees with it to the last bit.
#pragma once

#include <cstdint>

namespace cohort::kernels {

// dot(a, b) summed exactly as ggml_vec_dot_f32 does on AVX-512 (llama.cpp's attention scores
// q·k, and single-token attention outputs): element i goes to lane i % 64 by fused multiply-
// add, lanes are reduced in ggml's tree order, then the n % 64 tail is added one element at a
// time: rounded products for its chunks of 16 and 8, fused for the last n % 8.
float DotGgml(const float* a, const float* b, int64_t n);
// dot(a, b) as llamafile's AVX-512 sgemm sums it (llama.cpp's F32 matrix products for batches
// of >= 2 tokens): element i to lane i % 16 by fused multiply-add, then _mm512_reduce_add_ps's
// tree. n must be a multiple of 16.
float DotSgemm(const float* a, const float* b, int64_t n);
// How llama.cpp's CPU backend sums a float matrix product: one token alone goes through
// ggml_vec_dot_f32 (64 lanes); a batch of >= 2 contiguous rows through llamafile's sgemm
// (16 lanes, one fused multiply-add chain per lane).
enum class SumOrder { kVecDot, kSgemm };
// out[i] = sum_p w[p] * rows[p * row_stride + i] for i in [0, width), p in [0, n), each output
// summed in the given order with lane = p % (64 or 16).
void WeightedRowSum(const float* w, const float* rows, int64_t row_stride, int64_t n,
                    int64_t width, SumOrder order, float* out);

}  // namespace cohort::kernels
