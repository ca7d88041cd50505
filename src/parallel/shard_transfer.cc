// Share streaming (frames, the coordinator's and the worker's side); see shard_transfer.h.
#include "parallel/shard_transfer.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "parallel/share_cache.h"

namespace cohort::parallel {
namespace {

constexpr uint32_t kFrameMagic = 0x46485343;  // "CSHF"
constexpr uint16_t kFrameVersion = 1;
constexpr uint16_t kLastFrame = 1;
constexpr size_t kHeaderBytes = 32;
constexpr size_t kRangeBytes = 16;
constexpr size_t kDigestBytes = 32;
// Ranges per frame: keeps a frame of tiny column slices inside the channel's message limit.
constexpr size_t kFrameRangesMax = 1 << 16;

// The digest of a frame: everything before the digest field, then the data after it.
Sha256Digest FrameDigest(const std::vector<uint8_t>& f, size_t digest_at) {
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, f.data(), digest_at);
  const size_t data_at = digest_at + kDigestBytes;
  crypto_hash_sha256_update(&state, f.data() + data_at, f.size() - data_at);
  Sha256Digest d;
  crypto_hash_sha256_final(&state, d.data());
  return d;
}

void PutLe(std::vector<uint8_t>* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

Status PreadAll(int fd, uint8_t* dst, uint64_t offset, uint64_t n) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return IoError(std::string("pread: ") + std::strerror(errno));
    if (got == 0) return Corrupt("the model file ended early");
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return Status::Ok();
}

Status PwriteAll(int fd, const uint8_t* src, uint64_t offset, uint64_t n) {
  while (n > 0) {
    const ssize_t put = ::pwrite(fd, src, n, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return IoError(std::string("writing the share: ") + std::strerror(errno));
    src += put;
    offset += static_cast<uint64_t>(put);
    n -= static_cast<uint64_t>(put);
  }
  return Status::Ok();
}

// Builds one frame: header, range table, digest, data (read from fd).
Result<std::vector<uint8_t>> EncodeFrame(int fd, std::span<const ByteRange> ranges, uint64_t seq,
                                         bool last, uint64_t total) {
  std::vector<uint8_t> f;
  uint64_t data = 0;
  for (const ByteRange& r : ranges) data += r.length;
  f.reserve(kHeaderBytes + ranges.size() * kRangeBytes + kDigestBytes + data);
  PutLe(&f, kFrameMagic, 4);
  PutLe(&f, kFrameVersion, 2);
  PutLe(&f, last ? kLastFrame : 0, 2);
  PutLe(&f, ranges.size(), 4);
  PutLe(&f, 0, 4);
  PutLe(&f, seq, 8);
  PutLe(&f, total, 8);
  for (const ByteRange& r : ranges) {
    PutLe(&f, r.offset, 8);
    PutLe(&f, r.length, 8);
  }
  const size_t digest_at = f.size();
  f.resize(digest_at + kDigestBytes + data);
  uint8_t* p = f.data() + digest_at + kDigestBytes;
  for (const ByteRange& r : ranges) {
    COHORT_RETURN_IF_ERROR(PreadAll(fd, p, r.offset, r.length));
    p += r.length;
  }
  const Sha256Digest d = FrameDigest(f, digest_at);
  std::copy(d.begin(), d.end(), f.begin() + digest_at);
  return f;
}

struct Frame {
  bool last = false;
  uint64_t seq = 0;
  uint64_t total = 0;
  std::vector<ByteRange> ranges;
  const uint8_t* data = nullptr;
};

// Validates every field of a received frame before anything is written.
Result<Frame> DecodeFrame(const std::vector<uint8_t>& f, uint64_t file_size) {
  if (f.size() < kHeaderBytes + kDigestBytes || GetLe(f.data(), 4) != kFrameMagic) {
    // The coordinator may have sent an error instead of a frame.
    nlohmann::json j = nlohmann::json::parse(f.begin(), f.end(), nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("error")) {
      return Unavailable("coordinator reports: " + j.value("error", std::string()));
    }
    return Corrupt("share transfer: not a frame");
  }
  if (GetLe(f.data() + 4, 2) != kFrameVersion) return Corrupt("share transfer: frame version");
  Frame fr;
  fr.last = (GetLe(f.data() + 6, 2) & kLastFrame) != 0;
  const uint64_t n = GetLe(f.data() + 8, 4);
  fr.seq = GetLe(f.data() + 16, 8);
  fr.total = GetLe(f.data() + 24, 8);
  if (n > (f.size() - kHeaderBytes - kDigestBytes) / kRangeBytes) {
    return Corrupt("share transfer: frame range table runs past the frame");
  }
  const size_t table_end = kHeaderBytes + n * kRangeBytes;
  uint64_t data = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* p = f.data() + kHeaderBytes + i * kRangeBytes;
    const ByteRange r{GetLe(p, 8), GetLe(p + 8, 8)};
    if (r.offset > file_size || r.length > file_size - r.offset) {
      return Corrupt(fmt::format("share transfer: range [{}, +{}) is outside the {}-byte file",
                                 r.offset, r.length, file_size));
    }
    data += r.length;
    fr.ranges.push_back(r);
  }
  if (data != f.size() - table_end - kDigestBytes) {
    return Corrupt("share transfer: frame data does not match its range table");
  }
  const Sha256Digest d = FrameDigest(f, table_end);
  if (!std::equal(d.begin(), d.end(), f.begin() + table_end)) {
    return Corrupt(fmt::format("share transfer: frame {} fails its sha256 check", fr.seq));
  }
  fr.data = f.data() + table_end + kDigestBytes;
  return fr;
}

comm::Deadline StallDeadline(const TransferOptions& o, comm::Deadline total) {
  return std::min(comm::DeadlineAfter(o.stall_timeout), total);
}

}  // namespace

Status SendRanges(ControlChannel& channel, const std::string& path, uint64_t file_size,
                  std::span<const ByteRange> ranges, const TransferOptions& options) {
  COHORT_CHECK_GT(options.frame_data_bytes, 0u);
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return IoError(fmt::format("{}: open failed: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != file_size) {
    return Corrupt(fmt::format("{} is no longer {} bytes long", path, file_size));
  }
  const comm::Deadline total_deadline = comm::DeadlineAfter(options.total_timeout);
  const uint64_t total = TotalBytes(ranges);
  const uint64_t frame_bytes =
      options.on_sent ? std::min<uint64_t>(options.frame_data_bytes, std::max<uint64_t>(64 << 10, total / 64))
                      : options.frame_data_bytes;
  uint64_t seq = 0, sent = 0;
  size_t i = 0;
  ByteRange rest = i < ranges.size() ? ranges[0] : ByteRange{};
  for (;;) {
    // Fill a frame with whole ranges, splitting the one that does not fit.
    std::vector<ByteRange> part;
    uint64_t bytes = 0;
    while (i < ranges.size() && bytes < frame_bytes && part.size() < kFrameRangesMax) {
      const uint64_t take = std::min<uint64_t>(rest.length, frame_bytes - bytes);
      part.push_back({rest.offset, take});
      bytes += take;
      rest.offset += take;
      rest.length -= take;
      if (rest.length == 0 && ++i < ranges.size()) rest = ranges[i];
    }
    const bool last = i >= ranges.size();
    sent += bytes;
    COHORT_ASSIGN_OR_RETURN(std::vector<uint8_t> frame,
                            EncodeFrame(f.fd, part, seq++, last, last ? sent : 0));
    if (options.tamper_for_test) options.tamper_for_test(frame);
    COHORT_RETURN_IF_ERROR(channel.SendBytes(frame, StallDeadline(options, total_deadline))
                               .Annotate("sending the share"));
    if (options.on_sent) options.on_sent(sent, total);
    if (last) return Status::Ok();
    // The receiver says nothing until the last frame unless it gives up: stop sending then.
    if (channel.Readable()) return Cancelled("the receiver stopped the share transfer");
  }
}

Result<std::vector<ByteRange>> ReceiveRanges(ControlChannel& channel, int fd, uint64_t file_size,
                                             const TransferOptions& options) {
  const comm::Deadline total_deadline = comm::DeadlineAfter(options.total_timeout);
  std::vector<ByteRange> got;
  std::vector<uint8_t> buf;
  uint64_t bytes = 0;
  for (uint64_t seq = 0;; ++seq) {
    const Status st = channel.ReceiveBytes(&buf, StallDeadline(options, total_deadline));
    if (!st.ok()) {
      return st.Annotate(fmt::format("share transfer interrupted after {} frames ({} bytes)", seq, bytes));
    }
    COHORT_ASSIGN_OR_RETURN(Frame fr, DecodeFrame(buf, file_size));
    if (fr.seq != seq) return Corrupt(fmt::format("share transfer: frame {} where {} was due", fr.seq, seq));
    const uint8_t* p = fr.data;
    for (const ByteRange& r : fr.ranges) {
      COHORT_RETURN_IF_ERROR(PwriteAll(fd, p, r.offset, r.length));
      p += r.length;
      bytes += r.length;
      got.push_back(r);
    }
    if (bytes > file_size) return Corrupt("share transfer: more bytes than the file holds");
    if (fr.last) {
      if (fr.total != bytes) {
        return Corrupt(fmt::format("share transfer: {} bytes arrived, the sender sent {}", bytes, fr.total));
      }
      return MergeRanges(std::move(got));
    }
  }
}

Status ServeShareFetch(ControlChannel& channel, const gguf::File& file, const plan::ShardPlan& plan,
                       int rank, const TransferOptions& options) {
  if (file.path().empty()) return InvalidArgument("the coordinator's model was not opened from a file");
  COHORT_ASSIGN_OR_RETURN(std::vector<ByteRange> ranges, ShardByteRanges(file, plan, rank));
  COHORT_ASSIGN_OR_RETURN(const std::string share_sha256, ShareSha256(file.path(), ranges));
  const comm::Deadline deadline = comm::DeadlineAfter(options.stall_timeout);
  COHORT_RETURN_IF_ERROR(channel.Send({{"ranges_digest", HexOf(RangesDigest(ranges))},
                                       {"share_sha256", share_sha256},
                                       {"bytes", TotalBytes(ranges)},
                                       {"n_ranges", ranges.size()}},
                                      deadline));
  COHORT_ASSIGN_OR_RETURN(nlohmann::json answer, channel.Receive(deadline));
  if (!answer.value("send", false)) return Status::Ok();  // the worker has it cached
  return SendRanges(channel, file.path(), file.file_size(), ranges, options);
}

namespace {

// Opens a sparse copy and checks it holds the share the coordinator offered, byte for byte.
Result<std::unique_ptr<gguf::File>> OpenShare(const std::string& path, const ShareRequest& req,
                                              const std::string& ranges_digest, const std::string& share_sha256,
                                              const std::vector<ByteRange>* received) {
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  if (file->file_size() != req.file_bytes) return Corrupt(path + " has the wrong size");
  COHORT_ASSIGN_OR_RETURN(std::vector<ByteRange> need, ShardByteRanges(*file, req.plan, req.rank));
  if (HexOf(RangesDigest(need)) != ranges_digest) {
    return Corrupt("the worker and the coordinator disagree about which bytes the share needs");
  }
  if (received != nullptr && !Covers(*received, need)) {
    return Corrupt("the share transfer left out bytes the share needs");
  }
  COHORT_ASSIGN_OR_RETURN(const std::string got, ShareSha256(path, need));
  if (got != share_sha256) return Corrupt("the share's bytes are not the coordinator's (sha256 differs)");
  return file;
}

}  // namespace

Result<std::string> ShareSha256(const std::string& path, std::span<const ByteRange> ranges) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return IoError(fmt::format("{}: open failed: {}", path, std::strerror(errno)));
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::vector<uint8_t> buf(4 << 20);
  for (const ByteRange& r : ranges) {
    for (uint64_t done = 0; done < r.length;) {
      const uint64_t n = std::min<uint64_t>(buf.size(), r.length - done);
      COHORT_RETURN_IF_ERROR(PreadAll(f.fd, buf.data(), r.offset + done, n));
      crypto_hash_sha256_update(&state, buf.data(), n);
      done += n;
    }
  }
  Sha256Digest d;
  crypto_hash_sha256_final(&state, d.data());
  return HexOf(d);
}

Result<std::unique_ptr<gguf::File>> FetchShare(ControlChannel& channel, const ShareRequest& req,
                                               const TransferOptions& options) {
  if (req.cache_dir.empty()) {
    return NotFound("no local copy of the model and no cache directory to stream it into");
  }
  if (!IsSha256Hex(req.sha256)) return InvalidArgument("the job's model sha256 is malformed");
  if (req.file_bytes == 0 || req.file_bytes > kModelBytesMax) {
    return InvalidArgument(fmt::format("the job's model size {} is out of bounds", req.file_bytes));
  }
  const comm::Deadline deadline = comm::DeadlineAfter(options.stall_timeout);
  COHORT_RETURN_IF_ERROR(channel.Send({{"fetch", true}}, deadline));
  COHORT_ASSIGN_OR_RETURN(nlohmann::json offer, channel.Receive(deadline));
  const std::string ranges_digest = offer.value("ranges_digest", std::string());
  const uint64_t share_bytes = offer.value("bytes", uint64_t{0});
  const std::string share_sha256 = offer.value("share_sha256", std::string());
  if (!IsSha256Hex(ranges_digest) || !IsSha256Hex(share_sha256) || share_bytes > req.file_bytes) {
    return Corrupt("the coordinator's share offer is malformed");
  }
  std::error_code ec;
  std::filesystem::create_directories(req.cache_dir, ec);
  const std::string path = fmt::format("{}/{}-{}.gguf", req.cache_dir, req.sha256, ranges_digest.substr(0, 16));
  if (auto cached = OpenShare(path, req, ranges_digest, share_sha256, nullptr); cached.ok()) {
    TouchShare(path);
    COHORT_RETURN_IF_ERROR(channel.Send({{"send", false}}, deadline));
    return cached;
  }
  COHORT_RETURN_IF_ERROR(MakeRoomInShareCache(req.cache_dir, share_bytes, req.cache_bytes_max));
  struct statvfs vfs {};
  if (::statvfs(req.cache_dir.c_str(), &vfs) == 0 &&
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize < share_bytes) {
    return ResourceExhausted(fmt::format("{} has no room for the share's {} bytes", req.cache_dir, share_bytes));
  }
  // Unique per fetch: two jobs in one process may fetch the same share at once.
  std::random_device rd;
  const std::string partial = fmt::format("{}.partial.{}.{:08x}", path, ::getpid(), rd());
  Fd f{::open(partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (f.fd < 0) return IoError(fmt::format("{}: {}", partial, std::strerror(errno)));
  auto received = [&]() -> Result<std::vector<ByteRange>> {
    if (::ftruncate(f.fd, static_cast<off_t>(req.file_bytes)) != 0) {
      return IoError(fmt::format("{}: ftruncate: {}", partial, std::strerror(errno)));
    }
    COHORT_RETURN_IF_ERROR(channel.Send({{"send", true}}, deadline));
    return ReceiveRanges(channel, f.fd, req.file_bytes, options);
  }();
  auto file = received.ok() ? OpenShare(partial, req, ranges_digest, share_sha256, &*received)
                            : Result<std::unique_ptr<gguf::File>>(received.status());
  if (file.ok() && ::fdatasync(f.fd) == 0 && ::rename(partial.c_str(), path.c_str()) == 0) return file;
  ::unlink(partial.c_str());
  return file;  // the error, or a share that works but could not be kept for next time
}

}  // namespace cohort::parallel
