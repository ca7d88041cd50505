// PrefixCache: chains of token blocks, their rows, and least-recently-used eviction of leaves.
#include "engine/prefix_cache.h"

#include <algorithm>

#include "core/check.h"

namespace cohort::engine {

PrefixCache::PrefixCache(const model::KvCache& shape, int64_t bytes_max, int block_tokens)
    : block_tokens_(block_tokens), block_bytes_(shape.RowsBytes(block_tokens)), bytes_max_(bytes_max) {
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

void PrefixCache::Touch(uint64_t id, Block& block) {
  if (block.children == 0) {
    leaves_.erase({block.tick, id});
    leaves_.insert({tick_, id});
  }
  block.tick = tick_;
}

bool PrefixCache::EvictOne(uint64_t tick) {
  if (leaves_.empty() || leaves_.begin()->first >= tick) return false;
  const uint64_t id = leaves_.begin()->second;
  leaves_.erase(leaves_.begin());
  auto it = blocks_.find(id);
  COHORT_CHECK(it != blocks_.end());
  Block& b = it->second;
  COHORT_CHECK_EQ(b.children, 0);
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
  bytes_ -= static_cast<int64_t>(b.rows.size());
  blocks_.erase(it);
  ++stats_.blocks_evicted;
  if (replicas_ != nullptr) replicas_->Drop(id);
  return true;
}

int PrefixCache::Restore(std::span<const int32_t> tokens, int max_positions, model::KvCache& cache, int seq) {
  ++stats_.lookups;
  ++tick_;
  cache.Truncate(seq, 0);
  const size_t n_blocks = std::min(tokens.size(), static_cast<size_t>(std::max(max_positions, 0))) / block_tokens_;
  uint64_t parent = 0;
  int n = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const uint64_t id = Find(parent, tokens.subspan(i * block_tokens_, block_tokens_));
    if (id == 0) break;
    Block& b = blocks_.at(id);
    cache.WriteRows(seq, n, block_tokens_, b.rows.data());
    if (replicas_ != nullptr) replicas_->Load(id, seq, n);
    Touch(id, b);
    n += block_tokens_;
    parent = id;
  }
  if (n > 0) ++stats_.hits;
  stats_.tokens_restored += static_cast<uint64_t>(n);
  return n;
}

void PrefixCache::Save(std::span<const int32_t> tokens, const model::KvCache& cache, int seq) {
  COHORT_CHECK_LE(tokens.size(), static_cast<size_t>(cache.length(seq)));
  ++tick_;
  const size_t n_blocks = tokens.size() / block_tokens_;
  uint64_t parent = 0;
  for (size_t i = 0; i < n_blocks; ++i) {
    const std::span<const int32_t> block_tokens = tokens.subspan(i * block_tokens_, block_tokens_);
    uint64_t id = Find(parent, block_tokens);
    if (id != 0) {
      Touch(id, blocks_.at(id));
      parent = id;
      continue;
    }
    // Make room from blocks not used by this chain (all of which carry this tick now).
    while (bytes_ + block_bytes_ > bytes_max_) {
      if (!EvictOne(tick_)) return;
    }
    id = next_id_++;
    Block& b = blocks_[id];
    b.parent = parent;
    b.tokens.assign(block_tokens.begin(), block_tokens.end());
    b.rows.resize(static_cast<size_t>(block_bytes_));
    cache.ReadRows(seq, static_cast<int>(i) * block_tokens_, block_tokens_, b.rows.data());
    if (replicas_ != nullptr) replicas_->Keep(id, seq, static_cast<int>(i) * block_tokens_, block_tokens_);
    b.tick = tick_;
    index_.emplace(Key(parent, block_tokens), id);
    leaves_.insert({tick_, id});
    if (parent != 0) {
      Block& p = blocks_.at(parent);
      if (p.children++ == 0) leaves_.erase({p.tick, parent});
    }
    bytes_ += block_bytes_;
    parent = id;
  }
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.bytes = bytes_;
  s.blocks = static_cast<int64_t>(blocks_.size());
  return s;
}

}  // namespace cohort::engine
