// Quantisation for the 8-bit activation wire format (see q8_wire.h).
#include "comm/q8_wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/frame.h"
#include "core/check.h"

namespace cohort::comm {

void QuantizeQ8(std::span<const float> in, std::span<std::byte> out) {
  COHORT_CHECK_EQ(out.size(), Q8WireBytes(in.size()));
  for (size_t begin = 0, b = 0; begin < in.size(); begin += kQ8Block, ++b) {
    const size_t n = std::min(kQ8Block, in.size() - begin);
    float amax = 0.0f;
    for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(in[begin + i]));
    const float d = amax / 127.0f;
    const float id = d > 0.0f ? 1.0f / d : 0.0f;
    std::byte* block = out.data() + b * kQ8BlockBytes;
    uint32_t d_bits;
    std::memcpy(&d_bits, &d, 4);
    StoreLe32(block, d_bits);
    for (size_t i = 0; i < kQ8Block; ++i) {
      const float x = i < n ? in[begin + i] : 0.0f;
      const float q = std::clamp(std::nearbyint(x * id), -127.0f, 127.0f);
      block[4 + i] = static_cast<std::byte>(static_cast<int8_t>(q));
    }
  }
}

void AccumulateQ8(std::span<const std::byte> wire, std::span<float> acc) {
  COHORT_CHECK_EQ(wire.size(), Q8WireBytes(acc.size()));
  for (size_t begin = 0, b = 0; begin < acc.size(); begin += kQ8Block, ++b) {
    const size_t n = std::min(kQ8Block, acc.size() - begin);
    const std::byte* block = wire.data() + b * kQ8BlockBytes;
    const uint32_t d_bits = LoadLe32(block);
    float d;
    std::memcpy(&d, &d_bits, 4);
    for (size_t i = 0; i < n; ++i) {
      acc[begin + i] += d * static_cast<float>(static_cast<int8_t>(block[4 + i]));
    }
  }
}

}  // namespace cohort::comm
