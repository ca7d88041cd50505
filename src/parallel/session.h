// Setting up a distributed instance across processes. The coordinator (rank 0) connects to
// each worker's control address, sends it the job (model path, plan, its rank, threads,
// transport), collects the address each worker's data listener got, sends everyone the full
// list, and all ranks connect the comm group and build their Executor. A worker serves one
// job at a time until the coordinator stops it or goes away.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/tcp_transport.h"
#include "core/context.h"
#include "core/status.h"
#include "parallel/control_channel.h"
#include "parallel/executor.h"

namespace cohort::gguf {
class File;
}

namespace cohort::parallel {

// kUcx: UCX (RDMA where present, else its shm/tcp), bootstrapped like TCP; builds with UCX only.
enum class DataTransport { kTcp, kShm, kUcx };

struct SessionOptions {
  std::string model_path;               // every worker opens the same path
  std::string layout = "tp";            // tp | pp | hybrid[:STAGES]
  std::vector<double> shares;           // per-rank (or per-stage for pp) weights; empty: even
  std::vector<std::string> workers;     // control "host:port" of ranks 1..N-1
  DataTransport transport = DataTransport::kTcp;  // kShm: every rank on this host
  int worker_threads = 1;
  comm::LinkEmulation link;             // TCP only: emulate a slower network (tests)
  std::chrono::milliseconds setup_timeout{60000};
  // Every collective's bound. A peer that dies is seen at once (closed connection); this
  // bounds one that hangs.
  std::chrono::milliseconds comm_timeout{30000};

  Status Validate() const;
};

// The coordinator's side of a running instance: its Executor is the model to run.
class Session {
 public:
  // `file` is the coordinator's own open copy of options.model_path.
  static Result<std::unique_ptr<Session>> Start(const SessionOptions& options, const gguf::File& file);
  ~Session();  // stops the workers

  // Ranks already connected by someone else (mpirun): `world` is rank 0's transport, and
  // every rank builds the same plan with MakeSessionPlan.
  static Result<std::unique_ptr<Session>> Adopt(std::unique_ptr<comm::Transport> world,
                                                const ShardPlan& plan, const gguf::File& file,
                                                std::chrono::milliseconds comm_timeout);

  Executor& executor() { return *executor_; }
  const ShardPlan& plan() const { return executor_->plan(); }

 private:
  Session() = default;
  std::vector<std::unique_ptr<ControlChannel>> channels_;
  std::unique_ptr<comm::Communicator> world_;
  std::unique_ptr<Executor> executor_;
};

// The plan of an instance of n_ranks ranks for options.layout/shares on `file`'s model;
// deterministic, so ranks that cannot talk yet agree on it.
Result<ShardPlan> MakeSessionPlan(const SessionOptions& options, const gguf::File& file, int n_ranks);

// A worker rank of an already-connected group (mpirun): builds its Executor and serves until
// rank 0 stops it.
Status ServeRank(std::unique_ptr<comm::Transport> world, const ShardPlan& plan,
                 const gguf::File& file, int threads, std::chrono::milliseconds comm_timeout,
                 Logger* log);

// This process's peak resident memory (VmHWM), 0 where /proc does not say.
int64_t PeakResidentBytes();

// A worker's side: waits on `listen_fd` for a coordinator, runs its job to the end, returns
// how it ended (Ok when the coordinator stopped it). `log` may be null.
Status ServeOneJob(int listen_fd, Logger* log);

}  // namespace cohort::parallel
