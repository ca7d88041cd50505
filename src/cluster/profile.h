// What a node measures about itself (free memory, cores, memory bandwidth, matmul throughput)
// and about its links to peers (latency, bandwidth), and how those fill the planner's
// NodeProfile and LinkProfile (hardware.h).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/hardware.h"
#include "cluster/node_id.h"
#include "core/meminfo.h"
#include "core/status.h"

namespace cohort::cluster {

struct ResourceProfile {
  double memory_total_bytes = 0;
  double memory_available_bytes = 0;  // /proc/meminfo MemAvailable when measured
  int cores = 0;
  double memory_bandwidth_Bps = 0;    // streaming read, all cores; 0 = not measured
  double matmul_flops = 0;            // Q8_0 MatMul, FLOP/s; 0 = not measured
  bool measured = false;              // false: only memory and cores are known
  std::string simd;                   // the SIMD level its kernels run at (kernels::SimdLevelName)
};

struct LinkMeasurement {
  NodeId peer;
  double latency_s = 0;      // one-way: half the smoothed control-channel round trip
  double bandwidth_Bps = 0;  // TCP probe, one direction; 0 = not measured yet
};

// How much work the measurements may do: small sizes keep tests and start-up fast.
struct ProfileOptions {
  bool run_benchmarks = true;
  size_t bandwidth_buffer_bytes = size_t{64} << 20;  // read repeatedly for bandwidth
  int bandwidth_passes = 3;
  int matmul_dim = 1024;   // weight [dim x dim] in Q8_0
  int matmul_tokens = 32;  // activation rows
  int threads = 0;         // 0: hardware_concurrency
};

// Memory, cores and the kernels' SIMD level from /proc/meminfo, the scheduler and
// kernels::BestSimdLevel (COHORT_SIMD's level where set); bandwidth and matmul timed runs
// (a fraction of a second at the default sizes) unless run_benchmarks is false.
Result<ResourceProfile> MeasureResources(const ProfileOptions& options);

nlohmann::json ResourceToJson(const ResourceProfile& p);
ResourceProfile ResourceFromJson(const nlohmann::json& j);  // missing fields stay 0 (or "")

// The planner's view: physical memory as memory_bytes with the available fraction as the
// usable fraction, measured bandwidth and FLOP/s.
plan::NodeProfile ToNodeProfile(const std::string& name, const ResourceProfile& p);
plan::LinkProfile ToLinkProfile(const std::string& name, const LinkMeasurement& m);

}  // namespace cohort::cluster
