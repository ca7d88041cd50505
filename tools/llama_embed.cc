// Reference embeddings from llama.cpp, for making golden files (a developer tool, never linked
// into cohort). Built against a llama.cpp build by tools/make-embedding-goldens.sh.
//
//   llama_embed MODEL IDS POOLING OUT.f32
//
// Decodes IDS (comma-separated) as one batch of one sequence with embeddings on and pooling
// POOLING (mean, cls or last), with the fixtures' golden settings: one thread, F32 KV cache,
// flash attention off, context 256. Writes the sequence's pooled embedding, not normalized:
// float32 LE [n_embd].
#include <llama.h>

#include "golden_context.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL IDS mean|cls|last OUT.f32\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> ids;
  std::stringstream list(argv[2]);
  for (std::string item; std::getline(list, item, ',');) ids.push_back(std::atoi(item.c_str()));
  const std::string pooling = argv[3];
  enum llama_pooling_type type = LLAMA_POOLING_TYPE_MEAN;
  if (pooling == "cls") {
    type = LLAMA_POOLING_TYPE_CLS;
  } else if (pooling == "last") {
    type = LLAMA_POOLING_TYPE_LAST;
  } else if (pooling != "mean") {
    return 2;
  }
  if (ids.empty() || ids.size() > 256) return 2;

  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (model == nullptr) return 1;
  llama_context_params cp = GoldenContextParams();
  cp.embeddings = true;
  cp.pooling_type = type;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) return 1;
  const int n_embd = llama_model_n_embd(model);

  llama_batch batch = llama_batch_init(static_cast<int>(ids.size()), 0, 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int k = batch.n_tokens++;
    batch.token[k] = ids[i];
    batch.pos[k] = static_cast<llama_pos>(i);
    batch.n_seq_id[k] = 1;
    batch.seq_id[k][0] = 0;
    batch.logits[k] = 1;
  }
  if (llama_decode(ctx, batch) != 0) return 1;
  const float* embd = llama_get_embeddings_seq(ctx, 0);
  if (embd == nullptr) return 1;

  std::FILE* f = std::fopen(argv[4], "wb");
  if (f == nullptr || std::fwrite(embd, sizeof(float), n_embd, f) != static_cast<size_t>(n_embd)) return 1;
  std::fclose(f);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
