// The coordinator's per-step message to every rank: what to do (run a batch, stop), the
// batch, and the coordinator's KV-cache state so every rank's cache stays in step with it.
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
enum class StepCommand : uint16_t { kForward = 1, kStop = 2, kKeepAlive = 3 };

// Fixed-size header broadcast first; it says how long the payload that follows is.
struct StepHeader {
  static constexpr uint32_t kMagic = 0x31584843;  // "CHX1"
  static constexpr uint16_t kVersion = 1;
  static constexpr size_t kBytes = 32;
  static constexpr uint32_t kTokensMax = 1 << 20;
  static constexpr uint32_t kSeqMax = 1 << 16;

  StepCommand command = StepCommand::kForward;
  uint32_t n_tokens = 0;
  uint32_t n_seq = 0;     // KV-cache sequence slots
  uint32_t n_ctx = 0;     // KV-cache positions per slot
  DType kv_type = DType::kF32;

  size_t PayloadBytes() const { return n_tokens * (3 * sizeof(int32_t) + 1) + n_seq * sizeof(int32_t); }
  void Encode(std::span<std::byte, kBytes> out) const;
  static Result<StepHeader> Decode(std::span<const std::byte, kBytes> in);
};

// The batch and the cache lengths (per sequence slot) the step runs against.
struct StepPayload {
  model::Batch batch;
  std::vector<int32_t> cache_lengths;  // [n_seq]
};

// out must hold header.PayloadBytes().
void EncodePayload(const model::Batch& batch, std::span<const int32_t> cache_lengths,
                   std::span<std::byte> out);
Status DecodePayload(const StepHeader& header, std::span<const std::byte> in, StepPayload* out);

}  // namespace cohort::parallel
