// MlaAttention; see mla_attention.h.
#include "model/mla_attention.h"

#include <cstring>

#include "core/check.h"
#include "kernels/matmul.h"
#include "model/attention_core.h"

namespace cohort::model {
namespace {

// q [n_tokens][n_q][dk] for the local heads, roped in its last qk_rope_dim values.
void ProjectQuery(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, HeadRange heads,
                  const float* x, MlaScratch& s) {
  const int64_t dk = p.qk_nope_dim + p.qk_rope_dim;
  const int64_t q0 = heads.begin * dk;
  const int64_t q1 = heads.end * dk;
  const int n = env.n_tokens;
  s.q.resize(n * (q1 - q0));
  if (p.q_lora_rank > 0) {
    s.q_lora.resize(static_cast<size_t>(n) * p.q_lora_rank);
    kernels::MatMul(w.q_a, x, n, s.q_lora.data(), env.pool, env.matmul_scratch);
    for (int t = 0; t < n; ++t) {
      float* row = s.q_lora.data() + static_cast<size_t>(t) * p.q_lora_rank;
      kernels::RmsNorm(row, w.q_a_norm, p.q_lora_rank, p.rms_eps, row);
    }
    kernels::MatMul(w.q_b.Rows(q0, q1), s.q_lora.data(), n, s.q.data(), env.pool, env.matmul_scratch);
  } else {
    kernels::MatMul(w.wq.Rows(q0, q1), x, n, s.q.data(), env.pool, env.matmul_scratch);
  }
  for (int t = 0; t < n; ++t) {
    kernels::Rope(p.rope, env.positions[t], s.q.data() + t * (q1 - q0) + p.qk_nope_dim,
                  heads.size(), dk, s.rope_cache.data());
  }
}

// The cache rows [c ; k_pe] of the batch, written to the cache.
void ProjectLatent(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, int layer,
                   const float* x, KvCache& cache, MlaScratch& s) {
  const int64_t width = p.kv_lora_rank + p.qk_rope_dim;
  s.kv.resize(env.n_tokens * width);
  kernels::MatMul(w.kv_a_mqa, x, env.n_tokens, s.kv.data(), env.pool, env.matmul_scratch);
  for (int t = 0; t < env.n_tokens; ++t) {
    float* row = s.kv.data() + t * width;
    kernels::RmsNorm(row, w.kv_a_norm, p.kv_lora_rank, p.rms_eps, row);
    kernels::Rope(p.rope, env.positions[t], row + p.kv_lora_rank, 1, p.qk_rope_dim,
                  s.rope_cache.data());
    cache.Store(layer, env.seq_ids[t], env.positions[t], row, nullptr);
  }
}

// q_full[t][h] = [k_b[h] q_nope[t][h] ; q_pe[t][h]]: each head's query in latent space.
void AbsorbQuery(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, HeadRange heads,
                 MlaScratch& s) {
  const int n = env.n_tokens;
  const int64_t dk = p.qk_nope_dim + p.qk_rope_dim;
  const int64_t dl = p.kv_lora_rank + p.qk_rope_dim;
  s.q_nope.resize(static_cast<size_t>(n) * p.qk_nope_dim);
  s.q_abs.resize(static_cast<size_t>(n) * p.kv_lora_rank);
  s.q_full.resize(static_cast<size_t>(n) * heads.size() * dl);
  for (int h = 0; h < heads.size(); ++h) {
    const int head = heads.begin + h;
    for (int t = 0; t < n; ++t) {
      std::memcpy(s.q_nope.data() + static_cast<size_t>(t) * p.qk_nope_dim,
                  s.q.data() + (static_cast<size_t>(t) * heads.size() + h) * dk,
                  p.qk_nope_dim * sizeof(float));
    }
    kernels::MatMul(w.k_b.Rows(static_cast<int64_t>(head) * p.kv_lora_rank,
                               static_cast<int64_t>(head + 1) * p.kv_lora_rank),
                    s.q_nope.data(), n, s.q_abs.data(), env.pool, env.matmul_scratch);
    for (int t = 0; t < n; ++t) {
      float* dst = s.q_full.data() + (static_cast<size_t>(t) * heads.size() + h) * dl;
      std::memcpy(dst, s.q_abs.data() + static_cast<size_t>(t) * p.kv_lora_rank,
                  p.kv_lora_rank * sizeof(float));
      std::memcpy(dst + p.kv_lora_rank,
                  s.q.data() + (static_cast<size_t>(t) * heads.size() + h) * dk + p.qk_nope_dim,
                  p.qk_rope_dim * sizeof(float));
    }
  }
}

// attn[t][h] = v_b[h] latent[t][h]: each head's value from its latent attention output.
void ExpandValues(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, HeadRange heads,
                  MlaScratch& s) {
  const int n = env.n_tokens;
  const int64_t attn_width = static_cast<int64_t>(heads.size()) * p.v_head_dim;
  s.latent_h.resize(static_cast<size_t>(n) * p.kv_lora_rank);
  s.v_h.resize(static_cast<size_t>(n) * p.v_head_dim);
  s.attn.resize(static_cast<size_t>(n) * attn_width);
  for (int h = 0; h < heads.size(); ++h) {
    const int head = heads.begin + h;
    for (int t = 0; t < n; ++t) {
      std::memcpy(s.latent_h.data() + static_cast<size_t>(t) * p.kv_lora_rank,
                  s.latent.data() + (static_cast<size_t>(t) * heads.size() + h) * p.kv_lora_rank,
                  p.kv_lora_rank * sizeof(float));
    }
    kernels::MatMul(w.v_b.Rows(static_cast<int64_t>(head) * p.v_head_dim,
                               static_cast<int64_t>(head + 1) * p.v_head_dim),
                    s.latent_h.data(), n, s.v_h.data(), env.pool, env.matmul_scratch);
    for (int t = 0; t < n; ++t) {
      std::memcpy(s.attn.data() + t * attn_width + h * p.v_head_dim,
                  s.v_h.data() + static_cast<size_t>(t) * p.v_head_dim, p.v_head_dim * sizeof(float));
    }
  }
}

}  // namespace

void MlaAttention(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, HeadRange heads,
                  int layer, const float* x, KvCache& cache, MlaScratch& s, float* out) {
  COHORT_CHECK(heads.begin >= 0 && heads.begin < heads.end && heads.end <= p.n_head);
  const int64_t dl = p.kv_lora_rank + p.qk_rope_dim;
  COHORT_CHECK_EQ(cache.k_width(), dl);
  s.rope_cache.resize(p.rope.n_rot);
  ProjectQuery(env, w, p, heads, x, s);
  ProjectLatent(env, w, p, layer, x, cache, s);
  AbsorbQuery(env, w, p, heads, s);

  const int n_q = heads.size();
  const int n_threads = env.pool != nullptr ? env.pool->size() : 1;
  s.scores.resize(static_cast<size_t>(n_threads) * ScoresStride(cache.n_ctx()));
  s.latent.resize(static_cast<size_t>(env.n_tokens) * n_q * p.kv_lora_rank);
  // One struct captured by reference keeps the pool's std::function allocation-free.
  struct Job {
    const BlockEnv* env;
    const MlaParams* p;
    MlaScratch* s;
    const KvCache* cache;
    int layer, n_q;
    int64_t dl;
  } job{&env, &p, &s, &cache, layer, n_q, dl};
  RunOnPool(env.pool, [&job](int thread, int threads) {
    const int n_ctx = ScoresStride(job.cache->n_ctx());
    const int64_t kv_lora = job.p->kv_lora_rank;
    int64_t begin, end;
    SplitRange(static_cast<int64_t>(job.env->n_tokens) * job.n_q, thread, threads, &begin, &end);
    float* scores = job.s->scores.data() + static_cast<size_t>(thread) * n_ctx;
    for (int64_t i = begin; i < end; ++i) {
      const int t = static_cast<int>(i / job.n_q);
      const int seq = job.env->seq_ids[t];
      // Keys are whole cache rows; values are their latent part.
      const CacheRows rows{job.cache->KRow(job.layer, seq, 0), job.cache->k_row_bytes(), job.cache->type()};
      AttendOne(job.s->q_full.data() + i * job.dl, job.dl, rows, rows, kv_lora,
                job.env->positions[t] + 1, job.p->kq_scale, scores, job.s->latent.data() + i * kv_lora,
                BatchSumOrder(job.env->n_tokens));
    }
  });

  ExpandValues(env, w, p, heads, s);
  const int64_t c0 = static_cast<int64_t>(heads.begin) * p.v_head_dim;
  const int64_t c1 = static_cast<int64_t>(heads.end) * p.v_head_dim;
  kernels::MatMul(ColumnSlice(w.wo, c0, c1), s.attn.data(), env.n_tokens, out, env.pool,
                  env.matmul_scratch);
}

}  // namespace cohort::model
