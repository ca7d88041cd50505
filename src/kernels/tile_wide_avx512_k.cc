// AVX-512 (VNNI) wide tile kernels (tile_wide.h) for Q4_K and Q6_K against Q8_K activations.
// Q4_K, 16 rows as the lanes of a zmm register, reproduces VecDotQ4_KRepacked
// (vec_dot_avx2_k.cc) per lane: the same exact integer sums (scaled quants; mins times the
// activation's sums of 16), then acc = fma(sum, d_w * d_a, acc) and acc_min = fma(min_sum,
// dmin_w * d_a, acc_min) once per super-block (GEMV order) or once per 64 elements (kPerPair,
// the repacked GEMM's order). Q6_K keeps VecDotQ6_K's 8 lanes per row (see WideQ6KPass).
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;
using x86::LoadInt;

// Q8_K side data: x86::SideQ8_K (tile_wide_x86.h), shared with the other ISA's K kernels.
using x86::kQ8KSideWords;
using x86::SideQ8_K;

// Lanes of 4 bytes b0..b3 -> the int16 pairs (b0, b1) (half 0) or (b2, b3) (half 1).
template <int kHalf>
COHORT_TARGET_AVX512 inline __m512i BytePairs(__m512i v) {
  const __m512i byte = _mm512_set1_epi32(0xff);
  if constexpr (kHalf == 0) {
    return _mm512_or_si512(_mm512_and_si512(v, byte), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(v, 8), byte), 16));
  } else {
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v, 16), byte), _mm512_slli_epi32(_mm512_srli_epi32(v, 24), 16));
  }
}

// The 16 rows' Q4_K super-blocks as stored, their 16-byte segments transposed in registers.
class Q4KRows {
 public:
  COHORT_TARGET_AVX512 Q4KRows(const uint8_t* w, int64_t w_stride) : rows_(w, w_stride) {}
  // q[j] lane r = the 32-bit word at byte 16 * segment + 4j of row r's super-block i.
  COHORT_TARGET_AVX512 void Segment(int64_t i, int segment, __m512i q[4]) const {
    rows_.Load16x16(i * static_cast<int64_t>(sizeof(BlockQ4_K)) + 16 * segment, q);
  }
  template <int T>
  void Prefetch(int64_t i, int part, int parts) const {
    rows_.PrefetchNextPart(i, sizeof(BlockQ4_K), part, parts);
  }

 private:
  x86::WideRows rows_;
};

// The same words packed (PackRows, pack.h): super-block i of the group is its 9 segments,
// each the 4 vectors q[j] of Q4KRows::Segment, 64 bytes apart.
class Q4KPacked {
 public:
  static constexpr int64_t kBlockBytes = 16 * static_cast<int64_t>(sizeof(BlockQ4_K));
  Q4KPacked(const uint8_t* w, int64_t group_stride) : group_(w, group_stride) {}
  COHORT_TARGET_AVX512 void Segment(int64_t i, int segment, __m512i q[4]) const {
    const uint8_t* b = group_.Block(i) + 256 * segment;
    for (int j = 0; j < 4; ++j) q[j] = x86::LoadToRegister512(b + 64 * j);
  }
  // The next group with more than 1 token (x86::kPrefetchPacked); at 1 token the stream's
  // next page and lines (PrefetchPageAhead, PrefetchLinesAhead).
  template <int T>
  void Prefetch(int64_t i, int part, int parts) const {
    if constexpr (x86::kPrefetchPacked(T)) group_.PrefetchNextPart(i, part, parts);
    if constexpr (T == 1) {
      if (part == 0) x86::PrefetchPageAhead(group_.Block(i), kBlockBytes);
      x86::PrefetchLinesAhead(group_.Block(i), kBlockBytes, part, parts);
    }
  }

 private:
  x86::PackedGroup<kBlockBytes> group_;
};

// A super-block's per-row constants, lane r for row r.
struct Q4KHead {
  __m512 d, dmin;
  __m512i sc[8];    // the 8 six-bit scales as int32
  __m512i mins[4];  // (min 2k, min 2k + 1) as int16 pairs
};

template <class Source>
COHORT_TARGET_AVX512 inline void LoadHead(const Source& rows, int64_t i, Q4KHead* h) {
  __m512i head[4];  // words 0..3 of each row's block: d | dmin << 16, then the 12 scale bytes
  rows.Segment(i, 0, head);
  h->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0]));
  h->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head[0], 16)));
  const __m512i low6 = _mm512_set1_epi8(0x3f), low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  const __m512i u0 = head[1], u1 = head[2], u2 = head[3];
  // As UnpackScalesK4 (tile_avx512_k.cc), 16 rows at once.
  const __m512i sc_lo = _mm512_and_si512(u0, low6);
  const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u2, low4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), low2), 4));
  const __m512i mn_lo = _mm512_and_si512(u1, low6);
  const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), low4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), low2), 4));
  const __m512i byte = _mm512_set1_epi32(0xff);
  h->sc[0] = _mm512_and_si512(sc_lo, byte);
  h->sc[1] = _mm512_and_si512(_mm512_srli_epi32(sc_lo, 8), byte);
  h->sc[2] = _mm512_and_si512(_mm512_srli_epi32(sc_lo, 16), byte);
  h->sc[3] = _mm512_srli_epi32(sc_lo, 24);
  h->sc[4] = _mm512_and_si512(sc_hi, byte);
  h->sc[5] = _mm512_and_si512(_mm512_srli_epi32(sc_hi, 8), byte);
  h->sc[6] = _mm512_and_si512(_mm512_srli_epi32(sc_hi, 16), byte);
  h->sc[7] = _mm512_srli_epi32(sc_hi, 24);
  h->mins[0] = BytePairs<0>(mn_lo);
  h->mins[1] = BytePairs<1>(mn_lo);
  h->mins[2] = BytePairs<0>(mn_hi);
  h->mins[3] = BytePairs<1>(mn_hi);
}

template <class Source, bool kPerPair, int T>
COHORT_TARGET_AVX512 void WideQ4K(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                  int64_t act_stride, const float* side, int64_t side_stride,
                                  int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK_K;
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  const Source rows(w, w_stride);
  __m512 acc[T], acc_min[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    Q4KHead h;
    LoadHead(rows, i, &h);
    const BlockQ8_K* y[T];
    const int32_t* pairs[T];
    for (int t = 0; t < T; ++t) {
      y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
      pairs[t] = reinterpret_cast<const int32_t*>(side + t * side_stride) + i * kQ8KSideWords;
    }
    __m512i sum[T];
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high)
      rows.template Prefetch<T>(i, c, 4);
      __m512i sub_lo[T], sub_hi[T];
      for (int t = 0; t < T; ++t) sub_lo[t] = sub_hi[t] = _mm512_setzero_si512();
      for (int half = 0; half < 2; ++half) {
        __m512i q[4];  // q[j] lane r: row r's qs bytes 32c + 16 half + 4j ..
        rows.Segment(i, 1 + 2 * c + half, q);
        for (int j = 0; j < 4; ++j) {
          const __m512i lo = _mm512_and_si512(q[j], low_mask);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q[j], 4), low_mask);
          const int e = 64 * c + 16 * half + 4 * j;
          for (int t = 0; t < T; ++t) {
            sub_lo[t] = _mm512_dpbusd_epi32(sub_lo[t], lo, _mm512_set1_epi32(LoadInt(y[t]->qs + e)));
            sub_hi[t] = _mm512_dpbusd_epi32(sub_hi[t], hi, _mm512_set1_epi32(LoadInt(y[t]->qs + e + 32)));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(sub_lo[t], h.sc[2 * c]),
                                           _mm512_mullo_epi32(sub_hi[t], h.sc[2 * c + 1]));
        if constexpr (kPerPair) {
          const __m512 yd = _mm512_set1_ps(y[t]->d);
          const __m512i pm = _mm512_dpwssd_epi32(_mm512_setzero_si512(), h.mins[c], _mm512_set1_epi32(pairs[t][c]));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(h.d, yd), acc[t]);
          acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pm), _mm512_mul_ps(h.dmin, yd), acc_min[t]);
        } else {
          sum[t] = _mm512_add_epi32(sum[t], s);
        }
      }
    }
    if constexpr (!kPerPair) {
      for (int t = 0; t < T; ++t) {
        __m512i m = _mm512_setzero_si512();
        for (int k = 0; k < kQ8KSideWords; ++k) m = _mm512_dpwssd_epi32(m, h.mins[k], _mm512_set1_epi32(pairs[t][k]));
        const __m512 yd = _mm512_set1_ps(y[t]->d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), _mm512_mul_ps(h.d, yd), acc[t]);
        acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(h.dmin, yd), acc_min[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, _mm512_sub_ps(acc[t], acc_min[t]));
}

template <class Source, bool kPerPair>
struct Q4KKernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ4K<Source, kPerPair, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

// Tokens per call: 4 keeps the per-token integer sums in registers.
constexpr int kQ4KTokens = 4;

// Q6_K: VecDotQ6_K (vec_dot_avx2_k.cc) keeps 8 int32 / float lanes per row (lane m: bytes
// 4m..4m+3 of every 32-element group), so its rows are not split into 16 lanes; instead one
// zmm holds two groups of one row (64 contiguous ql bytes, the activation's 64 matching
// bytes as one plain load), lane m and lane m + 8 both being the vec-dot's lane m. Their
// integer sums meet (exactly) once per super-block, before the vec-dot's one FMA per
// super-block into 8 float lanes; the end is its HorizontalSum. Compared with the 4-row
// tile, each zmm op does two groups' work, no insert builds the operands, and GFNI's
// gf2p8affine moves each group's two high bits into place in one op (was a shift and an and).
struct Q6KConsts {
  __m512i low_mask, high01, high23, high_nibble;  // GF(2) bit matrices (gf2p8affine)
  __m512i scale_index[4];  // int16 lanes 8b..8b+7 take scale 4q + b, q = 0..3
};

COHORT_TARGET_AVX512_GFNI inline Q6KConsts MakeQ6KConsts() {
  Q6KConsts c;
  c.low_mask = _mm512_set1_epi8(0x0f);
  // Matrix byte 7 - i selects the input bits that make output bit i, so one gf2p8affine
  // moves and isolates bits within every byte. Group 0 (1) of a 64-element half takes qh
  // bits 0, 1 (2, 3) to bits 4, 5, group 2 (3) bits 4, 5 (6, 7): the groups' two 32-byte
  // halves take different matrices (qwords 0..3, 4..7). The high nibble of ql to bits 0..3.
  c.high01 = _mm512_mask_set1_epi64(_mm512_set1_epi64(0x01020000), 0xf0, 0x04080000);
  c.high23 = _mm512_mask_set1_epi64(_mm512_set1_epi64(0x10200000), 0xf0, 0x40800000);
  c.high_nibble = _mm512_set1_epi64(0x1020408000000000);
  for (int q = 0; q < 4; ++q) {
    c.scale_index[q] = _mm512_setzero_si512();
    for (int b = 0; b < 4; ++b) {
      c.scale_index[q] = _mm512_mask_set1_epi16(c.scale_index[q], 0xffu << (8 * b), static_cast<int16_t>(4 * q + b));
    }
  }
  return c;
}

// Rows [r0, r0 + R) of the tile, all n elements, T tokens. kPacked: w is a group packed by
// PackRows (Q6KPackedLayout), w_stride the bytes from one group to the next.
template <int R, int T, bool kPacked>
COHORT_TARGET_AVX512_GFNI void WideQ6KPass(const uint8_t* w, int64_t w_stride, int r0, const uint8_t* act,
                                      int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
  const Q6KPackedLayout layout{n / kQK_K};
  const Q6KConsts c = MakeQ6KConsts();
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ6_K));
    const BlockQ8_K* y[T];
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = kPacked ? w + layout.Block(r0 + r, i) : w + (r0 + r) * w_stride + off;
      // Packed, a single-token pass reads its stripe as one stream (PrefetchPageAhead);
      // otherwise the same bytes of the next tile (the caller's next call) are prefetched:
      // 8 rows ahead, the next pass's rows, is too short a distance to cover DRAM latency.
      if (kPacked && T == 1) {
        x86::PrefetchPageAhead(row, sizeof(BlockQ6_K));
      } else {
        const uint8_t* next = kPacked ? row + w_stride : row + kWideRows * w_stride;
        for (int line = 0; line < 4; ++line) _mm_prefetch(reinterpret_cast<const char*>(next + 64 * line), _MM_HINT_T1);
      }
      const auto* x = reinterpret_cast<const BlockQ6_K*>(row);
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
      const __m512i scales = _mm512_castsi256_si512(scales16);
      // -32 * scale fits int16, and madd by it is exactly -32 * madd(bsums, scales): the
      // shift and negation leave the per-token work.
      const __m256i neg32_scales = _mm256_mullo_epi16(scales16, _mm256_set1_epi16(-32));
      __m512i sum[T];  // lanes 0..7: the -32 offset's term (see VecDotQ6_K), lanes 8..15: 0
      for (int t = 0; t < T; ++t) {
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->bsums));
        sum[t] = _mm512_zextsi256_si512(_mm256_madd_epi16(bsums, neg32_scales));
      }
      for (int h = 0; h < 2; ++h) {  // 128 elements: groups 0, 1 (low nibbles), 2, 3 (high)
        const __m512i ql = _mm512_loadu_si512(x->ql + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h)));
        const __m512i high01 = _mm512_gf2p8affine_epi64_epi8(qh, c.high01, 0);
        const __m512i high23 = _mm512_gf2p8affine_epi64_epi8(qh, c.high23, 0);
        const __m512i u01 = _mm512_ternarylogic_epi32(ql, c.low_mask, high01, 0xea);  // (a & b) | c
        const __m512i u23 = _mm512_or_si512(_mm512_gf2p8affine_epi64_epi8(ql, c.high_nibble, 0), high23);
        const __m512i s01 = _mm512_permutexvar_epi16(c.scale_index[2 * h], scales);
        const __m512i s23 = _mm512_permutexvar_epi16(c.scale_index[2 * h + 1], scales);
        for (int t = 0; t < T; ++t) {
          const int8_t* yq = y[t]->qs + 128 * h;
          sum[t] = _mm512_dpwssd_epi32(sum[t], _mm512_maddubs_epi16(u01, _mm512_loadu_si512(yq)), s01);
          sum[t] = _mm512_dpwssd_epi32(sum[t], _mm512_maddubs_epi16(u23, _mm512_loadu_si512(yq + 64)), s23);
        }
      }
      const float d = HalfToFloat(x->d);
      for (int t = 0; t < T; ++t) {
        const __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(sum[t]), _mm512_extracti64x4_epi64(sum[t], 1));
        acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t]->d * d), _mm256_cvtepi32_ps(s8), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r0 + r] = x86::HorizontalSum(acc[r][t]);
  }
}

template <bool kPacked>
struct Q6KKernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float*, int64_t, int64_t n, float* out, int64_t out_stride) {
      // R * T float accumulators stay in registers; a pass never spans two packed stripes.
      constexpr int kRows = T <= 2 ? 8 : T <= 4 ? 4 : 2;
      static_assert(kQ6KStripeRows % kRows == 0);
      for (int r0 = 0; r0 < kWideRows; r0 += kRows) {
        WideQ6KPass<kRows, T, kPacked>(w, w_stride, r0, act, act_stride, n, out, out_stride);
      }
    }
  };
};

constexpr int kQ6KTokens = 4;

}  // namespace

WideTile GetWideTileK(DType weight, bool grouped) {
  if (weight == DType::kQ6_K) {
    // GFNI is not part of the AVX-512 level (Cascade Lake has VNNI without it): without it
    // the 4-row tile, with the same results, does Q6_K.
    if (!__builtin_cpu_supports("gfni")) return {};
    return {x86::WideRun<Q6KKernel<false>::Shape, kQ6KTokens>, nullptr, 0, kQ6KTokens};
  }
  if (weight != DType::kQ4_K) return {};
  const WideTileFn fn = grouped ? x86::WideRun<Q4KKernel<Q4KRows, true>::Shape, kQ4KTokens>
                                : x86::WideRun<Q4KKernel<Q4KRows, false>::Shape, kQ4KTokens>;
  return {fn, SideQ8_K, kQ8KSideWords, kQ4KTokens};
}

WideTile GetWideTilePackedK(DType weight, bool grouped) {
  if (weight == DType::kQ6_K) {
    if (!__builtin_cpu_supports("gfni")) return {};
    return {x86::WideRun<Q6KKernel<true>::Shape, kQ6KTokens>, nullptr, 0, kQ6KTokens};
  }
  if (weight != DType::kQ4_K) return {};
  const WideTileFn fn = grouped ? x86::WideRun<Q4KKernel<Q4KPacked, true>::Shape, kQ4KTokens>
                                : x86::WideRun<Q4KKernel<Q4KPacked, false>::Shape, kQ4KTokens>;
  return {fn, SideQ8_K, kQ8KSideWords, kQ4KTokens};
}

void PackSegments16(const uint8_t* src, int64_t row_bytes, int64_t n_rows, int64_t block_bytes, uint8_t* dst) {
  const int64_t nb = row_bytes / block_bytes;
  for (int64_t g = 0; g < n_rows / 16; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* b = dst + g * 16 * row_bytes + i * 16 * block_bytes;
      for (int64_t seg = 0; seg < block_bytes / 16; ++seg) {
        for (int r = 0; r < 16; ++r) {
          const uint8_t* x = src + (16 * g + r) * row_bytes + i * block_bytes + 16 * seg;
          for (int j = 0; j < 4; ++j) std::memcpy(b + 256 * seg + 64 * j + 4 * r, x + 4 * j, 4);
        }
      }
    }
  }
}

#else

WideTile GetWideTileK(DType, bool) { return {}; }
WideTile GetWideTilePackedK(DType, bool) { return {}; }
void PackSegments16(const uint8_t*, int64_t, int64_t, int64_t, uint8_t*) {}

#endif

}  // namespace cohort::kernels::avx512
