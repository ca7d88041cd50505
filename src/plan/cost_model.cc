// Cost model: each rank's share comes from the real ShardPlan of the layout, so the bytes it
// stores and reads are the bytes the runtime would load; times are bytes over bandwidth,
// FLOPs over throughput, and messages over the link.
#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

namespace cohort::plan {
namespace {

using plan::RankShard;

// One rank's share of each tensor class.
struct Share {
  int layers = 0;
  int dense_layers = 0;
  int moe_layers = 0;
  double q_heads = 0;
  double kv_heads = 0;
  double kv_fraction = 0;   // of the KV cache per layer (MLA: the latent is replicated)
  double ff_frac = 0;
  double shexp_frac = 0;
  double expert_frac = 0;   // of all routed-expert weights
  bool whole_experts = false;
  double held_experts = 0;  // whole experts held (expert parallelism)
  int tp_ranks = 1;         // ranks in its tensor-parallel group
  double embd_rows = 0;
  double output_rows = 0;
};

Share ShareOf(const ModelShape& m, const plan::ShardPlan& plan, int stage, const RankShard& r) {
  const plan::StagePlan& st = plan.stages[stage];
  Share s;
  s.layers = st.layers.size();
  const int dense_end = m.is_moe() ? m.n_leading_dense : m.n_layer;
  s.dense_layers = std::max(0, std::min(st.layers.end, dense_end) - st.layers.begin);
  s.moe_layers = s.layers - s.dense_layers;
  s.q_heads = r.q_heads.size();
  s.kv_heads = r.kv_heads.size();
  s.kv_fraction = m.is_mla() ? 1.0 : s.kv_heads / m.n_head_kv;
  if (plan.shape.n_ff > 0) s.ff_frac = static_cast<double>(r.ff_cols.size()) / plan.shape.n_ff;
  if (plan.shape.n_ff_shexp > 0) s.shexp_frac = static_cast<double>(r.shexp_cols.size()) / plan.shape.n_ff_shexp;
  if (m.is_moe()) {
    s.whole_experts = plan.expert_split == plan::ExpertSplit::kWhole;
    s.held_experts = r.experts.size();
    s.expert_frac = static_cast<double>(r.experts.size()) / m.n_expert *
                    r.expert_cols.size() / m.n_ff_expert;
  }
  s.tp_ranks = static_cast<int>(st.ranks.size());
  s.embd_rows = r.embd_rows.size();
  s.output_rows = r.output_rows.size();
  return s;
}

double AttnParams(const ModelShape& m, const Share& s) {
  return m.AttnReplicatedParams() + s.q_heads * m.AttnPerQHeadParams() +
         s.kv_heads * m.AttnPerKvHeadParams();
}

// Resident weight bytes of a share.
double StorageBytes(const ModelShape& m, const QuantScheme& q, const Share& s) {
  const double bd = q.bits_dense / 8, be = q.bits_expert / 8;
  double bytes = s.layers * AttnParams(m, s) * bd;
  bytes += s.dense_layers * m.DenseFfnParams() * s.ff_frac * bd;
  bytes += s.moe_layers * (m.n_expert * m.ExpertParams() * s.expert_frac * be +
                           (m.SharedExpertParams() * s.shexp_frac + m.RouterParams()) * bd);
  bytes += s.embd_rows * m.n_embd * q.bits_embd / 8;
  // A tied output matrix is the embedding: stored once where one rank holds both.
  if (!(m.tied_embeddings && s.embd_rows > 0)) bytes += s.output_rows * m.n_embd * q.bits_output / 8;
  return bytes;
}

// Routed experts (in units of one expert) this rank reads per layer for `tokens` tokens. With
// whole experts the slowest rank matters: its load is the expected maximum over the group,
// approximated as mean + sqrt(2 ln t) standard deviations of a binomial load.
double ExpertsRead(const ModelShape& m, const Share& s, int tokens) {
  const double distinct = DistinctExperts(m.n_expert, m.n_expert_used, tokens);
  if (!s.whole_experts) return distinct * s.expert_frac;
  const double p = s.held_experts / m.n_expert;
  const double mean = distinct * p;
  const double spread = s.tp_ranks > 1 ? std::sqrt(2 * std::log(s.tp_ranks)) : 0;
  return std::min(s.held_experts, mean + spread * std::sqrt(mean * (1 - p)));
}

struct RankStep {
  double memory_s = 0;
  double compute_s = 0;
  double read_bytes = 0;
  double time() const { return std::max(memory_s, compute_s); }
};

// One forward step of `tokens` tokens (decode: one per sequence; prompt: a ubatch), each
// attending to `context` positions, of which `logit_rows` go through the output matrix (decode:
// all; a prompt: its last token, as the runtime computes no logits for the others).
RankStep RankStepTime(const ModelShape& m, const QuantScheme& q, const NodeProfile& node,
                      const StackProfile& stack, const Share& s, int tokens, int logit_rows,
                      double context, double kv_bytes) {
  const double bd = q.bits_dense / 8, be = q.bits_expert / 8;
  const double attn = AttnParams(m, s);
  const double dense = m.DenseFfnParams() * s.ff_frac;
  const double moe_fixed = m.SharedExpertParams() * s.shexp_frac + m.RouterParams();
  const double output = s.output_rows * m.n_embd;
  double read = s.layers * attn * bd + s.dense_layers * dense * bd + output * q.bits_output / 8;
  if (m.is_moe()) {
    read += s.moe_layers * (moe_fixed * bd + ExpertsRead(m, s, tokens) * m.ExpertParams() * be);
  }
  read += tokens * context * m.KvElementsPerToken() * kv_bytes * s.kv_fraction * s.layers;
  // FLOPs: 2 per weight per token, plus QK and AV over the context.
  const double expert_per_token = m.is_moe() ? m.n_expert_used * (s.whole_experts
                                                   ? s.held_experts / m.n_expert
                                                   : s.expert_frac) * m.ExpertParams()
                                             : 0;
  const double params_per_token = s.layers * attn + s.dense_layers * dense +
                                  s.moe_layers * (moe_fixed + expert_per_token);
  const double head_width = m.is_mla() ? m.qk_nope_dim + m.qk_rope_dim : m.head_dim;
  const double attn_flops = 4.0 * context * s.q_heads * head_width * s.layers;
  const double flops = tokens * (2 * params_per_token + attn_flops) + logit_rows * 2 * output;
  RankStep out;
  out.read_bytes = read;
  out.memory_s = read / (node.memory_bandwidth_Bps * stack.bandwidth_efficiency);
  out.compute_s = flops / (node.flops * stack.compute_efficiency);
  return out;
}

double HopSeconds(const ClusterSpec& c, const ModelShape& m, int tokens) {
  return c.stack.hop_messages * (c.link.latency_s + c.stack.message_overhead_s) +
         tokens * m.n_embd * c.stack.activation_bytes / c.link.bandwidth_Bps;
}

// Gathering the vocabulary-split logits of `rows` output rows on the coordinator.
double LogitsGatherSeconds(const ClusterSpec& c, const ModelShape& m, int n, int rows) {
  if (n <= 1) return 0;
  return c.link.latency_s + (n - 1) * c.stack.message_overhead_s +
         rows * m.n_vocab * 4.0 * (n - 1) / n / c.link.bandwidth_Bps;
}

// The last pipeline stage sending `rows` rows of logits back to the coordinator, which samples.
double LogitsReturnSeconds(const ClusterSpec& c, const ModelShape& m, int rows) {
  if (c.stack.logits_return_bytes <= 0) return 0;
  return c.link.latency_s + c.stack.message_overhead_s +
         rows * m.n_vocab * c.stack.logits_return_bytes / c.link.bandwidth_Bps;
}

struct Step {
  std::vector<double> stage_s;  // each stage: slowest rank + its collectives
  StepTime parts;
  double hop_s = 0;
  double remote_s = 0;          // remote-layer overhead per step
};

// One forward step of `tokens` tokens of which `logit_rows` produce logits (decode: all of
// them; a prompt ubatch: its last token).
Step StepFor(const ModelShape& m, const QuantScheme& q, const ClusterSpec& c,
             const Prediction& p, const std::vector<Share>& shares, int tokens, int logit_rows,
             double context, double kv_bytes) {
  Step out;
  const int n_stages = p.plan.n_stages();
  const double activations = tokens * m.n_embd * c.stack.activation_bytes;
  for (int s = 0; s < n_stages; ++s) {
    RankStep slowest;
    int t = 0;
    for (const RankShard& r : p.plan.stages[s].ranks) {
      const NodeProfile& node = c.nodes[p.layout.node_of_rank[r.rank]];
      RankStep rs = RankStepTime(m, q, node, c.stack, shares[r.rank], tokens, logit_rows, context, kv_bytes);
      if (t++ == 0 || rs.time() > slowest.time()) slowest = rs;
    }
    double coll = p.plan.stages[s].layers.size() * c.stack.collectives_per_layer *
                  AllReduceSeconds(c, t, activations);
    // The plan splits the embedding rows over the first stage's ranks: one more all-reduce
    // joins the looked-up rows before the first layer.
    if (s == 0) coll += AllReduceSeconds(c, t, activations);
    if (s + 1 == n_stages) coll += LogitsGatherSeconds(c, m, t, logit_rows);
    out.parts.weights_s += slowest.memory_s;
    out.parts.compute_s += std::max(0.0, slowest.compute_s - slowest.memory_s);
    out.parts.collectives_s += coll;
    out.stage_s.push_back(slowest.time() + coll);
  }
  out.hop_s = HopSeconds(c, m, tokens);
  out.parts.hops_s = (n_stages - 1) * out.hop_s;
  if (n_stages > 1) {
    out.parts.hops_s += LogitsReturnSeconds(c, m, logit_rows);
    out.remote_s = (m.n_layer - p.plan.stages[0].layers.size()) * c.stack.remote_layer_overhead_s;
  }
  out.parts.overhead_s = c.stack.token_overhead_s + out.remote_s;
  return out;
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

double MaxStagePlusHop(const Step& step) {
  double worst = 0;
  for (double s : step.stage_s) worst = std::max(worst, s + step.hop_s);
  return worst;
}

void PredictThroughput(const ModelShape& m, const QuantScheme& q, const ClusterSpec& c,
                       const Workload& w, const std::vector<Share>& shares, Prediction* p) {
  const int n_stages = p->plan.n_stages();
  const bool overlap = n_stages > 1 && c.stack.pipelines_microbatches;
  // Batch N: with several stages and a stack that overlaps them, the batch is cut into up to
  // one micro-batch per stage and the slowest stage sets the pace.
  const int b = w.batch;
  const int m_count = overlap ? std::min(n_stages, b) : 1;
  const int mb = (b + m_count - 1) / m_count;
  Step batch = StepFor(m, q, c, *p, shares, mb, mb, w.context_tokens, w.kv_bytes);
  double period = batch.parts.total();
  if (m_count > 1) period = std::max(period, m_count * MaxStagePlusHop(batch) + batch.parts.overhead_s);
  p->gen_tok_s_batch = m_count * mb / period;

  const int u = std::max(1, std::min(w.ubatch, w.prompt_tokens));
  const int n_ub = (w.prompt_tokens + u - 1) / u;
  // Overlapping stages pass each pass on in micro-batches (as parallel::SplitMicroBatches does:
  // a pass of at least two micro-batches' worth is cut into even shares), and the stages run
  // one micro-batch apart, so the pipeline fills and drains once per prompt, not per pass.
  const int n_mb = overlap && w.micro_batch > 0 ? std::max(1, u / w.micro_batch) : 1;
  const int unit = (u + n_mb - 1) / n_mb;
  Step prompt = StepFor(m, q, c, *p, shares, overlap ? unit : u, 1, w.prompt_tokens / 2.0, w.kv_bytes);
  double t_prompt = 0;
  if (overlap) {
    const int n_units = n_ub * n_mb;
    t_prompt = (n_units + n_stages - 1) * MaxStagePlusHop(prompt) + n_units * prompt.remote_s;
  } else {
    t_prompt = n_ub * (Sum(prompt.stage_s) + prompt.parts.hops_s + prompt.remote_s);
  }
  t_prompt += c.stack.token_overhead_s;
  p->prompt_tok_s = w.prompt_tokens / t_prompt;
  p->ttft_s = t_prompt;
}

}  // namespace

Status Workload::Validate() const {
  if (batch < 1 || prompt_tokens < 1 || context_tokens < 0 || ubatch < 1 || micro_batch < 0 ||
      !(kv_bytes > 0)) {
    return InvalidArgument("workload: batch, prompt and ubatch must be >= 1, context and micro_batch >= 0");
  }
  return Status::Ok();
}

double Prediction::max_memory_bytes() const {
  double worst = 0;
  for (const RankCost& r : ranks) worst = std::max(worst, r.memory_bytes);
  return worst;
}

double DistinctExperts(int n_expert, int n_used, int tokens) {
  if (n_expert <= 0) return 0;
  const double miss = 1.0 - static_cast<double>(n_used) / n_expert;
  return n_expert * (1.0 - std::pow(miss, tokens));
}

double AllReduceSeconds(const ClusterSpec& c, int n, double bytes) {
  if (n <= 1) return 0;
  const double lat = c.link.latency_s, msg = c.stack.message_overhead_s, bw = c.link.bandwidth_Bps;
  // Ring: reduce-scatter then all-gather, 2(n-1) steps of 1/n of the data.
  const double ring = 2.0 * (n - 1) * (lat + msg + bytes / n / bw);
  double algo = ring;
  if (c.topology == Topology::kFullMesh) {
    // Direct exchange: one step of latency, but a node's n-1 sends share its injection
    // bandwidth (one NIC, or Thunderbolt ports behind shared controllers).
    algo = std::min(ring, lat + (n - 1) * (msg + bytes / bw));
  } else if (c.topology == Topology::kChain) {
    // No closing link: reduce towards one end and broadcast back, whole vectors each step.
    algo = 2.0 * (n - 1) * (lat + msg + bytes / bw);
  }
  return c.stack.collective_overhead_s + algo;
}

double ModelBytes(const ModelShape& m, const QuantScheme& q) {
  const double experts = m.n_moe_layers() * m.n_expert * m.ExpertParams();
  const double embd = m.EmbeddingParams() * q.bits_embd / 8;
  const double output = m.tied_embeddings ? 0 : m.EmbeddingParams() * q.bits_output / 8;
  const double dense = m.TotalParams() - experts - m.EmbeddingParams() * (m.tied_embeddings ? 1 : 2);
  return experts * q.bits_expert / 8 + dense * q.bits_dense / 8 + embd + output;
}

double ActiveBytes(const ModelShape& m, const QuantScheme& q) {
  const double experts = m.n_moe_layers() * m.n_expert_used * m.ExpertParams();
  const double dense = m.ActiveParams() - experts - m.EmbeddingParams() - m.n_embd;
  return experts * q.bits_expert / 8 + dense * q.bits_dense / 8 +
         m.EmbeddingParams() * q.bits_output / 8;
}

Result<Prediction> Predict(const ModelShape& model, const QuantScheme& quant,
                           const ClusterSpec& cluster, const Layout& layout,
                           const Workload& workload) {
  COHORT_RETURN_IF_ERROR(model.Validate());
  COHORT_RETURN_IF_ERROR(cluster.Validate());
  COHORT_RETURN_IF_ERROR(workload.Validate());
  Prediction p;
  p.layout = layout;
  const int n_ranks = layout.spec.n_ranks();
  if (p.layout.node_of_rank.empty()) {
    for (int r = 0; r < n_ranks; ++r) p.layout.node_of_rank.push_back(r);
  }
  if (static_cast<int>(p.layout.node_of_rank.size()) != n_ranks) {
    return InvalidArgument("layout '" + layout.label + "' maps " +
                           std::to_string(p.layout.node_of_rank.size()) + " ranks to nodes, has " +
                           std::to_string(n_ranks));
  }
  for (int node : p.layout.node_of_rank) {
    if (node < 0 || node >= static_cast<int>(cluster.nodes.size())) {
      return InvalidArgument("layout '" + layout.label + "' uses node " + std::to_string(node) +
                             " of " + std::to_string(cluster.nodes.size()));
    }
  }
  COHORT_ASSIGN_OR_RETURN(p.plan, plan::MakePlan(model.ToPlanShape(quant.block), layout.spec));
  std::vector<Share> shares(n_ranks);
  for (int s = 0; s < p.plan.n_stages(); ++s) {
    for (const RankShard& r : p.plan.stages[s].ranks) shares[r.rank] = ShareOf(model, p.plan, s, r);
  }
  p.fits = true;
  for (int r = 0; r < n_ranks; ++r) {
    const NodeProfile& node = cluster.nodes[p.layout.node_of_rank[r]];
    const Share& s = shares[r];
    RankCost rc;
    rc.rank = r;
    rc.node = p.layout.node_of_rank[r];
    rc.node_name = node.name;
    rc.weight_bytes = StorageBytes(model, quant, s);
    rc.kv_bytes = static_cast<double>(workload.batch) * workload.context_tokens *
                  model.KvElementsPerToken() * workload.kv_bytes * s.kv_fraction * s.layers;
    // Hybrid models: each sequence also holds its conv + DeltaNet state (f32, fixed size, does
    // not grow with context). Charged by the rank's share of layers and heads, as a stage holds
    // about its share of the recurrent layers and tp splits the state with its heads.
    if (model.is_hybrid() && model.n_layer > 0) {
      rc.kv_bytes += static_cast<double>(workload.batch) * model.RecurrentStateElements() * 4.0 *
                     s.layers / model.n_layer * s.kv_fraction;
    }
    rc.memory_bytes = rc.weight_bytes + rc.kv_bytes + cluster.stack.memory_overhead_bytes;
    rc.usable_bytes = node.usable_bytes();
    rc.read_bytes_b1 = RankStepTime(model, quant, node, cluster.stack, s, 1, 1,
                                    workload.context_tokens, workload.kv_bytes).read_bytes;
    p.fits = p.fits && rc.fits();
    p.ranks.push_back(rc);
  }
  Step one = StepFor(model, quant, cluster, p, shares, 1, 1, workload.context_tokens, workload.kv_bytes);
  p.step_b1 = one.parts;
  p.gen_tok_s_b1 = 1.0 / one.parts.total();
  PredictThroughput(model, quant, cluster, workload, shares, &p);
  return p;
}

}  // namespace cohort::plan
