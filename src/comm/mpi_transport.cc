// MPI implementation of Transport (see mpi_transport.h).
#include "comm/mpi_transport.h"

// Only MPI's C API: keep its deprecated C++ bindings (and their extra library) out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/wait.h"

namespace cohort::comm {
namespace {

std::string MpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

// MPI guarantees tags up to 32767 only: keep the low 14 bits of our tag and whether it belongs
// to a collective. Matching is by (source, tag) in order, and sizes are checked on arrival.
int MpiTag(uint32_t tag) { return static_cast<int>((tag & 0x3fff) | ((tag >> 31) << 14)); }

class MpiTransport final : public Transport {
 public:
  MpiTransport(MPI_Comm comm, int rank, int size, const WaitPolicy& wait)
      : comm_(comm), rank_(rank), size_(size), wait_(wait) {
    requests_.reserve(2 * size);
    statuses_.resize(2 * size);
  }
  ~MpiTransport() override { Close(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  Status Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                  Deadline deadline) override;
  void Close() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

 private:
  Status Fail(Status status) {
    for (MPI_Request& request : requests_) {
      if (request != MPI_REQUEST_NULL) {
        MPI_Cancel(&request);
        MPI_Request_free(&request);
      }
    }
    broken_ = status.Annotate(fmt::format("mpi rank {}", rank_));
    return broken_;
  }

  MPI_Comm comm_;
  int rank_;
  int size_;
  WaitPolicy wait_;
  Status broken_;
  std::vector<MPI_Request> requests_;
  std::vector<MPI_Status> statuses_;
};

Status MpiTransport::Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                              Deadline deadline) {
  if (!broken_.ok()) return broken_;
  if (comm_ == MPI_COMM_NULL) return Unavailable("mpi transport is closed");
  CheckExchangeArgs(rank_, size_, sends, recvs);
  requests_.clear();
  for (const RecvOp& op : recvs) {
    if (op.data.size() > INT_MAX) return Unsupported("MPI messages are limited to 2 GiB");
    requests_.emplace_back();
    int rc = MPI_Irecv(op.data.data(), static_cast<int>(op.data.size()), MPI_BYTE, op.peer,
                       MpiTag(op.tag), comm_, &requests_.back());
    if (rc != MPI_SUCCESS) return Fail(Unavailable("MPI_Irecv: " + MpiErrorText(rc)));
  }
  for (const SendOp& op : sends) {
    if (op.data.size() > INT_MAX) return Unsupported("MPI messages are limited to 2 GiB");
    requests_.emplace_back();
    int rc = MPI_Isend(op.data.data(), static_cast<int>(op.data.size()), MPI_BYTE, op.peer,
                       MpiTag(op.tag), comm_, &requests_.back());
    if (rc != MPI_SUCCESS) return Fail(Unavailable("MPI_Isend: " + MpiErrorText(rc)));
  }
  Backoff backoff(wait_);
  for (;;) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                               statuses_.data());
    if (rc != MPI_SUCCESS) return Fail(Corrupt("MPI_Testall: " + MpiErrorText(rc)));
    if (done) break;
    if (Clock::now() >= deadline) return Fail(Timeout("timed out waiting for MPI peers"));
    // MPI offers no wait with a timeout: past the spin phase, nap briefly between tests.
    if (backoff.ShouldBlock()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (size_t i = 0; i < recvs.size(); ++i) {
    int count = 0;
    MPI_Get_count(&statuses_[i], MPI_BYTE, &count);
    if (static_cast<size_t>(count) != recvs[i].data.size()) {
      return Fail(Corrupt(fmt::format("from rank {}: message of {} bytes but expected {}",
                                      recvs[i].peer, count, recvs[i].data.size())));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<MpiRuntime>> MpiRuntime::Init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return Unavailable("MPI_Init_thread: " + MpiErrorText(rc));
    owns = true;
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiRuntime>(new MpiRuntime(owns, rank, size));
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !finalized) MPI_Finalize();
}

Result<std::unique_ptr<Transport>> ConnectMpiGroup(const MpiRuntime& runtime, const WaitPolicy& wait) {
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) return Unavailable("MPI_Comm_dup: " + MpiErrorText(rc));
  // Errors come back as codes (and then as Status) instead of aborting the job.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Transport>(
      new MpiTransport(comm, runtime.world_rank(), runtime.world_size(), wait));
}

Status MpiAllReduceSum(std::span<float> data) {
  if (data.size() > INT_MAX) return Unsupported("MPI messages are limited to 2^31 elements");
  const int rc = MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) return Unavailable("MPI_Allreduce: " + MpiErrorText(rc));
  return Status::Ok();
}

}  // namespace cohort::comm
