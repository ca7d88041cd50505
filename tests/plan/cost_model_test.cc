// Cost model: parameter accounting against published totals, and the physical behaviour of
// each term (pipeline at batch 1 adds memory, not speed; tensor parallel divides the bytes
// read; collectives by topology; batching and experts).
#include <gtest/gtest.h>

#include "plan/cost_model.h"

namespace cohort::plan {
namespace {

TEST(ModelShape, ParameterCountsMatchPublishedTotals) {
  struct Want {
    const char* name;
    double total_b, active_b;
  };
  for (const Want& w : {Want{"qwen3-235b-a22b", 235, 22}, Want{"kimi-k2", 1026, 32},
                        Want{"deepseek-v3", 671, 37}, Want{"llama-3.1-70b", 70.6, 70.6},
                        Want{"llama-3.1-405b", 405.8, 405.8}, Want{"llama-3.2-1b", 1.24, 1.24}}) {
    auto m = FindBuiltinShape(w.name);
    ASSERT_TRUE(m.ok()) << w.name;
    ASSERT_TRUE(m->Validate().ok());
    EXPECT_NEAR(m->TotalParams() / 1e9, w.total_b, 0.01 * w.total_b) << w.name;
    // Active: every weight read per token (for a tied model the output matrix is read
    // although the embedding is counted once in the total).
    EXPECT_NEAR(m->ActiveParams() / 1e9, w.active_b, 0.05 * w.active_b) << w.name;
  }
  EXPECT_FALSE(FindBuiltinShape("gpt-5").ok());
  EXPECT_TRUE(FindBuiltinShape("Kimi-K2-Thinking").ok());
}

ClusterSpec IdealLinkCluster(int nodes) {
  ClusterSpec c = *UniformCluster("mac-studio-m3-ultra-512", nodes, "tb5-rdma", "cohort");
  c.link.latency_s = 0;
  c.stack.collective_overhead_s = 0;
  c.stack.message_overhead_s = 0;
  c.stack.token_overhead_s = 0;
  return c;
}

Prediction PredictWith(const std::string& model, const std::string& quant, const ClusterSpec& c,
               LayoutSpec spec, Workload w = {}) {
  auto p = Predict(*FindBuiltinShape(model), *FindBuiltinQuant(quant), c, Layout{"x", spec, {}}, w);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

TEST(CostModel, PipelineAtBatchOneAddsMemoryNotSpeed) {
  const Prediction one = PredictWith("llama-3.1-70b", "q8_0", IdealLinkCluster(1), LayoutSpec::Tensor(1));
  const Prediction pp4 = PredictWith("llama-3.1-70b", "q8_0", IdealLinkCluster(4), LayoutSpec::Pipeline(4));
  EXPECT_NEAR(pp4.gen_tok_s_b1 / one.gen_tok_s_b1, 1.0, 0.02);
  EXPECT_NEAR(pp4.max_memory_bytes() / one.max_memory_bytes(), 0.25, 0.03);
  // With several sequences in flight the stages overlap: micro-batches keep every stage busy,
  // so a batch runs as fast as on one node that could hold the model.
  EXPECT_NEAR(pp4.gen_tok_s_batch / one.gen_tok_s_batch, 1.0, 0.1);
  EXPECT_GT(pp4.gen_tok_s_batch, 2.5 * pp4.gen_tok_s_b1);
}

// A long prompt through a pipeline whose stages run micro-batches one apart (the executor's
// micro_batch_tokens): the pipeline fills and drains once, 16 micro-batches of 128 tokens
// reaching 16 / (16 + 1) of the stages' overlap where whole 512-token passes reach 4 / 5. (The
// stages are not equal, the last one holds the LM head, so neither is 2x one node.)
TEST(CostModel, PromptMicroBatchesOverlapPipelineStages) {
  Workload w;
  w.prompt_tokens = 2048;
  const Prediction one = PredictWith("llama-3.2-1b", "q4_0", IdealLinkCluster(1), LayoutSpec::Tensor(1), w);
  const Prediction pp2 = PredictWith("llama-3.2-1b", "q4_0", IdealLinkCluster(2), LayoutSpec::Pipeline(2), w);
  w.micro_batch = 0;
  const Prediction whole = PredictWith("llama-3.2-1b", "q4_0", IdealLinkCluster(2), LayoutSpec::Pipeline(2), w);
  EXPECT_NEAR(whole.ttft_s / pp2.ttft_s, (16.0 / 17) / (4.0 / 5), 0.02);
  EXPECT_GT(one.ttft_s / pp2.ttft_s, 1.5);
}

// A prompt's compute: every token through the layers, but only the last one through the output
// matrix (the runtime computes no logits for the others). On the 1B shape the LM head is a
// fifth of the weights, so counting it per prompt token put the time 25% too high, and most of
// it on a pipeline's last stage (bench/plan-calibrate.sh's TTFT rows: pp3 +57%).
TEST(CostModel, PromptComputesLogitsOfItsLastTokenOnly) {
  const ModelShape m = *FindBuiltinShape("llama-3.2-1b");
  ClusterSpec c = IdealLinkCluster(1);
  c.nodes[0].flops = 1e12;  // compute-bound by far: 2 TFLOP per prompt against 0.7 GB read
  Workload w;
  w.prompt_tokens = 1024;
  w.ubatch = 1024;
  const Prediction one = PredictWith("llama-3.2-1b", "q4_0", c, LayoutSpec::Tensor(1), w);
  const double output = m.EmbeddingParams();
  const double layers = m.ActiveParams() - output - m.n_embd;
  const double attn = 4.0 * (w.prompt_tokens / 2.0) * m.n_head * m.head_dim * m.n_layer;
  const double flops = w.prompt_tokens * (2 * layers + attn) + 2 * output;
  EXPECT_NEAR(one.ttft_s, flops / (c.nodes[0].flops * c.stack.compute_efficiency), 0.01 * one.ttft_s);
  // Generation still reads and multiplies the whole output matrix for every token.
  Workload b = w;
  b.batch = 64;
  const Prediction batch = PredictWith("llama-3.2-1b", "q4_0", c, LayoutSpec::Tensor(1), b);
  const double per_token = 2 * (layers + output) + 4.0 * b.context_tokens * m.n_head * m.head_dim * m.n_layer;
  EXPECT_NEAR(batch.gen_tok_s_batch, c.nodes[0].flops * c.stack.compute_efficiency / per_token,
              0.02 * batch.gen_tok_s_batch);
}

// The link delays per token, as measured on real ranks (tiny model, emulated one-way delay of
// 1 and 2 ms): a pipeline over N ranks pays N delays (N-1 activation hops, then the logits back
// to the coordinator); tensor parallelism pays one per all-reduce, 2 per layer plus the split
// embedding's, and one for gathering the logits.
TEST(CostModel, LinkDelaysPerTokenMatchTheExecutorsMessages) {
  const ModelShape m = *FindBuiltinShape("llama-3.2-1b");
  for (int n : {2, 3}) {
    ClusterSpec c = IdealLinkCluster(n);
    c.link.bandwidth_Bps = 1e15;  // delays only
    const auto delays = [&](LayoutSpec spec) {
      c.link.latency_s = 0;
      const double base = PredictWith("llama-3.2-1b", "q4_0", c, spec).step_b1.total();
      c.link.latency_s = 1e-3;
      return (PredictWith("llama-3.2-1b", "q4_0", c, spec).step_b1.total() - base) / 1e-3;
    };
    EXPECT_NEAR(delays(LayoutSpec::Pipeline(n)), n, 1e-6) << n << " stages";
    EXPECT_NEAR(delays(LayoutSpec::Tensor(n)), 2 * m.n_layer + 2, 1e-6) << n << " ranks";
  }
  // The returned logits are f32 rows of the vocabulary: 1 Gbit/s costs 128256 x 4 x 8 / 1e9 s.
  ClusterSpec slow = IdealLinkCluster(2);
  slow.link.bandwidth_Bps = 1e9 / 8;
  const StepTime pp2 = PredictWith("llama-3.2-1b", "q4_0", slow, LayoutSpec::Pipeline(2)).step_b1;
  const double activations = m.n_embd * 4.0 / slow.link.bandwidth_Bps;
  EXPECT_NEAR(pp2.hops_s - activations, m.n_vocab * 4.0 / slow.link.bandwidth_Bps, 1e-9);
}

TEST(CostModel, TensorParallelDividesBytesReadPerNode) {
  const Prediction one = PredictWith("llama-3.1-70b", "q8_0", IdealLinkCluster(1), LayoutSpec::Tensor(1));
  const Prediction tp4 = PredictWith("llama-3.1-70b", "q8_0", IdealLinkCluster(4), LayoutSpec::Tensor(4));
  EXPECT_NEAR(tp4.step_b1.weights_s / one.step_b1.weights_s, 0.25, 0.02);
  EXPECT_NEAR(tp4.ranks[0].read_bytes_b1 / one.ranks[0].read_bytes_b1, 0.25, 0.02);
  EXPECT_GT(tp4.gen_tok_s_b1, 3.5 * one.gen_tok_s_b1);  // ideal link: almost linear
  // A real link costs 2 all-reduces per layer: 160 collectives per token for 80 layers.
  ClusterSpec tcp = *UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-tcp", "cohort");
  const Prediction slow = PredictWith("llama-3.1-70b", "q8_0", tcp, LayoutSpec::Tensor(4));
  EXPECT_GE(slow.step_b1.collectives_s, 160 * AllReduceSeconds(tcp, 4, 8192 * 4));
  EXPECT_LT(slow.step_b1.collectives_s, 160 * AllReduceSeconds(tcp, 4, 8192 * 4) + 1e-3);
  EXPECT_LT(slow.gen_tok_s_b1, 0.5 * tp4.gen_tok_s_b1);
}

TEST(CostModel, AllReduceByTopologyAndSize) {
  ClusterSpec c = *UniformCluster("mac-studio-m3-ultra-512", 4, "10gbe", "cohort");
  EXPECT_EQ(AllReduceSeconds(c, 1, 1e6), 0);
  const double mesh_small = AllReduceSeconds(c, 4, 16e3);
  const double mesh_large = AllReduceSeconds(c, 4, 64e6);
  c.topology = Topology::kRing;
  const double ring_small = AllReduceSeconds(c, 4, 16e3);
  const double ring_large = AllReduceSeconds(c, 4, 64e6);
  c.topology = Topology::kChain;
  const double chain_small = AllReduceSeconds(c, 4, 16e3);
  EXPECT_LT(mesh_small, ring_small);   // one exchange instead of 6 ring steps
  EXPECT_LT(ring_small, chain_small);  // whole vectors per step on a chain
  EXPECT_NEAR(mesh_large, ring_large, 1e-9);  // large messages: the ring wins on a mesh too
  // Ring: 2 (n-1) / n of the data crosses each link: 96 MB at 1.175 GB/s.
  EXPECT_NEAR(ring_large, 2.0 * 3 / 4 * 64e6 / (9.4e9 / 8), 0.01);
}

TEST(CostModel, ExpertsAndBatching) {
  EXPECT_NEAR(DistinctExperts(128, 8, 1), 8, 1e-9);
  EXPECT_GT(DistinctExperts(128, 8, 64), 120);
  EXPECT_EQ(DistinctExperts(0, 0, 8), 0);
  ClusterSpec c = *UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-rdma", "cohort");
  const Prediction cols = PredictWith("qwen3-235b-a22b", "q8_0", c, LayoutSpec::Tensor(4));
  LayoutSpec ep = LayoutSpec::Tensor(4);
  ep.expert_split = ExpertSplit::kWhole;
  const Prediction whole = PredictWith("qwen3-235b-a22b", "q8_0", c, ep);
  // At batch 1 eight active experts land unevenly on 4 ranks; column slices stay balanced.
  EXPECT_GT(cols.gen_tok_s_b1, whole.gen_tok_s_b1);
  EXPECT_NEAR(cols.max_memory_bytes(), whole.max_memory_bytes(), 0.01 * cols.max_memory_bytes());
  // Batching reads each weight once for many tokens.
  EXPECT_GT(cols.gen_tok_s_batch, 1.5 * cols.gen_tok_s_b1);
  EXPECT_GT(cols.prompt_tok_s, cols.gen_tok_s_b1);
  EXPECT_GT(cols.ttft_s, 512 / cols.prompt_tok_s * 0.99);
}

TEST(CostModel, MemoryPerNodeAndErrors) {
  ClusterSpec c = *UniformCluster("mac-studio-m3-ultra-512", 2, "tb5-rdma", "cohort");
  const Prediction p = PredictWith("llama-3.1-405b", "f16", c, LayoutSpec::TensorWeighted({3, 1}));
  ASSERT_EQ(p.ranks.size(), 2u);
  EXPECT_NEAR(p.ranks[0].weight_bytes / p.ranks[1].weight_bytes, 3.0, 0.05);
  EXPECT_NEAR(p.ranks[0].weight_bytes + p.ranks[1].weight_bytes,
              ModelBytes(*FindBuiltinShape("llama-3.1-405b"), *FindBuiltinQuant("f16")), 1e6);
  EXPECT_FALSE(p.fits);  // 3/4 of 812 GB exceeds one 512 GB node
  EXPECT_FALSE(p.ranks[0].fits());
  EXPECT_TRUE(p.ranks[1].fits());
  // More ranks than nodes, or a plan the model cannot have: a clear Status.
  auto bad = Predict(*FindBuiltinShape("llama-3.1-70b"), *FindBuiltinQuant("q8_0"), c,
                     Layout{"tp3", LayoutSpec::Tensor(3), {}}, Workload{});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  Workload w;
  w.batch = 0;
  EXPECT_FALSE(Predict(*FindBuiltinShape("llama-3.1-70b"), *FindBuiltinQuant("q8_0"), c,
                       Layout{"tp2", LayoutSpec::Tensor(2), {}}, w).ok());
}

// A hybrid model's per-sequence recurrent state is charged to memory even with no context, and a
// pipeline stage holds its share of it.
TEST(CostModel, HybridCountsTheRecurrentState) {
  Workload w;
  w.batch = 4;
  w.context_tokens = 0;
  const ModelShape m = *FindBuiltinShape("qwen3.5-397b-a17b");
  const double state = 4.0 * m.RecurrentStateElements() * 4.0;
  ASSERT_GT(state, 0);
  const Prediction one = PredictWith("qwen3.5-397b-a17b", "q4_k_m", IdealLinkCluster(1), LayoutSpec::Tensor(1), w);
  EXPECT_NEAR(one.ranks[0].kv_bytes, state, 1e-6 * state);
  const Prediction pp2 = PredictWith("qwen3.5-397b-a17b", "q4_k_m", IdealLinkCluster(2), LayoutSpec::Pipeline(2), w);
  EXPECT_NEAR(pp2.ranks[0].kv_bytes + pp2.ranks[1].kv_bytes, state, 1e-6 * state);
  // A dense transformer has none.
  const Prediction llama = PredictWith("llama-3.1-70b", "q8_0", IdealLinkCluster(1), LayoutSpec::Tensor(1), w);
  EXPECT_EQ(llama.ranks[0].kv_bytes, 0);
}

}  // namespace
}  // namespace cohort::plan
