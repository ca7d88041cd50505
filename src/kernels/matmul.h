// Matrix products of quantized weights with float activations, computed as ggml's CPU
// backend computes them: the activation rows are first quantized to the weight type's
// vec-dot type (Q8_0, Q8_1 or Q8_K; F16/BF16 for half weights), then integer dot products
// are taken block by block. This is what makes quantized models agree with llama.cpp.
#pragma once

#include <cstdint>
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

}  // namespace cohort::kernels
