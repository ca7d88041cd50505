// Helpers for the share-streaming tests: scratch directories, whole-file reads, and the disk
// blocks a list of byte ranges touches.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "parallel/shard_bytes.h"

namespace cohort::parallel::testing {

// A fresh directory under /tmp, removed with everything in it when this goes away.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/cohort-share-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    path_ = p != nullptr ? p : "";
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline bool WriteWholeFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// Bytes of the 4 KiB blocks that `ranges` (merged) touch: what a sparse file holding exactly
// those ranges must allocate at least... and, block-granular, at most.
inline uint64_t BlocksTouchedBytes(const std::vector<ByteRange>& ranges) {
  constexpr uint64_t kBlock = 4096;
  uint64_t total = 0, last_block_end = 0;
  for (const ByteRange& r : ranges) {
    uint64_t first = r.offset / kBlock * kBlock;
    const uint64_t end = (r.end() + kBlock - 1) / kBlock * kBlock;
    if (first < last_block_end) first = last_block_end;
    if (end > first) total += end - first;
    if (end > last_block_end) last_block_end = end;
  }
  return total;
}

inline uint64_t AllocatedBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

}  // namespace cohort::parallel::testing
