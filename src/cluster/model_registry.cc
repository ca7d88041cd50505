// ModelRegistry; see model_registry.h.
#include "cluster/model_registry.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/config.h"
#include "parallel/file_digest.h"
#include "plan/gguf_shape.h"

namespace cohort::cluster {
namespace {

constexpr int kProposeTimeoutMs = 3000;
constexpr size_t kRequestedBytesMax = 1024;
// A GGUF header: magic, version u32, tensor count u64, metadata count u64.
constexpr size_t kGgufHeaderBytes = 24;

// `path` resolved (symlinks followed); "" when it does not exist.
std::string Canonical(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? "" : p.string();
}

bool Inside(const std::string& path, const std::string& dir) {
  return !dir.empty() && path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

// A regular file that starts like a GGUF. Opened non-blocking (a FIFO does not hang us) and
// without following a last symlink; at most the header is read.
Status CheckGgufFile(const std::string& canonical) {
  const int fd = ::open(canonical.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return InvalidArgument("model: the file cannot be opened");
  struct stat st {};
  uint8_t header[kGgufHeaderBytes];
  Status verdict = Status::Ok();
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    verdict = InvalidArgument("model: not a regular file");
  } else if (static_cast<size_t>(st.st_size) < kGgufHeaderBytes ||
             ::pread(fd, header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
             std::memcmp(header, "GGUF", 4) != 0) {
    verdict = InvalidArgument("model: not a GGUF file");
  }
  ::close(fd);
  return verdict;
}

}  // namespace

Result<std::string> ModelRegistry::RequestedFile(const std::string& requested) const {
  if (requested.empty() || requested.size() > kRequestedBytesMax || requested.find('\0') != std::string::npos) {
    return InvalidArgument("model: 1..1024 bytes naming a model");
  }
  const std::filesystem::path asked(requested);
  for (const auto& part : asked) {
    if (part == "..") return InvalidArgument("model: '..' is not allowed in a model name");
  }
  // The command line's files, by the path given there or by their file name (or stem).
  for (const std::string& given : options_.command_line) {
    const std::filesystem::path g(given);
    const bool same_file = asked.is_absolute() && !Canonical(given).empty() && Canonical(given) == Canonical(requested);
    if (requested == given || requested == g.filename().string() || requested == g.stem().string() || same_file) {
      const std::string c = Canonical(given);
      if (c.empty()) return NotFound("model: the file given on the command line is gone");
      COHORT_RETURN_IF_ERROR(CheckGgufFile(c));
      return c;
    }
  }
  const std::string dir = options_.models_dir.empty() ? "" : Canonical(options_.models_dir);
  if (dir.empty()) return NotFound("model: no such model on this node (it offers files under --models-dir and -m)");
  std::vector<std::string> candidates;
  if (asked.is_absolute()) {
    candidates.push_back(requested);
  } else {
    candidates.push_back(dir + "/" + requested);
    if (asked.extension() != ".gguf") candidates.push_back(dir + "/" + requested + ".gguf");
  }
  for (const std::string& candidate : candidates) {
    struct stat st {};
    if (::lstat(candidate.c_str(), &st) != 0) continue;
    const std::string c = Canonical(candidate);
    // Symlinks are followed, but must end inside the models directory too.
    if (c.empty() || !Inside(c, dir)) return InvalidArgument("model: outside the models directory");
    COHORT_RETURN_IF_ERROR(CheckGgufFile(c));
    return c;
  }
  if (asked.is_absolute() && !Inside(Canonical(requested).empty() ? requested : Canonical(requested), dir)) {
    return InvalidArgument("model: outside the models directory");
  }
  return NotFound("model: no such model on this node (it offers files under --models-dir and -m)");
}

Result<std::string> ModelRegistry::Sha256Of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return NotFound("no file " + path);
  const std::string stamp = fmt::format("{}:{}", st.st_size, st.st_mtim.tv_sec);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hashes_.find(path);
    if (it != hashes_.end() && it->second.first == stamp) return it->second.second;
  }
  COHORT_ASSIGN_OR_RETURN(std::string sha, parallel::Sha256OfFile(path));
  std::lock_guard<std::mutex> lock(mutex_);
  hashes_[path] = {stamp, sha};
  return sha;
}

Result<ModelEntry> ModelRegistry::ReadEntry(const std::string& path) {
  ModelEntry entry;
  std::error_code ec;
  entry.path = std::filesystem::canonical(path, ec).string();
  if (ec) return IoError("cannot resolve " + path);
  entry.name = std::filesystem::path(entry.path).stem().string();
  // One open, and a GGUF this build runs (ModelConfig says why not) before a byte is hashed.
  // The parser's own words may quote the file or its path: they go to the log only.
  auto file = gguf::File::Open(entry.path);
  if (!file.ok()) {
    log_.Warn("model {}: {}", entry.path, file.status().ToString());
    return InvalidArgument("model: not a valid GGUF file");
  }
  if (Status config = model::ModelConfig::FromGguf(**file).status(); !config.ok()) {
    log_.Warn("model {}: {}", entry.path, config.ToString());
    return InvalidArgument("model: a GGUF this build cannot run (" + std::string(StatusCodeName(config.code())) + ")");
  }
  COHORT_ASSIGN_OR_RETURN(plan::GgufModel shape, plan::ReadGgufModel(**file));
  entry.shape = shape.shape;
  entry.quant = shape.quant;
  entry.file_bytes = static_cast<int64_t>(shape.file_bytes);
  entry.n_ctx_train = shape.n_ctx_train;
  COHORT_ASSIGN_OR_RETURN(entry.sha256, Sha256Of(entry.path));
  return entry;
}

Result<ModelEntry> ModelRegistry::Resolve(const std::string& path_or_name) {
  const Records records = Records::Of(node_.Snapshot().state);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_or_name, ec)) {
    auto it = records.models.find(path_or_name);
    if (it == records.models.end()) {
      return NotFound("'" + path_or_name + "' is neither a file on this node nor a model the cluster knows");
    }
    return it->second;
  }
  COHORT_ASSIGN_OR_RETURN(ModelEntry entry, ReadEntry(path_or_name));
  if (auto it = records.models.find(entry.name); it != records.models.end()) {
    const ModelEntry& known = it->second;
    if (known.sha256 == entry.sha256) return known;
    return InvalidArgument("a different file (sha256 " + known.sha256.substr(0, 12) + ") is already registered as '" +
                           entry.name + "'");
  }
  COHORT_RETURN_IF_ERROR(node_.ProposeChange(PutModelEntry(entry), kProposeTimeoutMs).status());
  log_.Info("registered model {} ({} bytes, sha256 {})", entry.name, entry.file_bytes, entry.sha256);
  return entry;
}

std::map<std::string, std::string> ModelRegistry::HeldFiles(const Records& records) {
  std::map<std::string, std::string> files;
  for (const auto& [name, entry] : records.models) {
    // The path comes from the agreed state, which any member can write: only a file this node
    // offers, of the registered size, is hashed (not a /proc file or a device another member named).
    struct stat st {};
    if (::stat(entry.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != entry.file_bytes) continue;
    if (!RequestedFile(entry.path).ok()) continue;
    auto sha = Sha256Of(entry.path);
    if (sha.ok() && *sha == entry.sha256) files[entry.sha256] = entry.path;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  known_files_ = files;
  return files;
}

std::map<std::string, std::string> ModelRegistry::KnownFiles() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return known_files_;
}

}  // namespace cohort::cluster
