// RecurrentState; see recurrent_state.h.
#include "model/recurrent_state.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace cohort::model {

RecurrentState::RecurrentState(int n_layer, int n_seq, int64_t conv_floats, int64_t delta_floats)
    : n_layer_(n_layer), n_seq_(n_seq), conv_floats_(conv_floats), delta_floats_(delta_floats) {
  COHORT_CHECK_GE(n_layer, 0);
  COHORT_CHECK_GT(n_seq, 0);
  COHORT_CHECK_GE(conv_floats, 0);
  COHORT_CHECK_GE(delta_floats, 0);
  const size_t slots = static_cast<size_t>(n_layer) * n_seq;
  conv_.assign(slots * conv_floats, 0.0f);
  delta_.assign(slots * delta_floats, 0.0f);
}

size_t RecurrentState::Index(int layer, int seq) const {
  COHORT_CHECK(layer >= 0 && layer < n_layer_);
  COHORT_CHECK(seq >= 0 && seq < n_seq_);
  return static_cast<size_t>(layer) * n_seq_ + seq;
}

float* RecurrentState::Conv(int layer, int seq) {
  return conv_.data() + Index(layer, seq) * conv_floats_;
}

float* RecurrentState::Delta(int layer, int seq) {
  return delta_.data() + Index(layer, seq) * delta_floats_;
}

void RecurrentState::Reset(int seq) {
  COHORT_CHECK(seq >= 0 && seq < n_seq_);
  for (int l = 0; l < n_layer_; ++l) {
    std::fill_n(Conv(l, seq), conv_floats_, 0.0f);
    std::fill_n(Delta(l, seq), delta_floats_, 0.0f);
  }
}

int64_t RecurrentState::bytes() const {
  return static_cast<int64_t>((conv_.size() + delta_.size()) * sizeof(float));
}

int64_t RecurrentState::SeqBytes() const {
  return static_cast<int64_t>(n_layer_) * (conv_floats_ + delta_floats_) * static_cast<int64_t>(sizeof(float));
}

void RecurrentState::ReadSeq(int seq, uint8_t* dst) const {
  COHORT_CHECK(seq >= 0 && seq < n_seq_);
  for (int l = 0; l < n_layer_; ++l) {
    const size_t i = Index(l, seq);
    std::memcpy(dst, conv_.data() + i * conv_floats_, conv_floats_ * sizeof(float));
    dst += conv_floats_ * sizeof(float);
    std::memcpy(dst, delta_.data() + i * delta_floats_, delta_floats_ * sizeof(float));
    dst += delta_floats_ * sizeof(float);
  }
}

void RecurrentState::WriteSeq(int seq, const uint8_t* src) {
  COHORT_CHECK(seq >= 0 && seq < n_seq_);
  for (int l = 0; l < n_layer_; ++l) {
    std::memcpy(Conv(l, seq), src, conv_floats_ * sizeof(float));
    src += conv_floats_ * sizeof(float);
    std::memcpy(Delta(l, seq), src, delta_floats_ * sizeof(float));
    src += delta_floats_ * sizeof(float);
  }
}

}  // namespace cohort::model
