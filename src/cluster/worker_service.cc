// WorkerService; see worker_service.h.
#include "cluster/worker_service.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include "parallel/session.h"

namespace cohort::cluster {

Status WorkerServiceOptions::Validate() const {
  if (listen.empty()) return InvalidArgument("the worker service needs a listen address");
  if (slots < 1 || slots > 64) return InvalidArgument("worker slots must be in [1, 64]");
  if (slots_per_coordinator < 0 || slots_per_coordinator > slots) {
    return InvalidArgument("worker slots per coordinator must be in [0, slots]");
  }
  if (!key.has_value() && !insecure) {
    COHORT_ASSIGN_OR_RETURN(const comm::SocketAddress addr, comm::SocketAddress::Parse(listen));
    if ((ntohl(addr.addr.sin_addr.s_addr) >> 24) != 127) {
      return InvalidArgument("a worker service beyond loopback (" + listen + ") needs the cluster secret");
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<WorkerService>> WorkerService::Bind(const WorkerServiceOptions& options, Logger& log) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<WorkerService> service(new WorkerService(options, log));
  auto bound = comm::TcpListener::Bind(options.listen);
  if (!bound.ok()) return bound.status().Annotate("worker service");
  service->listener_ = std::move(*bound);
  return service;
}

WorkerService::~WorkerService() { Stop(); }

void WorkerService::Start() {
  COHORT_CHECK(threads_.empty());
  for (int i = 0; i < options_.slots; ++i) threads_.emplace_back([this] { Run(); });
}

void WorkerService::Run() {
  while (!stop_) {
    parallel::WorkerEnvironment env;
    env.cache_dir = options_.cache_dir;
    if (options_.known_files) env.known_files = options_.known_files();
    env.running = &running_;
    env.peer_slots = &peer_slots_;
    env.cache_bytes_max = options_.cache_bytes_max;
    env.data_ports = options_.data_ports;
    if (options_.member_hosts) {
      // Asked when the job comes, not when the slot began waiting: members come and go.
      env.allowed_host = [this](const std::string& host) { return options_.member_hosts().count(host) > 0; };
    }
    env.key = options_.key;
    const Status st = parallel::ServeOneJob(listener_->fd(), env, &log_);
    if (!st.ok() && !stop_) log_.Info("worker job ended: {}", st.ToString());
  }
}

void WorkerService::Stop() {
  if (stop_.exchange(true)) return;
  running_.Interrupt();  // the running jobs fail at once
  // Wakes the threads waiting for a job.
  if (listener_ != nullptr) ::shutdown(listener_->fd(), SHUT_RDWR);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

}  // namespace cohort::cluster
