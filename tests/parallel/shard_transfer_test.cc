// Share streaming over a connected socket pair: frames arrive intact at their offsets; a
// flipped byte, a range outside the file, a truncated or stalled stream and malformed requests
// are clear errors, never a crash or a hang. Also the file digests and their cache.
#include "parallel/shard_transfer.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "comm/socket_util.h"
#include "parallel/file_digest.h"
#include "share_util.h"

namespace cohort::parallel::testing {
namespace {

using std::chrono::milliseconds;

struct Pair {
  std::unique_ptr<ControlChannel> a, b;
};

Pair Connected() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  EXPECT_TRUE(comm::SetNonBlocking(fds[0]).ok());
  EXPECT_TRUE(comm::SetNonBlocking(fds[1]).ok());
  return {std::make_unique<ControlChannel>(fds[0]), std::make_unique<ControlChannel>(fds[1])};
}

class TransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    source_.resize(300000);
    for (size_t i = 0; i < source_.size(); ++i) source_[i] = static_cast<uint8_t>(i * 7 + (i >> 9));
    src_path_ = dir_.Sub("source.bin");
    ASSERT_TRUE(WriteWholeFile(src_path_, source_));
    dst_fd_ = ::open(dir_.Sub("dest.bin").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ASSERT_GE(dst_fd_, 0);
    ASSERT_EQ(::ftruncate(dst_fd_, static_cast<off_t>(source_.size())), 0);
    options_.frame_data_bytes = 40000;  // several frames, ranges split across them
    options_.stall_timeout = milliseconds(2000);
  }
  void TearDown() override { ::close(dst_fd_); }

  // Sends `ranges` from one thread, receives them here.
  Result<std::vector<ByteRange>> Transfer(const std::vector<ByteRange>& ranges, Status* sent) {
    Pair p = Connected();
    std::thread sender([&] { *sent = SendRanges(*p.a, src_path_, source_.size(), ranges, options_); });
    auto got = ReceiveRanges(*p.b, dst_fd_, source_.size(), options_);
    p.b.reset();  // a sender still writing sees the closed socket
    sender.join();
    return got;
  }

  ScratchDir dir_;
  std::vector<uint8_t> source_;
  std::string src_path_;
  int dst_fd_ = -1;
  TransferOptions options_;
};

const std::vector<ByteRange> kRanges = {{0, 100}, {1000, 150000}, {160000, 7}, {200000, 100000}};

TEST_F(TransferTest, RangesArriveAtTheirOffsets) {
  Status sent;
  auto got = Transfer(kRanges, &sent);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  EXPECT_EQ(*got, kRanges);
  const std::vector<uint8_t> dest = ReadWholeFile(dir_.Sub("dest.bin"));
  ASSERT_EQ(dest.size(), source_.size());
  for (const ByteRange& r : kRanges) {
    EXPECT_TRUE(std::equal(dest.begin() + r.offset, dest.begin() + r.end(), source_.begin() + r.offset));
  }
  EXPECT_EQ(dest[500], 0);  // a byte outside the ranges stays a hole
}

TEST_F(TransferTest, FlippedByteFailsItsDigest) {
  int frames = 0;
  options_.tamper_for_test = [&](std::vector<uint8_t>& f) {
    if (frames++ == 2) f.back() ^= 1;
  };
  Status sent;
  auto got = Transfer(kRanges, &sent);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(got.status().message().find("frame 2 fails its sha256 check"), std::string::npos)
      << got.status().ToString();
}

TEST_F(TransferTest, RangeOutsideTheFileIsRejected) {
  options_.tamper_for_test = [](std::vector<uint8_t>& f) {
    // Move the first range past the end and re-sign the frame: only the bounds check is left.
    f[32] = 0xF0;
    f[33] = 0xFF;
    f[34] = 0xFF;
    const uint32_t n = f[8] | f[9] << 8;
    const size_t table_end = 32 + 16 * n;
    std::vector<uint8_t> covered(f.begin(), f.begin() + table_end);
    covered.insert(covered.end(), f.begin() + table_end + 32, f.end());
    const Sha256Digest d = Sha256Of(covered);
    std::copy(d.begin(), d.end(), f.begin() + table_end);
  };
  Status sent;
  auto got = Transfer(kRanges, &sent);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("outside"), std::string::npos) << got.status().ToString();
}

TEST_F(TransferTest, TruncatedStreamIsAnError) {
  Pair p = Connected();
  int frames = 0;
  TransferOptions o = options_;
  // The sender's connection drops after two frames: the third is never delivered.
  o.tamper_for_test = [&](std::vector<uint8_t>&) {
    if (++frames == 3) ::shutdown(p.a->fd(), SHUT_RDWR);
  };
  Status sent;
  std::thread sender([&] { sent = SendRanges(*p.a, src_path_, source_.size(), kRanges, o); });
  auto got = ReceiveRanges(*p.b, dst_fd_, source_.size(), options_);
  sender.join();
  EXPECT_FALSE(sent.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("interrupted after 2 frames"), std::string::npos)
      << got.status().ToString();
}

TEST_F(TransferTest, StalledSenderTimesOut) {
  Pair p = Connected();
  options_.stall_timeout = milliseconds(200);
  const auto start = std::chrono::steady_clock::now();
  auto got = ReceiveRanges(*p.b, dst_fd_, source_.size(), options_);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kTimeout) << got.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(TransferTest, GarbageIsNotAFrame) {
  Pair p = Connected();
  std::vector<uint8_t> junk(100, 0x5A);
  ASSERT_TRUE(p.a->SendBytes(junk, comm::DeadlineAfter(milliseconds(1000))).ok());
  auto got = ReceiveRanges(*p.b, dst_fd_, source_.size(), options_);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kCorrupt);
}

TEST(FetchShareTest, MalformedRequestsAreRejectedBeforeAnyIo) {
  ScratchDir dir;
  Pair p = Connected();
  ShareRequest req;
  req.cache_dir = dir.Sub("cache");
  req.sha256 = "../../etc/passwd";
  req.file_bytes = 1000;
  auto bad_sha = FetchShare(*p.b, req, {});
  ASSERT_FALSE(bad_sha.ok());
  EXPECT_EQ(bad_sha.status().code(), StatusCode::kInvalidArgument);
  req.sha256 = std::string(64, 'a');
  req.file_bytes = uint64_t{1} << 50;
  auto huge = FetchShare(*p.b, req, {});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  req.cache_dir.clear();
  req.file_bytes = 1000;
  EXPECT_EQ(FetchShare(*p.b, req, {}).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("cache")));
}

TEST(FileDigestTest, KnownVectorAndCache) {
  const std::string abc = "abc";
  EXPECT_EQ(HexOf(Sha256Of({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()})),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  ScratchDir dir;
  const std::string file = dir.Sub("f.bin");
  ASSERT_TRUE(WriteWholeFile(file, {'a', 'b', 'c'}));
  auto plain = Sha256OfFile(file);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const DigestCache cache(dir.Sub("digests"));
  auto first = cache.Get(file);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->sha256, *plain);
  EXPECT_EQ(first->size, 3u);
  // The entry is remembered on disk...
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.Sub("digests"))) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
  // ...and a changed file (new size and mtime) is hashed again.
  ASSERT_TRUE(WriteWholeFile(file, {'a', 'b', 'c', 'd'}));
  auto second = cache.Get(file);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->sha256, "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589");
  EXPECT_EQ(cache.Get(dir.Sub("missing")).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort::parallel::testing
