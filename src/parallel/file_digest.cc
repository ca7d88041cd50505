// Sha256OfFile and DigestCache; see file_digest.h.
#include "parallel/file_digest.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace cohort::parallel {
namespace {

constexpr size_t kReadBytes = 4 << 20;

// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Sha256Digest Sha256Of(std::span<const uint8_t> bytes) {
  Sha256Digest d;
  crypto_hash_sha256(d.data(), bytes.data(), bytes.size());
  return d;
}

std::string HexOf(const Sha256Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < digest.size(); ++i) {
    s[2 * i] = kHex[digest[i] >> 4];
    s[2 * i + 1] = kHex[digest[i] & 15];
  }
  return s;
}

bool IsSha256Hex(const std::string& text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> Sha256OfFile(const std::string& path) {
  // Non-blocking, and regular files only: a FIFO or a device would block or never end.
  Fd f{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (f.fd < 0) return IoError(fmt::format("{}: open failed: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file");
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::vector<uint8_t> buf(kReadBytes);
  for (;;) {
    const ssize_t n = ::read(f.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(fmt::format("{}: read failed: {}", path, std::strerror(errno)));
    if (n == 0) break;
    crypto_hash_sha256_update(&state, buf.data(), static_cast<unsigned long long>(n));
  }
  Sha256Digest d;
  crypto_hash_sha256_final(&state, d.data());
  return HexOf(d);
}

Result<DigestCache::Entry> DigestCache::Get(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return NotFound(path + ": no such file");
    return IoError(fmt::format("{}: stat failed: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(path + ": not a regular file");
  Entry e;
  e.size = static_cast<uint64_t>(st.st_size);
  // The key names the file's identity; any change to it makes a new key (and a re-hash).
  const std::string key = fmt::format("{}\n{}\n{}.{}\n{}:{}", path, st.st_size, st.st_mtim.tv_sec,
                                      st.st_mtim.tv_nsec, st.st_dev, st.st_ino);
  std::string entry_path;
  if (!dir_.empty()) {
    const auto* k = reinterpret_cast<const uint8_t*>(key.data());
    entry_path = dir_ + "/" + HexOf(Sha256Of({k, key.size()})) + ".sha256";
    std::ifstream in(entry_path);
    std::string cached;
    if (in >> cached && IsSha256Hex(cached)) {
      e.sha256 = cached;
      return e;
    }
  }
  COHORT_ASSIGN_OR_RETURN(e.sha256, Sha256OfFile(path));
  if (!dir_.empty()) {
    // Best effort: a cache that cannot be written only costs a re-hash next time.
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    const std::string tmp = fmt::format("{}.{}.tmp", entry_path, ::getpid());
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << e.sha256 << "\n";
    }
    if (::rename(tmp.c_str(), entry_path.c_str()) != 0) ::unlink(tmp.c_str());
  }
  return e;
}

}  // namespace cohort::parallel
