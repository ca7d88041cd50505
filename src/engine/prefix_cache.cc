// PrefixCache: chains of token blocks, their rows (and state checkpoints), and least-recently-
// used eviction of leaves.
#include "engine/prefix_cache.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace cohort::engine {

PrefixCache::PrefixCache(const model::KvCache& shape, int64_t bytes_max, int block_tokens)
    : block_tokens_(block_tokens),
      block_bytes_(shape.RowsBytes(block_tokens)),
      state_bytes_(shape.sequence_state() != nullptr ? shape.sequence_state()->SeqBytes() : 0),
      bytes_max_(bytes_max) {
  COHORT_CHECK_GT(block_tokens, 0);
  COHORT_CHECK_GE(bytes_max, 0);
  stats_.bytes_max = bytes_max;
}

uint64_t PrefixCache::Key(uint64_t parent, std::span<const int32_t> tokens) {
  // splitmix64 over the parent id and the tokens: only picks candidates, which Find compares.
  auto mix = [](uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent);
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h;
}

uint64_t PrefixCache::Find(uint64_t parent, std::span<const int32_t> tokens) const {
  const auto [begin, end] = index_.equal_range(Key(parent, tokens));
  for (auto it = begin; it != end; ++it) {
    const Block& b = blocks_.at(it->second);
    if (b.parent == parent && std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end())) {
      return it->second;
    }
  }
  return 0;
}

std::vector<uint64_t> PrefixCache::Chain(std::span<const int32_t> tokens, int max_positions) const {
  const size_t n_blocks = std::min(tokens.size(), static_cast<size_t>(std::max(max_positions, 0))) / block_tokens_;
  std::vector<uint64_t> ids;
  uint64_t parent = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const uint64_t id = Find(parent, tokens.subspan(i * block_tokens_, block_tokens_));
    if (id == 0) break;
    ids.push_back(id);
    parent = id;
  }
  return ids;
}

void PrefixCache::Touch(uint64_t id, Block& block) {
  if (block.children == 0) {
    leaves_.erase({block.tick, id});
    leaves_.insert({tick_, id});
  }
  block.tick = tick_;
}

void PrefixCache::Remove(uint64_t id) {
  auto it = blocks_.find(id);
  COHORT_CHECK(it != blocks_.end());
  Block& b = it->second;
  COHORT_CHECK_EQ(b.children, 0);
  leaves_.erase({b.tick, id});
  if (replicas_ != nullptr) replicas_->Drop(id);
  const auto [begin, end] = index_.equal_range(Key(b.parent, b.tokens));
  for (auto e = begin; e != end; ++e) {
    if (e->second == id) {
      index_.erase(e);
      break;
    }
  }
  if (b.parent != 0) {
    Block& parent = blocks_.at(b.parent);
    if (--parent.children == 0) leaves_.insert({parent.tick, b.parent});
  }
  bytes_ -= static_cast<int64_t>(b.rows.size() + b.state.size());
  if (!b.state.empty()) --states_;
  blocks_.erase(it);
}

bool PrefixCache::EvictOne(uint64_t tick) {
  if (leaves_.empty() || leaves_.begin()->first >= tick) return false;
  Remove(leaves_.begin()->second);
  ++stats_.blocks_evicted;
  return true;
}

bool PrefixCache::MakeRoom(int64_t bytes) {
  // Only blocks not used by the chain being saved (all of which carry this tick now).
  while (bytes_ + bytes > bytes_max_) {
    if (!EvictOne(tick_)) return false;
  }
  return true;
}

template <typename Fill>
uint64_t PrefixCache::Insert(uint64_t parent, std::span<const int32_t> tokens, Fill fill) {
  uint64_t id = Find(parent, tokens);
  if (id != 0) {
    Touch(id, blocks_.at(id));
    return id;
  }
  if (!MakeRoom(block_bytes_)) return 0;
  id = next_id_++;
  Block& b = blocks_[id];
  b.parent = parent;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.rows.resize(static_cast<size_t>(block_bytes_));
  fill(b.rows.data());
  b.tick = tick_;
  index_.emplace(Key(parent, tokens), id);
  leaves_.insert({tick_, id});
  if (parent != 0) {
    Block& p = blocks_.at(parent);
    if (p.children++ == 0) leaves_.erase({p.tick, parent});
  }
  bytes_ += block_bytes_;
  return id;
}

bool PrefixCache::Attach(uint64_t id, std::span<const uint8_t> state) {
  COHORT_CHECK_EQ(static_cast<int64_t>(state.size()), state_bytes_);
  if (state_bytes_ == 0 || !blocks_.at(id).state.empty()) return true;
  if (!MakeRoom(state_bytes_)) return false;
  blocks_.at(id).state.assign(state.begin(), state.end());
  bytes_ += state_bytes_;
  ++states_;
  return true;
}

int PrefixCache::Restore(std::span<const int32_t> tokens, int max_positions, model::KvCache& cache, int seq) {
  ++stats_.lookups;
  ++tick_;
  cache.Truncate(seq, 0);
  const std::vector<uint64_t> chain = Chain(tokens, max_positions);
  size_t usable = chain.size();
  if (state_bytes_ > 0) {
    while (usable > 0 && blocks_.at(chain[usable - 1]).state.empty()) --usable;
  }
  int n = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    Block& b = blocks_.at(chain[i]);
    Touch(chain[i], b);  // the blocks past the last checkpoint too: they say where to keep one
    if (i >= usable) continue;
    cache.WriteRows(seq, n, block_tokens_, b.rows.data());
    if (replicas_ != nullptr) replicas_->Load(chain[i], seq, n);
    n += block_tokens_;
  }
  if (usable > 0 && state_bytes_ > 0) {
    cache.sequence_state()->WriteSeq(seq, blocks_.at(chain[usable - 1]).state.data());
  }
  if (n > 0) ++stats_.hits;
  stats_.tokens_restored += static_cast<uint64_t>(n);
  return n;
}

int PrefixCache::Match(std::span<const int32_t> tokens, int max_positions) const {
  return static_cast<int>(Chain(tokens, max_positions).size()) * block_tokens_;
}

void PrefixCache::Save(std::span<const int32_t> tokens, const model::KvCache& cache, int seq) {
  Save(tokens, cache, seq, {});
}

void PrefixCache::Save(std::span<const int32_t> tokens, const model::KvCache& cache, int seq,
                       std::span<const StateCheckpoint> checkpoints) {
  COHORT_CHECK_LE(tokens.size(), static_cast<size_t>(cache.length(seq)));
  ++tick_;
  const size_t n_blocks = tokens.size() / block_tokens_;
  std::vector<uint64_t> ids;
  uint64_t parent = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const int pos = static_cast<int>(i) * block_tokens_;
    const uint64_t first_new = next_id_;  // ids only grow: a block made now has one >= it
    parent = Insert(parent, tokens.subspan(i * block_tokens_, block_tokens_),
                    [&](uint8_t* rows) { cache.ReadRows(seq, pos, block_tokens_, rows); });
    if (parent == 0) break;
    if (parent >= first_new && replicas_ != nullptr) replicas_->Keep(parent, seq, pos, block_tokens_);
    ids.push_back(parent);
  }
  if (state_bytes_ == 0) return;
  for (const StateCheckpoint& c : checkpoints) {
    COHORT_CHECK(c.positions > 0 && c.positions % block_tokens_ == 0);
    const size_t block = static_cast<size_t>(c.positions / block_tokens_) - 1;
    if (block < ids.size() && blocks_.count(ids[block]) != 0) (void)Attach(ids[block], c.state);
  }
}

std::vector<PrefixBlockData> PrefixCache::Export(std::span<const int32_t> tokens) const {
  std::vector<uint64_t> chain = Chain(tokens, static_cast<int>(std::min<size_t>(tokens.size(), 1 << 30)));
  if (state_bytes_ > 0) {
    while (!chain.empty() && blocks_.at(chain.back()).state.empty()) chain.pop_back();
  }
  std::vector<PrefixBlockData> out;
  out.reserve(chain.size());
  for (uint64_t id : chain) {
    const Block& b = blocks_.at(id);
    out.push_back(PrefixBlockData{b.tokens, b.rows, b.state});
  }
  return out;
}

int PrefixCache::Import(std::span<const PrefixBlockData> chain) {
  // A file holds rank 0's rows only: the other ranks could not load such blocks.
  if (replicas_ != nullptr) return 0;
  ++tick_;
  uint64_t parent = 0;
  int n = 0;
  for (const PrefixBlockData& block : chain) {
    COHORT_CHECK_EQ(block.tokens.size(), static_cast<size_t>(block_tokens_));
    COHORT_CHECK_EQ(static_cast<int64_t>(block.rows.size()), block_bytes_);
    parent = Insert(parent, block.tokens, [&](uint8_t* rows) { std::memcpy(rows, block.rows.data(), block.rows.size()); });
    if (parent == 0) break;
    if (!block.state.empty() && !Attach(parent, block.state)) break;
    n += block_tokens_;
  }
  return n;
}

int PrefixCache::Erase(std::span<const int32_t> tokens) {
  const std::vector<uint64_t> chain = Chain(tokens, static_cast<int>(std::min<size_t>(tokens.size(), 1 << 30)));
  int n = 0;
  for (auto it = chain.rbegin(); it != chain.rend() && blocks_.at(*it).children == 0; ++it) {
    Remove(*it);
    n += block_tokens_;
  }
  return n;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.bytes = bytes_;
  s.blocks = static_cast<int64_t>(blocks_.size());
  s.states = states_;
  return s;
}

}  // namespace cohort::engine
