// PullModel: downloads a model file over HTTP or HTTPS into a models directory, as `ollama
// pull` does. The bytes go to "<name>.part" first; a transfer cut off part-way is resumed
// with a Range request (on the next attempt, or the next pull), and the file takes its name
// only once its SHA-256 matches the expected one: the caller's, or the one Hugging Face
// publishes for the file (X-Linked-Etag). A file whose digest differs is refused and its
// partial copy removed, so the next pull starts clean. A bare "owner/repo" is looked up in the
// hub's model API (GET /api/models/owner/repo, its "siblings"): its one GGUF file is pulled,
// or the one a quantization hint names; several candidates are an error that lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace cohort::server {

inline constexpr const char* kDefaultHub = "https://huggingface.co";

struct PullProgress {
  int64_t bytes_done = 0;
  int64_t bytes_total = -1;  // -1: the server did not say
  double rate_Bps = 0;       // over this pull's transfer so far
  bool resumed = false;      // started from a partial file
};

struct PullOptions {
  std::string source;       // http(s)://host[:port]/path, or Hugging Face "owner/repo:file"
  std::string dest_dir;     // the models directory (created if missing)
  std::string sha256;       // expected digest (hex); "": the server's, or none is checked
  std::string name;         // file name to write; "": the URL's last path segment
  std::string hub = kDefaultHub;  // Hugging Face or a mirror (HF_ENDPOINT): where owner/repo[:file] live
  std::string quant;        // owner/repo: pick the GGUF whose name contains this ("Q4_K_M"; any case)
  int attempts = 5;         // transfers tried, each resuming the last
  int timeout_s = 30;       // connect and per-read timeout
  int64_t max_bytes = int64_t{1} << 40;
  // Called from the downloading thread, about every 64 KiB received and once at the end.
  std::function<void(const PullProgress&)> progress;
  Status Validate() const;
};

struct PullResult {
  std::string path;     // the verified file
  std::string sha256;
  int64_t bytes = 0;
  bool verified = false;  // an expected digest was known and matched
  bool already = false;   // the file was there already with the expected digest
};

// "owner/repo:file" -> HUB/owner/repo/resolve/main/file; URLs unchanged.
Result<std::string> PullUrlOf(const std::string& source, const std::string& hub = kDefaultHub);

// Whether `source` is a bare Hugging Face repository, "owner/repo" (no file, no URL).
bool IsBareRepo(const std::string& source);
// The GGUF file of repository `repo` ("owner/repo") to pull: the only one it has, or the only
// one whose name contains `quant` (any case) when given. No GGUF, or several that the hint
// does not narrow to one, is kInvalidArgument naming the candidates.
Result<std::string> ChooseRepoFile(const std::string& repo, const std::string& hub, const std::string& quant,
                                   int timeout_s = 30);

Result<PullResult> PullModel(const PullOptions& options);

}  // namespace cohort::server
