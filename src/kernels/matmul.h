// Matrix products of quantized weights with float activations, computed as ggml's CPU
// backend computes them: the activation rows are first quantized to the weight type's
// vec-dot type (Q8_0, Q8_1 or Q8_K; F16/BF16 for half weights), then integer dot products
// are taken block by block. This is what makes quantized models agree with llama.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace cohort::kernels {

// y[t][r] = dot(W row r, x[t]) for t in [0, n_tokens), r in [0, W.n_rows()).
// x is [n_tokens][W.ne[0]] floats, y is [n_tokens][W.n_rows()] floats (row stride n_rows).
// `scratch` is reused between calls to hold the quantized activations.
void MatMul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            std::vector<uint8_t>* scratch);

// The same for weight rows [row_begin, row_end) only (e.g. one rank's share of a split
// matrix): y[t * y_stride + (r - row_begin)] = dot(W row r, x[t]). To fill columns
// [row_begin, row_end) of a full-width output, pass y + row_begin and y_stride = W.n_rows().
// Weight types: see IsWeightType in quant.h. pool may be nullptr (runs on the caller).
void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
                std::vector<uint8_t>* scratch);

// MatMul for the tokens routed to one expert: llama.cpp's MUL_MAT_ID takes every token alone
// (ggml_vec_dot, or the repacked GEMV), so every token gets the single-token order whatever the
// batch (see GetVecDotGrouped in quant.h).
void MatMulExperts(const TensorView& w, const float* x, int64_t n_tokens, float* y,
                   ThreadPool* pool, std::vector<uint8_t>* scratch);

// One product of a MatMulExpertsBatch or MatMulBatch: y[t * w.n_rows() + r] = dot(W row r,
// x[t]) for t < n_tokens, in the order of MatMulExperts or MatMul respectively.
struct MatMulProduct {
  TensorView w;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* y = nullptr;
};
inline constexpr int kMaxMatMulProducts = 64;

// MatMulExperts for up to kMaxMatMulProducts products at once, with the same results: the
// activations of products that share x are quantized once, and all products' tiles of rows
// are split over the pool in one parallel pass (one synchronisation instead of one each).
void MatMulExpertsBatch(std::span<const MatMulProduct> products, ThreadPool* pool,
                        std::vector<uint8_t>* scratch);

// MatMul for up to kMaxMatMulProducts products at once (a layer's q, k and v; gate and up),
// each with MatMul's results (the batch picks each token's order, as MatMul does): inputs
// shared by several products are quantized once, and all rows are split over the pool in one
// pass, so a decode step pays one synchronisation where it paid one per matrix.
void MatMulBatch(std::span<const MatMulProduct> products, ThreadPool* pool,
                 std::vector<uint8_t>* scratch);

}  // namespace cohort::kernels
