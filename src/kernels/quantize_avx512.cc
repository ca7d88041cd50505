// AVX-512 Q8_0 / Q8_1 row quantization, the activation side of every legacy-quant matmul:
// the same bytes as ref::QuantizeLegacyRow (ggml's x86 quantize_row_q8_0/q8_1), 16 lanes at
// a time. amax is a max (exact in any order), x * (127 / amax) is the same one multiply per
// element, and cvtps_epi32 rounds to nearest, ties to even, as NearestInt does.
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

template <typename Block>
COHORT_TARGET_AVX512 void QuantizeQ8(const float* x, Block* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const __m512 a = _mm512_loadu_ps(x);
    const __m512 b = _mm512_loadu_ps(x + 16);
    // max(|x|, acc) keeps acc where |x| is NaN, as the reference's std::max(acc, |x|) does.
    const __m512 m = _mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b));
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(m, _mm512_setzero_ps()));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(d);
    const __m512 scale = _mm512_set1_ps(id);
    const __m512i qa = _mm512_cvtps_epi32(_mm512_mul_ps(a, scale));
    const __m512i qb = _mm512_cvtps_epi32(_mm512_mul_ps(b, scale));
    // The values lie in [-127, 127]: truncating to bytes is the reference's cast.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs), _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16), _mm512_cvtepi32_epi8(qb));
    if constexpr (sizeof(Block) == sizeof(BlockQ8_1)) {
      const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
      y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
    }
  }
}

}  // namespace

bool QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::kQ8_0: QuantizeQ8(src, static_cast<BlockQ8_0*>(dst), n / kQK); return true;
    case DType::kQ8_1: QuantizeQ8(src, static_cast<BlockQ8_1*>(dst), n / kQK); return true;
    default: return false;
  }
}

#else

bool QuantizeRow(DType, const float*, void*, int64_t) { return false; }

#endif

}  // namespace cohort::kernels::avx512
