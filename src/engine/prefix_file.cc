// PrefixFile; see prefix_file.h.
#include "engine/prefix_file.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"

namespace cohort::engine {
namespace {

constexpr char kMagic[8] = {'C', 'O', 'H', 'P', 'F', 'X', '0', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 4 + 32 + 4 + 4 + 8 + 8 + 4 + 4;
constexpr size_t kDigestBytes = crypto_hash_sha256_BYTES;
constexpr uint64_t kSampleBytes = 256;

class Writer {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void U8(uint8_t v) { out_.push_back(v); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  size_t left() const { return bytes_.size() - pos_; }
  // Callers check left() first.
  const uint8_t* Take(size_t n) {
    COHORT_CHECK_LE(n, left());
    const uint8_t* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  uint8_t U8() { return *Take(1); }
  uint32_t U32() {
    const uint8_t* p = Take(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
    return v;
  }
  uint64_t U64() {
    const uint8_t* p = Take(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

void Sha256(std::span<const uint8_t> bytes, uint8_t* out) {
  COHORT_CHECK(sodium_init() >= 0);
  crypto_hash_sha256(out, bytes.data(), bytes.size());
}

Status Refuse(const std::string& why) { return InvalidArgument("slot file: " + why); }

}  // namespace

ModelId ModelIdentity(const gguf::File& file) {
  COHORT_CHECK(sodium_init() >= 0);
  crypto_hash_sha256_state h;
  crypto_hash_sha256_init(&h);
  auto u64 = [&h](uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    crypto_hash_sha256_update(&h, b, sizeof(b));
  };
  u64(file.file_size());
  u64(file.data_offset());
  for (const gguf::TensorInfo& t : file.tensors()) {
    u64(t.name.size());
    crypto_hash_sha256_update(&h, reinterpret_cast<const uint8_t*>(t.name.data()), t.name.size());
    u64(static_cast<uint64_t>(t.type));
    u64(t.ne.size());
    for (int64_t n : t.ne) u64(static_cast<uint64_t>(n));
    u64(t.offset);
    const uint64_t head = std::min(t.n_bytes, kSampleBytes);
    const std::span<const uint8_t> first = file.TensorBytes(t, 0, head);
    const std::span<const uint8_t> last = file.TensorBytes(t, t.n_bytes - head, t.n_bytes);
    crypto_hash_sha256_update(&h, first.data(), first.size());
    crypto_hash_sha256_update(&h, last.data(), last.size());
  }
  ModelId id{};
  crypto_hash_sha256_final(&h, id.data());
  return id;
}

std::vector<uint8_t> EncodePrefixFile(const PrefixFileShape& shape, std::span<const PrefixBlockData> blocks) {
  Writer w;
  w.Bytes(kMagic, sizeof(kMagic));
  w.U32(kVersion);
  w.Bytes(shape.model.data(), shape.model.size());
  w.U32(static_cast<uint32_t>(shape.kv_type));
  w.U32(static_cast<uint32_t>(shape.block_tokens));
  w.U64(static_cast<uint64_t>(shape.block_bytes));
  w.U64(static_cast<uint64_t>(shape.state_bytes));
  w.U32(static_cast<uint32_t>(blocks.size()));
  w.U32(0);
  for (const PrefixBlockData& b : blocks) {
    COHORT_CHECK_EQ(b.tokens.size(), static_cast<size_t>(shape.block_tokens));
    COHORT_CHECK_EQ(static_cast<int64_t>(b.rows.size()), shape.block_bytes);
    COHORT_CHECK(b.state.empty() || static_cast<int64_t>(b.state.size()) == shape.state_bytes);
    w.U8(b.state.empty() ? 0 : 1);
    for (int32_t t : b.tokens) w.U32(static_cast<uint32_t>(t));
    w.Bytes(b.rows.data(), b.rows.size());
    w.Bytes(b.state.data(), b.state.size());
  }
  uint8_t digest[kDigestBytes];
  Sha256(w.bytes(), digest);
  w.Bytes(digest, sizeof(digest));
  return std::move(w.bytes());
}

Result<std::vector<PrefixBlockData>> DecodePrefixFile(std::span<const uint8_t> bytes, const PrefixFileShape& shape,
                                                      int32_t n_vocab) {
  if (bytes.size() < kHeaderBytes + kDigestBytes) return Refuse("too short for a header (truncated?)");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) return Refuse("not a cohort slot file");
  // The checksum first: every field after it is then what the server wrote.
  const std::span<const uint8_t> body = bytes.first(bytes.size() - kDigestBytes);
  uint8_t digest[kDigestBytes];
  Sha256(body, digest);
  if (std::memcmp(digest, bytes.data() + body.size(), kDigestBytes) != 0) {
    return Refuse("checksum mismatch (truncated or altered)");
  }
  Reader r(body);
  r.Take(sizeof(kMagic));
  if (const uint32_t v = r.U32(); v != kVersion) return Refuse("version " + std::to_string(v) + " is not 1");
  if (std::memcmp(r.Take(32), shape.model.data(), 32) != 0) return Refuse("made for another model");
  if (r.U32() != static_cast<uint32_t>(shape.kv_type)) return Refuse("made with another KV cache type");
  if (r.U32() != static_cast<uint32_t>(shape.block_tokens)) return Refuse("made with another cache block size");
  if (r.U64() != static_cast<uint64_t>(shape.block_bytes) || r.U64() != static_cast<uint64_t>(shape.state_bytes)) {
    return Refuse("its rows or states are sized for another cache");
  }
  const uint32_t n_blocks = r.U32();
  if (r.U32() != 0) return Refuse("reserved field is not 0");
  const uint64_t block_min = 1 + 4 * static_cast<uint64_t>(shape.block_tokens) + static_cast<uint64_t>(shape.block_bytes);
  if (n_blocks > r.left() / block_min) return Refuse("shorter than its block count says");
  std::vector<PrefixBlockData> blocks(n_blocks);
  for (PrefixBlockData& b : blocks) {
    if (r.left() < block_min) return Refuse("shorter than its block count says");
    const uint8_t has_state = r.U8();
    if (has_state > 1 || (has_state == 1 && shape.state_bytes == 0)) return Refuse("bad state flag");
    b.tokens.resize(static_cast<size_t>(shape.block_tokens));
    for (int32_t& t : b.tokens) {
      const uint32_t id = r.U32();
      if (id >= static_cast<uint32_t>(n_vocab)) return Refuse("token " + std::to_string(id) + " is outside the vocabulary");
      t = static_cast<int32_t>(id);
    }
    const uint8_t* rows = r.Take(static_cast<size_t>(shape.block_bytes));
    b.rows.assign(rows, rows + shape.block_bytes);
    if (has_state == 1) {
      if (r.left() < static_cast<uint64_t>(shape.state_bytes)) return Refuse("shorter than its blocks say");
      const uint8_t* state = r.Take(static_cast<size_t>(shape.state_bytes));
      b.state.assign(state, state + shape.state_bytes);
    }
  }
  if (r.left() != 0) return Refuse("longer than its blocks say");
  return blocks;
}

}  // namespace cohort::engine
