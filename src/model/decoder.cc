// Decoder::Forward and its batch checks; see decoder.h.
#include "model/decoder.h"

#include <string>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/meminfo.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "kernels/quant.h"

namespace cohort::model {

int Batch::n_logits() const {
  int n = 0;
  for (uint8_t w : want_logits) n += w != 0;
  return n;
}

LayerShard FullShard(const ModelConfig& c) {
  LayerShard s;
  s.heads = {0, c.n_head};
  s.ffn_cols = {0, c.n_ff};
  s.experts = {0, c.moe.n_expert};
  s.expert_cols = {0, c.moe.n_ff_expert};
  s.shared_cols = {0, static_cast<int64_t>(c.moe.n_ff_expert) * c.moe.n_expert_shared};
  return s;
}

Decoder::Decoder(ModelConfig config, OutputWeights output)
    : config_(std::move(config)), output_(output) {
  stage_.layer = FullShard(config_);
  stage_.layer_begin = 0;
  stage_.layer_end = config_.n_layer;
}

Status Decoder::SetStageShard(const StageShard& shard) {
  const ModelConfig& c = config_;
  const LayerShard& l = shard.layer;
  if (shard.layer_begin < 0 || shard.layer_begin >= shard.layer_end || shard.layer_end > c.n_layer) {
    return InvalidArgument(fmt::format("stage layers [{}, {}) are not inside [0, {})",
                                       shard.layer_begin, shard.layer_end, c.n_layer));
  }
  if (l.heads.begin < 0 || l.heads.begin >= l.heads.end || l.heads.end > c.n_head) {
    return InvalidArgument(fmt::format("shard heads [{}, {}) are not inside [0, {})",
                                       l.heads.begin, l.heads.end, c.n_head));
  }
  if (l.ffn_cols.begin < 0 || l.ffn_cols.begin > l.ffn_cols.end || l.ffn_cols.end > c.n_ff) {
    return InvalidArgument("shard FFN columns are outside the FFN");
  }
  if (l.experts.begin < 0 || l.experts.begin > l.experts.end || l.experts.end > c.moe.n_expert) {
    return InvalidArgument("shard experts are outside the expert range");
  }
  const ColumnRange all_cols{0, c.moe.n_ff_expert};
  if (l.expert_cols.begin < 0 || l.expert_cols.begin > l.expert_cols.end ||
      l.expert_cols.end > all_cols.end) {
    return InvalidArgument("shard expert columns are outside the experts' columns");
  }
  // A column share holds those columns of every expert (CopyFfnSlices copies them so).
  const bool cols_split = l.expert_cols.begin != 0 || l.expert_cols.end != all_cols.end;
  if (cols_split && (l.experts.begin != 0 || l.experts.end != c.moe.n_expert)) {
    return InvalidArgument("a shard splits the routed experts whole or by columns, not both");
  }
  const int64_t n_shared = static_cast<int64_t>(c.moe.n_ff_expert) * c.moe.n_expert_shared;
  if (l.shared_cols.begin < 0 || l.shared_cols.begin > l.shared_cols.end ||
      l.shared_cols.end > n_shared) {
    return InvalidArgument("shard shared-expert columns are outside the shared experts");
  }
  stage_ = shard;
  return Status::Ok();
}

Result<std::unique_ptr<KvCache>> Decoder::NewKvCache(const KvCacheOptions& options) const {
  KvCacheOptions o = options;
  if (o.n_ctx == 0) o.n_ctx = config_.n_ctx_train;
  COHORT_RETURN_IF_ERROR(o.Validate());
  COHORT_RETURN_IF_ERROR(KvCache::CheckWidths(o, KvKeyWidth(), KvValueWidth()));
  // Attention reads a Q8_0 cache a head at a time, so each head must be whole 32-value blocks.
  if (o.type == DType::kQ8_0 && (config_.head_dim_k % 32 != 0 || config_.head_dim_v % 32 != 0)) {
    return InvalidArgument("kv cache: q8_0 needs heads of whole 32-value blocks; this model's are " +
                           std::to_string(config_.head_dim_k) + " and " + std::to_string(config_.head_dim_v));
  }
  return std::make_unique<KvCache>(o, stage_.layer_end - stage_.layer_begin, KvKeyWidth(),
                                   KvValueWidth());
}

Status Decoder::CheckBatch(const Batch& batch, const KvCache& cache, size_t out_size, int64_t row_width) {
  const size_t n = batch.tokens.size();
  if (n == 0) return InvalidArgument("batch is empty");
  if (batch.positions.size() != n || batch.seq_ids.size() != n || batch.want_logits.size() != n) {
    return InvalidArgument("batch fields have different lengths");
  }
  if (cache.k_width() != KvKeyWidth() || cache.v_width() != KvValueWidth()) {
    return InvalidArgument("kv cache was not made for this model");
  }
  const size_t need = static_cast<size_t>(batch.n_logits()) * row_width;
  if (out_size < need) {
    return InvalidArgument(fmt::format("output buffer holds {} floats, batch needs {}",
                                       out_size, need));
  }
  // Positions must continue each sequence without gaps, so every earlier position a token
  // attends to is in the cache or earlier in this batch.
  std::vector<int>& next = next_pos_;
  next.resize(cache.n_seq());
  for (int s = 0; s < cache.n_seq(); ++s) next[s] = cache.length(s);
  for (size_t i = 0; i < n; ++i) {
    const int32_t token = batch.tokens[i];
    const int32_t seq = batch.seq_ids[i];
    const int32_t pos = batch.positions[i];
    if (token < 0 || token >= config_.n_vocab) {
      return InvalidArgument(fmt::format("batch token {} at index {} is outside the vocabulary "
                                         "[0, {})", token, i, config_.n_vocab));
    }
    if (seq < 0 || seq >= cache.n_seq()) {
      return InvalidArgument(fmt::format("batch seq_id {} is outside the cache's {} slots", seq,
                                         cache.n_seq()));
    }
    if (pos != next[seq]) {
      return InvalidArgument(fmt::format("batch position {} of sequence {} does not continue it "
                                         "(expected {})", pos, seq, next[seq]));
    }
    if (pos >= cache.n_ctx()) {
      return OutOfRange(fmt::format("position {} exceeds the cache's context of {}", pos,
                                    cache.n_ctx()));
    }
    next[seq] = pos + 1;
  }
  return Status::Ok();
}

Status Decoder::CheckStageBatch(const Batch& batch, const KvCache& cache) {
  return CheckBatch(batch, cache, SIZE_MAX, config_.n_vocab);  // no logits buffer to check here
}

void Decoder::EmbedRows(const Batch& batch, int64_t row_begin, int64_t row_end, float* x) {
  const int64_t n_embd = config_.n_embd;
  const TensorView& embd = output_.token_embd;
  for (size_t t = 0; t < batch.size(); ++t) {
    const int32_t token = batch.tokens[t];
    float* row = x + t * n_embd;
    if (token >= row_begin && token < row_end) {
      const uint8_t* stored = embd.row(token);  // checks the token
      if (embd.packed != nullptr) {  // a tied head's packed copy (PackWeights)
        embd_row_.resize(static_cast<size_t>(embd.row_bytes));
        kernels::UnpackRow(embd.type, embd.packed, embd.row_bytes, token, embd_row_.data());
        stored = embd_row_.data();
      }
      kernels::DequantizeRow(embd.type, stored, row, n_embd);
    } else {
      std::memset(row, 0, n_embd * sizeof(float));
    }
  }
}

void Decoder::RunFfn(const BlockEnv& env, int layer, const float* x, float* out) {
  const FfnWeights& ffn = Ffn(layer);
  if (const auto* dense = std::get_if<DenseFfnWeights>(&ffn)) {
    DenseFfn(env.pool, env.matmul_scratch, *dense, shard().ffn_cols, x, env.n_tokens, ffn_scratch_,
             out);
  } else {
    MoeFfn(env.pool, env.matmul_scratch, config_.moe, std::get<MoeWeights>(ffn), shard().experts,
           shard().expert_cols, shard().shared_cols, x, env.n_tokens, config_.n_embd, moe_scratch_,
           out);
  }
}

int Decoder::NormOutputRows(const Batch& batch, const float* x, float* out) {
  const int64_t n_embd = config_.n_embd;
  int n_out = 0;
  for (size_t t = 0; t < batch.size(); ++t) {
    if (batch.want_logits[t] == 0) continue;
    kernels::RmsNorm(x + t * n_embd, output_.output_norm, n_embd, config_.rms_eps, out + n_out * n_embd);
    ++n_out;
  }
  return n_out;
}

void Decoder::HeadRows(const Batch& batch, ThreadPool* pool, const float* x, int64_t row_begin,
                       int64_t row_end, float* logits) {
  head_in_.resize(static_cast<size_t>(batch.n_logits()) * config_.n_embd);
  const int n_out = NormOutputRows(batch, x, head_in_.data());
  if (n_out == 0) return;
  const TensorView head = row_begin == 0 && row_end == config_.n_vocab
                              ? output_.output
                              : output_.output.Rows(row_begin, row_end);
  kernels::MatMul(head, head_in_.data(), n_out, logits, pool, &matmul_scratch_);
}

Status Decoder::CopyFfnSlices(FfnWeights& ffn) {
  const LayerShard& l = stage_.layer;
  if (auto* dense = std::get_if<DenseFfnWeights>(&ffn)) {
    COHORT_RETURN_IF_ERROR(owned_.ShareRows(&dense->gate, l.ffn_cols.begin, l.ffn_cols.end));
    COHORT_RETURN_IF_ERROR(owned_.ShareRows(&dense->up, l.ffn_cols.begin, l.ffn_cols.end));
    return owned_.ShareColumns(&dense->down, l.ffn_cols.begin, l.ffn_cols.end);
  }
  MoeWeights& moe = std::get<MoeWeights>(ffn);
  const int64_t n_ff = config_.moe.n_ff_expert;
  const int64_t n_embd = config_.n_embd;
  if (l.expert_cols.size() == n_ff) {  // whole experts (all of them for a single rank)
    COHORT_RETURN_IF_ERROR(owned_.ShareRows(&moe.gate_exps, l.experts.begin * n_ff, l.experts.end * n_ff));
    COHORT_RETURN_IF_ERROR(owned_.ShareRows(&moe.up_exps, l.experts.begin * n_ff, l.experts.end * n_ff));
    COHORT_RETURN_IF_ERROR(
        owned_.ShareRows(&moe.down_exps, l.experts.begin * n_embd, l.experts.end * n_embd));
  } else {
    // Columns of every expert (SetStageShard checked that experts are all of them): rows
    // [c0, c1) of each expert's n_ff gate and up rows, and columns [c0, c1) of every row of
    // the down projections, whose rows are the experts' n_embd outputs one expert after another.
    const ColumnRange cols = l.expert_cols;
    COHORT_RETURN_IF_ERROR(owned_.ShareStridedRows(&moe.gate_exps, n_ff, cols.begin, cols.end));
    COHORT_RETURN_IF_ERROR(owned_.ShareStridedRows(&moe.up_exps, n_ff, cols.begin, cols.end));
    COHORT_RETURN_IF_ERROR(owned_.ShareColumns(&moe.down_exps, cols.begin, cols.end));
  }
  if (!moe.shared.has_value()) return Status::Ok();
  COHORT_RETURN_IF_ERROR(owned_.ShareRows(&moe.shared->gate, l.shared_cols.begin, l.shared_cols.end));
  COHORT_RETURN_IF_ERROR(owned_.ShareRows(&moe.shared->up, l.shared_cols.begin, l.shared_cols.end));
  return owned_.ShareColumns(&moe.shared->down, l.shared_cols.begin, l.shared_cols.end);
}

Status Decoder::CopyVocabRows(int64_t embd_begin, int64_t embd_end, int64_t out_begin,
                              int64_t out_end) {
  const bool tied = output_.output.data == output_.token_embd.data;
  if (tied && embd_begin == out_begin && embd_end == out_end) {
    COHORT_RETURN_IF_ERROR(owned_.ShareRows(&output_.token_embd, embd_begin, embd_end));
    output_.output = output_.token_embd;
    return Status::Ok();
  }
  const TensorView embd = output_.token_embd;  // the source of a tied head's copy, too
  COHORT_RETURN_IF_ERROR(owned_.ShareRows(&output_.token_embd, embd_begin, embd_end));
  if (tied) output_.output = embd;
  return owned_.ShareRows(&output_.output, out_begin, out_end);
}

Result<int64_t> Decoder::CopyShardWeights(int64_t embd_begin, int64_t embd_end, int64_t out_begin,
                                          int64_t out_end) {
  const ColumnRange attn = AttnOutputColumns();
  for (int layer = stage_.layer_begin; layer < stage_.layer_end; ++layer) {
    if (TensorView* wo = MutableAttnOutput(layer); wo != nullptr) {
      COHORT_RETURN_IF_ERROR(owned_.ShareColumns(wo, attn.begin, attn.end));
    }
    COHORT_RETURN_IF_ERROR(CopyAttentionRows(layer, owned_));
    if (FfnWeights* ffn = MutableFfn(layer); ffn != nullptr) {
      COHORT_RETURN_IF_ERROR(CopyFfnSlices(*ffn));
    }
  }
  COHORT_RETURN_IF_ERROR(CopyVocabRows(embd_begin, embd_end, out_begin, out_end));
  return owned_.bytes();
}

Result<int64_t> Decoder::PackWeights() {
  std::vector<TensorView*> weights;
  auto add = [&](TensorView* w) {
    if (w != nullptr && !w->empty() && w->packed == nullptr && RowBytes(w->type, w->ne[0]) == w->row_bytes) {
      weights.push_back(w);
    }
  };
  for (int layer = stage_.layer_begin; layer < stage_.layer_end; ++layer) {
    for (TensorView* w : MutableAttnInputs(layer)) add(w);
    add(MutableAttnOutput(layer));
    FfnWeights* ffn = MutableFfn(layer);
    if (ffn == nullptr) continue;
    if (auto* dense = std::get_if<DenseFfnWeights>(ffn)) {
      for (TensorView* w : {&dense->gate, &dense->up, &dense->down}) add(w);
    } else if (auto* moe = std::get_if<MoeWeights>(ffn)) {
      for (TensorView* w : {&moe->gate_exps, &moe->up_exps, &moe->down_exps}) add(w);
      if (moe->shared) {
        for (TensorView* w : {&moe->shared->gate, &moe->shared->up, &moe->shared->down}) add(w);
      }
    }
  }
  add(&output_.output);
  const bool tied = output_.output.data == output_.token_embd.data;
  int64_t total = 0;
  for (const TensorView* w : weights) total += w->n_rows() * w->row_bytes;
  // The copies are anonymous memory, all resident, where the mapping's pages are reclaimable
  // and, for a mixture of experts, only the experts used are read at all: a model that would
  // crowd the memory stays mapped as it is. COHORT_NO_PACK (set to anything) keeps every
  // model mapped: for comparisons, or a host whose memory is spoken for.
  if (std::getenv("COHORT_NO_PACK") != nullptr) return int64_t{0};
  double memory = 0, available = 0;
  const bool known = ReadMeminfo(&memory, &available).ok();
  if (total == 0 || (known && static_cast<double>(total) > 0.75 * available)) return int64_t{0};
  // Each copy is cache-line aligned in the arena.
  COHORT_RETURN_IF_ERROR(owned_.ReserveArena(total + 64 * static_cast<int64_t>(weights.size())));
  for (TensorView* w : weights) {
    COHORT_ASSIGN_OR_RETURN(const bool packed, owned_.Pack(*w));
    if (!packed) COHORT_RETURN_IF_ERROR(owned_.Own(*w));
  }
  // A tied head's copy serves the embedding too (packed, EmbedRows unpacks a token's row);
  // read from the mapping, the rows of the tokens that come would be mapped back page by
  // page, with their neighbours (fault-around: +30 MB over a 512-token prompt on the 1B
  // model), a second copy of the same bytes.
  if (tied) {
    output_.token_embd.data = output_.output.data;
    output_.token_embd.packed = output_.output.packed;
  }
  owned_.ReleaseCopiedSources();
  return total;
}

Status Decoder::RunLayers(const Context& ctx, const Batch& batch, KvCache& cache, float* x,
                          PartialSumReducer* reducer) {
  const int n_tokens = static_cast<int>(batch.size());
  const size_t n_act = static_cast<size_t>(n_tokens) * config_.n_embd;
  xn_.resize(n_act);
  block_out_.resize(n_act);
  Status block_error;
  BlockEnv env{ctx.pool, n_tokens, batch.positions.data(), batch.seq_ids.data(), &matmul_scratch_,
               reducer, &block_error};
  const std::span<float> block_out(block_out_.data(), n_act);
  const int64_t n_embd = config_.n_embd;
  for (int layer = stage_.layer_begin; layer < stage_.layer_end; ++layer) {
    for (int t = 0; t < n_tokens; ++t) {
      kernels::RmsNorm(x + t * n_embd, AttnNorm(layer), n_embd, config_.rms_eps, xn_.data() + t * n_embd);
    }
    Attention(env, layer, xn_.data(), cache, block_out_.data());
    COHORT_RETURN_IF_ERROR(block_error);
    if (reducer != nullptr) COHORT_RETURN_IF_ERROR(reducer->Reduce(block_out));
    kernels::Add(block_out_.data(), static_cast<int64_t>(n_act), x);
    for (int t = 0; t < n_tokens; ++t) {
      kernels::RmsNorm(x + t * n_embd, FfnNorm(layer), n_embd, config_.rms_eps, xn_.data() + t * n_embd);
    }
    RunFfn(env, layer, xn_.data(), block_out_.data());
    if (reducer != nullptr) COHORT_RETURN_IF_ERROR(reducer->Reduce(block_out));
    kernels::Add(block_out_.data(), static_cast<int64_t>(n_act), x);
  }
  return Status::Ok();
}

Status Decoder::Forward(const Context& ctx, const Batch& batch, KvCache& cache,
                        std::span<float> logits) {
  COHORT_RETURN_IF_ERROR(CheckBatch(batch, cache, logits.size(), config_.n_vocab));
  COHORT_RETURN_IF_ERROR(RunWhole(ctx, batch, cache));
  HeadRows(batch, ctx.pool, x_.data(), 0, config_.n_vocab, logits.data());
  return Status::Ok();
}

Status Decoder::RunWhole(const Context& ctx, const Batch& batch, KvCache& cache) {
  x_.resize(batch.size() * config_.n_embd);
  EmbedRows(batch, 0, config_.n_vocab, x_.data());
  return RunLayers(ctx, batch, cache, x_.data(), nullptr);
}

Status Decoder::ForwardHidden(const Context& ctx, const Batch& batch, KvCache& cache,
                              std::span<float> hidden) {
  COHORT_RETURN_IF_ERROR(CheckBatch(batch, cache, hidden.size(), config_.n_embd));
  COHORT_RETURN_IF_ERROR(RunWhole(ctx, batch, cache));
  NormOutputRows(batch, x_.data(), hidden.data());
  return Status::Ok();
}

}  // namespace cohort::model
