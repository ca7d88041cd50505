// Profiles the cost model runs on: nodes (memory, bandwidth, compute), links (latency,
// bandwidth), topologies, and software stacks (how much of the hardware a runtime achieves).
// Built-in profiles carry their sources; measured numbers replace them field by field.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::plan {

// One machine. Physical numbers: spec sheets or measurements, never fitted to a benchmark.
struct NodeProfile {
  std::string name;
  double memory_bytes = 0;            // physical memory (unified memory on Apple silicon)
  double usable_memory_fraction = 0.9;  // what the runtime may fill (OS, caches keep the rest)
  double memory_bandwidth_Bps = 0;    // peak (spec) or measured streaming-read bandwidth
  double flops = 0;                   // dense matmul throughput, FLOP/s (or int8 ops/s on CPUs)
  std::string source;                 // where the numbers come from

  double usable_bytes() const { return memory_bytes * usable_memory_fraction; }
  Status Validate() const;
};

// A point-to-point link between two nodes, as an application sees it.
struct LinkProfile {
  std::string name;
  double latency_s = 0;       // one-way latency of a small message
  double bandwidth_Bps = 0;   // achievable bytes/s in one direction
  bool rdma = false;
  std::string source;
  Status Validate() const;
};

enum class Topology {
  kFullMesh,  // every pair has its own link (Thunderbolt: up to 6 ports per Mac Studio)
  kRing,      // each node links to two neighbours
  kChain,     // a daisy chain: a ring without the closing link
};
const char* TopologyName(Topology t);
Result<Topology> ParseTopology(const std::string& name);

// What a software stack achieves on the hardware. These are the only constants that differ
// between runtimes; one set per stack serves every model, node count and layout.
struct StackProfile {
  std::string name;
  double bandwidth_efficiency = 0.8;  // fraction of memory bandwidth reached streaming weights
  double compute_efficiency = 0.5;    // fraction of peak FLOP/s reached in prompt matmuls
  double token_overhead_s = 0;        // per generated token: sampling, graph launch, scheduling
  double collective_overhead_s = 0;   // per collective: synchronising the compute device
  double message_overhead_s = 0;      // per message a rank sends or receives in a collective
  double hop_messages = 1;            // one-way messages per pipeline stage boundary per step
  // Bytes per logit the last pipeline stage sends back to the coordinator per output row (one
  // more one-way message per step; cohort: f32 logits). 0: no separate message (llama.cpp's
  // RPC round trips in hop_messages already come back to the coordinator).
  double logits_return_bytes = 0;
  double remote_layer_overhead_s = 0; // per layer held off the coordinating node, per step
  int collectives_per_layer = 2;      // all-reduces per layer in a tensor-parallel group
  double activation_bytes = 4;        // bytes per activation element on the wire
  bool pipelines_microbatches = true; // overlaps stages when several sequences are in flight
  double memory_overhead_bytes = 0;   // compute buffers and runtime per node
  bool supports_tensor_parallel = true;
  bool supports_pipeline = true;
  std::string source;
  Status Validate() const;
};

// The machines an instance may use, the links between them and the stack that runs on them.
struct ClusterSpec {
  std::vector<NodeProfile> nodes;
  LinkProfile link;
  Topology topology = Topology::kFullMesh;
  StackProfile stack;
  Status Validate() const;
};

std::vector<NodeProfile> BuiltinNodes();
std::vector<LinkProfile> BuiltinLinks();
std::vector<StackProfile> BuiltinStacks();
Result<NodeProfile> FindBuiltinNode(const std::string& name);
Result<LinkProfile> FindBuiltinLink(const std::string& name);
Result<StackProfile> FindBuiltinStack(const std::string& name);

// Parses a node spec document (format in docs/PLANNER.md):
//   {"nodes": [{"profile": "mac-studio-m3-ultra-512", "count": 4},
//              {"name": "box", "memory_gb": 64, "memory_bandwidth_gbs": 273, "tflops": 9}],
//    "link": "tb5-rdma" | {"latency_us": 5, "bandwidth_gbps": 80},
//    "topology": "full-mesh", "stack": "cohort" | {"base": "cohort", ...overrides}}
Result<ClusterSpec> ParseClusterSpec(const std::string& json_text);

// N copies of a built-in node joined by a built-in link (tests, quick what-ifs).
Result<ClusterSpec> UniformCluster(const std::string& node, int count, const std::string& link,
                                   const std::string& stack, Topology topology = Topology::kFullMesh);

}  // namespace cohort::plan
