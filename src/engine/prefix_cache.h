// PrefixCache: the KV rows of finished requests, kept in blocks of block_tokens positions and
// indexed by the tokens that produced them, so that a new request whose prompt starts the same
// way (the next turn of a chat, an agent's shared system prompt) copies those rows into its
// slot instead of computing them again.
//
// Blocks form chains: a block is identified by its parent block and its own tokens, so a hit
// means the whole prefix up to it is equal, token for token (the hash only finds candidates;
// the tokens and the parent are compared). Rows are kept in the slot cache's own type and
// copied back bit for bit. Eviction is least recently used among the blocks no other block
// extends (a chain loses its tail first), within a byte budget.
//
// Why copies and not shared rows: the slot cache lays each (layer, slot) out contiguously and
// attention streams it in position order (model/kv_cache.h); sharing rows between slots would
// need a block table in every attention kernel. A copy costs a memcpy per layer per block,
// orders of magnitude less than the prefill it replaces, and any number of requests can start
// from one cached prefix at once. Not thread-safe: the scheduler's engine thread owns it.
//
// A model with a recurrent state beside its KV rows (KvCache::sequence_state(), Qwen3.5's
// DeltaNet layers) cannot start from rows alone: the state summarises every position and
// cannot be rebuilt from them. Such a cache keeps with a block, where it was given one, the
// state after the block's last position (a checkpoint), and a restore stops at the last block
// of the matching chain that has one, restoring the rows up to it and its state. The blocks
// past it stay as rows only: Match() still finds them, so the caller knows where a later
// request's checkpoint would pay (the scheduler's choice: scheduler.cc). States count in the
// budget like rows.
//
// On a distributed instance the cache given is the coordinator's slice (its layers, its KV
// heads): the index, the LRU and the budget live here, and every block kept, written back or
// evicted is reported to the model's replicas (model/kv_block_replicas.h) under its id, so each
// rank does the same to its own slice. The rows never cross the network. Such a cache holds no
// state checkpoints (the scheduler keeps it off for recurrent models there) and imports no files.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/kv_block_replicas.h"
#include "model/kv_cache.h"

namespace cohort::engine {

struct PrefixCacheStats {
  int64_t bytes = 0;             // rows held now
  int64_t bytes_max = 0;         // the budget
  int64_t blocks = 0;            // blocks held now
  uint64_t lookups = 0;          // Restore calls
  uint64_t hits = 0;             // Restore calls that found at least one block
  uint64_t tokens_restored = 0;  // positions copied into slots
  uint64_t blocks_evicted = 0;
  int64_t states = 0;            // blocks holding a state checkpoint now
};

// The sequence state after `positions` positions (a multiple of block_tokens).
struct StateCheckpoint {
  int positions = 0;
  std::vector<uint8_t> state;  // SequenceState::ReadSeq's bytes
};

// One block as a file keeps it (prefix_file.h): its tokens, rows and state (empty: none).
struct PrefixBlockData {
  std::vector<int32_t> tokens;  // block_tokens of them
  std::vector<uint8_t> rows;    // block_bytes()
  std::vector<uint8_t> state;   // empty or state_bytes()
};

class PrefixCache {
 public:
  // Rows shaped like `shape`'s (its layers, widths and type); at most bytes_max bytes of rows.
  PrefixCache(const model::KvCache& shape, int64_t bytes_max, int block_tokens);

  // Where every block's keeping, restoring and eviction is reported from now on (null: no
  // one); set before the first Save. Must outlive the cache.
  void SetReplicas(model::KvBlockReplicas* replicas) { replicas_ = replicas; }

  int block_tokens() const { return block_tokens_; }
  int64_t block_bytes() const { return block_bytes_; }
  // Bytes of one checkpoint (0: the cache has no sequence state, and blocks need none).
  int64_t state_bytes() const { return state_bytes_; }

  // Finds the longest chain of cached blocks that `tokens` starts with, at most max_positions
  // positions, copies their rows into positions [0, n) of cache's slot seq (emptied first) and
  // returns n, a multiple of block_tokens(). With a sequence state, n is the end of the last
  // matching block that has a checkpoint, and the slot's state becomes it.
  int Restore(std::span<const int32_t> tokens, int max_positions, model::KvCache& cache, int seq);
  // The positions of the longest chain of cached blocks `tokens` starts with, at most
  // max_positions, checkpoints or not (what Restore would give a cache without state).
  int Match(std::span<const int32_t> tokens, int max_positions) const;
  // Keeps the rows of slot seq for the whole blocks of tokens (the tokens at positions
  // [0, tokens.size()) of the slot, all of them in its cache); blocks already held are only
  // marked used. Evicts older blocks to stay within the budget.
  void Save(std::span<const int32_t> tokens, const model::KvCache& cache, int seq);
  // The same, and each checkpoint (positions a multiple of block_tokens, at most tokens.size(),
  // state of state_bytes()) kept with the block that ends there, unless it has one.
  void Save(std::span<const int32_t> tokens, const model::KvCache& cache, int seq,
            std::span<const StateCheckpoint> checkpoints);

  // Copies of the chain of blocks `tokens` starts with (with a sequence state, up to its last
  // checkpoint: the part a restore can use).
  std::vector<PrefixBlockData> Export(std::span<const int32_t> tokens) const;
  // Adds a chain (each block's tokens, rows of block_bytes() and a state empty or of
  // state_bytes(), as Export gives them; the caller checked the sizes) and returns the
  // positions of it held afterwards, less where the budget ran out.
  int Import(std::span<const PrefixBlockData> chain);
  // Drops the blocks of the chain `tokens` starts with that no other chain extends, from its
  // end, and returns the positions dropped.
  int Erase(std::span<const int32_t> tokens);

  PrefixCacheStats stats() const;

 private:
  struct Block {
    uint64_t parent = 0;  // 0: the chain's first block
    std::vector<int32_t> tokens;
    std::vector<uint8_t> rows;  // KvCache::ReadRows' layout for block_tokens positions
    std::vector<uint8_t> state; // the sequence state after the block (empty: none kept)
    uint64_t tick = 0;          // last use
    int children = 0;           // blocks whose parent this is
  };

  static uint64_t Key(uint64_t parent, std::span<const int32_t> tokens);
  // The block extending `parent` with exactly `tokens`, or 0.
  uint64_t Find(uint64_t parent, std::span<const int32_t> tokens) const;
  void Touch(uint64_t id, Block& block);
  // Drops the least recently used leaf older than `tick`; false when there is none.
  bool EvictOne(uint64_t tick);
  // Evicts leaves older than the current tick until `bytes` more fit; false when they cannot.
  bool MakeRoom(int64_t bytes);
  // Drops leaf `id`.
  void Remove(uint64_t id);
  // The ids of the chain of blocks `tokens` starts with, at most max_positions.
  std::vector<uint64_t> Chain(std::span<const int32_t> tokens, int max_positions) const;
  // The block extending `parent` with `tokens`, added with rows from `fill` when not held (0:
  // no room); marked used either way.
  template <typename Fill>
  uint64_t Insert(uint64_t parent, std::span<const int32_t> tokens, Fill fill);
  // Keeps `state` with block id unless it has one; false when there is no room.
  bool Attach(uint64_t id, std::span<const uint8_t> state);

  int block_tokens_;
  int64_t block_bytes_;
  int64_t state_bytes_;
  int64_t bytes_max_;
  int64_t bytes_ = 0;
  uint64_t next_id_ = 1;
  uint64_t tick_ = 0;
  std::unordered_map<uint64_t, Block> blocks_;            // by id
  std::unordered_multimap<uint64_t, uint64_t> index_;     // Key(parent, tokens) -> id
  std::set<std::pair<uint64_t, uint64_t>> leaves_;        // (tick, id) of blocks without children
  int64_t states_ = 0;
  PrefixCacheStats stats_;
  model::KvBlockReplicas* replicas_ = nullptr;
};

}  // namespace cohort::engine
