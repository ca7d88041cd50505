// The control connection between a coordinator and one worker while an instance is set up:
// small JSON messages, each a 4-byte little-endian length then the text, bounded in size and
// in time. Activations never travel here (they use comm); this carries the job and, for a
// worker without the model file, the frames of its share's bytes (shard_transfer.h). With a
// cluster key the connection opens with the secure handshake and every message is a sealed
// record (comm/secure_channel.h), so nothing of the job is read from an unauthenticated peer.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/secure_channel.h"
#include "comm/transport.h"
#include "core/status.h"

namespace cohort::parallel {

class ControlChannel {
 public:
  static constexpr size_t kMessageBytesMax = 16 << 20;

  // Connects to "host:port", retrying until `timeout` (a worker may still be starting), and
  // with a key runs the handshake as its client (kCorrupt: the worker has another secret).
  static Result<std::unique_ptr<ControlChannel>> Connect(const std::string& address,
                                                         std::chrono::milliseconds timeout,
                                                         const std::optional<comm::ChannelKey>& key = std::nullopt);
  // Takes ownership of a connected socket; `session` (null: plain) is its handshake's outcome.
  explicit ControlChannel(int fd, std::unique_ptr<comm::SecureSession> session = nullptr)
      : fd_(fd), session_(std::move(session)) {}
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
  bool secure() const { return session_ != nullptr; }

 private:
  int fd_ = -1;
  std::unique_ptr<comm::SecureSession> session_;
  std::vector<std::byte> record_;  // sealed records in and out, reused
};

}  // namespace cohort::parallel
