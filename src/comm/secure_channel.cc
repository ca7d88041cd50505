// SecureSession and the handshake; see secure_channel.h.
//
// Handshake (all fixed sizes, little-endian):
//   client -> server  M1 = magic "CHRS" u32 | version u16 | caps u16 | client kx public key [32]
//   server -> client  M2 = magic u32 | version u16 | caps u16 | server kx public key [32] | mac_s [32]
//   client -> server  M3 = mac_c [32]
// T = M1 || M2 without its mac. mac_s = BLAKE2b(key K, "server" || T), mac_c = BLAKE2b(K,
// "client" || T), K the ChannelKey. Both public keys are fresh per connection, so a replayed
// M1/M3 (or M2) is proved over a transcript the other end never saw and fails. The record keys
// are BLAKE2b(K, label || crypto_kx session key || T): each needs both the secret and the
// ephemeral keys. caps bit 0 says "I have AES-256-GCM"; it is in T, so flipping it fails.
#include "comm/secure_channel.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include <fmt/format.h>
#include <sodium.h>

#include "comm/frame.h"
#include "comm/socket_util.h"

namespace cohort::comm {
namespace {

constexpr uint32_t kHandshakeMagic = 0x53524843;  // "CHRS"
constexpr uint16_t kHandshakeVersion = 1;
constexpr uint16_t kCapAes = 1;
constexpr size_t kHelloPartBytes = 8 + crypto_kx_PUBLICKEYBYTES;   // M1, and M2 without its mac
constexpr size_t kMacBytes = 32;
constexpr const char* kKeyContext = "cohort data plane v1";

static_assert(sizeof(crypto_aead_aes256gcm_state) == 512);
static_assert(crypto_aead_aes256gcm_ABYTES == kSealTagBytes);
static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == kSealTagBytes);
static_assert(crypto_aead_aes256gcm_NPUBBYTES == 12 && crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12);
static_assert(crypto_kx_SESSIONKEYBYTES == 32);

using HelloPart = std::array<uint8_t, kHelloPartBytes>;

bool HaveAes() { return crypto_aead_aes256gcm_is_available() != 0; }

HelloPart EncodeHelloPart(uint16_t caps, const uint8_t pk[crypto_kx_PUBLICKEYBYTES]) {
  HelloPart out{};
  auto* b = reinterpret_cast<std::byte*>(out.data());
  StoreLe32(b, kHandshakeMagic);
  out[4] = kHandshakeVersion & 0xff;
  out[5] = kHandshakeVersion >> 8;
  out[6] = caps & 0xff;
  out[7] = caps >> 8;
  std::memcpy(out.data() + 8, pk, crypto_kx_PUBLICKEYBYTES);
  return out;
}

// The peer's caps, after checking the magic and version.
Result<uint16_t> DecodeHelloPart(const HelloPart& part) {
  if (LoadLe32(reinterpret_cast<const std::byte*>(part.data())) != kHandshakeMagic) {
    return Corrupt("authentication failed: the peer did not open a secure handshake (no secret, or not cohort)");
  }
  const uint16_t version = static_cast<uint16_t>(part[4] | (part[5] << 8));
  if (version != kHandshakeVersion) {
    return Corrupt(fmt::format("authentication failed: handshake version {} (this build speaks {})", version,
                               kHandshakeVersion));
  }
  return static_cast<uint16_t>(part[6] | (part[7] << 8));
}

// BLAKE2b keyed with K over label || parts..., `out_bytes` long.
void KeyedHash(const ChannelKey& key, const char* label, std::span<const std::span<const uint8_t>> parts,
               uint8_t* out, size_t out_bytes) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, key.bytes.data(), key.bytes.size(), out_bytes);
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(label), std::strlen(label));
  for (std::span<const uint8_t> p : parts) crypto_generichash_update(&state, p.data(), p.size());
  crypto_generichash_final(&state, out, out_bytes);
}

struct Transcript {
  HelloPart client{};
  HelloPart server{};
  void Mac(const ChannelKey& key, const char* label, uint8_t out[kMacBytes]) const {
    const std::span<const uint8_t> parts[] = {client, server};
    KeyedHash(key, label, parts, out, kMacBytes);
  }
};

Status Write(int fd, const uint8_t* p, size_t n, Deadline deadline) {
  return WriteAll(fd, std::as_bytes(std::span(p, n)), deadline);
}
Status Read(int fd, uint8_t* p, size_t n, Deadline deadline) {
  return ReadAll(fd, std::as_writable_bytes(std::span(p, n)), deadline);
}

}  // namespace

struct SessionFactory {
  static std::unique_ptr<SecureSession> Make(Cipher cipher, const uint8_t tx[32], const uint8_t rx[32]) {
    return std::unique_ptr<SecureSession>(new SecureSession(cipher, tx, rx));
  }
};

Result<ChannelKey> DeriveChannelKey(std::string_view secret) {
  if (sodium_init() < 0) return Internal("libsodium failed to initialise");
  if (secret.empty()) return InvalidArgument("the cluster secret is empty");
  if (secret.size() > 4096) return InvalidArgument("the cluster secret is longer than 4096 bytes");
  ChannelKey key;
  crypto_generichash(key.bytes.data(), key.bytes.size(), reinterpret_cast<const uint8_t*>(secret.data()),
                     secret.size(), reinterpret_cast<const uint8_t*>(kKeyContext), std::strlen(kKeyContext));
  return key;
}

ChannelKey DeriveSubKey(const ChannelKey& key, std::string_view purpose) {
  COHORT_CHECK(sodium_init() >= 0);
  ChannelKey sub;
  crypto_generichash(sub.bytes.data(), sub.bytes.size(), reinterpret_cast<const uint8_t*>(purpose.data()),
                     purpose.size(), key.bytes.data(), key.bytes.size());
  return sub;
}

bool AesGcmAvailable() { return sodium_init() >= 0 && HaveAes(); }

const char* CipherName(Cipher cipher) {
  return cipher == Cipher::kAes256Gcm ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

SecureSession::SecureSession(Cipher cipher, const uint8_t tx[32], const uint8_t rx[32]) : cipher_(cipher) {
  std::memset(tx_state_, 0, sizeof(tx_state_));
  std::memset(rx_state_, 0, sizeof(rx_state_));
  if (cipher_ == Cipher::kAes256Gcm) {
    // The expanded key once, not per record.
    crypto_aead_aes256gcm_beforenm(reinterpret_cast<crypto_aead_aes256gcm_state*>(tx_state_), tx);
    crypto_aead_aes256gcm_beforenm(reinterpret_cast<crypto_aead_aes256gcm_state*>(rx_state_), rx);
  } else {
    std::memcpy(tx_state_, tx, 32);
    std::memcpy(rx_state_, rx, 32);
  }
}

SecureSession::~SecureSession() {
  sodium_memzero(tx_state_, sizeof(tx_state_));
  sodium_memzero(rx_state_, sizeof(rx_state_));
}

std::unique_ptr<SecureSession> SecureSession::ForTest(Cipher cipher, const ChannelKey& tx, const ChannelKey& rx) {
  COHORT_CHECK(sodium_init() >= 0);
  return SessionFactory::Make(cipher, tx.bytes.data(), rx.bytes.data());
}

void SecureSession::Nonce(uint64_t counter, uint8_t out[12]) const {
  std::memset(out, 0, 12);
  StoreLe64(reinterpret_cast<std::byte*>(out), counter);
}

void SecureSession::Seal(std::span<const std::byte> ad, std::span<const std::byte> plain, std::span<std::byte> out) {
  COHORT_CHECK(out.size() == plain.size() + kSealTagBytes);
  // 2^64 records would reuse a nonce; at a record per microsecond that is 584,000 years.
  COHORT_CHECK(tx_counter_ != UINT64_MAX);
  uint8_t nonce[12];
  Nonce(tx_counter_++, nonce);
  auto* c = reinterpret_cast<uint8_t*>(out.data());
  auto* m = reinterpret_cast<const uint8_t*>(plain.data());
  auto* a = reinterpret_cast<const uint8_t*>(ad.data());
  if (cipher_ == Cipher::kAes256Gcm) {
    crypto_aead_aes256gcm_encrypt_detached_afternm(
        c, c + plain.size(), nullptr, m, plain.size(), a, ad.size(), nullptr, nonce,
        reinterpret_cast<const crypto_aead_aes256gcm_state*>(tx_state_));
  } else {
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(c, c + plain.size(), nullptr, m, plain.size(), a, ad.size(),
                                                       nullptr, nonce, tx_state_);
  }
}

Status SecureSession::Open(std::span<const std::byte> ad, std::span<std::byte> data,
                           std::span<const std::byte, kSealTagBytes> tag) {
  uint8_t nonce[12];
  Nonce(rx_counter_, nonce);
  auto* d = reinterpret_cast<uint8_t*>(data.data());
  auto* t = reinterpret_cast<const uint8_t*>(tag.data());
  auto* a = reinterpret_cast<const uint8_t*>(ad.data());
  int rc;
  if (cipher_ == Cipher::kAes256Gcm) {
    rc = crypto_aead_aes256gcm_decrypt_detached_afternm(d, nullptr, d, data.size(), t, a, ad.size(), nonce,
                                                        reinterpret_cast<const crypto_aead_aes256gcm_state*>(rx_state_));
  } else {
    rc = crypto_aead_chacha20poly1305_ietf_decrypt_detached(d, nullptr, d, data.size(), t, a, ad.size(), nonce,
                                                            rx_state_);
  }
  if (rc != 0) {
    sodium_memzero(d, data.size());
    return Corrupt(fmt::format("record {} failed authentication (altered, replayed, reordered, or another key)",
                               rx_counter_));
  }
  ++rx_counter_;
  return Status::Ok();
}

namespace {

// One end's fresh key pair and what the messages carried.
struct HandshakeState {
  uint8_t pk[crypto_kx_PUBLICKEYBYTES];
  uint8_t sk[crypto_kx_SECRETKEYBYTES];
  uint16_t caps = 0;
  uint16_t peer_caps = 0;
  Transcript t;
  ~HandshakeState() { sodium_memzero(sk, sizeof(sk)); }
};

Status PeerCaps(const HelloPart& part, uint16_t* caps) {
  COHORT_ASSIGN_OR_RETURN(*caps, DecodeHelloPart(part));
  return Status::Ok();
}

// M1 out, M2 in (the server's proof checked), M3 out.
Status ClientMessages(int fd, const ChannelKey& key, HandshakeState* h, Deadline deadline) {
  h->t.client = EncodeHelloPart(h->caps, h->pk);
  COHORT_RETURN_IF_ERROR(Write(fd, h->t.client.data(), h->t.client.size(), deadline));
  COHORT_RETURN_IF_ERROR(Read(fd, h->t.server.data(), h->t.server.size(), deadline));
  uint8_t mac_peer[kMacBytes], mac[kMacBytes];
  COHORT_RETURN_IF_ERROR(Read(fd, mac_peer, kMacBytes, deadline));
  COHORT_RETURN_IF_ERROR(PeerCaps(h->t.server, &h->peer_caps));
  h->t.Mac(key, "server", mac);
  if (crypto_verify_32(mac, mac_peer) != 0) {
    return Corrupt("authentication failed: the peer does not know the cluster secret (or another secret)");
  }
  h->t.Mac(key, "client", mac);
  return Write(fd, mac, kMacBytes, deadline);
}

// M1 in, M2 out, M3 in (the client's proof checked).
Status ServerMessages(int fd, const ChannelKey& key, HandshakeState* h, Deadline deadline) {
  COHORT_RETURN_IF_ERROR(Read(fd, h->t.client.data(), h->t.client.size(), deadline));
  COHORT_RETURN_IF_ERROR(PeerCaps(h->t.client, &h->peer_caps));
  h->t.server = EncodeHelloPart(h->caps, h->pk);
  uint8_t mac_peer[kMacBytes], mac[kMacBytes];
  h->t.Mac(key, "server", mac);
  COHORT_RETURN_IF_ERROR(Write(fd, h->t.server.data(), h->t.server.size(), deadline));
  COHORT_RETURN_IF_ERROR(Write(fd, mac, kMacBytes, deadline));
  COHORT_RETURN_IF_ERROR(Read(fd, mac_peer, kMacBytes, deadline));
  h->t.Mac(key, "client", mac);
  if (crypto_verify_32(mac, mac_peer) != 0) {
    return Corrupt("authentication failed: the peer does not know the cluster secret");
  }
  return Status::Ok();
}

// The record keys: crypto_kx's, each bound to the secret and the transcript.
Result<std::unique_ptr<SecureSession>> DeriveSession(const ChannelKey& key, const HandshakeState& h, bool client) {
  uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
  const uint8_t* peer_pk = (client ? h.t.server.data() : h.t.client.data()) + 8;
  const int rc = client ? crypto_kx_client_session_keys(rx, tx, h.pk, h.sk, peer_pk)
                        : crypto_kx_server_session_keys(rx, tx, h.pk, h.sk, peer_pk);
  if (rc != 0) return Corrupt("authentication failed: the peer's public key is unusable");
  const std::span<const uint8_t> tx_parts[] = {tx, h.t.client, h.t.server};
  const std::span<const uint8_t> rx_parts[] = {rx, h.t.client, h.t.server};
  uint8_t tx_key[32], rx_key[32];
  KeyedHash(key, client ? "c2s" : "s2c", tx_parts, tx_key, 32);
  KeyedHash(key, client ? "s2c" : "c2s", rx_parts, rx_key, 32);
  const Cipher cipher =
      ((h.caps & kCapAes) && (h.peer_caps & kCapAes)) ? Cipher::kAes256Gcm : Cipher::kChaCha20Poly1305;
  auto session = SessionFactory::Make(cipher, tx_key, rx_key);
  for (uint8_t* k : {rx, tx, tx_key, rx_key}) sodium_memzero(k, 32);
  return session;
}

}  // namespace

Result<std::unique_ptr<SecureSession>> Handshake(int fd, HandshakeRole role, const ChannelKey& key,
                                                 Deadline deadline, bool force_chacha) {
  if (sodium_init() < 0) return Internal("libsodium failed to initialise");
  HandshakeState h;
  crypto_kx_keypair(h.pk, h.sk);
  h.caps = (!force_chacha && HaveAes()) ? kCapAes : 0;
  const bool client = role == HandshakeRole::kClient;
  COHORT_RETURN_IF_ERROR(client ? ClientMessages(fd, key, &h, deadline) : ServerMessages(fd, key, &h, deadline));
  return DeriveSession(key, h, client);
}

Status WriteRecord(int fd, SecureSession& session, std::span<const std::byte> plain, std::vector<std::byte>* scratch,
                   Deadline deadline) {
  if (plain.size() > UINT32_MAX) return InvalidArgument("record too long");
  const size_t n = 4 + plain.size() + kSealTagBytes;
  if (scratch->size() < n) scratch->resize(n);
  std::byte* p = scratch->data();
  StoreLe32(p, static_cast<uint32_t>(plain.size()));
  session.Seal(std::span<const std::byte>(p, 4), plain, std::span<std::byte>(p + 4, plain.size() + kSealTagBytes));
  return WriteAll(fd, std::span<const std::byte>(p, n), deadline);
}

Result<size_t> ReadRecord(int fd, SecureSession& session, std::vector<std::byte>* buffer, size_t bytes_max,
                          Deadline deadline) {
  std::byte len[4];
  COHORT_RETURN_IF_ERROR(ReadAll(fd, len, deadline));
  const size_t n = LoadLe32(len);
  if (n > bytes_max) return Corrupt(fmt::format("record of {} bytes, more than the limit {}", n, bytes_max));
  if (buffer->size() < n + kSealTagBytes) buffer->resize(n + kSealTagBytes);
  const std::span<std::byte> body(buffer->data(), n + kSealTagBytes);
  COHORT_RETURN_IF_ERROR(ReadAll(fd, body, deadline));
  COHORT_RETURN_IF_ERROR(session.Open(len, body.first(n), body.subspan(n).first<kSealTagBytes>()));
  return n;
}

}  // namespace cohort::comm
