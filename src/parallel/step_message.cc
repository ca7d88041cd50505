// StepHeader and payload coding; see step_message.h.
#include "parallel/step_message.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"

namespace cohort::parallel {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the step message is little-endian and copied as such");

template <typename T>
void Put(std::byte* out, size_t* at, T v) {
  std::memcpy(out + *at, &v, sizeof(T));
  *at += sizeof(T);
}

template <typename T>
T Get(const std::byte* in, size_t* at) {
  T v;
  std::memcpy(&v, in + *at, sizeof(T));
  *at += sizeof(T);
  return v;
}

}  // namespace

size_t StepHeader::PayloadBytes() const {
  return n_tokens * (3 * sizeof(int32_t) + 1) + n_seq * sizeof(int32_t) + n_block_ops * BlockOp::kBytes;
}

void StepHeader::Encode(std::span<std::byte, kBytes> out) const {
  std::memset(out.data(), 0, kBytes);
  size_t at = 0;
  Put<uint32_t>(out.data(), &at, kMagic);
  Put<uint16_t>(out.data(), &at, kVersion);
  Put<uint16_t>(out.data(), &at, static_cast<uint16_t>(command));
  Put<uint32_t>(out.data(), &at, n_tokens);
  Put<uint32_t>(out.data(), &at, n_seq);
  Put<uint32_t>(out.data(), &at, n_ctx);
  Put<uint32_t>(out.data(), &at, static_cast<uint32_t>(kv_type));
  Put<uint32_t>(out.data(), &at, n_block_ops);
  COHORT_CHECK_LE(at, kBytes);
}

Result<StepHeader> StepHeader::Decode(std::span<const std::byte, kBytes> in) {
  size_t at = 0;
  if (Get<uint32_t>(in.data(), &at) != kMagic) return Corrupt("step message: bad magic");
  const uint16_t version = Get<uint16_t>(in.data(), &at);
  if (version != kVersion) {
    return Corrupt(fmt::format("step message: version {}, this build speaks {}", version, kVersion));
  }
  StepHeader h;
  const uint16_t command = Get<uint16_t>(in.data(), &at);
  if (command != static_cast<uint16_t>(StepCommand::kForward) &&
      command != static_cast<uint16_t>(StepCommand::kStop) &&
      command != static_cast<uint16_t>(StepCommand::kKeepAlive) &&
      command != static_cast<uint16_t>(StepCommand::kHidden)) {
    return Corrupt(fmt::format("step message: unknown command {}", command));
  }
  h.command = static_cast<StepCommand>(command);
  h.n_tokens = Get<uint32_t>(in.data(), &at);
  h.n_seq = Get<uint32_t>(in.data(), &at);
  h.n_ctx = Get<uint32_t>(in.data(), &at);
  const uint32_t kv = Get<uint32_t>(in.data(), &at);
  if (kv != static_cast<uint32_t>(DType::kF32) && kv != static_cast<uint32_t>(DType::kF16)) {
    return Corrupt(fmt::format("step message: KV type {} is not f32 or f16", kv));
  }
  h.kv_type = static_cast<DType>(kv);
  h.n_block_ops = Get<uint32_t>(in.data(), &at);
  if (h.n_tokens > kTokensMax || h.n_seq > kSeqMax || h.n_block_ops > kBlockOpsMax) {
    return Corrupt(fmt::format("step message: {} tokens / {} sequences / {} block operations exceed the limits",
                               h.n_tokens, h.n_seq, h.n_block_ops));
  }
  return h;
}

void EncodePayload(const model::Batch& batch, std::span<const int32_t> cache_lengths,
                   std::span<const BlockOp> block_ops, std::span<std::byte> out) {
  const size_t n = batch.size();
  COHORT_CHECK_EQ(out.size(), n * (3 * sizeof(int32_t) + 1) + cache_lengths.size() * sizeof(int32_t) +
                                  block_ops.size() * BlockOp::kBytes);
  std::byte* p = out.data();
  std::memcpy(p, batch.tokens.data(), n * 4);
  std::memcpy(p + n * 4, batch.positions.data(), n * 4);
  std::memcpy(p + n * 8, batch.seq_ids.data(), n * 4);
  std::memcpy(p + n * 12, batch.want_logits.data(), n);
  std::memcpy(p + n * 13, cache_lengths.data(), cache_lengths.size() * 4);
  size_t at = n * 13 + cache_lengths.size() * 4;
  for (const BlockOp& op : block_ops) {
    Put<uint32_t>(p, &at, static_cast<uint32_t>(op.kind));
    Put<int32_t>(p, &at, op.seq);
    Put<int32_t>(p, &at, op.pos);
    Put<int32_t>(p, &at, op.n);
    Put<uint64_t>(p, &at, op.id);
  }
  COHORT_CHECK_EQ(at, out.size());
}

Status DecodePayload(const StepHeader& h, std::span<const std::byte> in, StepPayload* out) {
  if (in.size() != h.PayloadBytes()) return Corrupt("step message: payload size mismatch");
  const size_t n = h.n_tokens;
  model::Batch& b = out->batch;
  b.tokens.resize(n);
  b.positions.resize(n);
  b.seq_ids.resize(n);
  b.want_logits.resize(n);
  out->cache_lengths.resize(h.n_seq);
  const std::byte* p = in.data();
  std::memcpy(b.tokens.data(), p, n * 4);
  std::memcpy(b.positions.data(), p + n * 4, n * 4);
  std::memcpy(b.seq_ids.data(), p + n * 8, n * 4);
  std::memcpy(b.want_logits.data(), p + n * 12, n);
  std::memcpy(out->cache_lengths.data(), p + n * 13, h.n_seq * 4);
  for (int32_t len : out->cache_lengths) {
    if (len < 0 || static_cast<uint32_t>(len) > h.n_ctx) return Corrupt("step message: bad cache length");
  }
  // Ranges are checked here against the message's own shape; whether a block is held is the
  // receiver's to check.
  out->block_ops.resize(h.n_block_ops);
  size_t at = n * 13 + static_cast<size_t>(h.n_seq) * 4;
  for (BlockOp& op : out->block_ops) {
    const uint32_t kind = Get<uint32_t>(p, &at);
    op.seq = Get<int32_t>(p, &at);
    op.pos = Get<int32_t>(p, &at);
    op.n = Get<int32_t>(p, &at);
    op.id = Get<uint64_t>(p, &at);
    if (kind < static_cast<uint32_t>(BlockOpKind::kKeep) || kind > static_cast<uint32_t>(BlockOpKind::kDrop)) {
      return Corrupt(fmt::format("step message: unknown block operation {}", kind));
    }
    op.kind = static_cast<BlockOpKind>(kind);
    if (op.kind == BlockOpKind::kDrop) continue;
    const int64_t end = static_cast<int64_t>(op.pos) + (op.kind == BlockOpKind::kKeep ? op.n : 0);
    if (op.seq < 0 || static_cast<uint32_t>(op.seq) >= h.n_seq || op.pos < 0 ||
        (op.kind == BlockOpKind::kKeep && op.n <= 0) || end > h.n_ctx) {
      return Corrupt(fmt::format("step message: block operation on sequence {} positions {}..{} is outside the cache",
                                 op.seq, op.pos, end));
    }
  }
  return Status::Ok();
}

}  // namespace cohort::parallel
