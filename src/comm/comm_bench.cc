// Two-process all-reduce benchmark against raw TCP and raw shared-memory exchanges
// (see comm_bench.h).
#include "comm/comm_bench.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "comm/all_reduce.h"
#include "comm/all_gather.h"
#include "comm/barrier.h"
#include "comm/broadcast.h"
#include "comm/shm_transport.h"
#include "comm/socket_util.h"
#include "comm/tcp_transport.h"
#ifdef COHORT_HAVE_UCX
#include "comm/ucx_transport.h"
#endif
#ifdef COHORT_HAVE_MPI
#include "comm/mpi_transport.h"
#endif

namespace cohort::comm {
namespace {

constexpr auto kBenchTimeout = std::chrono::seconds(20);

// Times `iterations` calls of `step` after `warmup` untimed ones; sorted microseconds.
Result<std::vector<double>> TimeSteps(const CommBenchOptions& options,
                                      const std::function<Status(int)>& step) {
  std::vector<double> us;
  us.reserve(options.iterations);
  for (int i = 0; i < options.warmup + options.iterations; ++i) {
    const auto start = Clock::now();
    COHORT_RETURN_IF_ERROR(step(i));
    if (i >= options.warmup) {
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  std::sort(us.begin(), us.end());
  return us;
}

CommBenchRow Row(std::string name, const std::vector<double>& sorted_us) {
  return {std::move(name), sorted_us[sorted_us.size() / 2], sorted_us[sorted_us.size() * 9 / 10]};
}

// The raw TCP baseline: one blocking, TCP_NODELAY socket pair over loopback; each iteration
// both sides send their bytes and read the other's.
Result<std::vector<double>> RawTcp(int rank, int fd, const CommBenchOptions& options) {
  std::vector<std::byte> out(options.message_bytes, std::byte(rank)), in(options.message_bytes);
  return TimeSteps(options, [&](int) -> Status {
    const Deadline deadline = DeadlineAfter(kBenchTimeout);
    COHORT_RETURN_IF_ERROR(WriteAll(fd, out, deadline));
    return ReadAll(fd, in, deadline);
  });
}

// The raw shared-memory baseline: two slots per direction (alternating, so a slot is never
// rewritten before the peer has read it) and a published iteration counter per rank, spun on.
struct RawShm {
  alignas(64) std::atomic<int64_t> published[2];
};

Result<std::vector<double>> RawShmExchange(int rank, std::byte* region,
                                           const CommBenchOptions& options) {
  auto* control = reinterpret_cast<RawShm*>(region);
  const size_t bytes = options.message_bytes;
  std::byte* slots = region + 128;  // [rank][parity][bytes]
  std::vector<std::byte> out(bytes, std::byte(rank)), in(bytes);
  const int peer = 1 - rank;
  return TimeSteps(options, [&](int i) -> Status {
    std::memcpy(slots + (rank * 2 + i % 2) * bytes, out.data(), bytes);
    control->published[rank].store(i, std::memory_order_release);
    const Deadline deadline = DeadlineAfter(kBenchTimeout);
    // Spin, but hand the core over now and then: with more runnable threads than cores a
    // pure spin can keep the very peer we wait for off the CPU.
    for (int spins = 0; control->published[peer].load(std::memory_order_acquire) < i; ++spins) {
      if (spins % 256 == 255) {
        if (Clock::now() > deadline) return Timeout("raw shm peer did not answer");
        sched_yield();
      }
    }
    std::memcpy(in.data(), slots + (peer * 2 + i % 2) * bytes, bytes);
    return Status::Ok();
  });
}

// Checks one all-reduce's sum, then times all-reduces of zeros (so repeated sums stay
// finite without refilling the buffer inside the timed loop).
Result<std::vector<double>> AllReduceLoop(Communicator& comm, const CommBenchOptions& options) {
  const size_t count = options.message_bytes / 4;
  std::vector<float> data(count, static_cast<float>(comm.rank() + 1));
  COHORT_RETURN_IF_ERROR(AllReduceSum(comm, data));
  const float expected = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  if (data[0] != expected || data[count - 1] != expected) {
    return Internal("benchmark all-reduce gave a wrong sum");
  }
  std::fill(data.begin(), data.end(), 0.0f);
  COHORT_RETURN_IF_ERROR(Barrier(comm));
  return TimeSteps(options, [&](int) { return AllReduceSum(comm, data); });
}

// The transport alone, without the collective around it: where the all-reduce's time goes.
Result<std::vector<double>> ExchangeLoop(Communicator& comm, const CommBenchOptions& options) {
  std::vector<std::byte> out(options.message_bytes, std::byte(comm.rank())), in(options.message_bytes);
  const int peer = 1 - comm.rank();
  COHORT_RETURN_IF_ERROR(Barrier(comm));
  return TimeSteps(options, [&](int) -> Status {
    const SendOp send{peer, 1, out};
    const RecvOp recv{peer, 1, in};
    return comm.transport().Exchange({&send, 1}, {&recv, 1}, DeadlineAfter(kBenchTimeout));
  });
}

struct Setup {
  std::vector<std::unique_ptr<TcpListener>> listeners;
  std::vector<std::string> addresses;
  std::vector<std::unique_ptr<TcpListener>> ucx_listeners;  // UCX bootstraps over TCP
  std::vector<std::string> ucx_addresses;
  int raw_listen_fd = -1;
  sockaddr_in raw_addr{};
  std::byte* raw_shm = nullptr;
  size_t raw_shm_bytes = 0;
  std::string shm_name;
};

Result<int> RawTcpConnect(int rank, Setup& setup) {
  if (rank == 0) {
    COHORT_RETURN_IF_ERROR(PollOne(setup.raw_listen_fd, POLLIN, DeadlineAfter(kBenchTimeout)));
    const int fd = accept(setup.raw_listen_fd, nullptr, nullptr);
    if (fd < 0) return IoError("raw accept failed");
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(fd, reinterpret_cast<sockaddr*>(&setup.raw_addr), sizeof(setup.raw_addr)) != 0) {
    close(fd);
    return Unavailable("raw connect failed");
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Everything one rank does; rank 0's timings are the result.
Result<CommBenchResult> RunRank(int rank, Setup& setup, const CommBenchOptions& options) {
  CommBenchResult result;
  if (options.tcp) {
    COHORT_ASSIGN_OR_RETURN(int raw_fd, RawTcpConnect(rank, setup));
    auto raw = RawTcp(rank, raw_fd, options);
    close(raw_fd);
    if (!raw.ok()) return raw.status();
    TcpOptions tcp;
    tcp.rank = rank;
    tcp.addresses = setup.addresses;
    tcp.group_id = 0xbe4c;
    if (options.wait.has_value()) tcp.wait = *options.wait;
    COHORT_ASSIGN_OR_RETURN(auto transport, ConnectTcpGroup(tcp, std::move(setup.listeners[rank])));
    Communicator comm(std::move(transport));
    COHORT_ASSIGN_OR_RETURN(auto exchanged, ExchangeLoop(comm, options));
    COHORT_ASSIGN_OR_RETURN(auto reduced, AllReduceLoop(comm, options));
    result.rows.push_back(Row("tcp raw exchange", *raw));
    result.rows.push_back(Row("tcp transport", exchanged));
    result.rows.push_back(Row("tcp all-reduce", reduced));
    result.tcp_ratio = result.rows.back().median_us / result.rows[result.rows.size() - 3].median_us;
  }
  if (options.shm) {
    COHORT_ASSIGN_OR_RETURN(auto raw, RawShmExchange(rank, setup.raw_shm, options));
    ShmOptions shm;
    shm.rank = rank;
    shm.n_ranks = 2;
    shm.name = setup.shm_name;
    if (options.wait.has_value()) shm.wait = *options.wait;
    COHORT_ASSIGN_OR_RETURN(auto transport, ConnectShmGroup(shm));
    Communicator comm(std::move(transport));
    COHORT_ASSIGN_OR_RETURN(auto exchanged, ExchangeLoop(comm, options));
    COHORT_ASSIGN_OR_RETURN(auto reduced, AllReduceLoop(comm, options));
    result.rows.push_back(Row("shm raw exchange", raw));
    result.rows.push_back(Row("shm transport", exchanged));
    result.rows.push_back(Row("shm all-reduce", reduced));
    result.shm_ratio = result.rows.back().median_us / result.rows[result.rows.size() - 3].median_us;
  }
#ifdef COHORT_HAVE_UCX
  if (options.ucx) {
    UcxOptions ucx;
    ucx.bootstrap.rank = rank;
    ucx.bootstrap.addresses = setup.ucx_addresses;
    ucx.bootstrap.group_id = 0xbe4d;
    if (options.wait.has_value()) ucx.wait = *options.wait;
    COHORT_ASSIGN_OR_RETURN(auto transport, ConnectUcxGroup(ucx, std::move(setup.ucx_listeners[rank])));
    Communicator comm(std::move(transport));
    COHORT_ASSIGN_OR_RETURN(auto exchanged, ExchangeLoop(comm, options));
    COHORT_ASSIGN_OR_RETURN(auto reduced, AllReduceLoop(comm, options));
    result.rows.push_back(Row("ucx transport", exchanged));
    result.rows.push_back(Row("ucx all-reduce", reduced));
  }
#endif
  return result;
}

Status Prepare(const CommBenchOptions& options, Setup* setup) {
  for (int r = 0; r < 2; ++r) {
    COHORT_ASSIGN_OR_RETURN(auto listener, TcpListener::Bind("127.0.0.1:0"));
    setup->addresses.push_back(listener->address());
    setup->listeners.push_back(std::move(listener));
    COHORT_ASSIGN_OR_RETURN(auto ucx_listener, TcpListener::Bind("127.0.0.1:0"));
    setup->ucx_addresses.push_back(ucx_listener->address());
    setup->ucx_listeners.push_back(std::move(ucx_listener));
  }
  COHORT_ASSIGN_OR_RETURN(auto raw_listener, TcpListener::Bind("127.0.0.1:0"));
  COHORT_ASSIGN_OR_RETURN(setup->raw_addr, ParseAddress(raw_listener->address()));
  setup->raw_listen_fd = dup(raw_listener->fd());
  setup->raw_shm_bytes = 128 + 4 * options.message_bytes;
  void* region = mmap(nullptr, setup->raw_shm_bytes, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return IoError("mmap for the raw shm baseline failed");
  setup->raw_shm = static_cast<std::byte*>(region);
  auto* control = new (region) RawShm{};
  control->published[0].store(-1);
  control->published[1].store(-1);
  setup->shm_name = fmt::format("bench-{}", getpid());
  return Status::Ok();
}

}  // namespace

Status CommBenchOptions::Validate() const {
  if (message_bytes == 0 || message_bytes % 4 != 0) return InvalidArgument("message bytes must be a positive multiple of 4");
  if (iterations < 1 || warmup < 0) return InvalidArgument("iterations must be positive");
  return Status::Ok();
}

Result<CommBenchResult> MeasureComm(const CommBenchOptions& options) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  Setup setup;
  COHORT_RETURN_IF_ERROR(Prepare(options, &setup));
  // The child reports its own failure through this pipe, so the parent can say why.
  int report[2];
  if (pipe(report) != 0) return IoError("pipe failed");
  const pid_t child = fork();
  if (child < 0) return IoError("fork failed");
  if (child == 0) {
    close(report[0]);
    setup.listeners[0].reset();
    setup.ucx_listeners[0].reset();
    Result<CommBenchResult> mine = RunRank(1, setup, options);
    if (!mine.ok()) {
      const std::string why = mine.status().ToString();
      (void)!write(report[1], why.data(), why.size());
    }
    _exit(mine.ok() ? 0 : 1);
  }
  close(report[1]);
  setup.listeners[1].reset();
  setup.ucx_listeners[1].reset();
  Result<CommBenchResult> result = RunRank(0, setup, options);
  // Give a failing child a moment to explain itself before it is killed.
  if (!result.ok()) (void)PollOne(report[0], POLLIN, DeadlineAfter(std::chrono::seconds(2)));
  if (!result.ok()) kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  std::string child_error(4096, '\0');
  const ssize_t n = read(report[0], child_error.data(), child_error.size());
  child_error.resize(n > 0 ? static_cast<size_t>(n) : 0);
  close(report[0]);
  close(setup.raw_listen_fd);
  munmap(setup.raw_shm, setup.raw_shm_bytes);
  if (!child_error.empty()) {
    const Status own = result.ok() ? Status::Ok() : result.status();
    return Internal("benchmark rank 1 failed: " + child_error +
                    (own.ok() ? "" : "; rank 0: " + own.ToString()));
  }
  if (result.ok() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    return Internal("benchmark child process failed");
  }
  return result;
}

std::string FormatCommBench(const CommBenchOptions& options, const CommBenchResult& result) {
  std::string out = fmt::format(
      "comm benchmark: {} bytes, {} iterations, rank 0's view (µs per exchange)\n"
      "  {:<18} {:>9} {:>9}\n", options.message_bytes, options.iterations, "", "median", "p90");
  for (const CommBenchRow& row : result.rows) {
    out += fmt::format("  {:<18} {:>9.1f} {:>9.1f}\n", row.name, row.median_us, row.p90_us);
  }
  if (result.tcp_ratio > 0) out += fmt::format("  tcp all-reduce / raw: {:.2f}x (target <= 1.5x)\n", result.tcp_ratio);
  if (result.shm_ratio > 0) out += fmt::format("  shm all-reduce / raw: {:.2f}x (target <= 1.5x)\n", result.shm_ratio);
  return out;
}

#ifdef COHORT_HAVE_MPI
namespace {

// Joins a TCP group with every MPI rank, swapping listening addresses over `control`.
Result<std::unique_ptr<Transport>> TcpGroupOverMpi(Communicator& control, const WaitPolicy* wait) {
  COHORT_ASSIGN_OR_RETURN(auto listener, TcpListener::Bind("127.0.0.1:0"));
  std::array<char, 64> mine{};
  std::snprintf(mine.data(), mine.size(), "%s", listener->address().c_str());
  std::vector<char> all(mine.size() * control.size());
  COHORT_RETURN_IF_ERROR(AllGather(control, std::as_bytes(std::span(mine)),
                                   std::as_writable_bytes(std::span(all))));
  TcpOptions tcp;
  tcp.rank = control.rank();
  for (int r = 0; r < control.size(); ++r) tcp.addresses.emplace_back(&all[mine.size() * r]);
  tcp.group_id = 0xbe4e;
  if (wait != nullptr) tcp.wait = *wait;
  return ConnectTcpGroup(tcp, std::move(listener));
}

Result<std::unique_ptr<Transport>> ShmGroupOverMpi(Communicator& control, const WaitPolicy* wait) {
  int32_t pid = getpid();
  COHORT_RETURN_IF_ERROR(Broadcast(control, 0, std::as_writable_bytes(std::span(&pid, 1))));
  ShmOptions shm;
  shm.rank = control.rank();
  shm.n_ranks = control.size();
  shm.name = fmt::format("mpibench-{}", pid);
  if (wait != nullptr) shm.wait = *wait;
  return ConnectShmGroup(shm);
}

}  // namespace

Result<CommBenchResult> MeasureMpiComm(const MpiRuntime& runtime, const CommBenchOptions& options) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  if (runtime.world_size() < 2) return InvalidArgument("the MPI benchmark needs at least 2 ranks");
  const WaitPolicy* wait = options.wait.has_value() ? &*options.wait : nullptr;
  COHORT_ASSIGN_OR_RETURN(auto mpi_transport, ConnectMpiGroup(runtime, wait ? *wait : WaitPolicy{}));
  Communicator control(std::move(mpi_transport));
  CommBenchResult result;
  std::vector<float> data(options.message_bytes / 4, 0.0f);
  COHORT_RETURN_IF_ERROR(Barrier(control));
  COHORT_ASSIGN_OR_RETURN(auto native, TimeSteps(options, [&](int) { return MpiAllReduceSum(data); }));
  result.rows.push_back(Row("MPI_Allreduce", native));
  COHORT_ASSIGN_OR_RETURN(auto over_mpi, AllReduceLoop(control, options));
  result.rows.push_back(Row("mpi all-reduce", over_mpi));
  if (options.tcp) {
    COHORT_ASSIGN_OR_RETURN(auto transport, TcpGroupOverMpi(control, wait));
    Communicator comm(std::move(transport));
    COHORT_ASSIGN_OR_RETURN(auto reduced, AllReduceLoop(comm, options));
    result.rows.push_back(Row("tcp all-reduce", reduced));
  }
  if (options.shm) {
    COHORT_ASSIGN_OR_RETURN(auto transport, ShmGroupOverMpi(control, wait));
    Communicator comm(std::move(transport));
    COHORT_ASSIGN_OR_RETURN(auto reduced, AllReduceLoop(comm, options));
    result.rows.push_back(Row("shm all-reduce", reduced));
  }
  COHORT_RETURN_IF_ERROR(Barrier(control));
  return result;
}
#endif

Status RunCommBenchmark(const CommBenchOptions& options, std::string* report) {
  COHORT_ASSIGN_OR_RETURN(CommBenchResult result, MeasureComm(options));
  *report = FormatCommBench(options, result);
  return Status::Ok();
}

}  // namespace cohort::comm
