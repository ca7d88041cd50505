// What the byte-stream transports (TCP, shared memory) share: the progress of each frame an
// Exchange sends or receives, the broken/closed bookkeeping every Transport must keep (an
// error is final, a closed transport refuses work), and the checks that open an Exchange.
// Each transport adds only how bytes move: sockets or rings.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "comm/frame.h"
#include "comm/transport.h"

namespace cohort::comm {

// One frame on its way out: its header, then the caller's payload (or, encrypted, its
// ciphertext and tag).
struct FrameSend {
  int peer = -1;
  FrameHeaderBytes header{};
  std::span<const std::byte> payload;
  size_t done = 0;  // bytes of header + payload written
  bool finished() const { return done == kFrameHeaderBytes + payload.size(); }
};

// One frame on its way in: the header lands here and is checked against `tag` and the
// payload's size before any payload byte is taken. On an encrypted stream (TCP with a secret)
// the AEAD tag follows the payload (trailer_bytes = kSealTagBytes) and the payload is
// ciphertext until the transport opens it.
struct FrameRecv {
  int peer = -1;
  uint32_t tag = 0;
  FrameHeaderBytes header{};
  std::span<std::byte> payload;
  size_t done = 0;  // bytes of header + payload + trailer read
  std::array<std::byte, 16> trailer{};
  size_t trailer_bytes = 0;
  bool finished() const { return done == kFrameHeaderBytes + payload.size() + trailer_bytes; }
};

class FramedTransport : public Transport {
 public:
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return name_; }

 protected:
  // `name` must outlive the transport (a string literal).
  FramedTransport(const char* name, int rank, int size);

  // Opens an Exchange: the lasting error when the transport is broken or closed; else checks
  // the arguments and fills sends_ and recvs_ with one state per op, headers encoded.
  Status BeginExchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  // Makes `status` (annotated with the transport and rank) what every later call returns.
  Status Fail(Status status);
  // True the first time only: the caller then tells its peers and releases what it holds.
  bool MarkClosed();

  const int rank_;
  // Reused across calls so the steady state allocates nothing.
  std::vector<FrameSend> sends_;
  std::vector<FrameRecv> recvs_;

 private:
  const char* name_;
  int size_;
  Status broken_;
  bool closed_ = false;
};

}  // namespace cohort::comm
