// MatMul: activations quantized once per call to the weight's vec-dot type, then the dot
// products by tile kernels (kTileRows rows x kTileTokens tokens at once, tile.h) where the
// type has one, else one vec-dot per (token, weight row); tiled so each weight row is read
// once per block of tokens, and split over the thread pool by tiles of weight rows (threads
// never share an output element).
#include "kernels/matmul.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/quant.h"
#include "kernels/tile.h"

namespace cohort::kernels {
namespace {

// A tile of weight rows is small enough (a few KB) to stay in L1 while every token of a
// token block passes over it; a token block of quantized activations stays in L2.
constexpr int64_t kRowTile = kTileRows;
constexpr int64_t kTokenTile = 32;
// MatMulRows relies on this: a token tile never straddles the grouped/ungrouped boundary.
static_assert(kTileTokens == 4 && kTokenTile % kTileTokens == 0);

// A template, and the pool gets a lambda holding one reference, so std::function stores it
// inline: a matmul on the decode path allocates nothing.
template <typename Fn>
void RunParallel(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool != nullptr && pool->size() > 1 && n > 1) {
    pool->ParallelFor(n, [&fn](int64_t begin, int64_t end) { fn(begin, end); });
  } else if (n > 0) {
    fn(0, n);
  }
}

}  // namespace

TileFn GetTile(DType weight, SimdLevel level) {
  if (level >= SimdLevel::kAvx512) return avx512::GetTile(weight);
  return nullptr;
}

TileFn GetTileGrouped(DType weight, SimdLevel level) {
  if (level >= SimdLevel::kAvx512 && weight == DType::kQ4_K) return avx512::GetKTileGrouped(weight);
  return GetTile(weight, level);
}

namespace {

// batch_orders: the batch shape picks the summation order per token (GroupedTokens); false
// keeps every token in the single-token order.
void MatMulImpl(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
                std::vector<uint8_t>* scratch, bool batch_orders) {
  COHORT_CHECK(IsWeightType(w.type));
  COHORT_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= w.n_rows());
  COHORT_CHECK_GE(n_tokens, 0);
  COHORT_CHECK_GE(y_stride, row_end - row_begin);
  const int64_t n = w.ne[0];  // elements per row, shared by weights and activations
  const DType act_type = VecDotType(w.type);

  // [n_tokens][act_stride bytes]: the activations in the weight's vec-dot type.
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  int64_t act_stride = n * static_cast<int64_t>(sizeof(float));
  if (act_type != DType::kF32) {
    COHORT_CHECK(scratch != nullptr);
    act_stride = RowBytes(act_type, n);
    scratch->resize(static_cast<size_t>(n_tokens * act_stride));
    uint8_t* q = scratch->data();
    RunParallel(n_tokens > 1 ? pool : nullptr, n_tokens, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) QuantizeRow(act_type, x + t * n, q + t * act_stride, n);
    });
    act = q;
  }

  const VecDotFn dot = GetVecDot(w.type, BestSimdLevel());
  const TileFn tile_fn = GetTile(w.type, BestSimdLevel());
  // Tokens [0, n_grouped) take GetVecDotGrouped's order (quant.h); a tile of
  // kTileTokens (4) tokens starting at a multiple of 4 lies wholly on one side.
  const VecDotFn dot_grouped = GetVecDotGrouped(w.type, BestSimdLevel());
  const TileFn tile_grouped = GetTileGrouped(w.type, BestSimdLevel());
  const int64_t n_grouped = batch_orders ? GroupedTokens(w.type, n_tokens) : 0;
  const int64_t n_rows = row_end - row_begin;
  const int64_t n_tiles = (n_rows + kRowTile - 1) / kRowTile;
  const uint8_t* w_rows = w.data + row_begin * w.row_bytes;
  RunParallel(pool, n_tiles, [&](int64_t tile_begin, int64_t tile_end) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
      const int64_t t1 = std::min(t0 + kTokenTile, n_tokens);
      for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
        const int64_t r0 = tile * kRowTile;
        const int64_t r1 = std::min(r0 + kRowTile, n_rows);
        if (tile_fn != nullptr) {
          for (int64_t t = t0; t < t1; t += kTileTokens) {
            const int tokens = static_cast<int>(std::min<int64_t>(kTileTokens, t1 - t));
            const TileFn f = t < n_grouped ? tile_grouped : tile_fn;
            f(w_rows + r0 * w.row_bytes, w.row_bytes, static_cast<int>(r1 - r0),
              act + t * act_stride, act_stride, tokens, n, y + t * y_stride + r0, y_stride);
          }
          continue;
        }
        for (int64_t t = t0; t < t1; ++t) {
          const uint8_t* a = act + t * act_stride;
          float* out = y + t * y_stride;
          const VecDotFn f = t < n_grouped ? dot_grouped : dot;
          for (int64_t r = r0; r < r1; ++r) out[r] = f(w_rows + r * w.row_bytes, a, n);
        }
      }
    }
  });
}

}  // namespace

void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
                std::vector<uint8_t>* scratch) {
  MatMulImpl(w, row_begin, row_end, x, n_tokens, y, y_stride, pool, scratch, /*batch_orders=*/true);
}

void MatMulExperts(const TensorView& w, const float* x, int64_t n_tokens, float* y,
                   ThreadPool* pool, std::vector<uint8_t>* scratch) {
  MatMulImpl(w, 0, w.n_rows(), x, n_tokens, y, w.n_rows(), pool, scratch, /*batch_orders=*/false);
}

void MatMul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            std::vector<uint8_t>* scratch) {
  MatMulRows(w, 0, w.n_rows(), x, n_tokens, y, w.n_rows(), pool, scratch);
}

}  // namespace cohort::kernels
