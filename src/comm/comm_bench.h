// The collective benchmark behind `cohort bench --comm`: all-reduce of a small message between
// two processes on this host, over TCP loopback and over shared memory, each measured against a
// raw exchange of the same bytes over the same medium in the same run (issue 4 wants the
// all-reduce within 1.5× of raw).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

struct CommBenchOptions {
  size_t message_bytes = 16 * 1024;  // multiple of 4 (float32 all-reduce)
  int iterations = 2000;
  int warmup = 200;
  bool tcp = true;
  bool shm = true;
  bool ucx = true;  // where the build has UCX; reported beside the others, no raw baseline
  std::optional<WaitPolicy> wait;  // overrides both transports' defaults when set

  Status Validate() const;
};

struct CommBenchRow {
  std::string name;       // "tcp raw exchange", "tcp all-reduce", ...
  double median_us = 0;   // one iteration as seen by rank 0
  double p90_us = 0;
};

struct CommBenchResult {
  std::vector<CommBenchRow> rows;
  // all-reduce median / raw median per medium; 0 where not measured.
  double tcp_ratio = 0;
  double shm_ratio = 0;
};

// Forks one child process as rank 1 (so call it before starting threads that hold locks the
// child could need; the child only runs this benchmark and exits). Verifies the all-reduce
// results along the way.
Result<CommBenchResult> MeasureComm(const CommBenchOptions& options);

std::string FormatCommBench(const CommBenchOptions& options, const CommBenchResult& result);

#ifdef COHORT_HAVE_MPI
class MpiRuntime;
// The same comparison inside a job started by `mpirun -np N` (N >= 2): MPI_Allreduce, cohort's
// all-reduce over the MPI transport, and over TCP and shared-memory groups formed between
// the very same processes (addresses swapped over MPI). Every rank must call it; rank 0's
// timings are returned.
Result<CommBenchResult> MeasureMpiComm(const MpiRuntime& runtime, const CommBenchOptions& options);
#endif

// MeasureComm + FormatCommBench.
Status RunCommBenchmark(const CommBenchOptions& options, std::string* report);

}  // namespace cohort::comm
