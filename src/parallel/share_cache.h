// The worker's cache of streamed shares, bounded: before a share of n bytes is written, the
// least recently used shares are deleted until the cache's files and the new share fit in
// its bound. A share used again is marked as used (its modification time), so the shares of
// the models a worker serves stay and those of one-off jobs go first. Shares in use by a
// running job may be deleted: their mappings keep the bytes until the job ends.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace cohort::parallel {

// The bytes the cache's files take on disk (sparse shares count what they hold).
uint64_t ShareCacheBytes(const std::string& cache_dir);

// Deletes least recently used shares (*.gguf directly in `cache_dir`) until `incoming` more
// bytes fit in `max_bytes`; kResourceExhausted when they cannot (a share larger than the
// bound). max_bytes 0: no bound.
Status MakeRoomInShareCache(const std::string& cache_dir, uint64_t incoming, uint64_t max_bytes);

// Marks a cached share as just used.
void TouchShare(const std::string& path);

}  // namespace cohort::parallel
