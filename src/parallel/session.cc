// Session (coordinator) and ServeOneJob (worker); see session.h.
#include "parallel/session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "comm/shm_transport.h"
#include "comm/socket_util.h"
#ifdef COHORT_HAVE_UCX
#include "comm/ucx_transport.h"
#endif
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/file_digest.h"
#include "parallel/model_plan.h"

namespace cohort::parallel {
namespace {

// 2: the model travels by sha256 and size; 3: workers leave a coordinator silent for
// idle_timeout_ms (it sends keep-alives while idle).
constexpr int kJobVersion = 3;

const char* TransportName(DataTransport t) {
  switch (t) {
    case DataTransport::kShm: return "shm";
    case DataTransport::kUcx: return "ucx";
    case DataTransport::kTcp: break;
  }
  return "tcp";
}

// The IPv4 address this end of a connected socket has: what the peer can reach us at.
Result<std::string> LocalHost(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return IoError(std::string("getsockname: ") + std::strerror(errno));
  }
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return std::string(text);
}

uint64_t FreshGroupId() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

Result<std::unique_ptr<comm::Transport>> ConnectData(const nlohmann::json& job, int rank,
                                                     const std::vector<std::string>& addresses,
                                                     std::unique_ptr<comm::TcpListener> listener,
                                                     const std::optional<comm::ChannelKey>& key) {
  const int n_ranks = job.at("n_ranks").get<int>();
  if (job.at("transport").get<std::string>() == "shm") {
    comm::ShmOptions o;
    o.rank = rank;
    o.n_ranks = n_ranks;
    o.name = job.at("shm_name").get<std::string>();
      o.connect_timeout = std::chrono::milliseconds(job.at("setup_timeout_ms").get<int64_t>());
    return comm::ConnectShmGroup(o);
  }
  comm::TcpOptions o;
  o.rank = rank;
  o.addresses = addresses;
  o.group_id = job.at("group_id").get<uint64_t>();
  o.connect_timeout = std::chrono::milliseconds(job.at("setup_timeout_ms").get<int64_t>());
  o.key = key;
  if (job.at("transport").get<std::string>() == "ucx") {
    // UCX moves bytes itself (RDMA, its own shm/tcp): our records cannot wrap them.
    if (key.has_value()) {
      return Unsupported("the UCX transport cannot carry the data-plane encryption: use --transport tcp, or run "
                         "without a secret (workers beyond loopback then need --insecure)");
    }
#ifdef COHORT_HAVE_UCX
    comm::UcxOptions u;
    u.bootstrap = o;
    return comm::ConnectUcxGroup(u, std::move(listener));
#else
    return Unsupported("this build has no UCX (install libucx-dev and rebuild)");
#endif
  }
  o.link.latency_us = job.at("link_latency_us").get<int64_t>();
  o.link.bandwidth_bytes_per_s = job.at("link_bandwidth").get<int64_t>();
  return comm::ConnectTcpGroup(o, std::move(listener));
}

ExecutorOptions ExecutorOptionsOf(std::chrono::milliseconds idle_timeout) {
  ExecutorOptions o;
  o.idle_timeout = idle_timeout;
  o.keepalive_interval = std::min(o.keepalive_interval, idle_timeout / 4);
  return o;
}

comm::CommOptions CommOptionsOf(const nlohmann::json& job) {
  comm::CommOptions o;
  o.timeout = std::chrono::milliseconds(job.at("comm_timeout_ms").get<int64_t>());
  return o;
}

}  // namespace

Result<PortRange> PortRange::Parse(const std::string& text) {
  PortRange r;
  if (text.empty() || text == "0") return r;
  const size_t dash = text.find('-');
  const auto number = [&](const std::string& part) -> Result<int> {
    int v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 1 || v > 65535) {
      return InvalidArgument("data ports: '" + text + "' is not PORT or FIRST-LAST (1..65535)");
    }
    return v;
  };
  COHORT_ASSIGN_OR_RETURN(r.first, number(text.substr(0, dash)));
  r.last = r.first;
  if (dash != std::string::npos) {
    COHORT_ASSIGN_OR_RETURN(r.last, number(text.substr(dash + 1)));
  }
  if (r.last < r.first) return InvalidArgument("data ports: '" + text + "' ends before it starts");
  return r;
}

std::string PortRange::ToString() const {
  if (any()) return "any";
  return first == last ? std::to_string(first) : fmt::format("{}-{}", first, last);
}

Result<std::unique_ptr<comm::TcpListener>> BindDataListener(const std::string& host, const PortRange& ports) {
  if (ports.any()) return comm::TcpListener::Bind(host + ":0");
  Status last = Status::Ok();
  for (int port = ports.first; port <= ports.last; ++port) {
    auto bound = comm::TcpListener::Bind(host + ":" + std::to_string(port));
    if (bound.ok()) return bound;
    last = bound.status();
  }
  return Unavailable(fmt::format("no free data port in {} on {} (the last: {}); widen --data-ports",
                                 ports.ToString(), host, last.ToString()));
}

Status SessionOptions::Validate() const {
  if (model_path.empty()) return InvalidArgument("no model path");
  if (workers.empty()) return InvalidArgument("a distributed instance needs at least one worker");
  if (worker_threads <= 0) return InvalidArgument("worker threads must be positive");
  if (worker_idle_timeout < std::chrono::milliseconds(100)) {
    return InvalidArgument("the worker idle timeout must be at least 100 ms");
  }
  if (transport != DataTransport::kTcp && link.enabled()) {
    return InvalidArgument("link emulation applies to the TCP transport only");
  }
  if (transport == DataTransport::kUcx && key.has_value()) {
    return Unsupported("the UCX transport cannot carry the data-plane encryption: use --transport tcp, or run "
                       "without a secret (workers beyond loopback then need --insecure)");
  }
  return Status::Ok();
}

Session::~Session() {
  if (executor_ != nullptr) (void)executor_->Stop();
  executor_.reset();
  world_.reset();
}

Result<std::unique_ptr<Session>> Session::Adopt(std::unique_ptr<comm::Transport> world,
                                                const plan::ShardPlan& plan, const gguf::File& file,
                                                std::chrono::milliseconds comm_timeout) {
  std::unique_ptr<Session> session(new Session());
  COHORT_ASSIGN_OR_RETURN(auto model, model::Model::Load(file));
  comm::CommOptions o;
  o.timeout = comm_timeout;
  session->world_ = std::make_unique<comm::Communicator>(std::move(world), o);
  COHORT_ASSIGN_OR_RETURN(session->executor_, Executor::Create(std::move(model), plan, *session->world_));
  return session;
}

Status ServeRank(std::unique_ptr<comm::Transport> world, const plan::ShardPlan& plan,
                 const gguf::File& file, int threads, std::chrono::milliseconds comm_timeout,
                 Logger* log) {
  COHORT_ASSIGN_OR_RETURN(auto model, model::Model::Load(file));
  comm::CommOptions o;
  o.timeout = comm_timeout;
  comm::Communicator communicator(std::move(world), o);
  COHORT_ASSIGN_OR_RETURN(auto executor, Executor::Create(std::move(model), plan, communicator));
  ThreadPool pool(threads);
  Context ctx{&pool, log};
  const Status served = executor->Serve(ctx);
  if (log != nullptr) {
    log->Info("rank {}: peak resident {:.1f} MiB", communicator.rank(), PeakResidentBytes() / 1048576.0);
  }
  return served;
}

namespace {

// The coordinator's digest of its own file (cached unless given).
Result<std::string> CoordinatorDigest(const SessionOptions& options, const gguf::File& file) {
  if (!options.model_sha256.empty()) {
    if (!IsSha256Hex(options.model_sha256)) return InvalidArgument("model_sha256 is not 64 hex digits");
    return options.model_sha256;
  }
  if (file.path().empty()) return InvalidArgument("the coordinator's model was not opened from a file");
  COHORT_ASSIGN_OR_RETURN(DigestCache::Entry e, DigestCache(options.digest_cache_dir).Get(file.path()));
  if (e.size != file.file_size()) return Corrupt(file.path() + " changed since it was opened");
  return e.sha256;
}

// The job every worker gets (its "rank" is set per worker).
nlohmann::json MakeJob(const SessionOptions& options, const plan::ShardPlan& plan,
                       const std::string& sha256, uint64_t file_bytes) {
  const uint64_t group_id = FreshGroupId();
  return {{"version", kJobVersion}, {"n_ranks", plan.n_ranks()}, {"model", options.model_path},
          {"model_sha256", sha256}, {"model_bytes", file_bytes},
          {"plan", plan.ToJson()}, {"threads", options.worker_threads},
          {"transport", TransportName(options.transport)},
          {"shm_name", fmt::format("job-{:016x}", group_id)}, {"group_id", group_id},
          {"link_latency_us", options.link.latency_us},
          {"link_bandwidth", options.link.bandwidth_bytes_per_s},
          {"setup_timeout_ms", options.setup_timeout.count()},
          {"comm_timeout_ms", options.comm_timeout.count()},
          {"idle_timeout_ms", options.worker_idle_timeout.count()},
          {"transfer_timeout_ms", options.transfer.total_timeout.count()},
          {"progress", static_cast<bool>(options.progress)}};
}

// The worker's next message that is not a progress report (those go to options.progress).
Result<nlohmann::json> ReceiveReply(ControlChannel& channel, const SessionOptions& options, int rank,
                                    comm::Deadline deadline) {
  for (;;) {
    COHORT_ASSIGN_OR_RETURN(nlohmann::json reply, channel.Receive(deadline));
    if (!reply.contains("progress")) return reply;
    const nlohmann::json& p = reply["progress"];
    if (options.progress && p.is_object()) {
      options.progress(rank, "load", p.value("bytes_done", uint64_t{0}), p.value("bytes_total", uint64_t{0}));
    }
  }
}

// One worker's answer to its job: its data address, after streaming it its share if it asks.
Result<std::string> AwaitWorker(ControlChannel& channel, const SessionOptions& options,
                                const gguf::File& file, const plan::ShardPlan& plan, int rank,
                                comm::Deadline deadline) {
  COHORT_ASSIGN_OR_RETURN(nlohmann::json reply, ReceiveReply(channel, options, rank, deadline));
  if (reply.value("fetch", false)) {
    TransferOptions transfer = options.transfer;
    if (options.progress) {
      transfer.on_sent = [&options, rank](uint64_t sent, uint64_t total) { options.progress(rank, "transfer", sent, total); };
    }
    if (Status sent = ServeShareFetch(channel, file, plan, rank, transfer); !sent.ok()) {
      // A worker that rejects a frame says why and hangs up: its reason beats our broken pipe.
      auto why = channel.ReceiveAny(comm::DeadlineAfter(std::chrono::seconds(1)));
      const Status reported = why.ok() ? ControlChannel::PeerError(*why) : Status::Ok();
      return reported.ok() ? sent : reported;
    }
    // The worker now opens and loads its share: a fresh setup bound from here.
    COHORT_ASSIGN_OR_RETURN(reply, ReceiveReply(channel, options, rank, comm::DeadlineAfter(options.setup_timeout)));
  }
  return reply.value("data_address", std::string());
}

}  // namespace

Result<std::unique_ptr<Session>> Session::Start(const SessionOptions& options,
                                                const gguf::File& file) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  const int n_ranks = static_cast<int>(options.workers.size()) + 1;
  const plan::ShardPlan& plan = options.plan;
  if (plan.n_ranks() != n_ranks) {
    return InvalidArgument(fmt::format("the plan has {} ranks for a coordinator and {} workers", plan.n_ranks(),
                                       options.workers.size()));
  }
  COHORT_RETURN_IF_ERROR(CheckPlanFitsModel(plan, file));
  COHORT_ASSIGN_OR_RETURN(const std::string sha256, CoordinatorDigest(options, file));

  nlohmann::json job = MakeJob(options, plan, sha256, file.file_size());
  std::unique_ptr<Session> session(new Session());
  const comm::Deadline deadline = comm::DeadlineAfter(options.setup_timeout);
  for (size_t i = 0; i < options.workers.size(); ++i) {
    COHORT_ASSIGN_OR_RETURN(auto channel,
                            ControlChannel::Connect(options.workers[i], options.setup_timeout, options.key));
    job["rank"] = static_cast<int>(i + 1);
    COHORT_RETURN_IF_ERROR(channel->Send(job, deadline).Annotate("worker " + options.workers[i]));
    session->channels_.push_back(std::move(channel));
  }
  // Answer the workers (streaming shares to those without the file) while loading our own.
  const size_t n_workers = session->channels_.size();
  std::vector<Result<std::string>> replies(n_workers, Result<std::string>(Unavailable("no reply")));
  std::vector<std::thread> waiters;
  for (size_t i = 0; i < n_workers; ++i) {
    waiters.emplace_back([&, i] {
      try {
        replies[i] = AwaitWorker(*session->channels_[i], options, file, plan,
                                 static_cast<int>(i + 1), deadline);
      } catch (const nlohmann::json::exception& e) {
        replies[i] = Corrupt(std::string("malformed reply: ") + e.what());
      }
    });
  }
  Status read = Status::Ok();
  if (options.progress) {
    // Rank 0's share read ahead, so its loading shows in the progress too.
    auto ranges = ShardByteRanges(file, plan, 0);
    read = ranges.ok() ? TouchRanges(file.bytes(), *ranges,
                                     [&options](uint64_t done, uint64_t total) { options.progress(0, "load", done, total); })
                       : ranges.status();
  }
  auto model = read.ok() ? model::Model::Load(file) : Result<std::unique_ptr<model::Model>>(read);
  for (std::thread& t : waiters) t.join();
  if (!model.ok()) return model.status();
  std::vector<std::string> addresses(n_ranks);
  for (size_t i = 0; i < n_workers; ++i) {
    if (!replies[i].ok()) {
      Status why = replies[i].status().Annotate("worker " + options.workers[i]);
      // A worker with a secret hangs up on a coordinator without one, unread.
      if (!options.key.has_value() && why.code() == StatusCode::kUnavailable) {
        why = why.Annotate("a worker started with --secret refuses coordinators without it");
      }
      return why;
    }
    addresses[i + 1] = *replies[i];
  }
  std::unique_ptr<comm::TcpListener> listener;
  if (options.transport != DataTransport::kShm) {
    COHORT_ASSIGN_OR_RETURN(std::string host, LocalHost(session->channels_[0]->fd()));
    COHORT_ASSIGN_OR_RETURN(listener, BindDataListener(host, options.data_ports));
    addresses[0] = listener->address();
  }
  const comm::Deadline go_deadline = comm::DeadlineAfter(options.setup_timeout);
  for (auto& channel : session->channels_) {
    COHORT_RETURN_IF_ERROR(channel->Send({{"addresses", addresses}}, go_deadline));
  }
  COHORT_ASSIGN_OR_RETURN(auto transport, ConnectData(job, 0, addresses, std::move(listener), options.key));
  session->world_ = std::make_unique<comm::Communicator>(std::move(transport), CommOptionsOf(job));
  COHORT_ASSIGN_OR_RETURN(session->executor_,
                          Executor::Create(std::move(*model), plan, *session->world_,
                                           ExecutorOptionsOf(options.worker_idle_timeout)));
  return session;
}

namespace {

// The name of the job's model file, if it is a plain file name (no directories, no "..").
std::string SafeFileName(const std::string& path) {
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.empty() || name == "." || name == "..") return "";
  return name;
}

// The model file of a job: a local file with the job's size and digest, else the worker's share
// streamed from the coordinator into the cache.
Result<std::unique_ptr<gguf::File>> OpenJobModel(ControlChannel& channel, const nlohmann::json& job,
                                                 const plan::ShardPlan& plan, int rank,
                                                 const WorkerEnvironment& env, Logger* log) {
  const std::string path = job.at("model").get<std::string>();
  const std::string sha256 = job.at("model_sha256").get<std::string>();
  const uint64_t bytes = job.at("model_bytes").get<uint64_t>();
  if (!IsSha256Hex(sha256)) return InvalidArgument("the job's model sha256 is malformed");
  if (auto known = env.known_files.find(sha256); known != env.known_files.end()) {
    struct stat st {};
    if (::stat(known->second.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == bytes) {
      return gguf::File::Open(known->second);
    }
  }
  std::vector<std::string> candidates = {path};
  if (const std::string name = SafeFileName(path); !env.models_dir.empty() && !name.empty()) {
    candidates.push_back(env.models_dir + "/" + name);
  }
  const DigestCache digests(env.cache_dir.empty() ? "" : env.cache_dir + "/digests");
  for (const std::string& candidate : candidates) {
    struct stat st {};
    if (candidate.empty() || ::stat(candidate.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) != bytes) {
      continue;  // absent, or another size: not the model (and not worth hashing)
    }
    auto entry = digests.Get(candidate);
    if (entry.ok() && entry->sha256 == sha256) return gguf::File::Open(candidate);
    if (log != nullptr) log->Warn("{} is not the job's model (sha256 differs); not using it", candidate);
  }
  ShareRequest request{env.cache_dir, sha256, bytes, plan, rank, env.cache_bytes_max};
  TransferOptions transfer;
  transfer.stall_timeout = std::chrono::milliseconds(job.at("setup_timeout_ms").get<int64_t>());
  transfer.total_timeout = std::chrono::milliseconds(job.at("transfer_timeout_ms").get<int64_t>());
  if (log != nullptr) log->Info("rank {}: no local copy of {}; fetching its share", rank, path);
  return FetchShare(channel, request, transfer);
}

// Reads the worker's share of `file` ahead of loading it, telling the coordinator how far it
// got (a progress message at most every 250 ms, and one at the end).
Status ReadShareReporting(ControlChannel& channel, const gguf::File& file, const plan::ShardPlan& plan, int rank,
                          comm::Deadline deadline) {
  COHORT_ASSIGN_OR_RETURN(std::vector<ByteRange> ranges, ShardByteRanges(file, plan, rank));
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  Status told = Status::Ok();
  const Status read = TouchRanges(file.bytes(), ranges, [&](uint64_t done, uint64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!told.ok() || (done < total && now - last < std::chrono::milliseconds(250))) return;
    last = now;
    told = channel.Send({{"progress", {{"bytes_done", done}, {"bytes_total", total}}}}, deadline);
  });
  return read.ok() ? told : read;
}

// Everything of one job after its first message; errors go back to the coordinator.
// *serving is set once the job's executor runs (a failure after that is not the setup's).
Status RunJob(ControlChannel& channel, const nlohmann::json& job, const WorkerEnvironment& env,
              const std::string& coordinator_host, Logger* log, bool* serving) {
  if (job.value("version", 0) != kJobVersion) {
    return InvalidArgument(fmt::format("job version {} (this worker speaks {})",
                                       job.value("version", 0), kJobVersion));
  }
  COHORT_RETURN_IF_ERROR(ValidateJob(job, env.limits));
  const int rank = job.at("rank").get<int>();
  COHORT_ASSIGN_OR_RETURN(plan::ShardPlan plan, plan::ShardPlan::FromJson(job.at("plan").get<std::string>()));
  if (plan.n_ranks() != job.at("n_ranks").get<int>()) {
    return InvalidArgument(fmt::format("the job's plan has {} ranks, its n_ranks {}", plan.n_ranks(),
                                       job.at("n_ranks").get<int>()));
  }
  const std::string path = job.at("model").get<std::string>();
  COHORT_ASSIGN_OR_RETURN(auto file, OpenJobModel(channel, job, plan, rank, env, log));
  const std::chrono::milliseconds setup(job.at("setup_timeout_ms").get<int64_t>());
  // Other workers may still be fetching their shares: the go message may take that long.
  const comm::Deadline deadline = comm::DeadlineAfter(
      setup + std::chrono::milliseconds(job.at("transfer_timeout_ms").get<int64_t>()));
  if (job.value("progress", false)) {
    COHORT_RETURN_IF_ERROR(ReadShareReporting(channel, *file, plan, rank, deadline));
  }
  COHORT_ASSIGN_OR_RETURN(auto model, model::Model::Load(*file));
  std::unique_ptr<comm::TcpListener> listener;
  nlohmann::json reply = {{"ok", true}};
  if (job.at("transport").get<std::string>() != "shm") {
    COHORT_ASSIGN_OR_RETURN(std::string host, LocalHost(channel.fd()));
    COHORT_ASSIGN_OR_RETURN(listener, BindDataListener(host, env.data_ports));
    reply["data_address"] = listener->address();
  }
  COHORT_RETURN_IF_ERROR(channel.Send(reply, deadline));
  COHORT_ASSIGN_OR_RETURN(nlohmann::json go, channel.Receive(deadline));
  const auto addresses = go.at("addresses").get<std::vector<std::string>>();
  COHORT_RETURN_IF_ERROR(ValidateAddresses(addresses, rank, plan.n_ranks(), coordinator_host,
                                           reply.value("data_address", std::string()), env.allowed_host));
  COHORT_ASSIGN_OR_RETURN(auto transport, ConnectData(job, rank, addresses, std::move(listener), env.key));
  comm::Transport* data = transport.get();
  comm::Communicator world(std::move(transport), CommOptionsOf(job));
  const std::chrono::milliseconds idle(job.at("idle_timeout_ms").get<int64_t>());
  COHORT_ASSIGN_OR_RETURN(auto executor,
                          Executor::Create(std::move(model), plan, world, ExecutorOptionsOf(idle)));
  *serving = true;
  // Declared after the communicator and the executor: unregistered before either goes.
  const RunningJobs::Registration interruptible(env.running, -1, data);
  if (log != nullptr) log->Info("rank {} of {}: serving {} ({})", rank, plan.n_ranks(), path, plan.ToString());
  ThreadPool pool(job.at("threads").get<int>());
  Context ctx{&pool, log};
  const Status served = executor->Serve(ctx);
  if (log != nullptr) {
    log->Info("rank {}: peak resident {:.1f} MiB ({:.1f} MiB of weight slices copied)", rank,
              PeakResidentBytes() / 1048576.0, executor->copied_bytes() / 1048576.0);
  }
  return served;
}

}  // namespace

int64_t PeakResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  int64_t kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb * 1024;
}

namespace {

constexpr auto kJobMessageWait = std::chrono::seconds(10);

// The IPv4 address of the peer of a connected socket.
Result<std::string> PeerHost(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return IoError(std::string("getpeername: ") + std::strerror(errno));
  }
  char text[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return std::string(text);
}

struct Admission {
  std::string host;
  std::unique_ptr<PeerSlots::Ticket> ticket;  // null without a PeerSlots
};

// A coordinator may run a job here: a member where membership is known, and within its slots.
Result<Admission> AdmitCoordinator(ControlChannel& channel, const WorkerEnvironment& env) {
  Admission a;
  COHORT_ASSIGN_OR_RETURN(a.host, PeerHost(channel.fd()));
  if (env.allowed_host && !env.allowed_host(a.host)) {
    return InvalidArgument(a.host + " is not a member of this worker's cluster: job refused");
  }
  if (env.peer_slots != nullptr) {
    COHORT_ASSIGN_OR_RETURN(a.ticket, env.peer_slots->Enter(a.host));
  }
  return a;
}

}  // namespace

Status ServeOneJob(int listen_fd, Logger* log) { return ServeOneJob(listen_fd, WorkerEnvironment{}, log); }

namespace {

// A stranger gets this long to prove the key before its slot goes back to waiting.
constexpr auto kHandshakeTimeout = std::chrono::seconds(3);

std::string PeerOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return comm::FormatAddress(addr);
}

// The next coordinator's connection that passes the handshake (any connection without a key).
Result<std::unique_ptr<ControlChannel>> AcceptCoordinator(int listen_fd, const WorkerEnvironment& env, Logger* log) {
  for (;;) {
    int fd = -1;
    while (fd < 0) {  // a worker waits for its coordinator as long as it takes, an hour per poll
      const Status ready = comm::PollOne(listen_fd, POLLIN, comm::DeadlineAfter(std::chrono::hours(1)));
      if (ready.code() == StatusCode::kTimeout) continue;
      COHORT_RETURN_IF_ERROR(ready);
      fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      // Several threads may wait on one listener: another one took this connection.
      if (fd < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        return IoError(std::string("accept: ") + std::strerror(errno));
      }
    }
    if (Status st = comm::SetNonBlocking(fd); !st.ok()) {
      ::close(fd);
      return st;
    }
    if (!env.key.has_value()) return std::make_unique<ControlChannel>(fd);
    // A connection from a host that may not coordinate here is closed before its handshake:
    // a flood of them costs an accept each, never a slot for the handshake's timeout. (Without
    // a key there is no handshake: AdmitCoordinator refuses it with a message.)
    if (env.allowed_host) {
      Result<std::string> host = PeerHost(fd);
      if (!host.ok() || !env.allowed_host(*host)) {
        if (log != nullptr) log->Info("refused a connection from {}: a host this worker does not admit (not a member, or not in "
                            "--allow-coordinator)", PeerOf(fd));
        ::close(fd);
        continue;
      }
    }
    Result<std::unique_ptr<comm::SecureSession>> session = Unavailable("no handshake");
    {
      // A service that stops does not wait out a stranger's handshake.
      const RunningJobs::Registration interruptible(env.running, fd, nullptr);
      session = comm::Handshake(fd, comm::HandshakeRole::kServer, *env.key, comm::DeadlineAfter(kHandshakeTimeout));
    }
    if (session.ok()) return std::make_unique<ControlChannel>(fd, std::move(*session));
    if (log != nullptr) log->Warn("refused a connection from {}: {}", PeerOf(fd), session.status().ToString());
    ::close(fd);
  }
}

}  // namespace

Status ServeOneJob(int listen_fd, const WorkerEnvironment& env, Logger* log) {
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<ControlChannel> accepted, AcceptCoordinator(listen_fd, env, log));
  ControlChannel& channel = *accepted;
  const RunningJobs::Registration interruptible(env.running, channel.fd(), nullptr);
  auto admitted = AdmitCoordinator(channel, env);
  if (!admitted.ok()) {
    (void)channel.Send({{"error", admitted.status().ToString()}}, comm::DeadlineAfter(std::chrono::seconds(1)));
    // Read what the peer sends meanwhile, so our close does not reset the answer away.
    channel.DrainUntilClosed(comm::DeadlineAfter(std::chrono::milliseconds(500)));
    return admitted.status();
  }
  // A peer that connects and says nothing holds a slot this long at most.
  auto job = channel.Receive(comm::DeadlineAfter(kJobMessageWait));
  if (!job.ok()) return job.status().Annotate("reading the job");
  Status st;
  bool serving = false;
  try {
    st = RunJob(channel, *job, env, admitted->host, log, &serving);
  } catch (const nlohmann::json::exception& e) {
    st = Corrupt(std::string("malformed job: ") + e.what());
  }
  // A coordinator gone silent reads nothing: no report, no wait for its close.
  if (!st.ok() && !(serving && st.code() == StatusCode::kTimeout)) {
    (void)channel.Send({{"error", st.ToString()}}, comm::DeadlineAfter(std::chrono::seconds(1)));
    // The coordinator may still be sending (share frames): let it read this before we hang up.
    channel.DrainUntilClosed(comm::DeadlineAfter(std::chrono::seconds(2)));
  }
  return st;
}

}  // namespace cohort::parallel
