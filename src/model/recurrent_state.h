// RecurrentState: the per-sequence memory of a hybrid model's gated DeltaNet layers, kept
// beside the KV cache (KvCache::SetSequenceState) and reset with a slot. Per recurrent layer
// and sequence slot: the short convolution's last conv_kernel - 1 inputs of every channel, and
// the DeltaNet state of every value head, [head_dim (value index)][head_dim (key index)] F32,
// llama.cpp's layout (row j of a head's state holds S[.][j] over the key index). Its size is
// fixed at creation: it does not grow with the context.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace cohort::model {

class RecurrentState final : public SequenceState {
 public:
  // n_layer recurrent layers (those of the stage), n_seq slots; per (layer, slot)
  // conv_floats of convolution state and delta_floats of DeltaNet state.
  RecurrentState(int n_layer, int n_seq, int64_t conv_floats, int64_t delta_floats);

  int n_layer() const { return n_layer_; }
  int n_seq() const { return n_seq_; }
  int64_t conv_floats() const { return conv_floats_; }
  int64_t delta_floats() const { return delta_floats_; }
  // [channels][conv_kernel - 1], oldest input first.
  float* Conv(int layer, int seq);
  // [v_heads][head_dim][head_dim].
  float* Delta(int layer, int seq);

  void Reset(int seq) override;
  int64_t bytes() const override;
  // Per layer: the convolution state, then the DeltaNet state.
  int64_t SeqBytes() const override;
  void ReadSeq(int seq, uint8_t* dst) const override;
  void WriteSeq(int seq, const uint8_t* src) override;

 private:
  size_t Index(int layer, int seq) const;

  int n_layer_;
  int n_seq_;
  int64_t conv_floats_;
  int64_t delta_floats_;
  std::vector<float> conv_;   // [layer][seq][conv_floats]
  std::vector<float> delta_;  // [layer][seq][delta_floats]
};

}  // namespace cohort::model
