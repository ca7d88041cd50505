// Creation, mapping and validation of shared-memory segments (see shm_segment.h).
#include "comm/shm_segment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include <fmt/format.h>

namespace cohort::comm {
namespace {
constexpr size_t kHeaderBytes = 4096;
}

std::string ShmPath(const std::string& name, int rank) {
  return fmt::format("/cohort-{}-{}", name, rank);
}

bool ProcessAlive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(stat, line)) return true;  // no /proc: trust kill()
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

size_t ShmSegment::TotalBytes(int n_ranks, size_t ring_bytes) {
  return kHeaderBytes + n_ranks * (sizeof(ShmRing) + ring_bytes);
}

ShmRing& ShmSegment::ring(int from) const {
  return reinterpret_cast<ShmRing*>(base_ + kHeaderBytes)[from];
}

std::byte* ShmSegment::ring_data(int from) const {
  return base_ + kHeaderBytes + n_ranks_ * sizeof(ShmRing) + from * ring_bytes_;
}

ShmSegment::~ShmSegment() {
  if (base_ != nullptr) munmap(base_, bytes_);
}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) munmap(base_, bytes_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = other.bytes_;
    n_ranks_ = other.n_ranks_;
    ring_bytes_ = other.ring_bytes_;
  }
  return *this;
}

Result<ShmSegment> ShmSegment::Create(const std::string& path, int rank, int n_ranks,
                                      size_t ring_bytes) {
  shm_unlink(path.c_str());  // a stale segment of a crashed run with the same name
  const int fd = shm_open(path.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return IoError(fmt::format("shm_open({}): {}", path, std::strerror(errno)));
  ShmSegment segment;
  segment.bytes_ = TotalBytes(n_ranks, ring_bytes);
  segment.n_ranks_ = n_ranks;
  segment.ring_bytes_ = ring_bytes;
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(segment.bytes_)) == 0) {
    base = mmap(nullptr, segment.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(path.c_str());
    return IoError(fmt::format("cannot size or map {}: {}", path, std::strerror(error)));
  }
  segment.base_ = static_cast<std::byte*>(base);
  ShmHeader* header = new (segment.base_) ShmHeader{};
  header->version = kShmVersion;
  header->n_ranks = static_cast<uint32_t>(n_ranks);
  header->rank = static_cast<uint32_t>(rank);
  header->ring_bytes = ring_bytes;
  header->pid = getpid();
  for (int r = 0; r < n_ranks; ++r) new (&segment.ring(r)) ShmRing{};
  header->magic.store(kShmMagic, std::memory_order_release);
  return segment;
}

Result<ShmSegment> ShmSegment::Open(const std::string& path, int rank, int n_ranks,
                                    size_t ring_bytes, Deadline deadline) {
  const size_t bytes = TotalBytes(n_ranks, ring_bytes);
  for (;;) {
    const int fd = shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0600);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) {
      void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      close(fd);
      if (base == MAP_FAILED) return IoError(fmt::format("mmap {}: {}", path, std::strerror(errno)));
      ShmSegment segment;
      segment.base_ = static_cast<std::byte*>(base);
      segment.bytes_ = bytes;
      segment.n_ranks_ = n_ranks;
      segment.ring_bytes_ = ring_bytes;
      if (segment.header().magic.load(std::memory_order_acquire) == kShmMagic) {
        const ShmHeader& h = segment.header();
        if (h.version != kShmVersion || h.n_ranks != uint32_t(n_ranks) || h.rank != uint32_t(rank) ||
            h.ring_bytes != ring_bytes) {
          return Corrupt(fmt::format("{} belongs to another group layout (version {}, {} ranks, "
                                     "rank {}, ring {} bytes)", path, h.version, h.n_ranks, h.rank,
                                     h.ring_bytes));
        }
        return segment;
      }
    } else if (fd >= 0) {
      close(fd);  // exists but not sized yet (or a stale one of another layout)
    }
    if (Clock::now() >= deadline) {
      return Timeout(fmt::format("shared-memory segment {} of rank {} did not appear", path, rank));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace cohort::comm
