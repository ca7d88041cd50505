// ModelRegistry; see model_registry.h.
#include "cluster/model_registry.h"

#include <sys/stat.h>

#include <filesystem>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/config.h"
#include "parallel/file_digest.h"
#include "plan/gguf_shape.h"

namespace cohort::cluster {
namespace {

constexpr int kProposeTimeoutMs = 3000;

}  // namespace

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
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(entry.path));
  COHORT_RETURN_IF_ERROR(model::ModelConfig::FromGguf(*file).status());
  COHORT_ASSIGN_OR_RETURN(plan::GgufModel shape, plan::ReadGgufModel(*file));
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
