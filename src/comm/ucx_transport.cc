// UCX implementation of Transport (see ucx_transport.h): tagged sends and receives on one UCP
// worker per rank, progressed against the deadline, sleeping on the worker's event fd.
#include "comm/ucx_transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ucp/api/ucp.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "comm/frame.h"
#include "comm/socket_util.h"
#include "comm/wait.h"

namespace cohort::comm {
namespace {

// Tag matching is per worker, so the sender's rank is part of the tag.
ucp_tag_t UcxTag(int sender, uint32_t tag) { return (ucp_tag_t(sender) << 32) | tag; }
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
constexpr auto kPollSlice = std::chrono::milliseconds(10);
// A peer's last messages can trail its leaving by a scheduler tick or more when ranks outnumber
// cores (seen under load: 100 ms was not enough); a real death is still reported well inside
// the 5 s a client may wait.
constexpr auto kLeaveGrace = std::chrono::milliseconds(1000);
constexpr auto kCloseFlush = std::chrono::milliseconds(500);

struct OpState {
  void* request = nullptr;
  ucs_status_t status = UCS_INPROGRESS;
  ucp_tag_recv_info_t info{};
  int peer = -1;
  size_t expected = 0;
  bool is_recv = false;
};

void SendDone(void* /*request*/, ucs_status_t status, void* user_data) {
  static_cast<OpState*>(user_data)->status = status;
}

void RecvDone(void* /*request*/, ucs_status_t status, const ucp_tag_recv_info_t* info,
              void* user_data) {
  auto* op = static_cast<OpState*>(user_data);
  op->info = *info;
  op->status = status;
}

class UcxTransport final : public Transport {
 public:
  UcxTransport(int rank, std::vector<int> fds, const WaitPolicy& wait)
      : rank_(rank), fds_(std::move(fds)), wait_(wait), eps_(fds_.size(), nullptr),
        failed_(fds_.size(), UCS_OK), handler_args_(fds_.size()) {
    ops_.reserve(2 * fds_.size());
  }
  ~UcxTransport() override;

  Status Init(const std::vector<std::vector<std::byte>>& addresses);
  Status CreateWorker(std::vector<std::byte>* address);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(fds_.size()); }
  const char* name() const override { return "ucx"; }
  Status Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                  Deadline deadline) override;
  void Close() override;

  void OnPeerFailed(int peer, ucs_status_t status) { failed_[peer] = status; }

 private:
  struct HandlerArg {
    UcxTransport* self = nullptr;
    int peer = -1;
  };
  Status Post(std::span<const SendOp> sends, std::span<const RecvOp> recvs);
  Status Check(bool* all_done);
  Status Sleep(Deadline deadline);
  Status CheckLiveness();
  Status Fail(Status status);

  int rank_;
  std::vector<int> fds_;  // bootstrap sockets, kept as the liveness line
  WaitPolicy wait_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<ucp_ep_h> eps_;
  std::vector<ucs_status_t> failed_;
  std::vector<HandlerArg> handler_args_;
  std::vector<OpState> ops_;
  std::vector<pollfd> pollfds_;
  Status broken_;
  bool closed_ = false;
};

Status UcxTransport::CreateWorker(std::vector<std::byte>* address) {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucs_status_t status = ucp_init(&params, nullptr, &context_);
  if (status != UCS_OK) return Unavailable(fmt::format("ucp_init: {}", ucs_status_string(status)));
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  status = ucp_worker_create(context_, &worker_params, &worker_);
  if (status != UCS_OK) return Unavailable(fmt::format("ucp_worker_create: {}", ucs_status_string(status)));
  status = ucp_worker_get_efd(worker_, &event_fd_);
  if (status != UCS_OK) return Unavailable(fmt::format("ucp_worker_get_efd: {}", ucs_status_string(status)));
  ucp_address_t* raw = nullptr;
  size_t length = 0;
  status = ucp_worker_get_address(worker_, &raw, &length);
  if (status != UCS_OK) return Unavailable(fmt::format("ucp_worker_get_address: {}", ucs_status_string(status)));
  address->assign(reinterpret_cast<std::byte*>(raw), reinterpret_cast<std::byte*>(raw) + length);
  ucp_worker_release_address(worker_, raw);
  return Status::Ok();
}

Status UcxTransport::Init(const std::vector<std::vector<std::byte>>& addresses) {
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank_) continue;
    handler_args_[peer] = {this, peer};
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
      auto* handler = static_cast<HandlerArg*>(arg);
      handler->self->OnPeerFailed(handler->peer, status);
    };
    params.err_handler.arg = &handler_args_[peer];
    const ucs_status_t status = ucp_ep_create(worker_, &params, &eps_[peer]);
    if (status != UCS_OK) {
      return Unavailable(fmt::format("ucp_ep_create to rank {}: {}", peer, ucs_status_string(status)));
    }
  }
  return Status::Ok();
}

Status UcxTransport::Post(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  ops_.clear();
  for (const RecvOp& op : recvs) {
    ops_.push_back({nullptr, UCS_INPROGRESS, {}, op.peer, op.data.size(), true});
  }
  for (const SendOp& op : sends) ops_.push_back({nullptr, UCS_INPROGRESS, {}, op.peer, op.data.size(), false});
  for (size_t i = 0; i < ops_.size(); ++i) {
    OpState& state = ops_[i];  // ops_ does not reallocate: reserved for 2 per peer
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FIELD_DATATYPE;
    param.datatype = ucp_dt_make_contig(1);
    param.user_data = &state;
    ucs_status_ptr_t request;
    if (state.is_recv) {
      const RecvOp& op = recvs[i];
      // Always through the callback: UCX 1.13 leaves recv_info unset on immediate completion,
      // and the received length is what we check.
      param.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
      param.cb.recv = RecvDone;
      request = ucp_tag_recv_nbx(worker_, op.data.data(), op.data.size(), UcxTag(op.peer, op.tag),
                                 kFullMask, &param);
    } else {
      const SendOp& op = sends[i - recvs.size()];
      param.cb.send = SendDone;
      request = ucp_tag_send_nbx(eps_[op.peer], op.data.data(), op.data.size(),
                                 UcxTag(rank_, op.tag), &param);
    }
    if (UCS_PTR_IS_ERR(request)) {
      return Unavailable(fmt::format("ucx post to/from rank {}: {}", state.peer,
                                     ucs_status_string(UCS_PTR_STATUS(request))));
    }
    if (request == nullptr) {
      state.status = UCS_OK;  // a send completed in place
    } else {
      state.request = request;
    }
  }
  return Status::Ok();
}

Status UcxTransport::Check(bool* all_done) {
  *all_done = true;
  for (OpState& op : ops_) {
    if (op.status == UCS_INPROGRESS) {
      *all_done = false;
      continue;
    }
    if (op.request != nullptr) {
      ucp_request_free(op.request);
      op.request = nullptr;
    }
    if (op.status == UCS_ERR_MESSAGE_TRUNCATED) {
      return Corrupt(fmt::format("from rank {}: message larger than the {} bytes expected", op.peer, op.expected));
    }
    if (op.status != UCS_OK) {
      return Unavailable(fmt::format("ucx {} rank {}: {}", op.is_recv ? "recv from" : "send to",
                                     op.peer, ucs_status_string(op.status)));
    }
    if (op.is_recv && op.info.length != op.expected) {
      return Corrupt(fmt::format("from rank {}: message of {} bytes but expected {}", op.peer,
                                 op.info.length, op.expected));
    }
  }
  return Status::Ok();
}

Status UcxTransport::CheckLiveness() {
  for (const OpState& op : ops_) {
    if (op.status != UCS_INPROGRESS) continue;
    if (failed_[op.peer] != UCS_OK) {
      return Unavailable(fmt::format("rank {} failed: {}", op.peer, ucs_status_string(failed_[op.peer])));
    }
    char byte;
    const ssize_t n = recv(fds_[op.peer], &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      // The peer left. What it sent before leaving may still be on its way through UCX:
      // progress a little longer before calling the operation lost.
      const Deadline grace = DeadlineAfter(kLeaveGrace);
      while (Clock::now() < grace) {
        ucp_worker_progress(worker_);
        if (op.status != UCS_INPROGRESS) break;
      }
      if (op.status != UCS_INPROGRESS) continue;
      return Unavailable(fmt::format("rank {} closed its transport or died", op.peer));
    }
  }
  return Status::Ok();
}

// Sleeps until the worker has events or a pending peer's liveness line changes.
Status UcxTransport::Sleep(Deadline deadline) {
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return Status::Ok();  // events already pending
  pollfds_.clear();
  pollfds_.push_back({event_fd_, POLLIN, 0});
  for (const OpState& op : ops_) {
    if (op.status == UCS_INPROGRESS) pollfds_.push_back({fds_[op.peer], POLLIN | POLLRDHUP, 0});
  }
  const auto slice = std::min<Clock::duration>(deadline - Clock::now(), kPollSlice);
  const int timeout_ms = std::max<int>(0, static_cast<int>(
      std::chrono::ceil<std::chrono::milliseconds>(slice).count()));
  poll(pollfds_.data(), pollfds_.size(), timeout_ms);
  return CheckLiveness();
}

Status UcxTransport::Fail(Status status) {
  for (OpState& op : ops_) {
    if (op.request == nullptr) continue;
    if (op.status == UCS_INPROGRESS) ucp_request_cancel(worker_, op.request);
    ucp_request_free(op.request);
    op.request = nullptr;
  }
  broken_ = status.Annotate(fmt::format("ucx rank {}", rank_));
  return broken_;
}

Status UcxTransport::Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                              Deadline deadline) {
  if (!broken_.ok()) return broken_;
  if (closed_) return Unavailable("ucx transport is closed");
  CheckExchangeArgs(rank_, size(), sends, recvs);
  Status status = Post(sends, recvs);
  if (!status.ok()) return Fail(status);
  Backoff backoff(wait_);
  auto last_liveness_check = Clock::now();
  for (;;) {
    const bool progressed = ucp_worker_progress(worker_) != 0;
    bool all_done = false;
    status = Check(&all_done);
    if (!status.ok()) return Fail(status);
    if (all_done) return Status::Ok();
    if (progressed) {
      backoff.Progressed();
      continue;
    }
    if (Clock::now() >= deadline) return Fail(Timeout("timed out waiting for a peer"));
    if (backoff.ShouldBlock()) {
      status = Sleep(deadline);
      if (!status.ok()) return Fail(status);
    } else if (Clock::now() - last_liveness_check >= kPollSlice) {
      // Busy-polling never sleeps; look at the peers' liveness now and then all the same.
      last_liveness_check = Clock::now();
      status = CheckLiveness();
      if (!status.ok()) return Fail(status);
    }
  }
}

void UcxTransport::Close() {
  if (closed_) return;
  closed_ = true;
  // Flush first, so that everything we sent has arrived before the peers see us leave (they
  // take end-of-file on the bootstrap socket as "gone"). Briefly: a flush needs the peers to
  // progress, and a dead or busy peer must not hold up our exit (their side also gives late
  // messages a grace period, see CheckLiveness).
  if (worker_ != nullptr) {
    const Deadline deadline = DeadlineAfter(kCloseFlush);
    for (ucp_ep_h& ep : eps_) {
      if (ep == nullptr) continue;
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = failed_[&ep - eps_.data()] == UCS_OK ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t request = ucp_ep_close_nbx(ep, &param);
      while (request != nullptr && !UCS_PTR_IS_ERR(request) &&
             ucp_request_check_status(request) == UCS_INPROGRESS && Clock::now() < deadline) {
        ucp_worker_progress(worker_);
      }
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) ucp_request_free(request);
      ep = nullptr;
    }
  }
  for (int& fd : fds_) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
    CloseFd(&fd);
  }
}

UcxTransport::~UcxTransport() {
  Close();
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

// Swaps variable-length worker addresses over the bootstrap sockets: length, then bytes.
Status SwapAddresses(int rank, const std::vector<int>& fds, const std::vector<std::byte>& mine,
                     std::vector<std::vector<std::byte>>* all, Deadline deadline) {
  constexpr uint32_t kAddressBytesMax = 1 << 20;
  std::byte length[4];
  StoreLe32(length, static_cast<uint32_t>(mine.size()));
  for (int peer = 0; peer < static_cast<int>(fds.size()); ++peer) {
    if (peer == rank) continue;
    COHORT_RETURN_IF_ERROR(WriteAll(fds[peer], length, deadline));
    COHORT_RETURN_IF_ERROR(WriteAll(fds[peer], mine, deadline));
  }
  all->assign(fds.size(), {});
  for (int peer = 0; peer < static_cast<int>(fds.size()); ++peer) {
    if (peer == rank) continue;
    std::byte got[4];
    COHORT_RETURN_IF_ERROR(ReadAll(fds[peer], got, deadline));
    const uint32_t bytes = LoadLe32(got);
    if (bytes == 0 || bytes > kAddressBytesMax) {
      return Corrupt(fmt::format("rank {} sent a UCX address of {} bytes", peer, bytes));
    }
    (*all)[peer].resize(bytes);
    COHORT_RETURN_IF_ERROR(ReadAll(fds[peer], (*all)[peer], deadline));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Transport>> ConnectUcxGroup(const UcxOptions& options,
                                                   std::unique_ptr<TcpListener> listener) {
  COHORT_ASSIGN_OR_RETURN(std::vector<int> fds, ConnectTcpMesh(options.bootstrap, std::move(listener)));
  const int rank = options.bootstrap.rank;
  const Deadline deadline = DeadlineAfter(options.bootstrap.connect_timeout);
  auto transport = std::make_unique<UcxTransport>(rank, fds, options.wait);
  std::vector<std::byte> address;
  COHORT_RETURN_IF_ERROR(transport->CreateWorker(&address));
  std::vector<std::vector<std::byte>> addresses;
  COHORT_RETURN_IF_ERROR(SwapAddresses(rank, fds, address, &addresses, deadline));
  COHORT_RETURN_IF_ERROR(transport->Init(addresses));
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace cohort::comm
