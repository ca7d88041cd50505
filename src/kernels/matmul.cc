// MatMul: activations quantized once per call to the weight's vec-dot type, then the dot
// products by wide tiles (16 rows x up to 8 tokens, tile_wide.h) where the type has them,
// by tile kernels (kTileRows rows x kTileTokens tokens, tile.h) for the rows left over, else
// one vec-dot per (token, weight row); token tiles outermost so a block of quantized tokens
// stays in cache while the rows pass, split over the thread pool by tiles of weight rows
// (threads never share an output element). MatMulExpertsBatch runs many products this way
// in one parallel pass.
#include "kernels/matmul.h"

#include <algorithm>
#include <array>

#include "core/check.h"
#include "kernels/iq_panel.h"
#include "kernels/quant.h"
#include "kernels/quant_internal.h"
#include "kernels/tile.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels {
namespace {

// A tile of weight rows is small enough (a few KB) to stay in L1 while every token of a
// token block passes over it; a token block of quantized activations stays in L2.
constexpr int64_t kRowTile = kTileRows;
constexpr int64_t kTokenTile = 64;
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

// The AVX-512 level takes the AVX2 kernels for the types it has no vec-dot of its own for
// (their AVX2 vec-dot is then its vec-dot, so the AVX2 tiles keep its order).
namespace {
bool Avx512Owns(DType weight, SimdLevel level) {
  return HasAvx512(level) && avx512::GetVecDot(weight) != nullptr;
}
// Whether a batch's grouped tokens take another order than single tokens (quant.h).
bool GroupedOrderDiffers(DType weight, SimdLevel level) {
  return GetVecDotGrouped(weight, level) != GetVecDot(weight, level);
}
}  // namespace

TileFn GetTile(DType weight, SimdLevel level) {
  if (HasAvx512(level)) {
    if (TileFn fn = avx512::GetTile(weight)) return fn;
    if (Avx512Owns(weight, level)) return nullptr;
  }
  if (HasAvx2(level)) return avx2::GetTile(weight, HasAvxVnni(level));
  if (HasNeonDot(level)) return neon::GetTile(weight, HasNeonI8mm(level));
  return nullptr;
}

TileFn GetTileGrouped(DType weight, SimdLevel level) {
  if (!GroupedOrderDiffers(weight, level)) return GetTile(weight, level);
  if (HasAvx512(level) && weight == DType::kQ4_K) return avx512::GetKTileGrouped(weight);
  if (HasAvx2(level)) return avx2::GetTileGrouped(weight, HasAvxVnni(level));
  if (HasNeonDot(level)) return neon::GetTileGrouped(weight, HasNeonI8mm(level));
  return nullptr;
}

WideTile GetWideTile(DType weight, SimdLevel level, bool grouped) {
  if (HasAvx512(level)) {
    const WideTile t = avx512::GetWideTile(weight, grouped);
    if (t.fn != nullptr || Avx512Owns(weight, level)) return t;
  }
  if (HasAvx2(level)) return avx2::GetWideTile(weight, grouped, HasAvxVnni(level));
  if (HasNeonDot(level)) return neon::GetWideTile(weight, grouped, HasNeonI8mm(level));
  return {};
}

WideTile GetWideTilePacked(DType weight, SimdLevel level, bool grouped) {
  // The packed kernel of the ISA whose plain wide kernel GetWideTile picked.
  if (HasAvx512(level) && (avx512::GetWideTile(weight, grouped).fn != nullptr || Avx512Owns(weight, level))) {
    if (weight == DType::kQ4_K || weight == DType::kQ6_K) return avx512::GetWideTilePackedK(weight, grouped);
    if (weight == DType::kIQ4_XS) return avx512::GetWideTilePackedIq(weight, grouped);
    return avx512::GetWideTilePacked(weight);
  }
  if (HasAvx2(level)) return avx2::GetWideTilePacked(weight, grouped, HasAvxVnni(level));
  if (HasNeonDot(level)) return neon::GetWideTilePacked(weight, grouped, HasNeonI8mm(level));
  return {};
}

namespace {

// The kernels of one matmul: wide tiles (16 rows) where the type has them, 4-row tiles
// for the rows left over (or all rows), else one vec-dot per (token, row); each in the
// plain and the grouped order (quant.h).
struct Kernels {
  WideTile wide, wide_grouped;
  WideTile wide_packed, wide_packed_grouped;  // for TensorView::packed rows
  TileFn tile = nullptr, tile_grouped = nullptr;
  VecDotFn dot = nullptr, dot_grouped = nullptr;
  // The i-quants' grouped tokens on x86 (AVX2 and up): 16 rows decoded once into a panel for
  // a whole token tile (iq_panel.h), instead of once per (row, token) by dot_grouped.
  IqDecodeFn panel_decode = nullptr;
  int64_t panel_block_bytes = 0;
  DType panel_type = DType::kF32;
  SimdLevel panel_level = SimdLevel::kScalar;
};

Kernels GetKernels(const TensorView& w) {
  const SimdLevel level = BestSimdLevel();
  Kernels k;
#if defined(__x86_64__) || defined(__i386__)
  if (HasAvx2(level) && GroupedOrderDiffers(w.type, level)) {
    k.panel_decode = GetIqPanelDecode(w.type);
    k.panel_block_bytes = RowBytes(w.type, 256);
    k.panel_type = w.type;
    k.panel_level = level;
  }
#endif
  // The wide kernels address 15 rows ahead with 32-bit offsets.
  if (w.row_bytes * kWideRows < (int64_t{1} << 31)) {
    k.wide = GetWideTile(w.type, level, false);
    k.wide_grouped = GetWideTile(w.type, level, true);
  }
  // A panel type's grouped tokens take the panel, so its wide kernel may serve single tokens alone.
  const bool grouped_by_panel = k.panel_decode != nullptr && k.wide_grouped.fn == nullptr;
  if (k.wide.fn == nullptr ||
      (!grouped_by_panel && (k.wide_grouped.fn == nullptr || k.wide.side != k.wide_grouped.side ||
                             k.wide.max_tokens != k.wide_grouped.max_tokens))) {
    k.wide = k.wide_grouped = WideTile{};
  }
  if (w.packed != nullptr && k.wide.fn != nullptr) {
    k.wide_packed = GetWideTilePacked(w.type, level, false);
    k.wide_packed_grouped = GetWideTilePacked(w.type, level, true);
    // The same activations and side data as the plain kernels, or none (a panel type's grouped
    // tokens take the panel, which reads the rows as stored).
    for (const WideTile* t : {&k.wide_packed, &k.wide_packed_grouped}) {
      if (t == &k.wide_packed_grouped && grouped_by_panel) continue;
      if (t->fn == nullptr || t->side != k.wide.side || t->max_tokens != k.wide.max_tokens) {
        k.wide_packed = k.wide_packed_grouped = WideTile{};
      }
    }
  }
  k.tile = GetTile(w.type, level);
  k.tile_grouped = GetTileGrouped(w.type, level);
  if (k.tile == nullptr || k.tile_grouped == nullptr) k.tile = k.tile_grouped = nullptr;
  k.dot = GetVecDot(w.type, level);
  k.dot_grouped = GetVecDotGrouped(w.type, level);
  return k;
}

// One product y[t * y_stride + r] = dot(W row r, x[t]), planned: its kernels, where its
// quantized activations and side data lie, and its share of the work units (tiles of rows).
struct Plan {
  Kernels k;
  const uint8_t* w_rows = nullptr;
  const uint8_t* packed = nullptr;  // the rows' packed copy (TensorView::packed), if used
  int64_t packed_row_bytes = 0;      // its row stride (TensorView::PackedRowBytes)
  int64_t row_bytes = 0, n = 0, n_rows = 0;
  DType act_type = DType::kF32;
  const float* x = nullptr;
  const uint8_t* act = nullptr;
  int64_t act_stride = 0;
  const float* side = nullptr;
  int64_t side_stride = 0;
  int64_t n_tokens = 0, n_grouped = 0;
  float* y = nullptr;
  int64_t y_stride = 0;
  int64_t n_wide = 0;      // units [0, n_wide) are wide tiles, the rest kRowTile-row tiles
  int64_t n_units = 0;
  int64_t unit_begin = 0;  // first unit in the whole batch
  int64_t act_offset = 0;  // bytes into the scratch: activations, then side data
  int64_t side_offset = 0;
  bool owns_act = true;    // false: reuses an earlier plan's activations (same x)
};

Plan MakePlan(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
              int64_t n_tokens, float* y, int64_t y_stride, bool batch_orders) {
  COHORT_CHECK(IsWeightType(w.type));
  COHORT_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= w.n_rows());
  COHORT_CHECK_GE(n_tokens, 0);
  COHORT_CHECK_GE(y_stride, row_end - row_begin);
  Plan p;
  p.k = GetKernels(w);
  p.w_rows = w.data + row_begin * w.row_bytes;
  if (p.k.wide_packed.fn != nullptr && row_begin % kWideRows == 0) {
    p.packed_row_bytes = w.PackedRowBytes();
    p.packed = w.packed + row_begin * p.packed_row_bytes;
  }
  p.row_bytes = w.row_bytes;
  p.n = w.ne[0];  // elements per row, shared by weights and activations
  p.n_rows = row_end - row_begin;
  p.act_type = VecDotType(w.type);
  p.x = x;
  p.act_stride = p.act_type == DType::kF32 ? p.n * static_cast<int64_t>(sizeof(float)) : RowBytes(p.act_type, p.n);
  p.side_stride = p.k.wide.side != nullptr ? p.k.wide.side_per_256 * p.n / 256 : 0;
  p.n_tokens = n_tokens;
  // Tokens [0, n_grouped) take GetVecDotGrouped's order (quant.h); n_grouped is a multiple
  // of 4, so a 4-token tile starting at a multiple of 4 lies wholly on one side.
  p.n_grouped = batch_orders ? GroupedTokens(w.type, n_tokens) : 0;
  p.y = y;
  p.y_stride = y_stride;
  p.n_wide = p.k.wide.fn != nullptr || p.k.panel_decode != nullptr ? p.n_rows / kWideRows : 0;
  p.n_units = p.n_wide + (p.n_rows - p.n_wide * kWideRows + kRowTile - 1) / kRowTile;
  return p;
}

// Lays out the plans' quantized activations in `scratch` (one copy per distinct input),
// quantizes them (in parallel over tokens), and numbers the plans' work units.
void PrepareActivations(Plan* plans, int count, ThreadPool* pool, std::vector<uint8_t>* scratch) {
  int64_t bytes = 0, units = 0, rows_to_quantize = 0;
  for (int i = 0; i < count; ++i) {
    Plan& p = plans[i];
    p.unit_begin = units;
    units += p.n_units;
    if (p.act_type == DType::kF32) {
      p.act = reinterpret_cast<const uint8_t*>(p.x);
      p.owns_act = false;
      continue;
    }
    for (int j = 0; j < i && p.owns_act; ++j) {
      const Plan& q = plans[j];
      if (q.owns_act && q.x == p.x && q.n == p.n && q.act_type == p.act_type && q.n_tokens == p.n_tokens &&
          q.k.wide.side == p.k.wide.side) {
        p.owns_act = false;
        p.act_offset = q.act_offset;
        p.side_offset = q.side_offset;
      }
    }
    if (!p.owns_act) continue;
    // Each part 64-byte aligned.
    p.act_offset = bytes;
    bytes += (p.n_tokens * p.act_stride + 63) / 64 * 64;
    p.side_offset = bytes;
    bytes += (p.n_tokens * p.side_stride * 4 + 63) / 64 * 64;
    rows_to_quantize += p.n_tokens;
  }
  if (rows_to_quantize == 0) return;
  COHORT_CHECK(scratch != nullptr);
  if (static_cast<int64_t>(scratch->size()) < bytes + 64) scratch->resize(static_cast<size_t>(bytes + 64));
  uint8_t* base = scratch->data() + (64 - reinterpret_cast<uintptr_t>(scratch->data()) % 64) % 64;
  for (int i = 0; i < count; ++i) {
    Plan& p = plans[i];
    if (p.act_type == DType::kF32) continue;
    p.act = base + p.act_offset;
    p.side = reinterpret_cast<const float*>(base + p.side_offset);
  }
  // Rows [0, rows_to_quantize) over the owning plans, in plan order.
  RunParallel(rows_to_quantize > 1 ? pool : nullptr, rows_to_quantize, [&](int64_t begin, int64_t end) {
    int64_t first = 0;
    for (int i = 0; i < count && first < end; ++i) {
      const Plan& p = plans[i];
      if (!p.owns_act) continue;
      for (int64_t t = std::max(begin, first) - first; t < std::min(end - first, p.n_tokens); ++t) {
        uint8_t* q = const_cast<uint8_t*>(p.act) + t * p.act_stride;
        QuantizeRow(p.act_type, p.x + t * p.n, q, p.n);
        if (p.k.wide.side != nullptr) p.k.wide.side(q, p.n, const_cast<float*>(p.side) + t * p.side_stride);
      }
      first += p.n_tokens;
    }
  });
}

// Rows [r0, r1) of plan p for tokens [t0, t1) by tiles, else by vec-dots.
void RunRows(const Plan& p, int64_t r0, int64_t r1, int64_t t0, int64_t t1) {
  const Kernels& k = p.k;
  if (k.tile != nullptr) {
    for (int64_t t = t0; t < t1; t += kTileTokens) {
      const int tokens = static_cast<int>(std::min<int64_t>(kTileTokens, t1 - t));
      const TileFn f = t < p.n_grouped ? k.tile_grouped : k.tile;
      f(p.w_rows + r0 * p.row_bytes, p.row_bytes, static_cast<int>(r1 - r0), p.act + t * p.act_stride,
        p.act_stride, tokens, p.n, p.y + t * p.y_stride + r0, p.y_stride);
    }
    return;
  }
  for (int64_t t = t0; t < t1; ++t) {
    const uint8_t* a = p.act + t * p.act_stride;
    float* out = p.y + t * p.y_stride;
    const VecDotFn f = t < p.n_grouped ? k.dot_grouped : k.dot;
    for (int64_t r = r0; r < r1; ++r) out[r] = f(p.w_rows + r * p.row_bytes, a, p.n);
  }
}

// The 16 rows from r0 for tokens [t0, t1), all grouped: decoded into this thread's panel once,
// then every token against it.
void RunPanel(const Plan& p, int64_t r0, int64_t t0, int64_t t1) {
#if defined(__x86_64__) || defined(__i386__)
  thread_local std::vector<uint8_t> storage;
  const int64_t bytes = IqPanelBytes(p.n);
  if (static_cast<int64_t>(storage.size()) < bytes + 64) storage.resize(static_cast<size_t>(bytes + 64));
  uint8_t* panel = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  if (!HasAvx512(p.k.panel_level)) {
    // AVX2, AVX-VNNI: no packed rows of these types (CanPackRows), the portable decode.
    DecodeIqPanelPortable(p.k.panel_decode, p.k.panel_block_bytes, p.w_rows + r0 * p.row_bytes, p.row_bytes, p.n,
                          panel);
    for (int64_t t = t0; t < t1; t += kIqPanelTokens) {
      const int tokens = static_cast<int>(std::min<int64_t>(kIqPanelTokens, t1 - t));
      avx2::IqPanelDot(panel, p.act + t * p.act_stride, p.act_stride, tokens, p.n, p.y + t * p.y_stride + r0,
                       p.y_stride, HasAvxVnni(p.k.panel_level));
    }
    return;
  }
  if (p.packed != nullptr) {
    // Packed rows (their stored copy may be released: OwnedSlices::Pack); IQ4_XS is the one
    // panel type PackRows packs.
    COHORT_CHECK(p.k.panel_type == DType::kIQ4_XS);
    avx512::DecodeIq4XsPackedPanel(p.packed + r0 * p.packed_row_bytes, p.n, panel);
  } else {
    avx512::DecodeIqPanel(p.k.panel_decode, p.k.panel_block_bytes, p.w_rows + r0 * p.row_bytes, p.row_bytes, p.n,
                          panel);
  }
  for (int64_t t = t0; t < t1; t += kIqPanelTokens) {
    const int tokens = static_cast<int>(std::min<int64_t>(kIqPanelTokens, t1 - t));
    avx512::IqPanelDot(panel, p.act + t * p.act_stride, p.act_stride, tokens, p.n, p.y + t * p.y_stride + r0,
                       p.y_stride);
  }
#else
  RunRows(p, r0, r0 + kWideRows, t0, t1);
#endif
}

// Unit `unit` of plan p (a tile of rows) for tokens [t0, t1).
void RunUnit(const Plan& p, int64_t unit, int64_t t0, int64_t t1) {
  const Kernels& k = p.k;
  if (unit < p.n_wide && k.panel_decode != nullptr) {
    // A token tile lies wholly on one side of n_grouped for these types (all or none).
    const int64_t r0 = unit * kWideRows;
    if (t1 <= p.n_grouped) {
      RunPanel(p, r0, t0, t1);
      return;
    }
    if (k.wide.fn == nullptr) {
      RunRows(p, r0, r0 + kWideRows, t0, t1);
      return;
    }
  }
  if (unit < p.n_wide) {
    const int64_t r0 = unit * kWideRows;
    // A call stays on one side of n_grouped, unless both sides take the same kernel (most
    // types): a batch of 6 is then one pass over the weights, not a 4-token and a 2-token one.
    // Packed rows: the group's packed blocks, and the stride between groups.
    const bool packed = p.packed != nullptr;
    const WideTile& plain = packed ? k.wide_packed : k.wide;
    const WideTile& grouped = packed ? k.wide_packed_grouped : k.wide_grouped;
    const uint8_t* w = packed ? p.packed + r0 * p.packed_row_bytes : p.w_rows + r0 * p.row_bytes;
    const int64_t w_stride = packed ? kWideRows * p.packed_row_bytes : p.row_bytes;
    const bool split = grouped.fn != plain.fn;
    for (int64_t t = t0; t < t1;) {
      const int64_t stop = split && t < p.n_grouped ? std::min(t1, p.n_grouped) : t1;
      const int tokens = static_cast<int>(std::min<int64_t>(plain.max_tokens, stop - t));
      const WideTile& f = t < p.n_grouped ? grouped : plain;
      f.fn(w, w_stride, p.act + t * p.act_stride, p.act_stride, p.side + t * p.side_stride, p.side_stride,
           tokens, p.n, p.y + t * p.y_stride + r0, p.y_stride);
      t += tokens;
    }
    return;
  }
  const int64_t r0 = p.n_wide * kWideRows + (unit - p.n_wide) * kRowTile;
  RunRows(p, r0, std::min(r0 + kRowTile, p.n_rows), t0, t1);
}

// All plans' units, split over the pool (threads never share an output element). Token
// tiles outermost, so a token tile's activations stay in cache while the rows pass.
void RunPlans(const Plan* plans, int count, ThreadPool* pool) {
  int64_t units = 0, max_tokens = 0;
  for (int i = 0; i < count; ++i) {
    units += plans[i].n_units;
    max_tokens = std::max(max_tokens, plans[i].n_tokens);
  }
  RunParallel(pool, units, [&](int64_t unit_begin, int64_t unit_end) {
    for (int64_t t0 = 0; t0 < max_tokens; t0 += kTokenTile) {
      int i = 0;
      for (int64_t unit = unit_begin; unit < unit_end; ++unit) {
        while (unit >= plans[i].unit_begin + plans[i].n_units) ++i;
        const Plan& p = plans[i];
        if (t0 < p.n_tokens) RunUnit(p, unit - p.unit_begin, t0, std::min(t0 + kTokenTile, p.n_tokens));
      }
    }
  });
}

// batch_orders: the batch shape picks the summation order per token (GroupedTokens); false
// keeps every token in the single-token order.
void MatMulImpl(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int64_t n_tokens, float* y, int64_t y_stride, ThreadPool* pool,
                std::vector<uint8_t>* scratch, bool batch_orders) {
  Plan plan = MakePlan(w, row_begin, row_end, x, n_tokens, y, y_stride, batch_orders);
  PrepareActivations(&plan, 1, pool, scratch);
  RunPlans(&plan, 1, pool);
}

void MatMulProducts(std::span<const MatMulProduct> products, ThreadPool* pool,
                    std::vector<uint8_t>* scratch, bool batch_orders) {
  if (products.empty()) return;
  COHORT_CHECK_LE(products.size(), static_cast<size_t>(kMaxMatMulProducts));
  std::array<Plan, kMaxMatMulProducts> plans;
  const int count = static_cast<int>(products.size());
  for (int i = 0; i < count; ++i) {
    const MatMulProduct& e = products[i];
    plans[i] = MakePlan(e.w, 0, e.w.n_rows(), e.x, e.n_tokens, e.y, e.w.n_rows(), batch_orders);
  }
  PrepareActivations(plans.data(), count, pool, scratch);
  RunPlans(plans.data(), count, pool);
}

}  // namespace

void MatMulExpertsBatch(std::span<const MatMulProduct> products, ThreadPool* pool,
                        std::vector<uint8_t>* scratch) {
  MatMulProducts(products, pool, scratch, /*batch_orders=*/false);
}

void MatMulBatch(std::span<const MatMulProduct> products, ThreadPool* pool,
                 std::vector<uint8_t>* scratch) {
  MatMulProducts(products, pool, scratch, /*batch_orders=*/true);
}

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
