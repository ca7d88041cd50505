// The MPI backend: the same Transport over MPI point-to-point (non-blocking sends and receives
// polled against the deadline), for clusters launched by mpirun or Slurm. Built only when CMake
// finds MPI (COHORT_HAVE_MPI). MPI's own runtime decides what happens when a process dies:
// OpenMPI's mpirun tears the whole job down, so no rank is left waiting.
//
// Debian's OpenMPI disables its UCX path by default (/etc/openmpi/openmpi-mca-params.conf),
// so on an RDMA fabric pass `--mca pml ucx` to mpirun or it silently falls back to TCP.
#pragma once

#include <memory>
#include <span>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

// Owns MPI's initialisation: initialises MPI (with thread support "serialized") unless someone
// already did, and finalises it on destruction only if it initialised it. At most one per
// process, created on the main thread before any MPI transport.
class MpiRuntime {
 public:
  static Result<std::unique_ptr<MpiRuntime>> Init();
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  MpiRuntime(bool owns, int rank, int size) : owns_(owns), world_rank_(rank), world_size_(size) {}
  bool owns_;
  int world_rank_;
  int world_size_;
};

// A transport over a duplicate of MPI_COMM_WORLD (rank and size are the world's). `runtime`
// must outlive it.
Result<std::unique_ptr<Transport>> ConnectMpiGroup(const MpiRuntime& runtime,
                                                   const WaitPolicy& wait = {});

// MPI's own all-reduce (sum of float32) on the world, for comparisons in benchmarks and tests.
Status MpiAllReduceSum(std::span<float> data);

}  // namespace cohort::comm
