// ShardByteRanges and range-list helpers; see shard_bytes.h.
#include "parallel/shard_bytes.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "core/dtype.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "parallel/model_plan.h"

namespace cohort::parallel {

std::vector<ByteRange> MergeRanges(std::vector<ByteRange> ranges) {
  std::erase_if(ranges, [](const ByteRange& r) { return r.length == 0; });
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && r.offset <= out.back().end()) {
      out.back().length = std::max(out.back().end(), r.end()) - out.back().offset;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

uint64_t TotalBytes(std::span<const ByteRange> ranges) {
  uint64_t n = 0;
  for (const ByteRange& r : ranges) n += r.length;
  return n;
}

bool Covers(std::span<const ByteRange> have, std::span<const ByteRange> need) {
  for (const ByteRange& r : need) {
    if (r.length == 0) continue;
    // The last range of `have` starting at or before r.offset must reach r's end.
    auto it = std::upper_bound(have.begin(), have.end(), r.offset,
                               [](uint64_t off, const ByteRange& h) { return off < h.offset; });
    if (it == have.begin()) return false;
    --it;
    if (it->end() < r.end()) return false;
  }
  return true;
}

Sha256Digest RangesDigest(std::span<const ByteRange> ranges) {
  std::vector<uint8_t> bytes;
  bytes.reserve(ranges.size() * 16);
  for (const ByteRange& r : ranges) {
    for (uint64_t v : {r.offset, r.length}) {
      for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
  return Sha256Of(bytes);
}

namespace {

// What a rank reads of one tensor: nothing, all of it, a run of rows, or a run of columns of
// every row (rows and columns of the ggml layout: a row is ne[0] contiguous values).
enum class Take { kNone, kWhole, kRows, kColumns };
struct TensorTake {
  Take take = Take::kWhole;
  int64_t begin = 0;
  int64_t end = 0;
};

// "blk.<layer>.<rest>" -> layer and rest; -1 for tensors outside the blocks.
int LayerOf(std::string_view name, std::string_view* rest) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  name.remove_prefix(kPrefix.size());
  int layer = -1;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), layer);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return -1;
  *rest = std::string_view(ptr + 1, name.data() + name.size() - (ptr + 1));
  return layer;
}

TensorTake RowsOrNone(int64_t begin, int64_t end) {
  if (begin >= end) return {Take::kNone};
  return {Take::kRows, begin, end};
}

// The per-layer rules: Decoder::CopyFfnSlices, CopyShardWeights' attention output columns and
// GqaModel::CopyAttentionRows.
TensorTake LayerTake(std::string_view rest, const model::ModelConfig& c,
                     const model::LayerShard& l) {
  const bool mla = c.arch == model::Arch::kDeepseek2;
  if (!mla) {
    const int64_t hd = c.head_dim_k;
    const int group = c.n_head / c.n_head_kv;
    const int64_t kv0 = l.heads.begin / group * hd;
    const int64_t kv1 = (l.heads.end + group - 1) / group * hd;
    // Qwen3.5's gated attention: [q_h, gate_h] rows per head. (Its DeltaNet layers' tensors
    // are read whole: a rank's rows of them are not one run.)
    const bool gated = c.arch == model::Arch::kQwen35 || c.arch == model::Arch::kQwen35Moe;
    const int64_t q_rows = gated ? 2 * hd : hd;
    if (rest == "attn_q.weight") return {Take::kRows, l.heads.begin * q_rows, l.heads.end * q_rows};
    if (rest == "attn_k.weight" || rest == "attn_v.weight") return {Take::kRows, kv0, kv1};
  }
  if (rest == "attn_output.weight") {
    const int64_t hd = mla ? c.mla.v_head_dim : c.head_dim_k;
    return {Take::kColumns, l.heads.begin * hd, l.heads.end * hd};
  }
  if (rest == "ffn_gate.weight" || rest == "ffn_up.weight") {
    return RowsOrNone(l.ffn_cols.begin, l.ffn_cols.end);
  }
  if (rest == "ffn_down.weight") return {Take::kColumns, l.ffn_cols.begin, l.ffn_cols.end};
  const int64_t n_ff = c.moe.n_ff_expert;
  if (rest == "ffn_gate_exps.weight" || rest == "ffn_up_exps.weight") {
    return RowsOrNone(l.experts.begin * n_ff, l.experts.end * n_ff);
  }
  if (rest == "ffn_down_exps.weight") {
    return RowsOrNone(l.experts.begin * int64_t{c.n_embd}, l.experts.end * int64_t{c.n_embd});
  }
  if (rest == "ffn_gate_shexp.weight" || rest == "ffn_up_shexp.weight") {
    return RowsOrNone(l.shared_cols.begin, l.shared_cols.end);
  }
  if (rest == "ffn_down_shexp.weight") {
    return {Take::kColumns, l.shared_cols.begin, l.shared_cols.end};
  }
  return {Take::kWhole};  // norms, biases, routers, MLA projections, anything new
}

void AppendTake(const gguf::File& file, const gguf::TensorInfo& t, const TensorTake& take,
                std::vector<ByteRange>* out) {
  const uint64_t base = file.data_offset() + t.offset;
  const int64_t rows = t.n_rows();
  const uint64_t row_bytes = rows > 0 ? t.n_bytes / static_cast<uint64_t>(rows) : 0;
  switch (take.take) {
    case Take::kNone:
      return;
    case Take::kWhole:
      out->push_back({base, t.n_bytes});
      return;
    case Take::kRows: {
      const int64_t b = std::clamp<int64_t>(take.begin, 0, rows);
      const int64_t e = std::clamp<int64_t>(take.end, b, rows);
      out->push_back({base + b * row_bytes, static_cast<uint64_t>(e - b) * row_bytes});
      return;
    }
    case Take::kColumns: {
      if (take.begin >= take.end) return;
      if (take.begin == 0 && take.end >= t.ne[0]) {
        out->push_back({base, t.n_bytes});
        return;
      }
      const auto front = static_cast<uint64_t>(RowBytes(t.type, take.begin));
      const auto slice = static_cast<uint64_t>(RowBytes(t.type, take.end - take.begin));
      for (int64_t r = 0; r < rows; ++r) out->push_back({base + r * row_bytes + front, slice});
      return;
    }
  }
}

}  // namespace

Result<std::vector<ByteRange>> ShardByteRanges(const gguf::File& file, const plan::ShardPlan& plan,
                                               int rank) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig c, model::ModelConfig::FromGguf(file));
  COHORT_ASSIGN_OR_RETURN(model::StageShard stage, StageShardOf(plan, rank));
  const plan::RankShard& me = plan.Rank(rank);
  const bool tied = file.FindTensor("output.weight") == nullptr;
  std::vector<ByteRange> out;
  out.push_back({0, file.data_offset()});  // magic, metadata and tensor infos
  for (const gguf::TensorInfo& t : file.tensors()) {
    std::string_view rest;
    const int layer = LayerOf(t.name, &rest);
    TensorTake take{Take::kWhole};
    if (layer >= 0) {
      take = layer >= stage.layer_begin && layer < stage.layer_end ? LayerTake(rest, c, stage.layer)
                                                                   : TensorTake{Take::kNone};
    } else if (t.name == "token_embd.weight") {
      // The first stage embeds its rows; a tied LM head reads its own rows here too.
      AppendTake(file, t, RowsOrNone(me.embd_rows.begin, me.embd_rows.end), &out);
      if (tied) take = RowsOrNone(me.output_rows.begin, me.output_rows.end);
      else take = {Take::kNone};
    } else if (t.name == "output.weight") {
      take = RowsOrNone(me.output_rows.begin, me.output_rows.end);
    }
    AppendTake(file, t, take, &out);
  }
  return MergeRanges(std::move(out));
}

Status TouchRanges(std::span<const uint8_t> file_bytes, std::span<const ByteRange> ranges,
                   const std::function<void(uint64_t bytes_read, uint64_t bytes_total)>& on_read) {
  constexpr uint64_t kChunk = 1 << 20, kPage = 4096;
  const uint64_t total = TotalBytes(ranges);
  uint64_t done = 0;
  uint8_t sum = 0;  // read through volatile: the compiler must not drop the loads
  for (const ByteRange& r : ranges) {
    if (r.end() > file_bytes.size()) return OutOfRange("a share's range lies beyond the file");
    for (uint64_t at = r.offset; at < r.end();) {
      const uint64_t end = std::min(r.end(), at + kChunk);
      for (uint64_t p = at; p < end; p += kPage) sum ^= *static_cast<const volatile uint8_t*>(&file_bytes[p]);
      done += end - at;
      at = end;
      if (on_read) on_read(done, total);
    }
  }
  if (on_read && total == 0) on_read(0, 0);
  static_cast<void>(sum);
  return Status::Ok();
}

}  // namespace cohort::parallel
