// Streaming a rank's share of a GGUF to a worker that has no copy of the file. The coordinator
// sends the share's byte ranges (shard_bytes.h) over the job's control channel in frames, each
// with its SHA-256; the worker checks every frame, writes it at its offset into a sparse file
// of the model's full size in its cache directory, checks that it got every byte its share
// needs, and opens that file with the normal GGUF loader. Only the share is ever stored.
//
// Protocol, after the job (W = worker, C = coordinator; JSON unless said otherwise):
//   W: {"fetch": true}       C: {"ranges_digest": hex, "share_sha256": hex, "bytes": n, "n_ranges": k}
//   W: {"send": true|false}  (false: its cache already holds that share)
//   C: binary frames, the last one flagged, then W replies to the job as a local worker does.
// Frame (little-endian): magic u32, version u16, flags u16 (1: last), n_ranges u32, pad u32,
// seq u64, total u64 (last frame: data bytes of all frames), then n_ranges x (offset u64,
// length u64), then the SHA-256 of everything before it and the data, then the data.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf.h"
#include "parallel/control_channel.h"
#include "parallel/shard_bytes.h"
#include "plan/shard_plan.h"

namespace cohort::parallel {

struct TransferOptions {
  size_t frame_data_bytes = 4 << 20;  // data per frame (the channel carries up to 16 MiB)
  // A peer that sends nothing for this long has stalled: the transfer fails.
  std::chrono::milliseconds stall_timeout{60000};
  std::chrono::milliseconds total_timeout{std::chrono::hours(2)};
  // Called after each frame is sent with the share's bytes sent so far and in all (progress).
  // Set, frames carry at most 1/64 of the share (at least 64 KiB), so the figures move.
  std::function<void(uint64_t bytes_sent, uint64_t bytes_total)> on_sent;
  // Tests only: sees each frame after its digest was computed, before it is sent.
  std::function<void(std::vector<uint8_t>& frame)> tamper_for_test;
};

// The largest model file a worker accepts to stream into its cache.
inline constexpr uint64_t kModelBytesMax = uint64_t{1} << 42;  // 4 TiB

// Frames: sends bytes `ranges` (merged) of the file at `path`, which must be `file_size` long.
Status SendRanges(ControlChannel& channel, const std::string& path, uint64_t file_size,
                  std::span<const ByteRange> ranges, const TransferOptions& options);
// Receives frames until the last one, writing each range at its offset of `fd` (a file of
// `file_size` bytes); returns the merged ranges written. A bad digest, a range outside the
// file, a missing frame, a closed connection or a stall is an error.
Result<std::vector<ByteRange>> ReceiveRanges(ControlChannel& channel, int fd, uint64_t file_size,
                                             const TransferOptions& options);

// Coordinator: answers a worker's {"fetch"} for plan rank `rank` from `file` (opened from a
// path) through to the last frame.
Status ServeShareFetch(ControlChannel& channel, const gguf::File& file, const plan::ShardPlan& plan,
                       int rank, const TransferOptions& options);

struct ShareRequest {
  std::string cache_dir;  // where the sparse copies live
  std::string sha256;     // of the whole model file (hex)
  uint64_t file_bytes = 0;
  plan::ShardPlan plan;
  int rank = 0;
  uint64_t cache_bytes_max = 0;  // the cache's bound (share_cache.h); 0: none
};
// Worker: fetches its share (or finds it in the cache) and opens it. The file in the cache is
// named by the model's digest and the share's range digest, so a later job with the same share
// reuses it. The share's bytes, cached or just received, are used only when their SHA-256 is
// the one the coordinator computed from its copy of the model (share_sha256): a share another
// job left in the cache under the same model digest is not trusted for its name.
// The SHA-256 (hex) of the bytes `ranges` of the file at `path`, in order.
Result<std::string> ShareSha256(const std::string& path, std::span<const ByteRange> ranges);

Result<std::unique_ptr<gguf::File>> FetchShare(ControlChannel& channel, const ShareRequest& request,
                                               const TransferOptions& options);

}  // namespace cohort::parallel
