// The control connection between a coordinator and one worker while an instance is set up:
// small JSON messages, each a 4-byte little-endian length then the text, bounded in size and
// in time. Activations never travel here (they use comm); this carries the job and, for a
// worker without the model file, the frames of its share's bytes (shard_transfer.h).
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::parallel {

class ControlChannel {
 public:
  static constexpr size_t kMessageBytesMax = 16 << 20;

  // Connects to "host:port", retrying until `timeout` (a worker may still be starting).
  static Result<std::unique_ptr<ControlChannel>> Connect(const std::string& address,
                                                         std::chrono::milliseconds timeout);
  // Takes ownership of a connected socket.
  explicit ControlChannel(int fd) : fd_(fd) {}
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  Status Send(const nlohmann::json& message, comm::Deadline deadline);
  // A message that is not JSON, too long, or carries {"error": text} is an error (the
  // latter kUnavailable with the peer's text).
  Result<nlohmann::json> Receive(comm::Deadline deadline);
  // The next message as it came, an {"error": ...} report included.
  Result<nlohmann::json> ReceiveAny(comm::Deadline deadline);
  // Ok unless `message` is the peer's error report; then kUnavailable("peer reports: ...").
  static Status PeerError(const nlohmann::json& message);
  // A binary message with the same length prefix (the protocol says which kind comes next).
  Status SendBytes(std::span<const uint8_t> bytes, comm::Deadline deadline);
  // Reads one binary message into *bytes (resized); at most kMessageBytesMax.
  Status ReceiveBytes(std::vector<uint8_t>* bytes, comm::Deadline deadline);
  // Closes our sending side and reads (discarding) until the peer closes or the deadline: a
  // peer still sending then reads our last message instead of a reset connection.
  void DrainUntilClosed(comm::Deadline deadline);
  // Whether a message (or the peer's close) is waiting to be read, without blocking.
  bool Readable() const;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace cohort::parallel
