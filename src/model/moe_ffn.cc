// Route and MoeFfn; see moe_ffn.h. Each expert's products run over the tokens routed to it
// (all experts' products in one batched parallel pass), and the weighted outputs are summed
// per token in slot order, as ggml sums the views of its mul_mat_id result.
#include "model/moe_ffn.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "kernels/matmul.h"
#include "kernels/ggml_sums.h"
#include "kernels/ops.h"

namespace cohort::model {
namespace {

// Indices of the k largest values of v[0..n), largest first (ties: lower index first).
void TopK(const float* v, int n, int k, int32_t* out, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [v](int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  std::copy(order.begin(), order.begin() + k, out);
}

// DeepSeek-V3 grouped selection: keep the n_group_used groups whose two best selection
// scores sum highest; the other groups' experts drop out (-inf).
void MaskGroups(const MoeConfig& c, float* sel, std::vector<int32_t>& order) {
  const int per_group = c.n_expert / c.n_group;
  float group_score[256];
  COHORT_CHECK_LE(c.n_group, 256);
  int32_t top[2];
  for (int g = 0; g < c.n_group; ++g) {
    TopK(sel + g * per_group, per_group, 2, top, order);
    group_score[g] = sel[g * per_group + top[0]] + sel[g * per_group + top[1]];
  }
  int32_t keep[256];
  TopK(group_score, c.n_group, c.n_group_used, keep, order);
  bool kept[256] = {};
  for (int i = 0; i < c.n_group_used; ++i) kept[keep[i]] = true;
  for (int g = 0; g < c.n_group; ++g) {
    if (kept[g]) continue;
    for (int i = 0; i < per_group; ++i) sel[g * per_group + i] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace

void Route(const MoeConfig& c, const float* selection_bias, const float* logits, int n_tokens,
           std::vector<float>& work, std::vector<int32_t>& order, Routing& routing) {
  const int n_expert = c.n_expert;
  const int k = c.n_expert_used;
  work.resize(2 * n_expert);
  routing.n_used = k;
  routing.experts.resize(static_cast<size_t>(n_tokens) * k);
  routing.weights.resize(static_cast<size_t>(n_tokens) * k);
  float* probs = work.data();
  float* sel = work.data() + n_expert;
  for (int t = 0; t < n_tokens; ++t) {
    std::memcpy(probs, logits + static_cast<int64_t>(t) * n_expert, n_expert * sizeof(float));
    if (c.gating == ExpertGating::kSoftmax) {
      kernels::Softmax(probs, n_expert);
    } else if (c.gating == ExpertGating::kSoftmaxWeight) {
      // The logits choose; the softmax over the chosen ones weighs (below).
    } else {
      for (int e = 0; e < n_expert; ++e) probs[e] = kernels::Sigmoid(probs[e]);
    }
    for (int e = 0; e < n_expert; ++e) sel[e] = probs[e] + (selection_bias ? selection_bias[e] : 0.0f);
    if (c.n_group > 1) MaskGroups(c, sel, order);
    int32_t* chosen = routing.experts.data() + static_cast<size_t>(t) * k;
    float* weights = routing.weights.data() + static_cast<size_t>(t) * k;
    TopK(sel, n_expert, k, chosen, order);
    // Weights come from the unbiased probabilities.
    for (int i = 0; i < k; ++i) weights[i] = probs[chosen[i]];
    if (c.gating == ExpertGating::kSoftmaxWeight) kernels::Softmax(weights, k);
    if (c.norm_top_k) {
      float sum = 0.0f;
      for (int i = 0; i < k; ++i) sum += weights[i];
      sum = std::max(sum, 6.103515625e-5f);  // ggml clamps at the smallest normal half
      for (int i = 0; i < k; ++i) weights[i] /= sum;
    }
    if (c.weights_scale != 0.0f && c.weights_scale != 1.0f) {
      for (int i = 0; i < k; ++i) weights[i] *= c.weights_scale;
    }
  }
}

void MoeFfn(ThreadPool* pool, std::vector<uint8_t>* matmul_scratch, const MoeConfig& c,
            const MoeWeights& w, ExpertRange experts, ColumnRange expert_cols,
            ColumnRange shared_cols, const float* x, int n_tokens, int n_embd, MoeScratch& s,
            float* out) {
  COHORT_CHECK(0 <= experts.begin && experts.begin <= experts.end && experts.end <= c.n_expert);
  COHORT_CHECK(0 <= expert_cols.begin && expert_cols.begin <= expert_cols.end &&
               expert_cols.end <= c.n_ff_expert);
  const int k = c.n_expert_used;
  const int64_t n_ff_all = c.n_ff_expert;  // each expert's rows in gate_exps and up_exps
  const int64_t n_ff = expert_cols.size();  // the columns computed here
  // A share with no columns evaluates no expert (its routed partial sum is zero).
  if (n_ff == 0) experts.end = experts.begin;
  s.logits.resize(static_cast<size_t>(n_tokens) * c.n_expert);
  kernels::MatMul(w.router, x, n_tokens, s.logits.data(), pool, matmul_scratch);
  if (w.router_bias != nullptr) {
    for (int t = 0; t < n_tokens; ++t) kernels::Add(w.router_bias, c.n_expert, s.logits.data() + static_cast<size_t>(t) * c.n_expert);
  }
  Route(c, w.selection_bias, s.logits.data(), n_tokens, s.route_work, s.route_order, s.routing);

  // The routed (token, slot) pairs grouped by expert, in expert order; each group's
  // inputs gathered into consecutive rows of s.x.
  s.rows.clear();
  s.slots.clear();
  s.groups.clear();
  for (int e = experts.begin; e < experts.end; ++e) {
    const int begin = static_cast<int>(s.rows.size());
    for (int t = 0; t < n_tokens; ++t) {
      for (int i = 0; i < k; ++i) {
        if (s.routing.experts[static_cast<size_t>(t) * k + i] != e) continue;
        s.rows.push_back(t);
        s.slots.push_back(i);
      }
    }
    if (static_cast<int>(s.rows.size()) > begin) s.groups.push_back({e, begin, static_cast<int>(s.rows.size()) - begin});
  }
  const size_t n_routed = s.rows.size();
  s.x.resize(n_routed * n_embd);
  s.gate.resize(n_routed * n_ff);
  s.up.resize(n_routed * n_ff);
  s.y.resize(n_routed * n_embd);
  for (size_t r = 0; r < n_routed; ++r) {
    std::memcpy(s.x.data() + r * n_embd, x + static_cast<size_t>(s.rows[r]) * n_embd, n_embd * sizeof(float));
  }
  // Expert products take each token alone, as llama.cpp's MUL_MAT_ID does; all experts'
  // gate and up products go in one batch (one quantization of each group's input, one
  // parallel pass), then all down products.
  constexpr size_t kGroupsPerBatch = kernels::kMaxMatMulProducts / 2;
  std::array<kernels::MatMulProduct, kernels::kMaxMatMulProducts> products;
  for (size_t g0 = 0; g0 < s.groups.size(); g0 += kGroupsPerBatch) {
    const size_t g1 = std::min(s.groups.size(), g0 + kGroupsPerBatch);
    size_t count = 0;
    for (size_t g = g0; g < g1; ++g) {
      const ExpertGroup& eg = s.groups[g];
      const float* gx = s.x.data() + static_cast<size_t>(eg.begin) * n_embd;
      const int64_t rows_begin = eg.expert * n_ff_all + expert_cols.begin;
      products[count++] = {w.gate_exps.Rows(rows_begin, rows_begin + n_ff), gx, eg.count,
                           s.gate.data() + static_cast<size_t>(eg.begin) * n_ff};
      products[count++] = {w.up_exps.Rows(rows_begin, rows_begin + n_ff), gx, eg.count,
                           s.up.data() + static_cast<size_t>(eg.begin) * n_ff};
    }
    kernels::MatMulExpertsBatch({products.data(), count}, pool, matmul_scratch);
  }
  for (const ExpertGroup& eg : s.groups) {
    const int64_t bias0 = static_cast<int64_t>(eg.expert) * n_ff_all + expert_cols.begin;
    for (int r = eg.begin; r < eg.begin + eg.count; ++r) {
      if (w.gate_bias != nullptr) kernels::Add(w.gate_bias + bias0, n_ff, s.gate.data() + static_cast<size_t>(r) * n_ff);
      if (w.up_bias != nullptr) kernels::Add(w.up_bias + bias0, n_ff, s.up.data() + static_cast<size_t>(r) * n_ff);
    }
  }
  for (size_t r = 0; r < n_routed; ++r) {
    float* g = s.gate.data() + r * n_ff;
    if (c.activation == ExpertActivation::kSwiGluOai) {
      kernels::SwiGluOai(g, s.up.data() + r * n_ff, n_ff, c.oai_alpha, c.oai_limit, g);
    } else {
      kernels::SwiGlu(g, s.up.data() + r * n_ff, n_ff, g);
    }
  }
  // The down projections' columns of this share: the whole rows when it is whole experts.
  const TensorView down =
      s.groups.empty() ? w.down_exps : ColumnSlice(w.down_exps, expert_cols.begin, expert_cols.end);
  for (size_t g0 = 0; g0 < s.groups.size(); g0 += kernels::kMaxMatMulProducts) {
    const size_t g1 = std::min(s.groups.size(), g0 + kernels::kMaxMatMulProducts);
    size_t count = 0;
    for (size_t g = g0; g < g1; ++g) {
      const ExpertGroup& eg = s.groups[g];
      const int64_t rows_begin = static_cast<int64_t>(eg.expert) * n_embd;
      products[count++] = {down.Rows(rows_begin, rows_begin + n_embd),
                           s.gate.data() + static_cast<size_t>(eg.begin) * n_ff, eg.count,
                           s.y.data() + static_cast<size_t>(eg.begin) * n_embd};
    }
    kernels::MatMulExpertsBatch({products.data(), count}, pool, matmul_scratch);
  }
  if (w.down_bias != nullptr && expert_cols.begin == 0) {
    for (const ExpertGroup& eg : s.groups) {
      for (int r = eg.begin; r < eg.begin + eg.count; ++r) {
        kernels::Add(w.down_bias + static_cast<size_t>(eg.expert) * n_embd, n_embd, s.y.data() + static_cast<size_t>(r) * n_embd);
      }
    }
  }
  s.slot_out.assign(static_cast<size_t>(n_tokens) * k * n_embd, 0.0f);
  for (size_t r = 0; r < n_routed; ++r) {
    const size_t slot = static_cast<size_t>(s.rows[r]) * k + s.slots[r];
    float* dst = s.slot_out.data() + slot * n_embd;
    const float weight = s.routing.weights[slot];
    const float* src = s.y.data() + r * n_embd;
    for (int i = 0; i < n_embd; ++i) dst[i] = src[i] * weight;
  }
  std::memset(out, 0, static_cast<size_t>(n_tokens) * n_embd * sizeof(float));
  for (int t = 0; t < n_tokens; ++t) {
    for (int i = 0; i < k; ++i) {
      kernels::Add(s.slot_out.data() + (static_cast<size_t>(t) * k + i) * n_embd, n_embd,
                   out + static_cast<size_t>(t) * n_embd);
    }
  }
  if (w.shared.has_value()) {
    s.shared_out.resize(static_cast<size_t>(n_tokens) * n_embd);
    DenseFfn(pool, matmul_scratch, *w.shared, shared_cols, x, n_tokens, s.shared, s.shared_out.data());
    if (w.shared_gate != nullptr) {
      for (int t = 0; t < n_tokens; ++t) {
        const float gate = kernels::Sigmoid(kernels::DotGgml(w.shared_gate, x + static_cast<size_t>(t) * n_embd, n_embd));
        kernels::Scale(gate, n_embd, s.shared_out.data() + static_cast<size_t>(t) * n_embd);
      }
    }
    kernels::Add(s.shared_out.data(), static_cast<int64_t>(n_tokens) * n_embd, out);
  }
}

}  // namespace cohort::model
