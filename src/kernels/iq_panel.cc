// The i-quant decoders of iqp.cpp's panels (iq_panel.h), portable.
#include "kernels/iq_panel.h"

#include <cstring>

#include "core/fp16.h"
#include "kernels/iq1_grids.h"
#include "kernels/iq2_grids_xs.h"
#include "kernels/iq3_grids.h"
#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cohort::kernels {
namespace {

// For each 7 stored sign bits, 0xff in the bytes of the negative values (the 8th sign makes
// the count even): a group's 8 magnitudes g become (g ^ m) + (m & 1) per byte, which never
// carries into the next byte (magnitudes are 1..255).
constexpr struct Iq2SignMasks {
  uint64_t masks[128];
  constexpr Iq2SignMasks() : masks() {
    for (uint32_t i = 0; i < 128; ++i) {
      const uint32_t signs = i | ((__builtin_popcount(i) & 1) << 7);
      for (int j = 0; j < 8; ++j) masks[i] |= uint64_t{(signs >> j) & 1 ? 0xffu : 0u} << (8 * j);
    }
  }
} kIq2SignMasks;

inline uint64_t SignedGroup(uint64_t magnitudes, uint32_t seven_bits) {
  const uint64_t m = kIq2SignMasks.masks[seven_bits];
  return (magnitudes ^ m) + (m & 0x0101010101010101ull);
}

// IQ2_XXS: a sub-block of 32 shares the scale 2 * ls + 1; weight = d / 8 * scale * magnitude
// (the values of DecodeIq2XxsSubBlock, four groups of 8 at a time).
void DecodeIq2Xxs(const uint8_t* block, IqDecoded* out) {
  const auto& b = *reinterpret_cast<const BlockIq2Xxs*>(block);
  for (int ib = 0; ib < 8; ++ib) {
    const Iq2XxsWords w = Iq2XxsSubBlock(b, ib);
    for (int l = 0; l < 4; ++l) {
      const uint64_t v = SignedGroup(kIq2XxsGrid[(w.grid >> (8 * l)) & 0xff], (w.signs >> (7 * l)) & 127);
      std::memcpy(out->vals + 32 * ib + 8 * l, &v, sizeof v);
    }
    out->iscales[2 * ib] = out->iscales[2 * ib + 1] = static_cast<int8_t>(2 * (w.signs >> 28) + 1);
  }
  out->dfac = Fp16ToFp32(b.d) * 0.125f;
}

#if !defined(__x86_64__) && !defined(__i386__)
// IQ4_XS: sub-block ib's 16 bytes hold values 32 ib + j (low nibble) and 32 ib + 16 + j (high).
void DecodeIq4Xs(const uint8_t* block, IqDecoded* out) {
  const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
  for (int ib = 0; ib < 8; ++ib) {
    out->iscales[2 * ib] = out->iscales[2 * ib + 1] = static_cast<int8_t>(Iq4XsScale(b, ib));
    for (int j = 0; j < 16; ++j) {
      out->vals[32 * ib + j] = kIq4NlValues[b.qs[16 * ib + j] & 0xf];
      out->vals[32 * ib + 16 + j] = kIq4NlValues[b.qs[16 * ib + j] >> 4];
    }
  }
  out->dfac = Fp16ToFp32(b.d);
}
#endif

#if defined(__x86_64__) || defined(__i386__)
// IQ4_XS on x86, the nibbles looked up 16 at a time (every level that takes the panel, AVX2
// and up, has SSSE3's byte shuffle): sub-block ib's 16 bytes hold values 32 ib + j (low
// nibble) and 32 ib + 16 + j (high).
__attribute__((target("ssse3"))) void DecodeIq4XsShuffled(const uint8_t* block, IqDecoded* out) {
  const auto& b = *reinterpret_cast<const BlockIq4Xs*>(block);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  for (int ib = 0; ib < 8; ++ib) {
    out->iscales[2 * ib] = out->iscales[2 * ib + 1] = static_cast<int8_t>(Iq4XsScale(b, ib));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * ib));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->vals + 32 * ib), _mm_shuffle_epi8(table, _mm_and_si128(q, nibble)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out->vals + 32 * ib + 16),
                     _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), nibble)));
  }
  out->dfac = Fp16ToFp32(b.d);
}
#endif

// IQ2_XS, IQ2_S: a scale 2 * ls + 1 per 16 values; weight = d / 8 * scale * magnitude.
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
void DecodeIq2s(const uint8_t* block, IqDecoded* out) {
  const auto& b = *reinterpret_cast<const Block*>(block);
  for (int ib = 0; ib < 8; ++ib) {
    const Iq2SubBlock sub = kSubBlock(b, ib);
    Iq2SubBlockValues(sub, out->vals + 32 * ib);
    out->iscales[2 * ib] = static_cast<int8_t>(sub.scale[0]);
    out->iscales[2 * ib + 1] = static_cast<int8_t>(sub.scale[1]);
  }
  out->dfac = Fp16ToFp32(b.d) * 0.125f;
}

// IQ3_XXS (weight = d / 4 * scale * magnitude) and IQ3_S (d * scale * magnitude): a scale per 32.
template <typename Block, int (*kSubBlock)(const Block&, int, int8_t*)>
void DecodeIq3(const uint8_t* block, IqDecoded* out, float unit) {
  const auto& b = *reinterpret_cast<const Block*>(block);
  for (int ib = 0; ib < 8; ++ib) {
    const int scale = kSubBlock(b, ib, out->vals + 32 * ib);
    out->iscales[2 * ib] = out->iscales[2 * ib + 1] = static_cast<int8_t>(scale);
  }
  out->dfac = Fp16ToFp32(b.d) * unit;
}
void DecodeIq3Xxs(const uint8_t* block, IqDecoded* out) {
  DecodeIq3<BlockIq3Xxs, DecodeIq3XxsSubBlock>(block, out, 0.25f);
}
void DecodeIq3S(const uint8_t* block, IqDecoded* out) { DecodeIq3<BlockIq3S, DecodeIq3SSubBlock>(block, out, 1.0f); }

// IQ1_S, IQ1_M: the values 8 * grid + delta (so the delta's 1/8 moves into dfac = d / 8), a
// scale per 16.
template <typename Block>
void DecodeIq1(const uint8_t* block, IqDecoded* out) {
  const auto& b = *reinterpret_cast<const Block*>(block);
  Iq1SubBlock sub;
  for (int ib = 0; ib < 8; ++ib) {
    DecodeIq1SubBlock(b, ib, &sub);
    for (int e = 0; e < 32; ++e) out->vals[32 * ib + e] = static_cast<int8_t>(8 * sub.v[e] + sub.delta[e / 8]);
    out->iscales[2 * ib] = static_cast<int8_t>(sub.scale[0]);
    out->iscales[2 * ib + 1] = static_cast<int8_t>(sub.scale[1]);
  }
  out->dfac = Fp16ToFp32(Iq1SuperScaleBits(b)) * 0.125f;
}

}  // namespace

void DecodeIqPanelPortable(IqDecodeFn decode, int64_t block_bytes, const uint8_t* w, int64_t w_stride, int64_t n,
                           uint8_t* panel) {
  IqDecoded dec;
  for (int64_t i = 0; i < n / 256; ++i) {
    uint8_t* block = panel + i * kIqPanelBlockBytes;
    for (int r = 0; r < kIqPanelRows; ++r) {
      decode(w + r * w_stride + i * block_bytes, &dec);
      std::memcpy(block + kIqPanelDfacOffset + 4 * r, &dec.dfac, sizeof dec.dfac);
      for (int sb = 0; sb < 16; ++sb) block[kIqPanelScalesOffset + 16 * sb + r] = static_cast<uint8_t>(dec.iscales[sb]);
      // Group g's 4 values as lane r of the group's 64 bytes, each value + 128.
      for (int g = 0; g < 64; ++g) {
        for (int j = 0; j < 4; ++j) {
          block[kIqPanelQuantsOffset + 64 * g + 4 * r + j] = static_cast<uint8_t>(dec.vals[4 * g + j] + 128);
        }
      }
    }
  }
}

IqDecodeFn GetIqPanelDecode(DType weight) {
  switch (weight) {
    case DType::kIQ2_XXS: return DecodeIq2Xxs;
    case DType::kIQ2_XS: return DecodeIq2s<BlockIq2Xs, Iq2XsSubBlock>;
    case DType::kIQ2_S: return DecodeIq2s<BlockIq2S, Iq2SSubBlock>;
    case DType::kIQ3_XXS: return DecodeIq3Xxs;
    case DType::kIQ3_S: return DecodeIq3S;
    case DType::kIQ1_S: return DecodeIq1<BlockIq1S>;
    case DType::kIQ1_M: return DecodeIq1<BlockIq1M>;
#if defined(__x86_64__) || defined(__i386__)
    case DType::kIQ4_XS: return DecodeIq4XsShuffled;
#else
    case DType::kIQ4_XS: return DecodeIq4Xs;
#endif
    default: return nullptr;
  }
}

}  // namespace cohort::kernels
