// Setting up a distributed instance across processes. The coordinator (rank 0) connects to
// each worker's control address, sends it the job (model path, plan, its rank, threads,
// transport), collects the address each worker's data listener got, sends everyone the full
// list, and all ranks connect the comm group and build their Executor. A worker serves one
// job at a time until the coordinator stops it or goes away.
//
// With a cluster key (SessionOptions::key, WorkerEnvironment::key) every connection — the
// control channel and the data mesh — is authenticated and encrypted (comm/secure_channel.h);
// a worker refuses a coordinator that does not prove the key before reading its job.
//
// Model files: the job names the model by path, SHA-256 and size. A worker uses a local file
// only if its digest matches (its own copy at the job's path, in its models directory, or one
// it was told of); otherwise the coordinator streams the worker's share of the bytes to it
// (shard_transfer.h), into a sparse file in the worker's cache directory.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/tcp_transport.h"
#include "core/context.h"
#include "core/status.h"
#include "parallel/control_channel.h"
#include "parallel/executor.h"
#include "parallel/job_limits.h"
#include "parallel/running_jobs.h"
#include "parallel/shard_transfer.h"

namespace cohort::gguf {
class File;
}

namespace cohort::parallel {

// The ports a rank's data listener may take: the first free one of [first, last]. A firewall
// between the nodes opens this range (docs/DEPLOY.md). first == 0: any port the system gives.
struct PortRange {
  int first = 0;
  int last = 0;
  bool any() const { return first == 0; }
  // "FIRST-LAST", "PORT", or "0"/"" (any).
  static Result<PortRange> Parse(const std::string& text);
  std::string ToString() const;
};
// A listener on `host` at the first free port of `ports`.
Result<std::unique_ptr<comm::TcpListener>> BindDataListener(const std::string& host, const PortRange& ports);

// kUcx: UCX (RDMA where present, else its shm/tcp), bootstrapped like TCP; builds with UCX only.
enum class DataTransport { kTcp, kShm, kUcx };

struct SessionOptions {
  // The path workers look for the model at (a worker whose file there differs, or that has
  // none, is sent its share). The coordinator reads its own copy: the `file` given to Start.
  std::string model_path;
  // SHA-256 (hex) of the coordinator's file; empty: computed, and remembered in
  // digest_cache_dir when that is set (keyed by path, size, mtime and inode).
  std::string model_sha256;
  std::string digest_cache_dir;
  // Who holds what: made by the caller (the CLI's --layout, or the cluster's planner, whose
  // plan travels with the instance) and run as given. Its ranks are the coordinator and then
  // `workers` in order; it must describe this very model (CheckPlanFitsModel).
  plan::ShardPlan plan;
  std::vector<std::string> workers;     // control "host:port" of ranks 1..N-1
  DataTransport transport = DataTransport::kTcp;  // kShm: every rank on this host
  int worker_threads = 1;
  comm::LinkEmulation link;             // TCP only: emulate a slower network (tests)
  PortRange data_ports;                 // the coordinator's data listener
  std::chrono::milliseconds setup_timeout{60000};
  // Every collective's bound. A peer that dies is seen at once (closed connection); this
  // bounds one that hangs.
  std::chrono::milliseconds comm_timeout{30000};
  // A worker that hears nothing from the coordinator this long (no step, no keep-alive: the
  // coordinator's process stopped or its link cut without a close) ends its job and frees its
  // share. The coordinator sends keep-alives while idle, every min(1 s, this / 4).
  std::chrono::milliseconds worker_idle_timeout{10000};
  // Streaming shares to workers without the file: frame size, stall and total bounds.
  TransferOptions transfer;
  // The cluster key: set, the control channels and the TCP data mesh are authenticated and
  // encrypted, and UCX (which cannot carry the encryption) is refused.
  std::optional<comm::ChannelKey> key;
  // Set: hears the setup's progress per rank, from the setup's threads — "transfer" (rank's
  // share streamed from here) and "load" (the rank's share read from its disk; workers report
  // theirs over the control channel) — as bytes done of the phase's total.
  std::function<void(int rank, const std::string& phase, uint64_t bytes_done, uint64_t bytes_total)> progress;

  Status Validate() const;
};

// The coordinator's side of a running instance: its Executor is the model to run.
class Session {
 public:
  // `file` is the coordinator's own copy of the model, opened from a path (workers without
  // the file are streamed their shares from it).
  static Result<std::unique_ptr<Session>> Start(const SessionOptions& options, const gguf::File& file);
  ~Session();  // stops the workers

  // Ranks already connected by someone else (mpirun): `world` is rank 0's transport, and
  // every rank builds the same plan (PlanOfModel from the same layout).
  static Result<std::unique_ptr<Session>> Adopt(std::unique_ptr<comm::Transport> world,
                                                const plan::ShardPlan& plan, const gguf::File& file,
                                                std::chrono::milliseconds comm_timeout);

  Executor& executor() { return *executor_; }
  const Executor& executor() const { return *executor_; }
  const plan::ShardPlan& plan() const { return executor_->plan(); }

 private:
  Session() = default;
  std::vector<std::unique_ptr<ControlChannel>> channels_;
  std::unique_ptr<comm::Communicator> world_;
  std::unique_ptr<Executor> executor_;
};

// A worker rank of an already-connected group (mpirun): builds its Executor and serves until
// rank 0 stops it.
Status ServeRank(std::unique_ptr<comm::Transport> world, const plan::ShardPlan& plan,
                 const gguf::File& file, int threads, std::chrono::milliseconds comm_timeout,
                 Logger* log);

// This process's peak resident memory (VmHWM), 0 where /proc does not say.
int64_t PeakResidentBytes();

// Where a worker finds model files and keeps streamed shares.
struct WorkerEnvironment {
  // Streamed shares (<sha256>-<share digest>.gguf, sparse) and remembered digests (digests/).
  // Empty: the worker uses matching local files only, and hashes them on every job.
  std::string cache_dir;
  // Also tried: <models_dir>/<file name of the job's model path>.
  std::string models_dir;
  // Local files whose sha256 the caller already knows (sha256 hex -> path), e.g. the models a
  // cluster node registered: used without hashing when the job's sha256 and size match.
  std::map<std::string, std::string> known_files;
  // Where the job registers its connections, so the service running it can end it at once
  // (RunningJobs::Interrupt). Null: the job ends only when its coordinator stops it or falls
  // silent.
  RunningJobs* running = nullptr;
  // Bounds on every field of a job (job_limits.h).
  JobLimits limits;
  // Where set, a coordinator host this returns false for is refused at the door, and so is a
  // job that names a data address on such a host (a cluster node: its members).
  std::function<bool(const std::string& host)> allowed_host;
  // Where set, jobs held at once per coordinator host (a service with several slots).
  PeerSlots* peer_slots = nullptr;
  // Streamed shares kept in cache_dir, in bytes (least recently used evicted); 0: no bound.
  uint64_t cache_bytes_max = 0;
  PortRange data_ports;  // each job's data listener
  // Set: a connection that does not prove this key in the handshake is dropped (and logged)
  // before any of its bytes are read as a job, and the job's data mesh is encrypted.
  std::optional<comm::ChannelKey> key;
};

// A worker's side: waits on `listen_fd` for a coordinator, runs its job to the end, returns
// how it ended (Ok when the coordinator stopped it). A connection refused at the handshake is
// no job: it is logged and the wait goes on. `log` may be null.
Status ServeOneJob(int listen_fd, const WorkerEnvironment& env, Logger* log);
// The same with no cache: local files only (WorkerEnvironment{}).
Status ServeOneJob(int listen_fd, Logger* log);

}  // namespace cohort::parallel
