// MatMul and MatMulRows against naive loops over VecDot, for every weight type, 1..5 tokens,
// odd row counts, and 1 or 3 threads (results must not depend on the thread count).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

struct Weights {
  std::vector<uint8_t> bytes;
  TensorView view;
};

Weights MakeWeights(DType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  Weights w;
  const int64_t row_bytes = RowBytes(type, n_in);
  w.bytes.resize(static_cast<size_t>(row_bytes * n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    const std::vector<float> row = testing::RandomRow(n_in, seed + static_cast<uint32_t>(r));
    QuantizeRow(type, row.data(), w.bytes.data() + r * row_bytes, n_in);
  }
  w.view = TensorView::Make(type, w.bytes.data(), {n_in, n_out, 1, 1});
  return w;
}

// y[t][r] by the definition: quantize x[t] to the vec-dot type, then VecDot with row r.
std::vector<float> Naive(const TensorView& w, const std::vector<float>& x, int64_t n_tokens) {
  const int64_t n = w.ne[0];
  const DType act_type = VecDotType(w.type);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.n_rows()));
  std::vector<uint8_t> act(RowBytes(act_type, n));
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeRow(act_type, x.data() + t * n, act.data(), n);
    // A batch's full groups of 4 tokens take llama.cpp's repacked-GEMM order (quant.h).
    const VecDotFn dot = t < GroupedTokens(w.type, n_tokens) ? GetVecDotGrouped(w.type, BestSimdLevel())
                                                     : GetVecDot(w.type, BestSimdLevel());
    for (int64_t r = 0; r < w.n_rows(); ++r) y[t * w.n_rows() + r] = dot(w.row(r), act.data(), n);
  }
  return y;
}

TEST(MatMul, MatchesNaiveLoopsForEveryTypeTokenCountAndThreadCount) {
  ThreadPool pool3(3);
  const int64_t n_in = 512, n_out = 13;
  for (DType type : testing::kWeightTypes) {
    const Weights w = MakeWeights(type, n_in, n_out, 100);
    for (int64_t n_tokens = 1; n_tokens <= 5; ++n_tokens) {
      const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 7 + static_cast<uint32_t>(n_tokens));
      const std::vector<float> want = Naive(w.view, x, n_tokens);
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool3}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(type) << " tokens=" << n_tokens
                                          << " threads=" << (pool ? pool->size() : 1));
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out), -1.0f);
        std::vector<uint8_t> scratch;
        MatMul(w.view, x.data(), n_tokens, y.data(), pool, &scratch);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "index " << i;
      }
    }
  }
}

TEST(MatMul, RowsSubsetWritesOnlyItsColumns) {
  ThreadPool pool3(3);
  const int64_t n_in = 256, n_out = 11, n_tokens = 3;
  for (DType type : {DType::kF32, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(type));
    const Weights w = MakeWeights(type, n_in, n_out, 200);
    const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 5);
    const std::vector<float> want = Naive(w.view, x, n_tokens);
    // Rows [3, 10) into the matching columns of a full-width output.
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out), -7.0f);
    std::vector<uint8_t> scratch;
    MatMulRows(w.view, 3, 10, x.data(), n_tokens, y.data() + 3, n_out, &pool3, &scratch);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < n_out; ++r) {
        const float expected = (r >= 3 && r < 10) ? want[t * n_out + r] : -7.0f;
        EXPECT_EQ(y[t * n_out + r], expected) << "t=" << t << " r=" << r;
      }
    }
    // And packed into a buffer of exactly the slice's width.
    std::vector<float> packed(static_cast<size_t>(n_tokens * 7));
    MatMulRows(w.view, 3, 10, x.data(), n_tokens, packed.data(), 7, nullptr, &scratch);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 3; r < 10; ++r) EXPECT_EQ(packed[t * 7 + r - 3], want[t * n_out + r]);
    }
  }
}

TEST(MatMul, AgreesWithFloatProductOfDequantizedWeights) {
  // Catches a MatMul that is self-consistent but wrong: compare with plain float math.
  const int64_t n_in = 256, n_out = 5, n_tokens = 2;
  for (DType type : testing::kWeightTypes) {
    SCOPED_TRACE(DTypeName(type));
    const Weights w = MakeWeights(type, n_in, n_out, 300);
    const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 9);
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    std::vector<uint8_t> scratch;
    MatMul(w.view, x.data(), n_tokens, y.data(), nullptr, &scratch);
    for (int64_t r = 0; r < n_out; ++r) {
      const std::vector<float> wr = testing::Dequantized(type, w.view.row(r), n_in);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> xt(x.begin() + t * n_in, x.begin() + (t + 1) * n_in);
        const auto ref = testing::FloatDot(wr, xt);
        // Activation quantization (8 bits) bounds the difference.
        EXPECT_NEAR(y[t * n_out + r], ref.dot, 0.02 * ref.abs_sum);
      }
    }
  }
}

}  // namespace
}  // namespace cohort::kernels

namespace cohort::kernels {
namespace {

// 37 rows: two 16-row wide tiles (where the type has them) and 5 rows of 4-row tiles; up to
// 13 tokens: full and partial 8-token wide calls on both sides of the grouped boundary.
TEST(MatMul, WideTilesAndTheirTailsMatchNaiveLoops) {
  ThreadPool pool2(2);
  const int64_t n_in = 512, n_out = 37;
  for (DType type : testing::kWeightTypes) {
    const Weights w = MakeWeights(type, n_in, n_out, 300);
    for (int64_t n_tokens : {1, 3, 8, 9, 13, 70}) {
      const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 31 + static_cast<uint32_t>(n_tokens));
      const std::vector<float> want = Naive(w.view, x, n_tokens);
      SCOPED_TRACE(::testing::Message() << DTypeName(type) << " tokens=" << n_tokens);
      std::vector<float> y(static_cast<size_t>(n_tokens * n_out), -1.0f);
      std::vector<uint8_t> scratch;
      MatMul(w.view, x.data(), n_tokens, y.data(), &pool2, &scratch);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "i=" << i;
    }
  }
}

// Packed rows (pack.h): MatMul on a packed view equals the naive loops on the original rows
// (in both summation orders: batches of 4+ tokens take Q4_K's grouped one), whole and for
// row ranges and (Q4_0, Q4_K) column slices, and really reads the packed copy (the original
// blocks are scrambled once packed; rows outside whole groups still read them; IQ4_XS's
// batches of >= 8, which take the panel, read it too). UnpackRow gives back every row's stored
// bytes.
TEST(MatMul, PackedRowsMatchNaiveLoopsAndAreWhatTheKernelReads) {
  const int64_t n_out = 48;
  struct Case {
    int64_t row_begin, row_end, col_begin, col_end;
  };
  int packed_types = 0;
  for (DType type : {DType::kQ4_0, DType::kQ4_K, DType::kQ8_0, DType::kQ6_K, DType::kIQ4_XS}) {
    const int64_t block = Traits(type).block_size;
    // Q8_0: 67 blocks, two whole chunks of its packed layout and an odd last one.
    const int64_t n_in = type == DType::kQ8_0 ? 67 * block : 3 * std::max<int64_t>(block, 128);
    if (!CanPackRows(type, n_out, RowBytes(type, n_in))) continue;  // no packed kernel on this CPU
    ++packed_types;
    ThreadPool pool2(2);
    Weights w = MakeWeights(type, n_in, n_out, 700);
    const Weights original = MakeWeights(type, n_in, n_out, 700);
    std::vector<uint8_t> packed(w.bytes.size());
    PackRows(type, w.bytes.data(), w.view.row_bytes, n_out, packed.data());
    EXPECT_NE(packed, w.bytes);
    std::vector<uint8_t> row(static_cast<size_t>(w.view.row_bytes));
    for (int64_t r = 0; r < n_out; ++r) {
      UnpackRow(type, packed.data(), w.view.row_bytes, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), w.bytes.data() + r * w.view.row_bytes, row.size()))
          << DTypeName(type) << " row " << r;
    }
    TensorView view = w.view;
    view.packed = packed.data();
    // Scramble the original blocks of rows [16, 48): only the packed copy still holds them.
    for (int64_t r = 16; r < n_out; ++r) {
      for (int64_t b = 0; b < w.view.row_bytes; ++b) w.bytes[r * w.view.row_bytes + b] ^= 0x5a;
    }
    const int64_t third = n_in / 3;
    std::vector<Case> cases = {Case{16, 48, 0, n_in}, Case{32, 48, 0, n_in}};
    if (PackedColumnsSlice(type)) {
      cases.push_back(Case{16, 48, third, 2 * third});
      cases.push_back(Case{32, 48, 2 * third, n_in});
    }
    for (const Case c : cases) {
      TensorView v = view.Rows(c.row_begin, c.row_end);
      ASSERT_NE(v.packed, nullptr);
      v.data += RowBytes(type, c.col_begin);
      v.packed += TensorView::kPackRows * RowBytes(type, c.col_begin);
      v.ne[0] = c.col_end - c.col_begin;
      TensorView want_view = original.view.Rows(c.row_begin, c.row_end);
      want_view.data += RowBytes(type, c.col_begin);
      want_view.ne[0] = v.ne[0];
      for (int64_t n_tokens : {1, 4, 8, 11, 20}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(type) << " rows " << c.row_begin << ".." << c.row_end
                                          << " cols " << c.col_begin << ".." << c.col_end << " tokens=" << n_tokens);
        const std::vector<float> x = testing::RandomRow(v.ne[0] * n_tokens, 61 + static_cast<uint32_t>(n_tokens));
        const std::vector<float> want = Naive(want_view, x, n_tokens);
        std::vector<float> y(want.size(), -1.0f);
        std::vector<uint8_t> scratch;
        MatMul(v, x.data(), n_tokens, y.data(), &pool2, &scratch);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "i=" << i;
      }
    }
    // A range that does not start on a group boundary drops the packed copy (and so reads the
    // scrambled originals).
    EXPECT_EQ(view.Rows(5, 40).packed, nullptr);
  }
  if (packed_types == 0) GTEST_SKIP() << "no packed kernel on this CPU";
}

// A batch of expert products (two sharing an input, as gate and up do) equals the same
// products one MatMulExperts call at a time, bit for bit.
TEST(MatMul, ExpertsBatchEqualsOneCallPerProduct) {
  ThreadPool pool2(2);
  const int64_t n_in = 512;
  for (DType type : {DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ8_0, DType::kF32}) {
    SCOPED_TRACE(DTypeName(type));
    const Weights a = MakeWeights(type, n_in, 37, 500);
    const Weights b = MakeWeights(type, n_in, 16, 600);
    const Weights c = MakeWeights(type, n_in, 5, 700);
    const std::vector<float> x1 = testing::RandomRow(n_in * 5, 41);
    const std::vector<float> x2 = testing::RandomRow(n_in * 1, 43);
    struct Case {
      const TensorView* w;
      const std::vector<float>* x;
      int64_t n_tokens;
    };
    const Case cases[] = {{&a.view, &x1, 5}, {&b.view, &x1, 5}, {&c.view, &x2, 1}, {&a.view, &x2, 1}};
    std::vector<std::vector<float>> want, got;
    std::vector<MatMulProduct> products;
    std::vector<uint8_t> scratch;
    for (const Case& k : cases) {
      want.emplace_back(static_cast<size_t>(k.n_tokens * k.w->n_rows()));
      MatMulExperts(*k.w, k.x->data(), k.n_tokens, want.back().data(), &pool2, &scratch);
      got.emplace_back(want.back().size(), -1.0f);
    }
    for (size_t i = 0; i < got.size(); ++i) {
      products.push_back({*cases[i].w, cases[i].x->data(), cases[i].n_tokens, got[i].data()});
    }
    MatMulExpertsBatch(products, &pool2, &scratch);
    for (size_t i = 0; i < got.size(); ++i) {
      for (size_t j = 0; j < got[i].size(); ++j) ASSERT_EQ(got[i][j], want[i][j]) << "product " << i << " j=" << j;
    }
  }
}

// MatMulBatch (a layer's q, k, v or gate, up in one pass) gives every product exactly MatMul's
// result, the batch's grouped order included: 6 tokens take Q4_K's 4-token GEMM order for the
// first 4 (matmul.cc must not split or merge a product's tokens differently from MatMul).
TEST(MatMul, BatchOfProductsEqualsSeparateMatMuls) {
  ThreadPool pool2(2);
  const int64_t n_in = 512;
  const Weights q = MakeWeights(DType::kQ4_K, n_in, 37, 800);
  const Weights k = MakeWeights(DType::kQ4_K, n_in, 16, 900);
  const Weights v = MakeWeights(DType::kQ6_K, n_in, 16, 1000);
  const Weights u = MakeWeights(DType::kQ4_0, n_in, 21, 1100);
  for (int64_t n_tokens : {1, 4, 6, 8}) {
    SCOPED_TRACE(::testing::Message() << "tokens=" << n_tokens);
    const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 51 + static_cast<uint32_t>(n_tokens));
    std::vector<uint8_t> scratch;
    std::vector<std::vector<float>> want, got;
    std::vector<MatMulProduct> products;
    for (const Weights* w : {&q, &k, &v, &u}) {
      want.emplace_back(static_cast<size_t>(n_tokens * w->view.n_rows()));
      MatMul(w->view, x.data(), n_tokens, want.back().data(), &pool2, &scratch);
      got.emplace_back(want.back().size(), -1.0f);
    }
    const Weights* ws[] = {&q, &k, &v, &u};
    for (size_t i = 0; i < got.size(); ++i) products.push_back({ws[i]->view, x.data(), n_tokens, got[i].data()});
    MatMulBatch(products, &pool2, &scratch);
    for (size_t i = 0; i < got.size(); ++i) {
      for (size_t j = 0; j < got[i].size(); ++j) ASSERT_EQ(got[i][j], want[i][j]) << "product " << i << " j=" << j;
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
