// Encoding and validation of message headers and connection hellos (see frame.h).
#include "comm/frame.h"

#include <fmt/format.h>

namespace cohort::comm {

void StoreLe32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void StoreLe64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t LoadLe32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t LoadLe64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Layout: magic u32 | version u16 | kind u16 (0 = data) | tag u32 | reserved u32 | length u64.
FrameHeaderBytes EncodeFrameHeader(const FrameHeader& header) {
  FrameHeaderBytes out{};
  StoreLe32(&out[0], kFrameMagic);
  out[4] = static_cast<std::byte>(kWireVersion & 0xff);
  out[5] = static_cast<std::byte>(kWireVersion >> 8);
  StoreLe32(&out[8], header.tag);
  StoreLe64(&out[16], header.length);
  return out;
}

Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes) {
  const uint32_t magic = LoadLe32(&bytes[0]);
  if (magic != kFrameMagic) {
    return Corrupt(fmt::format("bad frame magic 0x{:08x} (not a cohort peer?)", magic));
  }
  const uint32_t version_kind = LoadLe32(&bytes[4]);
  const uint32_t version = version_kind & 0xffff;
  if (version != kWireVersion) {
    return Corrupt(fmt::format("frame version {} but this build speaks {}", version, kWireVersion));
  }
  if ((version_kind >> 16) != 0 || LoadLe32(&bytes[12]) != 0) {
    return Corrupt("frame kind or reserved field is not zero");
  }
  FrameHeader header;
  header.tag = LoadLe32(&bytes[8]);
  header.length = LoadLe64(&bytes[16]);
  if (header.length > kFrameBytesMax) {
    return Corrupt(fmt::format("frame claims {} bytes, more than the limit {}", header.length,
                               kFrameBytesMax));
  }
  return header;
}

Status CheckFrameHeader(std::span<const std::byte, kFrameHeaderBytes> bytes, uint32_t tag_expected,
                        uint64_t length_expected, int peer) {
  Result<FrameHeader> header = DecodeFrameHeader(bytes);
  if (!header.ok()) return header.status().Annotate(fmt::format("from rank {}", peer));
  if (header->tag != tag_expected) {
    return Corrupt(fmt::format("from rank {}: message tag {} but expected {} (ranks ran different "
                               "collectives)", peer, header->tag, tag_expected));
  }
  if (header->length != length_expected) {
    return Corrupt(fmt::format("from rank {}: message of {} bytes but expected {}", peer,
                               header->length, length_expected));
  }
  return Status::Ok();
}

// Layout: magic u32 | version u16 | reserved u16 | group_id u64 | rank u32 | n_ranks u32.
HelloBytes EncodeHello(const Hello& hello) {
  HelloBytes out{};
  StoreLe32(&out[0], kHelloMagic);
  out[4] = static_cast<std::byte>(kWireVersion & 0xff);
  out[5] = static_cast<std::byte>(kWireVersion >> 8);
  StoreLe64(&out[8], hello.group_id);
  StoreLe32(&out[16], hello.rank);
  StoreLe32(&out[20], hello.n_ranks);
  return out;
}

Result<Hello> DecodeHello(std::span<const std::byte, kHelloBytes> bytes) {
  if (LoadLe32(&bytes[0]) != kHelloMagic) return Corrupt("bad hello magic (not a cohort peer?)");
  const uint32_t version_reserved = LoadLe32(&bytes[4]);
  if ((version_reserved & 0xffff) != kWireVersion) {
    return Corrupt(fmt::format("hello version {} but this build speaks {}",
                               version_reserved & 0xffff, kWireVersion));
  }
  if ((version_reserved >> 16) != 0) return Corrupt("hello reserved field is not zero");
  Hello hello;
  hello.group_id = LoadLe64(&bytes[8]);
  hello.rank = LoadLe32(&bytes[16]);
  hello.n_ranks = LoadLe32(&bytes[20]);
  return hello;
}

}  // namespace cohort::comm
