// GqaAttention; see gqa_attention.h. Projections run over the whole batch at once; attention
// runs per (token, KV head) pair across the thread pool, reading keys/values in place.
#include "model/gqa_attention.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/matmul.h"
#include "model/attention_core.h"
#include "model/decoder.h"

namespace cohort::model {
namespace {

void AddBias(const float* bias, int64_t width, int n_tokens, float* y) {
  if (bias == nullptr) return;
  for (int t = 0; t < n_tokens; ++t) kernels::Add(bias, width, y + t * width);
}

// Per-head RMSNorm (qwen3) then RoPE, for every token's heads.
void NormAndRope(const BlockEnv& env, const GqaParams& p, const float* norm, int n_heads,
                 float* y, std::vector<float>& rope_cache) {
  const int64_t width = static_cast<int64_t>(n_heads) * p.head_dim;
  for (int t = 0; t < env.n_tokens; ++t) {
    float* row = y + t * width;
    if (norm != nullptr) {
      for (int h = 0; h < n_heads; ++h) {
        kernels::RmsNorm(row + h * p.head_dim, norm, p.head_dim, p.rms_eps, row + h * p.head_dim);
      }
    }
    kernels::Rope(p.rope, env.positions[t], row, n_heads, p.head_dim, rope_cache.data());
  }
}

// MiniMax-M2's q and k norms: RMSNorm over each token's whole q row (all n_head heads) and
// whole k row, as llama.cpp's minimax-m2 graph normalises the unsplit projections. A range of
// heads sums its squares and the tensor-parallel group adds them up: the q heads of the
// range, and the KV heads it owns, a KV head shared by ranks that split its group being
// counted by the one holding the group's first query head.
void FullWidthQkNorm(const BlockEnv& env, const GqaWeights& w, const GqaParams& p,
                     HeadRange heads, int kv_begin, int n_kv, GqaScratch& s) {
  const int64_t hd = p.head_dim;
  const int group = p.n_head / p.n_head_kv;
  const int64_t q_width = heads.size() * hd;
  const int64_t kv_width = n_kv * hd;
  const int n_tokens = env.n_tokens;
  const float* qw = w.q_norm_full + heads.begin * hd;
  const float* kw = w.k_norm_full + kv_begin * hd;
  if (heads.begin == 0 && heads.end == p.n_head) {
    for (int t = 0; t < n_tokens; ++t) {
      kernels::RmsNorm(s.q.data() + t * q_width, qw, q_width, p.rms_eps, s.q.data() + t * q_width);
      kernels::RmsNorm(s.k.data() + t * kv_width, kw, kv_width, p.rms_eps, s.k.data() + t * kv_width);
    }
    return;
  }
  const int64_t k_own = (heads.begin % group == 0 ? 0 : 1) * hd;  // first owned k value
  s.norm_sums.resize(2 * static_cast<size_t>(n_tokens));
  for (int t = 0; t < n_tokens; ++t) {
    double sq = 0.0, sk = 0.0;
    const float* q = s.q.data() + t * q_width;
    const float* k = s.k.data() + t * kv_width;
    for (int64_t i = 0; i < q_width; ++i) sq += static_cast<double>(q[i] * q[i]);
    for (int64_t i = k_own; i < kv_width; ++i) sk += static_cast<double>(k[i] * k[i]);
    s.norm_sums[2 * t] = static_cast<float>(sq);
    s.norm_sums[2 * t + 1] = static_cast<float>(sk);
  }
  COHORT_CHECK(env.reducer != nullptr && env.error != nullptr);
  *env.error = env.reducer->Reduce(s.norm_sums);
  if (!env.error->ok()) return;
  auto scale_row = [&](float* y, const float* gain, int64_t n, float sum, int64_t n_all) {
    const float mean = sum / static_cast<float>(n_all);
    const float scale = 1.0f / std::sqrt(mean + p.rms_eps);
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * scale * gain[i];
  };
  for (int t = 0; t < n_tokens; ++t) {
    scale_row(s.q.data() + t * q_width, qw, q_width, s.norm_sums[2 * t], int64_t{p.n_head} * hd);
    scale_row(s.k.data() + t * kv_width, kw, kv_width, s.norm_sums[2 * t + 1], int64_t{p.n_head_kv} * hd);
  }
}

}  // namespace

void GqaAttention(const BlockEnv& env, const GqaWeights& w, const GqaParams& p, HeadRange heads,
                  int layer, const float* x, KvCache& cache, GqaScratch& s, float* out) {
  const int group = p.n_head / p.n_head_kv;
  COHORT_CHECK(heads.begin >= 0 && heads.end <= p.n_head && heads.size() > 0);
  // A range may cover part of a KV-head group (tensor-parallel ranks that outnumber the KV
  // heads share one): it then holds every KV head its query heads touch.
  const int kv_begin = heads.begin / group;
  const int kv_end = (heads.end + group - 1) / group;
  const int n_q = heads.size();
  const int n_kv = kv_end - kv_begin;
  const int q_offset = heads.begin - kv_begin * group;  // local query head 0's place in its group
  const int64_t hd = p.head_dim;
  const int64_t q_width = n_q * hd;
  const int64_t kv_width = n_kv * hd;
  COHORT_CHECK_EQ(cache.k_width(), kv_width);
  COHORT_CHECK_EQ(cache.v_width(), kv_width);
  COHORT_CHECK(cache.type() != DType::kQ8_0 || hd % 32 == 0);  // a head is whole Q8_0 blocks
  const int n_tokens = env.n_tokens;

  s.q.resize(n_tokens * q_width);
  s.k.resize(n_tokens * kv_width);
  s.v.resize(n_tokens * kv_width);
  s.attn.resize(n_tokens * q_width);
  s.rope_cache.resize(p.rope.n_rot);
  const int64_t q0 = heads.begin * hd;
  const int64_t kv0 = kv_begin * hd;
  const kernels::MatMulProduct qkv[] = {{w.wq.Rows(q0, q0 + q_width), x, n_tokens, s.q.data()},
                                        {w.wk.Rows(kv0, kv0 + kv_width), x, n_tokens, s.k.data()},
                                        {w.wv.Rows(kv0, kv0 + kv_width), x, n_tokens, s.v.data()}};
  kernels::MatMulBatch(qkv, env.pool, env.matmul_scratch);
  AddBias(w.bq ? w.bq + q0 : nullptr, q_width, n_tokens, s.q.data());
  AddBias(w.bk ? w.bk + kv0 : nullptr, kv_width, n_tokens, s.k.data());
  AddBias(w.bv ? w.bv + kv0 : nullptr, kv_width, n_tokens, s.v.data());
  if (w.q_norm_full != nullptr) {
    FullWidthQkNorm(env, w, p, heads, kv_begin, n_kv, s);
    if (env.error != nullptr && !env.error->ok()) return;
  }
  NormAndRope(env, p, w.q_norm, n_q, s.q.data(), s.rope_cache);
  NormAndRope(env, p, w.k_norm, n_kv, s.k.data(), s.rope_cache);
  // A quantized cache holds keys and values in llama.cpp's rotated basis (attention_core.h).
  const KvRotation rot = KvRotationFor(cache.type(), hd, hd);
  RotateHadamard(s.q.data(), n_tokens * q_width, rot.k);
  RotateHadamard(s.k.data(), n_tokens * kv_width, rot.k);
  RotateHadamard(s.v.data(), n_tokens * kv_width, rot.v);

  // Append the whole batch first: a token then sees earlier tokens of its own sequence in the
  // batch through the cache, masked causally by position.
  for (int t = 0; t < n_tokens; ++t) {
    cache.Store(layer, env.seq_ids[t], env.positions[t], s.k.data() + t * kv_width,
                s.v.data() + t * kv_width);
  }

  // The loop's state travels as one struct so the pool's std::function stores the lambda
  // inline (no allocation per call).
  struct Job {
    const BlockEnv* env;
    const GqaParams* p;
    GqaScratch* s;
    const KvCache* cache;
    const float* sinks;  // of the local query heads, or null
    int layer, group, n_q, q_offset;
    int64_t q_width, kv_width;
  } job{&env, &p, &s, &cache, w.sinks != nullptr ? w.sinks + heads.begin : nullptr, layer, group, n_q, q_offset,
        q_width, kv_width};
  const int n_threads = env.pool != nullptr ? env.pool->size() : 1;
  // Work items are (token, KV head) pairs, each attending all the group's query heads at once
  // (their keys and values read once), unless that leaves too few items to share among the
  // threads (a token alone with one or two KV heads): then (token, query head) pairs.
  const bool by_group = static_cast<int64_t>(n_tokens) * n_kv >= 4 * n_threads;
  const int per_token = by_group ? n_kv : n_q;
  s.scores.resize(static_cast<size_t>(n_threads) * (by_group ? group : 1) * ScoresStride(cache.n_ctx()));
  RunOnPool(env.pool, [&job, by_group, per_token](int thread, int threads) {
    const int64_t hd = job.p->head_dim;
    const int n_ctx = ScoresStride(job.cache->n_ctx());
    int64_t begin, end;
    SplitRange(static_cast<int64_t>(job.env->n_tokens) * per_token, thread, threads, &begin, &end);
    float* scores = job.s->scores.data() + static_cast<size_t>(thread) * (by_group ? job.group : 1) * n_ctx;
    for (int64_t i = begin; i < end; ++i) {
      const int t = static_cast<int>(i / per_token);
      // Local KV head g and the local query heads [h0, h1) that read it.
      int g, h0, h1;
      if (by_group) {
        g = static_cast<int>(i % per_token);
        h0 = std::max(0, g * job.group - job.q_offset);
        h1 = std::min(job.n_q, (g + 1) * job.group - job.q_offset);
      } else {
        h0 = static_cast<int>(i % per_token);
        h1 = h0 + 1;
        g = (h0 + job.q_offset) / job.group;
      }
      const int seq = job.env->seq_ids[t];
      const int pos = job.env->positions[t];
      AttendMask mask;
      if (job.p->n_swa > 0) mask.first_pos = std::max(0, pos - job.p->n_swa + 1);
      if (job.sinks != nullptr) mask.sinks = job.sinks + h0;
      // Rows of kv_width elements in the cache's type; head g starts g * hd elements in
      // (whole blocks for a Q8_0 cache: hd is a multiple of 32 there).
      const int64_t stride = job.cache->k_row_bytes();
      const int64_t head = job.cache->ElementsBytes(g * hd);
      const CacheRows k{job.cache->KRow(job.layer, seq, 0) + head, stride, job.cache->type()};
      const CacheRows v{job.cache->VRow(job.layer, seq, 0) + head, stride, job.cache->type()};
      AttendHeads(job.s->q.data() + t * job.q_width + h0 * hd, hd, h1 - h0, hd, k, v, hd,
                  pos + 1, job.p->kq_scale, scores,
                  job.s->attn.data() + t * job.q_width + h0 * hd, hd, BatchSumOrder(job.env->n_tokens), mask);
    }
  });

  RotateHadamard(s.attn.data(), n_tokens * q_width, rot.v);  // back from the rotated value basis
  kernels::MatMul(ColumnSlice(w.wo, q0, q0 + q_width), s.attn.data(), n_tokens, out, env.pool,
                  env.matmul_scratch);
  if (heads.begin == 0) AddBias(w.bo, p.n_embd, n_tokens, out);
}

}  // namespace cohort::model
