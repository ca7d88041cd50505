// The bounded share cache; see share_cache.h.
#include "parallel/share_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace cohort::parallel {
namespace {

struct CachedFile {
  std::string path;
  uint64_t bytes = 0;  // on disk
  int64_t used_ns = 0;
  bool share = false;  // a finished share (*.gguf), which may be evicted
};

std::vector<CachedFile> ListCache(const std::string& cache_dir) {
  std::vector<CachedFile> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache_dir, ec)) {
    struct stat st {};
    const std::string path = e.path().string();
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    CachedFile f;
    f.path = path;
    f.bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    f.used_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    f.share = e.path().extension() == ".gguf";
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace

uint64_t ShareCacheBytes(const std::string& cache_dir) {
  uint64_t total = 0;
  for (const CachedFile& f : ListCache(cache_dir)) total += f.bytes;
  return total;
}

Status MakeRoomInShareCache(const std::string& cache_dir, uint64_t incoming, uint64_t max_bytes) {
  if (max_bytes == 0) return Status::Ok();
  if (incoming > max_bytes) {
    return ResourceExhausted(fmt::format("the share's {} bytes exceed the cache bound of {} bytes (--cache-max)",
                                         incoming, max_bytes));
  }
  std::vector<CachedFile> files = ListCache(cache_dir);
  uint64_t total = 0;
  for (const CachedFile& f : files) total += f.bytes;
  std::sort(files.begin(), files.end(), [](const CachedFile& a, const CachedFile& b) { return a.used_ns < b.used_ns; });
  for (const CachedFile& f : files) {
    if (total + incoming <= max_bytes) break;
    if (!f.share) continue;  // partial files belong to fetches still running
    if (::unlink(f.path.c_str()) == 0) total -= std::min(total, f.bytes);
  }
  if (total + incoming > max_bytes) {
    return ResourceExhausted(fmt::format("the share cache holds {} bytes in transfers still running; no room for {} "
                                         "more under its bound of {} bytes",
                                         total, incoming, max_bytes));
  }
  return Status::Ok();
}

void TouchShare(const std::string& path) { (void)::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

}  // namespace cohort::parallel
