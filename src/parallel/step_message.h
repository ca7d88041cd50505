// The coordinator's per-step message to every rank: what to do (run a batch, stop), the
// batch, the coordinator's KV-cache state so every rank's cache stays in step with it, and
// what its prefix cache did to blocks since the last step (each rank does the same to its own
// slice of the rows before the step's cache lengths apply).
// Little-endian, versioned and length-checked; Encode/Decode define the field order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/model.h"

namespace cohort::parallel {

// kKeepAlive: no step; the coordinator is alive but idle (workers restart their idle clock).
// kHidden: a forward whose last stage returns the final hidden states (embeddings), not logits.
enum class StepCommand : uint16_t { kForward = 1, kStop = 2, kKeepAlive = 3, kHidden = 4 };

// Fixed-size header broadcast first; it says how long the payload that follows is.
struct StepHeader {
  static constexpr uint32_t kMagic = 0x31584843;  // "CHX1"
  // 2: the prefix cache's block operations follow the cache lengths.
  static constexpr uint16_t kVersion = 2;
  static constexpr size_t kBytes = 32;
  static constexpr uint32_t kTokensMax = 1 << 20;
  static constexpr uint32_t kSeqMax = 1 << 16;
  static constexpr uint32_t kBlockOpsMax = 1 << 20;

  StepCommand command = StepCommand::kForward;
  uint32_t n_tokens = 0;
  uint32_t n_seq = 0;     // KV-cache sequence slots
  uint32_t n_ctx = 0;     // KV-cache positions per slot
  DType kv_type = DType::kF32;
  uint32_t n_block_ops = 0;  // BlockOps after the cache lengths

  size_t PayloadBytes() const;
  void Encode(std::span<std::byte, kBytes> out) const;
  static Result<StepHeader> Decode(std::span<const std::byte, kBytes> in);
};

// One thing the coordinator's prefix cache did to a block of its slice
// (model/kv_block_replicas.h), for every rank to do to its own.
enum class BlockOpKind : uint32_t {
  kKeep = 1,  // keep positions [pos, pos + n) of seq as block id
  kLoad = 2,  // cut seq to pos positions, then write block id's rows there
  kDrop = 3,  // forget block id
};

struct BlockOp {
  static constexpr size_t kBytes = 24;  // kind u32, seq i32, pos i32, n i32, id u64
  BlockOpKind kind = BlockOpKind::kKeep;
  int32_t seq = 0;
  int32_t pos = 0;
  int32_t n = 0;  // kKeep only
  uint64_t id = 0;
  bool operator==(const BlockOp&) const = default;
};

// The batch, the cache lengths (per sequence slot) the step runs against, and the block
// operations to apply first.
struct StepPayload {
  model::Batch batch;
  std::vector<int32_t> cache_lengths;  // [n_seq]
  std::vector<BlockOp> block_ops;      // [n_block_ops], in the order they happened
};

// out must hold header.PayloadBytes().
void EncodePayload(const model::Batch& batch, std::span<const int32_t> cache_lengths,
                   std::span<const BlockOp> block_ops, std::span<std::byte> out);
Status DecodePayload(const StepHeader& header, std::span<const std::byte> in, StepPayload* out);

}  // namespace cohort::parallel
