// Control-plane wire format: small, versioned, length-prefixed messages whose JSON payload is
// authenticated with a key derived from the cluster secret (libsodium crypto_auth), and the
// replay guard that rejects a message seen before or stamped outside the time window.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "cluster/node_id.h"
#include "core/clock.h"
#include "core/status.h"

namespace cohort::cluster {

inline constexpr uint8_t kWireVersion = 1;
inline constexpr size_t kWireHeaderBytes = 44;  // magic..nonce, see EncodeMessage
inline constexpr size_t kWireMacBytes = 32;     // crypto_auth_BYTES
// UDP datagrams stay below the IPv4 limit; the full cluster state is the largest message.
inline constexpr size_t kMaxPayloadBytes = 60000;
inline constexpr size_t kMaxMessageBytes = kWireHeaderBytes + kMaxPayloadBytes + kWireMacBytes;

enum class MessageType : uint8_t {
  kHeartbeat = 1,     // liveness, discovery and the sender's profile (UDP)
  kState = 2,         // the full agreed cluster state (UDP)
  kStateRequest = 3,  // "send me your state": the sender saw a newer one advertised (UDP)
  kPing = 4,          // link latency probe (UDP)
  kPong = 5,          // its echo (UDP)
  kPropose = 6,       // a change forwarded to the leader (TCP request)
  kProposeReply = 7,  // the leader's answer (TCP reply)
  kProbe = 8,         // link bandwidth probe: announces N raw bytes that follow (TCP)
  kProbeReply = 9,    // the probe's receipt (TCP reply)
};
const char* MessageTypeName(MessageType type);
bool IsKnownMessageType(uint8_t type);

// The cluster key: a 32-byte crypto_auth key derived from the secret with BLAKE2b
// (crypto_generichash) under a fixed context, so the raw secret never keys anything itself.
using ClusterKey = std::array<uint8_t, 32>;
Result<ClusterKey> DeriveClusterKey(const std::string& secret);

struct Message {
  MessageType type = MessageType::kHeartbeat;
  NodeId sender;
  uint64_t timestamp_ms = 0;  // sender's wall clock (unix ms, Clock::WallMs)
  uint64_t nonce = 0;         // random per message
  std::string payload;        // JSON text
};

// Layout (little-endian):
//   0  u8[4] magic "CHCP"      4 u8 version      5 u8 type      6 u16 reserved (0)
//   8  u32 payload bytes       12 u8[16] sender id
//   28 u64 timestamp_ms        36 u64 nonce      44 payload     44+N u8[32] MAC of [0, 44+N)
// Fills timestamp (from `clock`'s wall time) and nonce when they are 0. payload must be
// <= kMaxPayloadBytes.
std::vector<uint8_t> EncodeMessage(const ClusterKey& key, Message message,
                                   const Clock& clock = Clock::Real());

enum class DecodeError { kNone, kTooShort, kTooLarge, kBadMagic, kBadVersion, kBadType,
                         kBadLength, kBadMac };
// Validates every length before use and checks the MAC; returns kNone and fills `out` only
// for an intact, authentic message. The timestamp and nonce are checked by ReplayGuard.
DecodeError DecodeMessage(const ClusterKey& key, std::span<const uint8_t> bytes, Message* out);
// Reads the payload length from a header (TCP framing); 0 when the header is not ours.
size_t PeekPayloadBytes(std::span<const uint8_t> header);

// Rejects messages stamped more than `window_ms` away from now and (sender, nonce) pairs seen
// within the window. Bounded: at most max_senders senders and max_per_sender nonces each; a
// message that would exceed a bound is rejected, never admitted by forgetting a live entry.
class ReplayGuard {
 public:
  ReplayGuard(uint64_t window_ms, size_t max_senders = 256, size_t max_per_sender = 8192)
      : window_ms_(window_ms), max_senders_(max_senders), max_per_sender_(max_per_sender) {}
  enum class Verdict { kAccept, kStale, kReplay, kFull };
  Verdict Check(const Message& message, uint64_t now_ms);

 private:
  struct Seen {
    std::deque<std::pair<uint64_t, uint64_t>> order;  // (received ms, nonce), oldest first
    std::unordered_set<uint64_t> nonces;
  };
  void Expire(Seen* seen, uint64_t now_ms) const;

  uint64_t window_ms_;
  size_t max_senders_;
  size_t max_per_sender_;
  std::map<NodeId, Seen> seen_;
};

}  // namespace cohort::cluster
