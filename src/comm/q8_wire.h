// The optional 8-bit wire format for activations: blocks of 32 floats, each sent as a float32
// scale and 32 int8 values (the Q8_0 idea with a full-precision scale), 36 bytes instead of
// 128. Each value is off by at most half its block's step, amax / 254.
#pragma once

#include <cstddef>
#include <span>

namespace cohort::comm {

inline constexpr size_t kQ8Block = 32;
inline constexpr size_t kQ8BlockBytes = 4 + kQ8Block;

inline size_t Q8WireBytes(size_t count) { return (count + kQ8Block - 1) / kQ8Block * kQ8BlockBytes; }

// out.size() must be Q8WireBytes(in.size()); a short last block is padded with zeros.
void QuantizeQ8(std::span<const float> in, std::span<std::byte> out);
// Adds the dequantized values of `wire` to `acc` (acc.size() values).
void AccumulateQ8(std::span<const std::byte> wire, std::span<float> acc);

}  // namespace cohort::comm
