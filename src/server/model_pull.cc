// PullModel over cpp-httplib's client (HTTPS through its OpenSSL build); see model_pull.h.
#include "server/model_pull.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "parallel/file_digest.h"

namespace cohort::server {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Url {
  std::string origin;  // scheme://host[:port]
  std::string path;    // /..., with any query
};

Result<Url> SplitUrl(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return InvalidArgument("'" + url + "' is no http:// or https:// URL");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return InvalidArgument("'" + scheme + "': only http and https are pulled");
  const size_t path_start = url.find('/', scheme_end + 3);
  Url u;
  u.origin = url.substr(0, path_start);
  u.path = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (u.origin.size() <= scheme_end + 3) return InvalidArgument("'" + url + "' has no host");
  return u;
}

// The last path segment, without a query: the file name a URL names.
std::string FileNameOf(const std::string& path) {
  std::string p = path.substr(0, path.find('?'));
  return p.substr(p.rfind('/') + 1);
}

bool SafeName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name) {
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

std::unique_ptr<httplib::Client> ClientOf(const Url& url, int timeout_s) {
  auto client = std::make_unique<httplib::Client>(url.origin);
  client->set_connection_timeout(timeout_s, 0);
  client->set_read_timeout(timeout_s, 0);
  client->set_follow_location(true);
  return client;
}

// Hugging Face answers a resolve URL with a redirect that carries the file's SHA-256 (for
// files in LFS) as X-Linked-Etag; the redirect target does not.
std::string PublishedSha256(const Url& url, int timeout_s) {
  auto client = ClientOf(url, timeout_s);
  client->set_follow_location(false);
  auto res = client->Head(url.path.c_str());
  if (!res) return "";
  std::string etag = res->get_header_value("X-Linked-Etag");
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return parallel::IsSha256Hex(etag) ? etag : "";
}

// One transfer into `part`, resuming from its current size. Ok once the server sent the whole
// file; an error says why it stopped (the caller tries again from where it stopped).
Status TransferOnce(const Url& url, const std::string& part, const PullOptions& o, PullProgress* progress) {
  std::error_code ec;
  const int64_t have = fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
  httplib::Headers headers;
  if (have > 0) headers.emplace("Range", fmt::format("bytes={}-", have));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(nullptr, &std::fclose);
  Status failure = Status::Ok();
  int64_t total = -1;
  const auto start = Clock::now();
  int64_t received = 0, reported = 0;
  auto client = ClientOf(url, o.timeout_s);
  auto res = client->Get(
      url.path.c_str(), headers,
      [&](const httplib::Response& r) {
        int64_t offset = 0;
        if (r.status == 206 && have > 0) {
          offset = have;  // the server resumes where the partial file ends
          progress->resumed = true;
        } else if (r.status != 200) {
          failure = Unavailable(fmt::format("{} answered HTTP {}", url.origin + url.path, r.status));
          return false;
        }
        if (r.has_header("Content-Length")) {
          total = offset + std::strtoll(r.get_header_value("Content-Length").c_str(), nullptr, 10);
        }
        if (total > o.max_bytes) {
          failure = ResourceExhausted(fmt::format("the file has {} bytes, more than the limit {}", total, o.max_bytes));
          return false;
        }
        out.reset(std::fopen(part.c_str(), offset > 0 ? "ab" : "wb"));
        if (!out) failure = IoError("cannot write " + part);
        progress->bytes_done = offset;
        progress->bytes_total = total;
        return static_cast<bool>(out);
      },
      [&](const char* data, size_t n) {
        if (std::fwrite(data, 1, n, out.get()) != n) {
          failure = IoError("writing " + part + " failed (disk full?)");
          return false;
        }
        received += static_cast<int64_t>(n);
        progress->bytes_done += static_cast<int64_t>(n);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        progress->rate_Bps = s > 0 ? static_cast<double>(received) / s : 0;
        if (progress->bytes_done > o.max_bytes) {
          failure = ResourceExhausted(fmt::format("more than {} bytes", o.max_bytes));
          return false;
        }
        if (o.progress && received - reported >= (64 << 10)) {
          reported = received;
          o.progress(*progress);
        }
        return true;
      });
  if (out && std::fflush(out.get()) != 0) failure = IoError("writing " + part + " failed");
  out.reset();
  if (!failure.ok()) return failure;
  if (!res) return Unavailable(fmt::format("the transfer from {} broke off: {}", url.origin, httplib::to_string(res.error())));
  if (total >= 0 && progress->bytes_done < total) {
    return Unavailable(fmt::format("the transfer ended after {} of {} bytes", progress->bytes_done, total));
  }
  return Status::Ok();
}

}  // namespace

Status PullOptions::Validate() const {
  if (source.empty()) return InvalidArgument("nothing to pull: give a URL, owner/repo or owner/repo:file");
  if (hub.rfind("http://", 0) != 0 && hub.rfind("https://", 0) != 0) return InvalidArgument("--hub: an http(s) URL");
  if (dest_dir.empty()) return InvalidArgument("no models directory");
  if (!sha256.empty() && !parallel::IsSha256Hex(sha256)) return InvalidArgument("--sha256: 64 lower-case hex digits");
  if (!name.empty() && !SafeName(name)) return InvalidArgument("--name: a plain file name");
  if (attempts < 1 || attempts > 100) return InvalidArgument("attempts: 1..100");
  if (timeout_s < 1 || timeout_s > 3600) return InvalidArgument("timeout: 1..3600 s");
  return Status::Ok();
}

Result<std::string> PullUrlOf(const std::string& source, const std::string& hub) {
  if (source.find("://") != std::string::npos) return source;
  // owner/repo:file (a file of the repository's main branch).
  const size_t colon = source.find(':');
  const size_t slash = source.find('/');
  if (slash == std::string::npos || slash == 0 || colon == std::string::npos || colon < slash ||
      colon + 1 == source.size()) {
    return InvalidArgument("'" + source + "': give an http(s) URL, or a Hugging Face OWNER/REPO:FILE");
  }
  return hub + "/" + source.substr(0, colon) + "/resolve/main/" + source.substr(colon + 1);
}

bool IsBareRepo(const std::string& source) {
  const size_t slash = source.find('/');
  return source.find("://") == std::string::npos && source.find(':') == std::string::npos && slash != std::string::npos &&
         slash > 0 && slash + 1 < source.size() && source.find('/', slash + 1) == std::string::npos;
}

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) {
    if (!out.empty()) out += ", ";  // appended, not ", " + n: GCC 12 warns falsely on the temporary
    out += n;
  }
  return out;
}

}  // namespace

Result<std::string> ChooseRepoFile(const std::string& repo, const std::string& hub, const std::string& quant,
                                   int timeout_s) {
  if (!IsBareRepo(repo)) return InvalidArgument("'" + repo + "' is no OWNER/REPO");
  COHORT_ASSIGN_OR_RETURN(const Url api, SplitUrl(hub + "/api/models/" + repo));
  auto client = ClientOf(api, timeout_s);
  auto res = client->Get(api.path.c_str());
  if (!res) return Unavailable(fmt::format("{}{}: {}", api.origin, api.path, httplib::to_string(res.error())));
  if (res->status == 404 || res->status == 401) return NotFound(fmt::format("{}: no such repository on {}", repo, hub));
  if (res->status != 200) return Unavailable(fmt::format("{}{}: HTTP {}", api.origin, api.path, res->status));
  const nlohmann::json listing = nlohmann::json::parse(res->body, nullptr, false);
  if (!listing.is_object() || !listing.contains("siblings") || !listing["siblings"].is_array()) {
    return Corrupt(fmt::format("{}{}: the answer has no \"siblings\" list", api.origin, api.path));
  }
  std::vector<std::string> ggufs;
  for (const nlohmann::json& f : listing["siblings"]) {
    const std::string name = f.is_object() ? f.value("rfilename", std::string()) : std::string();
    if (EndsWith(Lower(name), ".gguf")) ggufs.push_back(name);
  }
  if (ggufs.empty()) return InvalidArgument(repo + " has no .gguf file");
  std::vector<std::string> picked;
  for (const std::string& name : ggufs) {
    if (quant.empty() || Lower(name).find(Lower(quant)) != std::string::npos) picked.push_back(name);
  }
  if (picked.size() == 1) return picked[0];
  if (picked.empty()) {
    return InvalidArgument(fmt::format("no GGUF of {} matches --quant {}; its GGUF files: {}", repo, quant, JoinNames(ggufs)));
  }
  return InvalidArgument(fmt::format("{} has {} GGUF files{}: {}; name one as {}:FILE or narrow it with --quant (e.g. "
                                     "Q4_K_M)",
                                     repo, picked.size(), quant.empty() ? "" : " matching --quant " + quant,
                                     JoinNames(picked), repo));
}

Result<PullResult> PullModel(const PullOptions& o) {
  COHORT_RETURN_IF_ERROR(o.Validate());
  std::string source = o.source;
  if (IsBareRepo(source)) {
    COHORT_ASSIGN_OR_RETURN(const std::string file, ChooseRepoFile(source, o.hub, o.quant, o.timeout_s));
    source += ":" + file;
  }
  COHORT_ASSIGN_OR_RETURN(const std::string url_text, PullUrlOf(source, o.hub));
  COHORT_ASSIGN_OR_RETURN(const Url url, SplitUrl(url_text));
  const std::string name = o.name.empty() ? FileNameOf(url.path) : o.name;
  if (!SafeName(name)) return InvalidArgument("'" + url_text + "' names no file: give --name");
  std::error_code ec;
  fs::create_directories(o.dest_dir, ec);
  if (ec) return IoError("cannot create " + o.dest_dir + ": " + ec.message());
  PullResult result;
  result.path = (fs::path(o.dest_dir) / name).string();
  const std::string expected = !o.sha256.empty() ? o.sha256 : PublishedSha256(url, o.timeout_s);
  if (fs::exists(result.path, ec)) {
    COHORT_ASSIGN_OR_RETURN(result.sha256, parallel::Sha256OfFile(result.path));
    if (!expected.empty() && result.sha256 != expected) {
      return InvalidArgument(fmt::format("{} exists with sha256 {}, not the expected {}: remove it first", result.path,
                                         result.sha256, expected));
    }
    result.bytes = static_cast<int64_t>(fs::file_size(result.path, ec));
    result.verified = !expected.empty();
    result.already = true;
    return result;
  }
  const std::string part = result.path + ".part";
  PullProgress progress;
  Status last = Status::Ok();
  for (int attempt = 0; attempt < o.attempts; ++attempt) {
    last = TransferOnce(url, part, o, &progress);
    if (last.ok() || last.code() == StatusCode::kResourceExhausted || last.code() == StatusCode::kIo) break;
  }
  if (!last.ok()) return last.Annotate(fmt::format("pulling {} ({} bytes kept in {} for the next pull)", url_text,
                                                   progress.bytes_done, part));
  if (o.progress) o.progress(progress);
  COHORT_ASSIGN_OR_RETURN(result.sha256, parallel::Sha256OfFile(part));
  if (!expected.empty() && result.sha256 != expected) {
    fs::remove(part, ec);  // a corrupt copy must not be resumed
    return Corrupt(fmt::format("{}: the download's sha256 is {}, not the expected {}; removed it", url_text,
                               result.sha256, expected));
  }
  fs::rename(part, result.path, ec);
  if (ec) return IoError("cannot rename " + part + ": " + ec.message());
  result.bytes = progress.bytes_done;
  result.verified = !expected.empty();
  return result;
}

}  // namespace cohort::server
