// Reference logits from llama.cpp, for making golden files (a developer tool, never linked
// into cohort). Built against a llama.cpp build by tools/make-synth-goldens.sh.
//
//   llama_logits MODEL IDS N_PROMPT OUT.f32 [N_GEN] [KV_TYPE] [chunk=N]   (any of them, in any order)
//
// Decodes the first N_PROMPT ids of IDS (comma-separated) as one batch with logits for every
// position, then each remaining id alone (chunk=N: N at a time, the last chunk shorter), with
// the fixtures' golden settings: one thread, F32 KV cache, flash attention off, context 256.
// Writes float32 LE [n_ids][n_vocab].
// With N_GEN, then decodes N_GEN greedy tokens one at a time (the argmax of the last row, a
// tie to the lowest id), appends their rows ([n_ids + N_GEN][n_vocab] in all) and prints
// their ids, comma-separated, on stdout.
// KV_TYPE q8_0 is llama.cpp's -ctk q8_0 -ctv q8_0, which needs flash attention (on then); with
// a quantized cache llama.cpp also rotates q, k and v into a Walsh-Hadamard basis unless
// LLAMA_ATTN_ROT_DISABLE is set (tools/make-kv-q8_0-goldens.sh unsets it).
#include <llama.h>

#include "golden_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 5 || argc > 8) {
    std::fprintf(stderr, "usage: %s MODEL IDS N_PROMPT OUT.f32 [N_GEN] [f32|q8_0] [chunk=N]\n", argv[0]);
    return 2;
  }
  // The optional arguments: a KV type (f32, q8_0), a chunk size and a count of greedy steps.
  std::string kv_type = "f32";
  int n_gen = 0;
  int chunk = 1;
  for (int i = 5; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("chunk=", 0) == 0) {
      chunk = std::atoi(a.c_str() + 6);
      if (chunk < 1) return 2;
    } else if (a == "f32" || a == "q8_0") {
      kv_type = a;
    } else {
      n_gen = std::atoi(argv[i]);
    }
  }
  if (kv_type != "f32" && kv_type != "q8_0") return 2;
  std::vector<llama_token> ids;
  std::stringstream list(argv[2]);
  for (std::string item; std::getline(list, item, ',');) ids.push_back(std::atoi(item.c_str()));
  const int n_prompt = std::atoi(argv[3]);
  if (n_prompt < 1 || n_prompt > static_cast<int>(ids.size())) return 2;

  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  llama_context_params cp = GoldenContextParams();
  if (kv_type == "q8_0") {
    cp.type_k = GGML_TYPE_Q8_0;
    cp.type_v = GGML_TYPE_Q8_0;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  std::vector<float> out;
  llama_batch batch = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  auto run = [&](int begin, int end) {
    batch.n_tokens = 0;
    for (int i = begin; i < end; ++i) {
      const int k = batch.n_tokens++;
      batch.token[k] = ids[i];
      batch.pos[k] = i;
      batch.n_seq_id[k] = 1;
      batch.seq_id[k][0] = 0;
      batch.logits[k] = 1;
    }
    if (llama_decode(ctx, batch) != 0) std::exit(1);
    for (int k = 0; k < end - begin; ++k) {
      const float* row = llama_get_logits_ith(ctx, k);
      out.insert(out.end(), row, row + n_vocab);
    }
  };
  run(0, n_prompt);
  for (int i = n_prompt; i < static_cast<int>(ids.size()); i += chunk) {
    run(i, std::min(i + chunk, static_cast<int>(ids.size())));
  }
  for (int k = 0; k < n_gen; ++k) {
    const float* last = out.data() + out.size() - n_vocab;
    int best = 0;
    for (int v = 1; v < n_vocab; ++v) {
      if (last[v] > last[best]) best = v;
    }
    ids.push_back(best);
    std::printf("%s%d", k == 0 ? "" : ",", best);
    const int i = static_cast<int>(ids.size()) - 1;
    run(i, i + 1);
  }
  if (n_gen > 0) std::printf("\n");

  std::FILE* f = std::fopen(argv[4], "wb");
  if (f == nullptr || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size()) return 1;
  std::fclose(f);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
