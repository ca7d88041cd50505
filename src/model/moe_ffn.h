// Mixture-of-experts feed-forward block (Qwen3-MoE, DeepSeek-V3, Kimi-K2): router logits,
// softmax or sigmoid gating, optional selection bias (exp_probs_b) and grouped selection,
// top-k, weight normalisation and scale, SiLU-GLU experts, optional shared experts. Routing is
// computed for every expert; only experts in an ExpertRange, and of them only a ColumnRange of
// their intermediate features, are evaluated, so a rank that owns a subset of experts or a
// column share of every expert produces a partial sum.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "model/block_env.h"
#include "model/config.h"
#include "model/dense_ffn.h"

namespace cohort::model {

struct MoeWeights {
  TensorView router;                      // ffn_gate_inp: [n_embd] -> [n_expert]
  const float* selection_bias = nullptr;  // exp_probs_b [n_expert]: affects selection only
  TensorView gate_exps;                   // [n_embd, n_ff_exp, n_expert]
  TensorView up_exps;                     // [n_embd, n_ff_exp, n_expert]
  TensorView down_exps;                   // [n_ff_exp, n_embd, n_expert]
  std::optional<DenseFfnWeights> shared;  // *_shexp, width n_ff_exp * n_expert_shared
  // ffn_gate_inp_shexp [n_embd] (Qwen3.5-MoE): the shared experts' output is scaled per token
  // by sigmoid(shared_gate · x); null: unscaled.
  const float* shared_gate = nullptr;
  // gpt-oss's biases (null when absent). The down bias is added by the share that holds an
  // expert's first column, so column shares still sum to the whole expert.
  const float* router_bias = nullptr;     // ffn_gate_inp.bias [n_expert]
  const float* gate_bias = nullptr;       // ffn_gate_exps.bias [n_expert][n_ff_exp]
  const float* up_bias = nullptr;         // ffn_up_exps.bias [n_expert][n_ff_exp]
  const float* down_bias = nullptr;       // ffn_down_exps.bias [n_expert][n_embd]
};

// The routing decision for one batch: per token, n_used (expert, weight) pairs in rank order.
struct Routing {
  int n_used = 0;
  std::vector<int32_t> experts;  // [n_tokens][n_used]
  std::vector<float> weights;    // [n_tokens][n_used]
};

// Chooses experts for each row of router logits [n_tokens][n_expert], as llama.cpp's
// build_moe_ffn does. `work` and `order` are scratch (2 * n_expert floats, n_expert ints).
void Route(const MoeConfig& c, const float* selection_bias, const float* logits, int n_tokens,
           std::vector<float>& work, std::vector<int32_t>& order, Routing& routing);

// The tokens routed to one expert: rows [begin, begin + count) of MoeScratch's gathered rows.
struct ExpertGroup {
  int expert = 0;
  int begin = 0;
  int count = 0;
};

struct MoeScratch {
  std::vector<float> logits;      // [n_tokens][n_expert]
  std::vector<float> route_work;
  std::vector<int32_t> route_order;
  Routing routing;
  std::vector<int32_t> rows;      // routed tokens, grouped by expert
  std::vector<int32_t> slots;     // their slot index
  std::vector<ExpertGroup> groups;
  std::vector<float> x, gate, up, y;  // gathered rows, grouped by expert (gate, up: the columns)
  std::vector<float> slot_out;    // [n_tokens][n_used][n_embd]
  DenseFfnScratch shared;
  std::vector<float> shared_out;  // [n_tokens][n_embd]
};

// out[n_tokens][n_embd] = sum over the chosen experts in `experts` of w_e * expert_e(x), where
// expert_e keeps only its intermediate columns `expert_cols` (down[:, cols] (silu(gate[cols] x)
// * up[cols] x), as a dense FFN's column share: all of [0, n_ff_expert) for the whole expert),
// plus the shared experts' columns `shared_cols` (ignored when there is no shared expert).
// Every rank routes alike, so column shares of the same experts sum to the whole block.
void MoeFfn(ThreadPool* pool, std::vector<uint8_t>* matmul_scratch, const MoeConfig& c,
            const MoeWeights& w, ExpertRange experts, ColumnRange expert_cols,
            ColumnRange shared_cols, const float* x, int n_tokens, int n_embd, MoeScratch& s,
            float* out);

}  // namespace cohort::model
