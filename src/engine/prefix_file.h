// PrefixFile: a chain of prefix-cache blocks (prefix_cache.h) as a file, so that a long shared
// prompt's rows and state outlive the process (llama-server's slot save/restore). The header
// names what the rows are only valid for — the model (ModelIdentity), the KV cache type, the
// block size and the byte sizes of a block's rows and state — and Decode refuses a file made
// for anything else, a truncated or padded one, or one whose checksum does not match, before
// anything is kept. Layout, little-endian:
//   "COHPFX01" | u32 version | u8[32] model | u32 kv_type | u32 block_tokens | u64 block_bytes
//   | u64 state_bytes | u32 n_blocks | u32 0 | n_blocks x (u8 has_state | i32 tokens[block_tokens]
//   | rows[block_bytes] | state[state_bytes] if has_state) | u8[32] SHA-256 of all before.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/prefix_cache.h"
#include "gguf/gguf.h"

namespace cohort::engine {

using ModelId = std::array<uint8_t, 32>;

// SHA-256 over the file's size and data offset, every tensor's name, type, shape and offset,
// and the first and last 256 bytes of every tensor's data: two files with the same layout
// but other weights (another fine-tune, another seed) differ, without reading gigabytes.
ModelId ModelIdentity(const gguf::File& file);

// What a file's rows and states are valid for.
struct PrefixFileShape {
  ModelId model{};
  DType kv_type = DType::kF16;
  int32_t block_tokens = 0;
  int64_t block_bytes = 0;
  int64_t state_bytes = 0;
};

std::vector<uint8_t> EncodePrefixFile(const PrefixFileShape& shape, std::span<const PrefixBlockData> blocks);
// The blocks of `bytes`, which must have been written for `shape` with tokens below n_vocab;
// kInvalidArgument saying what is wrong otherwise.
Result<std::vector<PrefixBlockData>> DecodePrefixFile(std::span<const uint8_t> bytes, const PrefixFileShape& shape,
                                                      int32_t n_vocab);

}  // namespace cohort::engine
