// The cost model: for a model, its quantization, a cluster (nodes, link, topology, stack) and
// a layout, predict generation tokens/s (batch 1 and batch N), prompt tokens/s, time to
// first token and memory per node. Every term is a physical quantity over a profile value:
// bytes read / bandwidth, FLOPs / throughput, messages x latency, bytes / link bandwidth.
#pragma once

#include <string>
#include <vector>

#include "plan/hardware.h"
#include "plan/model_shape.h"
#include "core/status.h"
#include "plan/shard_plan.h"

namespace cohort::plan {

struct Workload {
  int batch = 8;             // sequences decoded together for the batch-N figure
  int prompt_tokens = 512;
  int context_tokens = 512;  // context each generated token attends to
  int ubatch = 512;          // prompt tokens per forward pass
  // Prompt tokens per pipeline micro-batch within a forward pass, for a stack that overlaps
  // stages (cohort's parallel::ExecutorOptions::micro_batch_tokens); 0: whole passes.
  int micro_batch = 128;
  double kv_bytes = 2;       // bytes per KV-cache element (f16)
  Status Validate() const;
};

// A layout to evaluate: the ShardPlan layout, and which node runs each global rank.
struct Layout {
  std::string label;                 // "tp4", "pp2[3,1]", "hybrid2x2", "single"
  plan::LayoutSpec spec;
  std::vector<int> node_of_rank;     // index into ClusterSpec::nodes
};

// One decode step's time split into its physical terms (seconds).
struct StepTime {
  double weights_s = 0;      // memory-bound time of the slowest rank, summed over stages
  double compute_s = 0;      // extra time where compute, not memory, bounds a rank
  double collectives_s = 0;  // tensor-parallel all-reduces and the logits gather
  double hops_s = 0;         // activations passed between pipeline stages
  double overhead_s = 0;     // per-token software and remote-layer overhead
  double total() const { return weights_s + compute_s + collectives_s + hops_s + overhead_s; }
};

struct RankCost {
  int rank = 0;
  int node = 0;
  std::string node_name;
  double weight_bytes = 0;     // resident weights of its shard
  double kv_bytes = 0;         // KV cache for batch x context
  double memory_bytes = 0;     // weights + KV + runtime overhead
  double usable_bytes = 0;     // what the node can hold
  double read_bytes_b1 = 0;    // bytes read per token at batch 1
  bool fits() const { return memory_bytes <= usable_bytes; }
};

struct Prediction {
  Layout layout;
  plan::ShardPlan plan;
  std::vector<RankCost> ranks;
  StepTime step_b1;            // one token at batch 1
  double gen_tok_s_b1 = 0;
  double gen_tok_s_batch = 0;  // aggregate over Workload::batch sequences
  double prompt_tok_s = 0;
  double ttft_s = 0;
  bool fits = false;
  double max_memory_bytes() const;
};

// Expected distinct experts a batch of `tokens` touches in one layer, routing uniformly.
double DistinctExperts(int n_expert, int n_used, int tokens);

// Seconds for one all-reduce of `bytes` per rank over `n` ranks on the cluster's link and
// topology (direct exchange or ring, whichever is faster where the topology allows both).
double AllReduceSeconds(const ClusterSpec& cluster, int n, double bytes);

Result<Prediction> Predict(const ModelShape& model, const QuantScheme& quant,
                           const ClusterSpec& cluster, const Layout& layout,
                           const Workload& workload);

// Bytes of all weights under `quant` (the file size, near enough).
double ModelBytes(const ModelShape& model, const QuantScheme& quant);
// Bytes read per token at batch 1 on one node (active parameters under `quant`).
double ActiveBytes(const ModelShape& model, const QuantScheme& quant);

}  // namespace cohort::plan
