// AVX-512 (VNNI) wide tile kernels (tile_wide.h) for Q4_0, MXFP4 and Q8_0 against Q8_0 activations.
// Q4_0, 16 rows as the 16 lanes of a zmm register, reproduces VecDotQ4_0 (vec_dot_avx512.cc)
// per lane: per block the exact integer sum of (q - 8) * y, then acc = fma(sum, d_w * d_a, acc).
#include <algorithm>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;

// Side data of a Q8_0 activation row: per block, its scale as a float and -8 * sum(qs) (the
// term that turns dpbusd's unsigned nibbles q into q - 8), both shared by all rows.
struct Q8_0Side {
  float d;
  int32_t neg8_sum;
};
static_assert(sizeof(Q8_0Side) == 2 * sizeof(float));

void SideQ8_0(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  auto* out = reinterpret_cast<Q8_0Side*>(side);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[i].qs[j];
    out[i].d = HalfToFloat(y[i].d);
    out[i].neg8_sum = -8 * sum;
  }
}

// Side data of a Q8_0 activation row for Q8_0 weights: per block its scale as a float, then
// the 8 int32 lanes -128 * (sum of bytes 4m..4m+3), m = 0..7: the seed that turns dpbusd's
// unsigned q + 128 back into the signed product (see WideQ8_0Quad), made once per row rather
// than by a dpbusd per (token, block) in the kernel's busiest units.
constexpr int kQ8_0SeedWords = 9;

void SideQ8_0Seeds(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float* out = side + i * kQ8_0SeedWords;
    out[0] = HalfToFloat(y[i].d);
    for (int m = 0; m < 8; ++m) {
      const int32_t seed = -128 * (y[i].qs[4 * m] + y[i].qs[4 * m + 1] + y[i].qs[4 * m + 2] + y[i].qs[4 * m + 3]);
      std::memcpy(out + 1 + m, &seed, sizeof seed);
    }
  }
}

// The 16 rows' Q4_0 blocks as stored: each row's blocks in turn, transposed in registers.
class Q4_0Rows {
 public:
  COHORT_TARGET_AVX512 Q4_0Rows(const uint8_t* w, int64_t w_stride) : rows_(w, w_stride) {}
  // q[c] lane r: bytes 4c..4c+3 of block i's qs in row r; returns the rows' scales d.
  // The nibbles as dpbusd's unsigned bytes, and the seed that makes its sum the signed dot,
  // from -8 * (the activation block's sum): Q4_0's q - 8 as q with the seed.
  COHORT_TARGET_AVX512 static __m512i Map(__m512i nibbles) { return nibbles; }
  static int32_t Seed(int32_t neg8_sum) { return neg8_sum; }
  template <int T>
  COHORT_TARGET_AVX512 __m512 Block(int64_t i, __m512i q[4]) const {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ4_0));
    rows_.PrefetchNext(i, sizeof(BlockQ4_0));
    rows_.Load16x16(off + 2, q);
    return rows_.Halves(off);
  }

 private:
  x86::WideRows rows_;
};

// The 16 rows' Q4_0 blocks packed (PackRows, pack.h): block i of the group is 16 scales, then
// the words q[c] of all 16 rows, c = 0..3, 64 bytes each: plain loads, no transpose.
class Q4_0Packed {
 public:
  static constexpr int64_t kBlockBytes = 16 * static_cast<int64_t>(sizeof(BlockQ4_0));
  // w: the group's first block; group_stride: bytes to the next group.
  Q4_0Packed(const uint8_t* w, int64_t group_stride) : group_(w, group_stride) {}
  COHORT_TARGET_AVX512 static __m512i Map(__m512i nibbles) { return nibbles; }
  static int32_t Seed(int32_t neg8_sum) { return neg8_sum; }
  template <int T>
  COHORT_TARGET_AVX512 __m512 Block(int64_t i, __m512i q[4]) const {
    if constexpr (x86::kPrefetchPacked(T)) group_.PrefetchNextPart(i, 0, 1);
    if constexpr (T == 1) x86::PrefetchPageAhead(group_.Block(i), kBlockBytes);
    const uint8_t* b = group_.Block(i);
    for (int c = 0; c < 4; ++c) q[c] = _mm512_loadu_si512(b + 32 + 64 * c);
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  }

 private:
  x86::PackedGroup<kBlockBytes> group_;
};

// MXFP4's 16 rows as stored (blocks of an E8M0 exponent and Q4_0's nibble layout): the nibbles
// become their doubled e2m1 values + 16 by one byte shuffle (so the seed is -16 * the sum), the
// exponents the half scales Mxfp4HalfScale, in lanes. The vec-dot's order (vec_dot_avx2_mxfp4.cc:
// per block the exact integer sum, then acc = fma(sum, scale * d_a, acc)) is Q4_0's.
class Mxfp4Rows {
 public:
  COHORT_TARGET_AVX512 Mxfp4Rows(const uint8_t* w, int64_t w_stride) : rows_(w, w_stride) {}
  COHORT_TARGET_AVX512 static __m512i Map(__m512i nibbles) {
    const __m512i table = _mm512_setr4_epi32(0x13121110, 0x1c181614, 0x0d0e0f10, 0x04080a0c);
    return _mm512_shuffle_epi8(table, nibbles);
  }
  static int32_t Seed(int32_t neg8_sum) { return 2 * neg8_sum; }
  template <int T>
  COHORT_TARGET_AVX512 __m512 Block(int64_t i, __m512i q[4]) const {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockMxfp4));
    rows_.PrefetchNext(i, sizeof(BlockMxfp4));
    rows_.Load16x16(off + 1, q);
    const __m512i e = _mm512_and_si512(rows_.Words(off), _mm512_set1_epi32(0xff));
    // 2^(e - 128): exponent field e - 1, or for e = 0 and 1 the subnormals 2^-128, 2^-127.
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
  }

 private:
  x86::WideRows rows_;
};

template <class Source, int T>
COHORT_TARGET_AVX512 void WideQ4_0(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                   int64_t act_stride, const float* side, int64_t side_stride,
                                   int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK;
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  const Source rows(w, w_stride);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    // q[c] lane r: bytes 4c..4c+3 of row r's qs (low nibbles: elements 4c.., high: 16+4c..).
    __m512i q[4];
    const __m512 dw = rows.template Block<T>(i, q);
    __m512i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      lo[c] = Source::Map(_mm512_and_si512(q[c], low_mask));
      hi[c] = Source::Map(_mm512_and_si512(_mm512_srli_epi16(q[c], 4), low_mask));
    }
    for (int t = 0; t < T; ++t) {
      const auto& y = reinterpret_cast<const BlockQ8_0*>(act + t * act_stride)[i];
      const auto& s = reinterpret_cast<const Q8_0Side*>(side + t * side_stride)[i];
      const int32_t* y32 = reinterpret_cast<const int32_t*>(y.qs);
      // The integer sum is exact in any order. With many tokens one chain per token saves
      // the second chain's zeroing and the final add; alone, a token needs more chains to
      // hide dpbusd's latency.
      __m512i sum;
      if constexpr (T >= 8) {
        sum = _mm512_set1_epi32(Source::Seed(s.neg8_sum));
        for (int c = 0; c < 4; ++c) {
          sum = _mm512_dpbusd_epi32(sum, lo[c], _mm512_set1_epi32(x86::LoadInt(y32 + c)));
          sum = _mm512_dpbusd_epi32(sum, hi[c], _mm512_set1_epi32(x86::LoadInt(y32 + 4 + c)));
        }
      } else {
        __m512i sum_lo = _mm512_set1_epi32(Source::Seed(s.neg8_sum));
        __m512i sum_hi = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          sum_lo = _mm512_dpbusd_epi32(sum_lo, lo[c], _mm512_set1_epi32(x86::LoadInt(y32 + c)));
          sum_hi = _mm512_dpbusd_epi32(sum_hi, hi[c], _mm512_set1_epi32(x86::LoadInt(y32 + 4 + c)));
        }
        sum = _mm512_add_epi32(sum_lo, sum_hi);
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(s.d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

// Q8_0 with one row per ymm register: rows [4g, 4g + 4) of the 16 for T tokens. Each ymm lane
// is one of the vec-dot's 8 int32 lanes (vec_dot_avx512.cc's DotQ8_0Blocks): the signed
// weights go into dpbusd as q + 128 (unsigned), and -128 * (the activation's sums of 4, from
// SideQ8_0Seeds) seeds each sum, so every int32 lane is the vec-dot's; then, as there, acc =
// fma(d_w * d_a, float(sum), acc) per lane and block, and the 8 lanes are summed at the end.
// d_w * d_a is made per chunk of blocks in a pass of its own, so that the FMAs take it from
// memory as a broadcast operand (load units) rather than from registers through shuffles:
// the loop is left with a dpbusd, a conversion and an FMA per (row, token, block), the first
// and last sharing the two multiply units, and little else for the front end to issue.
// (Two rows per zmm, as before, needed a permute per (row pair, token, block) to spread the
// scales: 25% slower.)
// WideQ8_0Quad reads the rows as stored, w_stride apart, each its own stream through memory
// (four at once need a software prefetch of the next tile, else the hardware prefetcher falls
// behind and the kernel runs at half speed); WideQ8_0Packed below reads a packed copy.
class Q8_0QuadRows {
 public:
  Q8_0QuadRows(const uint8_t* w, int64_t w_stride, int g, int64_t nb)
      : rows_(w + 4 * g * w_stride), stride_(w_stride),
        next_(w + 16 * w_stride + g * nb * 4 * static_cast<int64_t>(sizeof(BlockQ8_0))) {}
  const uint8_t* Block(int r, int64_t i) const {
    return rows_ + r * stride_ + i * static_cast<int64_t>(sizeof(BlockQ8_0));
  }
  // The next tile's lines, as many per block as the quad reads.
  template <int T>
  void Prefetch(int64_t i) const {
    const int64_t off = 4 * i * static_cast<int64_t>(sizeof(BlockQ8_0));
    for (int64_t b = 0; b < 4 * static_cast<int64_t>(sizeof(BlockQ8_0)); b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next_ + off + b), _MM_HINT_T1);
    }
  }

 private:
  const uint8_t* rows_;
  int64_t stride_;
  const uint8_t* next_;
};

template <int T>
COHORT_TARGET_AVX512 void WideQ8_0Quad(const uint8_t* w, int64_t w_stride, int g, const uint8_t* act,
                                       int64_t act_stride, const float* side, int64_t side_stride,
                                       int64_t n, float* out, int64_t out_stride) {
  constexpr int kRows = kQ8_0QuadRows;
  const int64_t nb = n / kQK;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const Q8_0QuadRows rows(w, w_stride, g, nb);
  __m256 acc[kRows][T];
  for (int r = 0; r < kRows; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  constexpr int64_t kChunk = 32;
  alignas(64) float d[kChunk][T][kRows];
  for (int64_t i0 = 0; i0 < nb; i0 += kChunk) {
    const int64_t i1 = std::min(nb, i0 + kChunk);
    for (int64_t i = i0; i < i1; ++i) {
      __m128i halves = _mm_setzero_si128();
      for (int r = 0; r < kRows; ++r) {
        uint16_t h;
        std::memcpy(&h, rows.Block(r, i), 2);
        halves = _mm_insert_epi16(halves, h, r);
      }
      const __m128 dw = _mm_cvtph_ps(halves);
      for (int t = 0; t < T; ++t) {
        _mm_store_ps(d[i - i0][t], _mm_mul_ps(dw, _mm_set1_ps(side[t * side_stride + kQ8_0SeedWords * i])));
      }
    }
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ8_0));
      rows.template Prefetch<T>(i);
      __m256i q[kRows];
      for (int r = 0; r < kRows; ++r) {
        q[r] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows.Block(r, i) + 2)), flip);
      }
      for (int t = 0; t < T; ++t) {
        const __m256i y = x86::LoadToRegister(act + t * act_stride + off + 2);
        const __m256i seed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(side + t * side_stride + kQ8_0SeedWords * i + 1));
        for (int r = 0; r < kRows; ++r) {
          const __m256i sum = _mm256_dpbusd_epi32(seed, q[r], y);
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d[i - i0][t][r]), _mm256_cvtepi32_ps(sum), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + kRows * g + r] = x86::HorizontalSum(acc[r][t]);
  }
}

// The packed group (Q8_0PackedLayout), chunk by chunk, each chunk quad by quad: the same
// steps as WideQ8_0Quad for each row and block in the same order, so the same bits, with the
// quads' accumulators kept in memory between chunks. The quads' scales come first in their
// part of the chunk, so the pass that makes d_w * d_a reads them as a few whole lines.
template <int T>
COHORT_TARGET_AVX512 void WideQ8_0Packed(const uint8_t* w, int64_t group_stride, const uint8_t* act,
                                         int64_t act_stride, const float* side, int64_t side_stride,
                                         int64_t n, float* out, int64_t out_stride) {
  constexpr int kRows = kQ8_0QuadRows;
  constexpr int kQuads = kWideRows / kQ8_0QuadRows;
  const Q8_0PackedLayout layout{n / kQK};
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc_of[kQuads][kRows][T];
  for (int g = 0; g < kQuads; ++g) {
    for (int r = 0; r < kRows; ++r) {
      for (int t = 0; t < T; ++t) acc_of[g][r][t] = _mm256_setzero_ps();
    }
  }
  alignas(64) float d[T][kQ8_0ChunkBlocks][kRows];  // d[t][j][r] = d_w(row r) * d_a(token t)
  for (int64_t c = 0; c * kQ8_0ChunkBlocks < layout.nb; ++c) {
    const int64_t i0 = c * kQ8_0ChunkBlocks;
    const int64_t len = layout.ChunkLen(c);
    for (int g = 0; g < kQuads; ++g) {
      const uint8_t* scales = w + layout.Quad(c, g);
      const uint8_t* quants = w + layout.QuantsOfQuad(c, g);
      if constexpr (x86::kPrefetchPacked(T)) {
        for (int64_t b = 0; b < len * kRows * 2; b += 64) {
          _mm_prefetch(reinterpret_cast<const char*>(scales + group_stride + b), _MM_HINT_T1);
        }
      }
      // Two blocks' 8 scales per conversion; an odd chunk's last block alone.
      int64_t j = 0;
      for (; j + 2 <= len; j += 2) {
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 8 * j)));
        for (int t = 0; t < T; ++t) {
          const float* s = side + t * side_stride + kQ8_0SeedWords * (i0 + j);
          const __m256 da = _mm256_setr_m128(_mm_set1_ps(s[0]), _mm_set1_ps(s[kQ8_0SeedWords]));
          _mm256_store_ps(d[t][j], _mm256_mul_ps(dw, da));
        }
      }
      if (j < len) {
        const __m128 dw = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 8 * j)));
        for (int t = 0; t < T; ++t) {
          _mm_store_ps(d[t][j], _mm_mul_ps(dw, _mm_set1_ps(side[t * side_stride + kQ8_0SeedWords * (i0 + j)])));
        }
      }
      __m256 acc[kRows][T];
      for (int r = 0; r < kRows; ++r) {
        for (int t = 0; t < T; ++t) acc[r][t] = acc_of[g][r][t];
      }
      for (j = 0; j < len; ++j) {
        const uint8_t* q_j = quants + j * kRows * 32;
        if constexpr (T == 1) {
          x86::PrefetchPageAhead(q_j, kRows * 32);
          x86::PrefetchLinesAhead(q_j, kRows * 32, 0, 1);
        }
        if constexpr (x86::kPrefetchPacked(T)) {
          _mm_prefetch(reinterpret_cast<const char*>(q_j + group_stride), _MM_HINT_T1);
          _mm_prefetch(reinterpret_cast<const char*>(q_j + group_stride + 64), _MM_HINT_T1);
        }
        __m256i q[kRows];
        for (int r = 0; r < kRows; ++r) {
          q[r] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q_j + 32 * r)), flip);
        }
        const int64_t i = i0 + j;
        for (int t = 0; t < T; ++t) {
          const __m256i y = x86::LoadToRegister(act + t * act_stride + i * static_cast<int64_t>(sizeof(BlockQ8_0)) + 2);
          const __m256i seed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(side + t * side_stride + kQ8_0SeedWords * i + 1));
          for (int r = 0; r < kRows; ++r) {
            const __m256i sum = _mm256_dpbusd_epi32(seed, q[r], y);
            acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d[t][j][r]), _mm256_cvtepi32_ps(sum), acc[r][t]);
          }
        }
      }
      for (int r = 0; r < kRows; ++r) {
        for (int t = 0; t < T; ++t) acc_of[g][r][t] = acc[r][t];
      }
    }
  }
  for (int g = 0; g < kQuads; ++g) {
    for (int r = 0; r < kRows; ++r) {
      for (int t = 0; t < T; ++t) out[t * out_stride + kRows * g + r] = x86::HorizontalSum(acc_of[g][r][t]);
    }
  }
}

struct Q8_0Kernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      for (int g = 0; g < kWideRows / kQ8_0QuadRows; ++g) {
        WideQ8_0Quad<T>(w, w_stride, g, act, act_stride, side, side_stride, n, out, out_stride);
      }
    }
  };
};

struct Q8_0PackedKernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ8_0Packed<T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

template <class Source>
struct Q4_0Kernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ4_0<Source, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

}  // namespace

WideTile GetWideTile(DType weight, bool grouped) {
  switch (weight) {
    case DType::kQ4_0: return {x86::WideRun<Q4_0Kernel<Q4_0Rows>::Shape, kWideTokens>, SideQ8_0, 16, kWideTokens};
    case DType::kMXFP4: return {x86::WideRun<Q4_0Kernel<Mxfp4Rows>::Shape, kWideTokens>, SideQ8_0, 16, kWideTokens};
    // 4 tokens keep the 4 x 4 accumulators of an 8-row half in registers.
    case DType::kQ8_0: return {x86::WideRun<Q8_0Kernel::Shape, 4>, SideQ8_0Seeds, kQ8_0SeedWords * 8, 4};
    case DType::kIQ4_XS: return GetWideTileIq(weight, grouped);
    default: return GetWideTileK(weight, grouped);
  }
}

WideTile GetWideTilePacked(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return {x86::WideRun<Q4_0Kernel<Q4_0Packed>::Shape, kWideTokens>, SideQ8_0, 16, kWideTokens};
    case DType::kQ8_0: return {x86::WideRun<Q8_0PackedKernel::Shape, 4>, SideQ8_0Seeds, kQ8_0SeedWords * 8, 4};
    default: return {};
  }
}

void PackQ4_0(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  const int64_t nb = row_bytes / static_cast<int64_t>(sizeof(BlockQ4_0));
  for (int64_t g = 0; g < n_rows / 16; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* b = dst + g * 16 * row_bytes + i * Q4_0Packed::kBlockBytes;
      for (int r = 0; r < 16; ++r) {
        const auto* x = reinterpret_cast<const BlockQ4_0*>(src + (16 * g + r) * row_bytes) + i;
        std::memcpy(b + 2 * r, &x->d, 2);
        for (int c = 0; c < 4; ++c) std::memcpy(b + 32 + 64 * c + 4 * r, x->qs + 4 * c, 4);
      }
    }
  }
}

#else

WideTile GetWideTile(DType, bool) { return {}; }
WideTile GetWideTilePacked(DType) { return {}; }
void PackQ4_0(const uint8_t*, int64_t, int64_t, uint8_t*) {}

#endif

}  // namespace cohort::kernels::avx512
