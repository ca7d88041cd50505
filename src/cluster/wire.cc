// Encoding, decoding and authentication of control messages; the replay guard.
#include "cluster/wire.h"

#include <sodium.h>

#include <cstring>

namespace cohort::cluster {
namespace {

constexpr uint8_t kMagic[4] = {'C', 'H', 'C', 'P'};
// BLAKE2b key for deriving the auth key: a fixed context string, so a secret reused by
// another program does not give the same key.
constexpr char kKeyContext[] = "cohort-cluster-control-v1";

static_assert(crypto_auth_BYTES == kWireMacBytes);
static_assert(crypto_auth_KEYBYTES == 32);

void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void PutU64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t GetU64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kHeartbeat: return "heartbeat";
    case MessageType::kState: return "state";
    case MessageType::kStateRequest: return "state_request";
    case MessageType::kPing: return "ping";
    case MessageType::kPong: return "pong";
    case MessageType::kPropose: return "propose";
    case MessageType::kProposeReply: return "propose_reply";
    case MessageType::kProbe: return "probe";
    case MessageType::kProbeReply: return "probe_reply";
  }
  return "unknown";
}

bool IsKnownMessageType(uint8_t type) {
  return type >= static_cast<uint8_t>(MessageType::kHeartbeat) &&
         type <= static_cast<uint8_t>(MessageType::kProbeReply);
}

Result<ClusterKey> DeriveClusterKey(const std::string& secret) {
  if (sodium_init() < 0) return Internal("libsodium failed to initialise");
  if (secret.empty()) return InvalidArgument("the cluster secret is empty");
  if (secret.size() > 4096) return InvalidArgument("the cluster secret is longer than 4096 bytes");
  ClusterKey key;
  crypto_generichash(key.data(), key.size(), reinterpret_cast<const uint8_t*>(secret.data()),
                     secret.size(), reinterpret_cast<const uint8_t*>(kKeyContext),
                     sizeof(kKeyContext) - 1);
  return key;
}

std::vector<uint8_t> EncodeMessage(const ClusterKey& key, Message message, const Clock& clock) {
  COHORT_CHECK_LE(message.payload.size(), kMaxPayloadBytes);
  if (message.timestamp_ms == 0) message.timestamp_ms = clock.WallMs();
  while (message.nonce == 0) randombytes_buf(&message.nonce, sizeof(message.nonce));
  const size_t n = message.payload.size();
  std::vector<uint8_t> out(kWireHeaderBytes + n + kWireMacBytes);
  uint8_t* p = out.data();
  std::memcpy(p, kMagic, 4);
  p[4] = kWireVersion;
  p[5] = static_cast<uint8_t>(message.type);
  p[6] = p[7] = 0;
  PutU32(p + 8, static_cast<uint32_t>(n));
  std::memcpy(p + 12, message.sender.bytes.data(), 16);
  PutU64(p + 28, message.timestamp_ms);
  PutU64(p + 36, message.nonce);
  if (n > 0) std::memcpy(p + kWireHeaderBytes, message.payload.data(), n);
  crypto_auth(p + kWireHeaderBytes + n, p, kWireHeaderBytes + n, key.data());
  return out;
}

size_t PeekPayloadBytes(std::span<const uint8_t> header) {
  if (header.size() < kWireHeaderBytes || std::memcmp(header.data(), kMagic, 4) != 0) return 0;
  return GetU32(header.data() + 8);
}

DecodeError DecodeMessage(const ClusterKey& key, std::span<const uint8_t> bytes, Message* out) {
  if (bytes.size() < kWireHeaderBytes + kWireMacBytes) return DecodeError::kTooShort;
  if (bytes.size() > kMaxMessageBytes) return DecodeError::kTooLarge;
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kMagic, 4) != 0) return DecodeError::kBadMagic;
  if (p[4] != kWireVersion) return DecodeError::kBadVersion;
  if (!IsKnownMessageType(p[5]) || p[6] != 0 || p[7] != 0) return DecodeError::kBadType;
  const uint32_t n = GetU32(p + 8);
  if (n > kMaxPayloadBytes || kWireHeaderBytes + n + kWireMacBytes != bytes.size()) {
    return DecodeError::kBadLength;
  }
  if (crypto_auth_verify(p + kWireHeaderBytes + n, p, kWireHeaderBytes + n, key.data()) != 0) {
    return DecodeError::kBadMac;
  }
  out->type = static_cast<MessageType>(p[5]);
  std::memcpy(out->sender.bytes.data(), p + 12, 16);
  out->timestamp_ms = GetU64(p + 28);
  out->nonce = GetU64(p + 36);
  out->payload.assign(reinterpret_cast<const char*>(p + kWireHeaderBytes), n);
  return DecodeError::kNone;
}

void ReplayGuard::Expire(Seen* seen, uint64_t now_ms) const {
  // A nonce stamped before now - window would be rejected as stale anyway: forget it.
  while (!seen->order.empty() && seen->order.front().first + window_ms_ < now_ms) {
    seen->nonces.erase(seen->order.front().second);
    seen->order.pop_front();
  }
}

ReplayGuard::Verdict ReplayGuard::Check(const Message& message, uint64_t now_ms) {
  const uint64_t ts = message.timestamp_ms;
  if (ts + window_ms_ < now_ms || ts > now_ms + window_ms_) return Verdict::kStale;
  auto it = seen_.find(message.sender);
  if (it == seen_.end()) {
    if (seen_.size() >= max_senders_) {
      // Drop senders whose every nonce has expired before refusing a new one.
      for (auto s = seen_.begin(); s != seen_.end();) {
        Expire(&s->second, now_ms);
        s = s->second.order.empty() ? seen_.erase(s) : std::next(s);
      }
      if (seen_.size() >= max_senders_) return Verdict::kFull;
    }
    it = seen_.emplace(message.sender, Seen{}).first;
  }
  Seen& seen = it->second;
  Expire(&seen, now_ms);
  if (seen.nonces.count(message.nonce) != 0) return Verdict::kReplay;
  if (seen.order.size() >= max_per_sender_) return Verdict::kFull;
  seen.nonces.insert(message.nonce);
  // Kept in arrival order; expiry by timestamp is then approximate (timestamps may arrive out
  // of order by up to the network delay), which only keeps a nonce a little longer.
  seen.order.emplace_back(std::max(ts, seen.order.empty() ? ts : seen.order.back().first),
                          message.nonce);
  return Verdict::kAccept;
}

}  // namespace cohort::cluster
