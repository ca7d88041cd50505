// KvBlockReplicas: the other holders of a KV cache's rows, for a cache that is one slice of a
// model spread over ranks (parallel::Executor). A prefix cache in the coordinator keeps its
// own slice's rows of a block and tells the replicas what it did, block by block, so every
// rank keeps (and later writes back, and at last forgets) its own slice of the same block
// under the same id. The coordinator decides everything (which block, which id, when it is
// evicted); the rows themselves never leave the rank that computed them.
//
// A model::Model whose caches are such a slice is also a KvBlockReplicas (the engine finds it
// with a dynamic_cast); a model whole in this process is not, and nothing else holds rows.
#pragma once

#include <cstdint>

namespace cohort::model {

class KvBlockReplicas {
 public:
  virtual ~KvBlockReplicas() = default;
  // The caller kept positions [pos, pos + n) of sequence seq (all below its length) as block
  // `id`, an id not held.
  virtual void Keep(uint64_t id, int seq, int pos, int n) = 0;
  // The caller cut sequence seq to pos positions and wrote block `id`'s rows at pos.
  virtual void Load(uint64_t id, int seq, int pos) = 0;
  // The caller forgot block `id`.
  virtual void Drop(uint64_t id) = 0;
};

}  // namespace cohort::model
