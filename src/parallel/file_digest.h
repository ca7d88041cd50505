// SHA-256 of model files, and a small on-disk cache of those digests keyed by the file's
// identity (path, size, mtime, inode), so a multi-GB GGUF is hashed once, not on every job.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace cohort::parallel {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256Of(std::span<const uint8_t> bytes);
std::string HexOf(const Sha256Digest& digest);
// True for 64 lower-case hex digits (what HexOf writes): safe to use inside a file name.
bool IsSha256Hex(const std::string& text);

// The SHA-256 (hex) of the whole file at `path`, read in 4 MiB pieces.
Result<std::string> Sha256OfFile(const std::string& path);

// Remembers file digests in `dir` (one small file per entry; created on first use). A file is
// re-hashed when its size, modification time or inode changed. With an empty dir nothing is
// remembered and every call hashes.
class DigestCache {
 public:
  explicit DigestCache(std::string dir = "") : dir_(std::move(dir)) {}
  // The digest of `path` and its size.
  struct Entry {
    std::string sha256;
    uint64_t size = 0;
  };
  Result<Entry> Get(const std::string& path) const;

 private:
  std::string dir_;
};

}  // namespace cohort::parallel
