// The authenticated, encrypted channel every TCP connection between ranks runs on when a
// cluster secret is set: a mutual handshake (libsodium crypto_kx ephemeral keys, both ends
// proving the secret with a keyed BLAKE2b over the whole transcript), then AEAD records with
// per-direction keys and counters as nonces, so a replayed, reordered, dropped or altered
// record fails authentication. AES-256-GCM where both ends have AES instructions, else
// ChaCha20-Poly1305 (IETF); the choice is inside the authenticated transcript, so it cannot
// be downgraded. Sealing and opening allocate nothing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

inline constexpr size_t kSealTagBytes = 16;  // the AEAD tag after every record's ciphertext

// 32 bytes derived from the cluster secret with BLAKE2b under a data-plane context, so the
// raw secret never keys anything and the membership key (another context) differs from it.
struct ChannelKey {
  std::array<uint8_t, 32> bytes{};
};
Result<ChannelKey> DeriveChannelKey(std::string_view secret);
// A key for another use of the same secret (BLAKE2b keyed by `key` over `purpose`), e.g. the
// pre-shared key of the API relay between nodes (server/relay_channel.h): knowing one derived
// key tells nothing of another.
ChannelKey DeriveSubKey(const ChannelKey& key, std::string_view purpose);

enum class Cipher : uint8_t { kAes256Gcm = 1, kChaCha20Poly1305 = 2 };
const char* CipherName(Cipher cipher);
// Whether this CPU runs libsodium's AES-256-GCM (AES-NI and PCLMUL); sodium_init first.
bool AesGcmAvailable();

// One end's keys and counters after a handshake. Records in each direction must be opened in
// the order they were sealed, each exactly once: the counter is the nonce.
class SecureSession {
 public:
  ~SecureSession();
  SecureSession(const SecureSession&) = delete;
  SecureSession& operator=(const SecureSession&) = delete;

  Cipher cipher() const { return cipher_; }

  // Encrypts `plain` into out[0, plain.size()) and writes the tag after it; `ad` (e.g. a frame
  // header sent in clear) is authenticated with it. out.size() must be plain.size() +
  // kSealTagBytes; out may start at plain.data() (in place).
  void Seal(std::span<const std::byte> ad, std::span<const std::byte> plain, std::span<std::byte> out);
  // Decrypts `data` in place when `tag` authenticates it, `ad` and this record's position in
  // the stream; kCorrupt (and `data` zeroed) otherwise. A failed open breaks the stream: the
  // caller must drop the connection.
  Status Open(std::span<const std::byte> ad, std::span<std::byte> data,
              std::span<const std::byte, kSealTagBytes> tag);

  // Test hook: a session that encrypts with `tx` and decrypts with `rx` (no handshake).
  static std::unique_ptr<SecureSession> ForTest(Cipher cipher, const ChannelKey& tx, const ChannelKey& rx);

 private:
  friend struct SessionFactory;
  SecureSession(Cipher cipher, const uint8_t tx[32], const uint8_t rx[32]);
  void Nonce(uint64_t counter, uint8_t out[12]) const;

  Cipher cipher_;
  alignas(16) uint8_t tx_state_[512];  // crypto_aead_aes256gcm_state, or the raw key
  alignas(16) uint8_t rx_state_[512];
  uint64_t tx_counter_ = 0;
  uint64_t rx_counter_ = 0;
};

enum class HandshakeRole { kClient, kServer };

// Runs the handshake on a connected, non-blocking socket: kCorrupt ("authentication failed")
// when the peer does not prove the same secret or speaks something else, kTimeout at the
// deadline, kUnavailable when it hangs up. Only
// the fixed-size handshake messages are read: nothing a stranger sends is parsed further.
// `force_chacha` (tests, and machines whose AES path is suspect) advertises no AES.
Result<std::unique_ptr<SecureSession>> Handshake(int fd, HandshakeRole role, const ChannelKey& key,
                                                 Deadline deadline, bool force_chacha = false);

// A whole record on a blocking-style socket (poll until the deadline): a 4-byte little-endian
// length (authenticated as the record's ad), the ciphertext, the tag. ReadRecord reads into
// `*buffer` (grown, never shrunk, so a reused buffer allocates nothing) and returns the
// plaintext's size; a length over `bytes_max` is kCorrupt before anything else is read.
Status WriteRecord(int fd, SecureSession& session, std::span<const std::byte> plain,
                   std::vector<std::byte>* scratch, Deadline deadline);
Result<size_t> ReadRecord(int fd, SecureSession& session, std::vector<std::byte>* buffer,
                          size_t bytes_max, Deadline deadline);

}  // namespace cohort::comm
