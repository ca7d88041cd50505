// The wire codecs: round trips, little-endian layout, and rejection of malformed headers.
#include <cmath>

#include <gtest/gtest.h>

#include "comm/frame.h"
#include "comm/q8_wire.h"

namespace cohort::comm {
namespace {

TEST(FrameTest, HeaderRoundTripsAndIsLittleEndian) {
  const FrameHeaderBytes bytes = EncodeFrameHeader({0x01020304, 0x000000030b0c0d0eull});
  EXPECT_EQ(bytes[0], std::byte{'C'});
  EXPECT_EQ(bytes[1], std::byte{'H'});
  EXPECT_EQ(bytes[8], std::byte{0x04});
  EXPECT_EQ(bytes[16], std::byte{0x0e});
  auto header = DecodeFrameHeader(bytes);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->tag, 0x01020304u);
  EXPECT_EQ(header->length, 0x000000030b0c0d0eull);
}

TEST(FrameTest, RejectsWrongVersionReservedAndOversize) {
  FrameHeaderBytes bytes = EncodeFrameHeader({1, 2});
  bytes[4] = std::byte{9};
  EXPECT_EQ(DecodeFrameHeader(bytes).status().code(), StatusCode::kCorrupt);
  bytes = EncodeFrameHeader({1, 2});
  bytes[12] = std::byte{1};
  EXPECT_EQ(DecodeFrameHeader(bytes).status().code(), StatusCode::kCorrupt);
  bytes = EncodeFrameHeader({1, kFrameBytesMax + 1});
  EXPECT_EQ(DecodeFrameHeader(bytes).status().code(), StatusCode::kCorrupt);
}

TEST(FrameTest, HelloRoundTrips) {
  auto hello = DecodeHello(EncodeHello({0xdeadbeefcafef00dull, 3, 5}));
  ASSERT_TRUE(hello.ok());
  EXPECT_EQ(hello->group_id, 0xdeadbeefcafef00dull);
  EXPECT_EQ(hello->rank, 3u);
  EXPECT_EQ(hello->n_ranks, 5u);
  HelloBytes garbage{};
  EXPECT_FALSE(DecodeHello(garbage).ok());
}

TEST(Q8WireTest, RoundTripErrorIsAtMostHalfAStep) {
  std::vector<float> in(77);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(float(i) * 0.37f) * (1 + i % 5);
  std::vector<std::byte> wire(Q8WireBytes(in.size()));
  EXPECT_EQ(wire.size(), 3 * kQ8BlockBytes);
  QuantizeQ8(in, wire);
  std::vector<float> out(in.size(), 0.0f);
  AccumulateQ8(wire, out);
  for (size_t b = 0; b < in.size(); b += kQ8Block) {
    float amax = 0;
    for (size_t i = b; i < std::min(in.size(), b + kQ8Block); ++i) amax = std::max(amax, std::fabs(in[i]));
    for (size_t i = b; i < std::min(in.size(), b + kQ8Block); ++i) {
      EXPECT_LE(std::fabs(out[i] - in[i]), amax / 254.0f * 1.0001f) << i;
    }
  }
  std::vector<float> zeros(32, 0.0f), back(32, 1.0f);
  std::vector<std::byte> zwire(Q8WireBytes(32));
  QuantizeQ8(zeros, zwire);
  AccumulateQ8(zwire, back);
  EXPECT_EQ(back[5], 1.0f);
}

}  // namespace
}  // namespace cohort::comm
