// The wire format of one message on a byte stream (TCP, shared-memory ring): a fixed
// little-endian header (magic, version, tag, length) before the payload, and the hello that
// opens a connection. One function writes each field order; decode validates every field.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace cohort::comm {

inline constexpr uint32_t kFrameMagic = 0x54524843;  // "CHRT" little-endian
inline constexpr uint32_t kHelloMagic = 0x48524843;  // "CHRH"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 24;
inline constexpr size_t kHelloBytes = 24;
// No single message may claim more than this; a header that does is garbage, not a request
// to allocate.
inline constexpr uint64_t kFrameBytesMax = uint64_t{1} << 34;

struct FrameHeader {
  uint32_t tag = 0;
  uint64_t length = 0;  // payload bytes that follow the header
};

using FrameHeaderBytes = std::array<std::byte, kFrameHeaderBytes>;

FrameHeaderBytes EncodeFrameHeader(const FrameHeader& header);
// Checks magic, version, reserved fields and the length limit.
Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes);
// Decodes and also demands the tag and length the receiver expects.
Status CheckFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes, uint32_t tag_expected,
                        uint64_t length_expected, int peer);

// The first bytes each side of a new connection sends: who it is and which group it joins.
struct Hello {
  uint64_t group_id = 0;
  uint32_t rank = 0;
  uint32_t n_ranks = 0;
};

using HelloBytes = std::array<std::byte, kHelloBytes>;

HelloBytes EncodeHello(const Hello& hello);
Result<Hello> DecodeHello(std::span<const std::byte, kHelloBytes> bytes);

// Little-endian field access used by the codecs above (and by tests that forge frames).
void StoreLe32(std::byte* p, uint32_t v);
void StoreLe64(std::byte* p, uint64_t v);
uint32_t LoadLe32(const std::byte* p);
uint64_t LoadLe64(const std::byte* p);

}  // namespace cohort::comm
