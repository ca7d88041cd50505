// Scalar reference kernels for ggml's K-quants (Q2_K..Q6_K weights, Q8_K activations).
// Each block is unpacked into plain integers (one quant per element, one scale and min per
// sub-block); dequantize and vec-dot are then written once over that form, with ggml's float
// formulas. Packing is the exact inverse of unpacking, which the quantizers use.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// One super-block in integer form (quant_internal.h).
using Unpacked = UnpackedK;
static_assert(sizeof(Unpacked::q) == kQK_K);

struct KTypeInfo {
  int sub;       // elements per sub-block: 16 or 32
  bool has_min;  // x = d*scale*q - dmin*min, else x = d*scale*q
};

KTypeInfo InfoOf(DType type) {
  switch (type) {
    case DType::kQ2_K: return {16, true};
    case DType::kQ3_K: return {16, false};
    case DType::kQ4_K: return {32, true};
    case DType::kQ5_K: return {32, true};
    case DType::kQ6_K: return {16, false};
    default: COHORT_CHECK(false && "not a K-quant weight type");
  }
  __builtin_unreachable();
}

// Where the 2-bit fields of Q2_K/Q3_K live: element e = 128h + 32g + l sits in byte 32h + l
// at bit 2g.
inline int TwoBitByte(int e) { return 32 * (e / 128) + e % 32; }
inline int TwoBitShift(int e) { return 2 * ((e % 128) / 32); }

// Q4_K/Q5_K: element e = 64c + k is the low nibble of qs[32c + k] (k < 32) or the high
// nibble of qs[32c + k - 32].
inline int NibbleByte(int e) { return 32 * (e / 64) + e % 32; }
inline int NibbleShift(int e) { return (e % 64) < 32 ? 0 : 4; }

// The inverse of GetScaleMinK4 (quant_blocks.h).
void SetScaleMin(uint8_t* s, int j, int sc, int m) {  // s must start zeroed
  if (j < 4) {
    s[j] |= static_cast<uint8_t>(sc);
    s[j + 4] |= static_cast<uint8_t>(m);
  } else {
    s[j + 4] |= static_cast<uint8_t>((sc & 0xf) | ((m & 0xf) << 4));
    s[j - 4] |= static_cast<uint8_t>((sc >> 4) << 6);
    s[j] |= static_cast<uint8_t>((m >> 4) << 6);
  }
}

// The inverse of GetQ3KScale (quant_blocks.h).
void SetQ3Scale(uint8_t* s, int j, int scale) {  // s must start zeroed
  const int biased = scale + 32;
  if (j < 8) {
    s[j] |= static_cast<uint8_t>(biased & 0xf);
  } else {
    s[j - 8] |= static_cast<uint8_t>((biased & 0xf) << 4);
  }
  s[8 + j % 4] |= static_cast<uint8_t>((biased >> 4) << (2 * (j / 4)));
}

void Unpack(DType type, const uint8_t* block, Unpacked* u) {
  switch (type) {
    case DType::kQ2_K: {
      const auto& b = *reinterpret_cast<const BlockQ2_K*>(block);
      u->d = Fp16ToFp32(b.d);
      u->dmin = Fp16ToFp32(b.dmin);
      for (int j = 0; j < 16; ++j) {
        u->scale[j] = b.scales[j] & 0xf;
        u->min[j] = b.scales[j] >> 4;
      }
      for (int e = 0; e < kQK_K; ++e) u->q[e] = (b.qs[TwoBitByte(e)] >> TwoBitShift(e)) & 3;
      return;
    }
    case DType::kQ3_K: {
      const auto& b = *reinterpret_cast<const BlockQ3_K*>(block);
      u->d = Fp16ToFp32(b.d);
      for (int j = 0; j < 16; ++j) u->scale[j] = GetQ3KScale(b.scales, j);
      for (int e = 0; e < kQK_K; ++e) {
        const int low = (b.qs[TwoBitByte(e)] >> TwoBitShift(e)) & 3;
        const int bit = (b.hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
        u->q[e] = static_cast<int8_t>(low - (bit ? 0 : 4));
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = type == DType::kQ5_K;
      const auto& b4 = *reinterpret_cast<const BlockQ4_K*>(block);
      const auto& b5 = *reinterpret_cast<const BlockQ5_K*>(block);
      const uint8_t* scales = five ? b5.scales : b4.scales;
      const uint8_t* qs = five ? b5.qs : b4.qs;
      u->d = Fp16ToFp32(five ? b5.d : b4.d);
      u->dmin = Fp16ToFp32(five ? b5.dmin : b4.dmin);
      for (int j = 0; j < 8; ++j) GetScaleMinK4(scales, j, &u->scale[j], &u->min[j]);
      for (int e = 0; e < kQK_K; ++e) {
        int q = (qs[NibbleByte(e)] >> NibbleShift(e)) & 0xf;
        if (five) q |= ((b5.qh[e % 32] >> (e / 32)) & 1) << 4;
        u->q[e] = static_cast<int8_t>(q);
      }
      return;
    }
    case DType::kQ6_K: {
      const auto& b = *reinterpret_cast<const BlockQ6_K*>(block);
      u->d = Fp16ToFp32(b.d);
      for (int j = 0; j < 16; ++j) u->scale[j] = b.scales[j];
      for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        const int low = (b.ql[64 * h + 32 * (g & 1) + l] >> (g >= 2 ? 4 : 0)) & 0xf;
        const int high = (b.qh[32 * h + l] >> (2 * g)) & 3;
        u->q[e] = static_cast<int8_t>((low | (high << 4)) - 32);
      }
      return;
    }
    default: COHORT_CHECK(false && "not a K-quant weight type");
  }
}

void Pack(DType type, const Unpacked& u, uint8_t* block) {
  std::memset(block, 0, static_cast<size_t>(Traits(type).type_size));
  switch (type) {
    case DType::kQ2_K: {
      auto& b = *reinterpret_cast<BlockQ2_K*>(block);
      b.d = Fp32ToFp16(u.d);
      b.dmin = Fp32ToFp16(u.dmin);
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(u.scale[j] | (u.min[j] << 4));
      for (int e = 0; e < kQK_K; ++e) b.qs[TwoBitByte(e)] |= static_cast<uint8_t>(u.q[e] << TwoBitShift(e));
      return;
    }
    case DType::kQ3_K: {
      auto& b = *reinterpret_cast<BlockQ3_K*>(block);
      b.d = Fp32ToFp16(u.d);
      for (int j = 0; j < 16; ++j) SetQ3Scale(b.scales, j, u.scale[j]);
      for (int e = 0; e < kQK_K; ++e) {
        const int biased = u.q[e] + 4;  // 0..7
        b.qs[TwoBitByte(e)] |= static_cast<uint8_t>((biased & 3) << TwoBitShift(e));
        b.hmask[e % 32] |= static_cast<uint8_t>((biased >> 2) << (4 * (e / 128) + (e % 128) / 32));
      }
      return;
    }
    case DType::kQ4_K:
    case DType::kQ5_K: {
      const bool five = type == DType::kQ5_K;
      auto& b4 = *reinterpret_cast<BlockQ4_K*>(block);
      auto& b5 = *reinterpret_cast<BlockQ5_K*>(block);
      uint8_t* scales = five ? b5.scales : b4.scales;
      uint8_t* qs = five ? b5.qs : b4.qs;
      // d and dmin sit at the same offsets in both layouts.
      b4.d = Fp32ToFp16(u.d);
      b4.dmin = Fp32ToFp16(u.dmin);
      for (int j = 0; j < 8; ++j) SetScaleMin(scales, j, u.scale[j], u.min[j]);
      for (int e = 0; e < kQK_K; ++e) {
        qs[NibbleByte(e)] |= static_cast<uint8_t>((u.q[e] & 0xf) << NibbleShift(e));
        if (five) b5.qh[e % 32] |= static_cast<uint8_t>(((u.q[e] >> 4) & 1) << (e / 32));
      }
      return;
    }
    case DType::kQ6_K: {
      auto& b = *reinterpret_cast<BlockQ6_K*>(block);
      b.d = Fp32ToFp16(u.d);
      for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(u.scale[j]);
      for (int e = 0; e < kQK_K; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        const int biased = u.q[e] + 32;  // 0..63
        b.ql[64 * h + 32 * (g & 1) + l] |= static_cast<uint8_t>((biased & 0xf) << (g >= 2 ? 4 : 0));
        b.qh[32 * h + l] |= static_cast<uint8_t>((biased >> 4) << (2 * g));
      }
      return;
    }
    default: COHORT_CHECK(false && "not a K-quant weight type");
  }
}

// Rounds v to an integer in [lo, hi]; NaN and out-of-range values clamp.
int RoundClamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v > static_cast<float>(hi)) return hi;
  return NearestInt(v);
}

inline float RoundToHalf(float v) { return Fp16ToFp32(Fp32ToFp16(v)); }

// A simple quantizer for x = d*scale*q - dmin*min (q in [0, q_max], scale/min in
// [0, s_max]): each sub-block spans [min(0, lo), hi]; the super scales are fit to the
// largest sub-block scale and min. Not ggml's search, but valid and within a few percent.
void QuantizeWithMin(const float* x, int sub, int q_max, int s_max, Unpacked* u) {
  const int n_sub = kQK_K / sub;
  float scales[16], mins[16];
  float scale_max = 0, min_max = 0;
  for (int s = 0; s < n_sub; ++s) {
    float lo = 0, hi = 0;
    for (int i = 0; i < sub; ++i) {
      lo = std::min(lo, x[s * sub + i]);
      hi = std::max(hi, x[s * sub + i]);
    }
    scales[s] = (hi - lo) / static_cast<float>(q_max);
    mins[s] = -lo;
    scale_max = std::max(scale_max, scales[s]);
    min_max = std::max(min_max, mins[s]);
  }
  u->d = RoundToHalf(scale_max / static_cast<float>(s_max));
  u->dmin = RoundToHalf(min_max / static_cast<float>(s_max));
  for (int s = 0; s < n_sub; ++s) {
    u->scale[s] = u->d > 0 ? RoundClamped(scales[s] / u->d, 0, s_max) : 0;
    u->min[s] = u->dmin > 0 ? RoundClamped(mins[s] / u->dmin, 0, s_max) : 0;
    const float step = u->d * static_cast<float>(u->scale[s]);
    const float offset = u->dmin * static_cast<float>(u->min[s]);
    for (int i = 0; i < sub; ++i) {
      const float v = step > 0 ? (x[s * sub + i] + offset) / step : 0.0f;
      u->q[s * sub + i] = static_cast<int8_t>(RoundClamped(v, 0, q_max));
    }
  }
}

// A simple quantizer for x = d*scale*q (q in [-q_half, q_half - 1], signed scale with
// |scale| <= s_max): each sub-block's scale maps its largest-magnitude value to -q_half.
void QuantizeSymmetricK(const float* x, int q_half, int s_max, Unpacked* u) {
  float scales[16];
  float scale_amax = 0;
  for (int s = 0; s < 16; ++s) {
    float amax = 0, max = 0;
    for (int i = 0; i < 16; ++i) {
      if (std::fabs(x[s * 16 + i]) > amax) {
        amax = std::fabs(x[s * 16 + i]);
        max = x[s * 16 + i];
      }
    }
    scales[s] = max / static_cast<float>(-q_half);
    scale_amax = std::max(scale_amax, amax / static_cast<float>(q_half));
  }
  u->d = RoundToHalf(scale_amax / static_cast<float>(s_max));
  for (int s = 0; s < 16; ++s) {
    u->scale[s] = u->d > 0 ? RoundClamped(scales[s] / u->d, -s_max, s_max) : 0;
    const float step = u->d * static_cast<float>(u->scale[s]);
    for (int i = 0; i < 16; ++i) {
      const float v = step != 0 ? x[s * 16 + i] / step : 0.0f;
      u->q[s * 16 + i] = static_cast<int8_t>(RoundClamped(v, -q_half, q_half - 1));
    }
  }
}

// Q8_K exactly as ggml's quantize_row_q8_K_ref: the scale's sign follows the element of
// largest magnitude (the first one on ties), so that element becomes -127.
void QuantizeQ8K(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
    float max = 0, amax = 0;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

template <DType kType>
float VecDotK(const void* w, const void* a, int64_t n) {
  const KTypeInfo info = InfoOf(kType);
  const int64_t block_bytes = Traits(kType).type_size;
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  Unpacked u;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Unpack(kType, wb + i * block_bytes, &u);
    int sumi = 0;
    for (int s = 0; s < kQK_K / info.sub; ++s) {
      int isum = 0;
      for (int l = 0; l < info.sub; ++l) isum += u.q[s * info.sub + l] * y[i].qs[s * info.sub + l];
      sumi += u.scale[s] * isum;
    }
    sumf += (u.d * y[i].d) * static_cast<float>(sumi);
    if (info.has_min) {
      // The mins multiply sums of 16 activation quants, which Q8_K carries precomputed.
      int summs = 0;
      for (int g = 0; g < kQK_K / 16; ++g) summs += y[i].bsums[g] * u.min[g * 16 / info.sub];
      sumf -= (u.dmin * y[i].d) * static_cast<float>(summs);
    }
  }
  return sumf;
}

}  // namespace

void UnpackK(DType type, const uint8_t* block, UnpackedK* u) { Unpack(type, block, u); }

bool IsKType(DType type) {
  switch (type) {
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K: return true;
    default: return false;
  }
}

void DequantizeKRow(DType type, const void* src, float* y, int64_t n) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  if (type == DType::kQ8_K) {
    const auto* b = reinterpret_cast<const BlockQ8_K*>(bytes);
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      for (int j = 0; j < kQK_K; ++j) y[i * kQK_K + j] = b[i].d * b[i].qs[j];
    }
    return;
  }
  const KTypeInfo info = InfoOf(type);
  const int64_t block_bytes = Traits(type).type_size;
  Unpacked u;
  for (int64_t i = 0; i < n / kQK_K; ++i, y += kQK_K) {
    Unpack(type, bytes + i * block_bytes, &u);
    for (int e = 0; e < kQK_K; ++e) {
      const int s = e / info.sub;
      const float dl = u.d * static_cast<float>(u.scale[s]);
      if (info.has_min) {
        y[e] = dl * u.q[e] - u.dmin * static_cast<float>(u.min[s]);
      } else {
        y[e] = dl * u.q[e];
      }
    }
  }
}

void QuantizeKRow(DType type, const float* x, void* dst, int64_t n) {
  auto* bytes = static_cast<uint8_t*>(dst);
  if (type == DType::kQ8_K) {
    QuantizeQ8K(x, reinterpret_cast<BlockQ8_K*>(bytes), n / kQK_K);
    return;
  }
  const int64_t block_bytes = Traits(type).type_size;
  Unpacked u = {};
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    switch (type) {
      case DType::kQ2_K: QuantizeWithMin(x, 16, 3, 15, &u); break;
      case DType::kQ3_K: QuantizeSymmetricK(x, 4, 31, &u); break;
      case DType::kQ4_K: QuantizeWithMin(x, 32, 15, 63, &u); break;
      case DType::kQ5_K: QuantizeWithMin(x, 32, 31, 63, &u); break;
      case DType::kQ6_K: QuantizeSymmetricK(x, 32, 127, &u); break;
      default: COHORT_CHECK(false && "not a K-quant type");
    }
    Pack(type, u, bytes + i * block_bytes);
  }
}

VecDotFn GetKVecDot(DType weight) {
  switch (weight) {
    case DType::kQ2_K: return VecDotK<DType::kQ2_K>;
    case DType::kQ3_K: return VecDotK<DType::kQ3_K>;
    case DType::kQ4_K: return VecDotK<DType::kQ4_K>;
    case DType::kQ5_K: return VecDotK<DType::kQ5_K>;
    case DType::kQ6_K: return VecDotK<DType::kQ6_K>;
    default: return nullptr;
  }
}

}  // namespace cohort::kernels::ref
