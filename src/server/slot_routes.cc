// AddSlotRoutes; see slot_routes.h. The file I/O is confined to the save directory: names are
// checked, files opened with openat(O_NOFOLLOW) relative to the directory and written to a
// temporary name first, then renamed into place (a reader never sees half a file, and a
// symbolic link at the name is replaced, not followed).
#include "server/slot_routes.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/prefix_file.h"
#include "server/api_response.h"

namespace cohort::server {
namespace {

constexpr const char* kJson = "application/json";
constexpr size_t kMaxNameBytes = 200;

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

Result<std::vector<uint8_t>> ReadSlotFile(const std::string& dir, const std::string& name, uint64_t max_bytes) {
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0) return Errno("slot save directory " + dir);
  // O_NONBLOCK: a FIFO planted at the name must not hang the request.
  Fd f(::openat(d.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (f.get() < 0) {
    if (errno == ENOENT) return NotFound("slot file '" + name + "' does not exist");
    if (errno == ELOOP) return InvalidArgument("slot file '" + name + "' is a symbolic link");
    return Errno("slot file '" + name + "'");
  }
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) return Errno("slot file '" + name + "'");
  if (!S_ISREG(st.st_mode)) return InvalidArgument("slot file '" + name + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return InvalidArgument(fmt::format("slot file '{}' has {} bytes, more than the prefix cache holds", name, st.st_size));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(f.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("reading slot file '" + name + "'");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

Status WriteSlotFile(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  static std::atomic<uint64_t> counter{0};
  Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (d.get() < 0) return Errno("slot save directory " + dir);
  // A leading '.' is refused in names, so this never collides with a file a client named.
  const std::string tmp = fmt::format(".{}.{}.{}.tmp", name, ::getpid(), counter++);
  {
    Fd f(::openat(d.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (f.get() < 0) return Errno("creating a slot file in " + dir);
    size_t put = 0;
    while (put < bytes.size()) {
      const ssize_t n = ::write(f.get(), bytes.data() + put, bytes.size() - put);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const Status st = Errno("writing slot file '" + name + "'");
        ::unlinkat(d.get(), tmp.c_str(), 0);
        return st;
      }
      put += static_cast<size_t>(n);
    }
    if (::fsync(f.get()) != 0) {
      const Status st = Errno("writing slot file '" + name + "'");
      ::unlinkat(d.get(), tmp.c_str(), 0);
      return st;
    }
  }
  if (::renameat(d.get(), tmp.c_str(), d.get(), name.c_str()) != 0) {
    const Status st = Errno("naming slot file '" + name + "'");
    ::unlinkat(d.get(), tmp.c_str(), 0);
    return st;
  }
  return Status::Ok();
}

// llama-server answers slot actions it cannot do with 501.
void SendSlotError(httplib::Response& res, const Status& status) {
  if (status.code() != StatusCode::kUnsupported) return SendStatus(res, status);
  ApiError e;
  e.http_status = 501;
  e.type = "not_supported_error";
  e.message = status.message();
  SendError(res, e);
}

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// What the slot actions share: the instance, the directory and the shape files must have.
struct SlotFiles {
  engine::ServingInstance* instance = nullptr;
  std::string dir;
  bool have_model_id = false;
  engine::ModelId model{};

  Result<engine::PrefixFileShape> Shape() const {
    engine::Scheduler& scheduler = instance->scheduler();
    const engine::PrefixCache* cache = scheduler.prefix_cache();
    if (cache == nullptr) return Unsupported("the prefix cache is off (--cache-ram 0, or a model spread over ranks)");
    if (!have_model_id) return Unsupported("the model was not loaded from a GGUF file");
    engine::PrefixFileShape shape;
    shape.model = model;
    shape.kv_type = scheduler.options().kv_type;
    shape.block_tokens = cache->block_tokens();
    shape.block_bytes = cache->block_bytes();
    shape.state_bytes = cache->state_bytes();
    return shape;
  }

  Result<nlohmann::json> Save(int32_t id, const std::string& name) const {
    const auto start = std::chrono::steady_clock::now();
    COHORT_ASSIGN_OR_RETURN(engine::PrefixFileShape shape, Shape());
    COHORT_ASSIGN_OR_RETURN(std::vector<engine::PrefixBlockData> blocks, instance->scheduler().ExportSlot(id));
    if (blocks.empty()) {
      return InvalidArgument(fmt::format("slot {} has no cached prefix to save (no request ended there, or its "
                                         "blocks were evicted or erased)", id));
    }
    const std::vector<uint8_t> bytes = engine::EncodePrefixFile(shape, blocks);
    COHORT_RETURN_IF_ERROR(WriteSlotFile(dir, name, bytes));
    return nlohmann::json{{"id_slot", id},
                          {"filename", name},
                          {"n_saved", blocks.size() * static_cast<size_t>(shape.block_tokens)},
                          {"n_written", bytes.size()},
                          {"timings", {{"save_ms", MsSince(start)}}}};
  }

  Result<nlohmann::json> Restore(int32_t id, const std::string& name) const {
    const auto start = std::chrono::steady_clock::now();
    COHORT_ASSIGN_OR_RETURN(engine::PrefixFileShape shape, Shape());
    // A file the cache could not hold is refused before it is read whole.
    const engine::SchedulerStats stats = instance->scheduler().stats();
    const uint64_t max_bytes = 2 * static_cast<uint64_t>(stats.prefix_cache_bytes_max) + (1u << 20);
    COHORT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadSlotFile(dir, name, max_bytes));
    COHORT_ASSIGN_OR_RETURN(std::vector<engine::PrefixBlockData> blocks,
                            engine::DecodePrefixFile(bytes, shape, instance->model().config().n_vocab));
    COHORT_ASSIGN_OR_RETURN(int32_t restored, instance->scheduler().ImportSlot(id, std::move(blocks)));
    return nlohmann::json{{"id_slot", id},
                          {"filename", name},
                          {"n_restored", restored},
                          {"n_read", bytes.size()},
                          {"timings", {{"restore_ms", MsSince(start)}}}};
  }
};

Result<int32_t> SlotIdOf(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("Invalid slot ID '" + text + "'");
  }
  return std::stoi(text);
}

Result<std::string> FileNameOf(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return InvalidArgument("the body must be a JSON object with \"filename\"");
  const auto it = j.find("filename");
  if (it == j.end() || !it->is_string()) return InvalidArgument("filename: required, a string");
  std::string name = it->get<std::string>();
  if (!ValidSlotFileName(name)) {
    return InvalidArgument("Invalid filename: a plain name of letters, digits, '.', '_' and '-', not starting with "
                           "'.', at most 200 bytes");
  }
  return name;
}

}  // namespace

bool ValidSlotFileName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

void AddSlotRoutes(HttpServer& server, engine::ServingInstance& instance, const std::string& save_dir) {
  auto files = std::make_shared<SlotFiles>();
  files->instance = &instance;
  files->dir = save_dir;
  if (const gguf::File* file = instance.model().file(); file != nullptr) {
    files->model = engine::ModelIdentity(*file);
    files->have_model_id = true;
  }
  server.routes().Get("/slots", [files](const httplib::Request&, httplib::Response& res) {
    engine::Scheduler& scheduler = files->instance->scheduler();
    auto slots = scheduler.Slots();
    if (!slots.ok()) return SendSlotError(res, slots.status());
    nlohmann::json out = nlohmann::json::array();
    for (const engine::SlotInfo& s : *slots) {
      out.push_back({{"id", s.id}, {"n_ctx", scheduler.n_ctx()}, {"is_processing", s.is_processing}, {"n_saved", s.n_saved}});
    }
    res.set_content(out.dump(), kJson);
  });
  server.routes().Post(R"(/slots/([^/]+))", [files](const httplib::Request& req, httplib::Response& res) {
    if (files->dir.empty()) {
      return SendSlotError(res, Unsupported("This server does not support slots action. Start it with --slot-save-path"));
    }
    Result<int32_t> id = SlotIdOf(req.matches[1].str());
    if (!id.ok()) return SendSlotError(res, id.status());
    const std::string action = req.get_param_value("action");
    Result<nlohmann::json> answer = InvalidArgument("Invalid action '" + action + "': save, restore or erase");
    if (action == "erase") {
      Result<int32_t> erased = files->instance->scheduler().EraseSlot(*id);
      answer = erased.ok() ? Result<nlohmann::json>(nlohmann::json{{"id_slot", *id}, {"n_erased", *erased}})
                           : Result<nlohmann::json>(erased.status());
    } else if (action == "save" || action == "restore") {
      Result<std::string> name = FileNameOf(req.body);
      if (!name.ok()) return SendSlotError(res, name.status());
      answer = action == "save" ? files->Save(*id, *name) : files->Restore(*id, *name);
    }
    if (!answer.ok()) return SendSlotError(res, answer.status());
    res.set_content(answer->dump(), kJson);
  });
}

}  // namespace cohort::server
