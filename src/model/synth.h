// Synthesize (`cohort synth`): writes a random-weight GGUF of a real model's shape and
// quantization, with the real tokenizer of that model family, for benchmarks and tests at real
// sizes.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "core/thread_pool.h"

namespace cohort::model {

struct SynthOptions {
  std::string arch;         // must match the shape's architecture when given
  std::string shape;        // a name from SynthShapes()
  std::string type = "q4_0";  // f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k q4_k_m
                              // iq1_s iq1_m iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq4_nl iq4_xs tq1_0 tq2_0 mxfp4
  bool pure = false;        // every matrix in `type` (llama-quantize --pure)
  std::string vocab_dir;    // where the vocab-only GGUFs are
  // A GGUF whose tokenizer to take instead of the shape's (a small vocabulary keeps test
  // models' logits small); empty: the shape's own from vocab_dir.
  std::string vocab_file;
  std::string output;
  uint64_t seed = 1;
  int n_layer_override = 0;  // fewer layers, for small test models
  // llama-imatrix's importance matrix (gguf/imatrix.h), for a model of this shape: the matrices
  // it measured whose type's quantizer takes one (kernels::TakesImportance: IQ4_NL, IQ4_XS)
  // are quantized against it, as llama-quantize --imatrix does; empty: none.
  std::string imatrix;
};

Status Synthesize(const SynthOptions& options, ThreadPool* pool);

}  // namespace cohort::model
