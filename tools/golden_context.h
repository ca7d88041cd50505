// The fixtures' golden settings for llama.cpp contexts, shared by the golden tools of tools/
// (llama_logits.cc, llama_embed.cc): one thread, F32 KV cache, flash attention off, context
// (and batch) 256. A developer header, never part of cohort.
#pragma once

#include <llama.h>

inline llama_context_params GoldenContextParams() {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = 256;
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  return cp;
}
