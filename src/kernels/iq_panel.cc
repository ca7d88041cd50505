// The i-quant decoders of iqp.cpp's panels (iq_panel.h), portable.
#include "kernels/iq_panel.h"

#include <cstring>

#include "core/fp16.h"
#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"

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

}  // namespace

IqDecodeFn GetIqPanelDecode(DType weight) {
  switch (weight) {
    case DType::kIQ2_XXS: return DecodeIq2Xxs;
    case DType::kIQ4_XS: return DecodeIq4Xs;
    default: return nullptr;
  }
}

}  // namespace cohort::kernels
