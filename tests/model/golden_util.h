// Helpers for the golden tests: fixture paths, the golden JSON and logits files, and runs of a
// model over a token sequence (one batch, or prompt batch then one token at a time).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/context.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace cohort::model::testing {

inline std::string FixturePath(const std::string& rel) {
  return std::string(COHORT_TEST_DATA) + "/fixtures/" + rel;
}

struct Golden {
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> greedy_ids;
  int n_vocab = 0;
  std::vector<float> logits;  // [n_prompt + n_gen][n_vocab]: prompt rows then gen rows
};

inline std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  EXPECT_TRUE(in.good()) << path;
  const auto size = static_cast<size_t>(in.tellg());
  std::vector<float> v(size / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

inline Golden LoadGolden(const std::string& name) {
  Golden g;
  std::ifstream in(FixturePath("golden/" + name + ".golden.json"));
  EXPECT_TRUE(in.good()) << name;
  const nlohmann::json j = nlohmann::json::parse(in);
  g.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  g.greedy_ids = j.at("greedy_ids").get<std::vector<int32_t>>();
  g.n_vocab = j.at("n_vocab").get<int>();
  g.logits = ReadFloats(FixturePath("golden/" + name + ".logits.f32"));
  const std::vector<float> gen = ReadFloats(FixturePath("golden/" + name + ".gen_logits.f32"));
  EXPECT_EQ(g.logits.size(), g.prompt_ids.size() * g.n_vocab);
  EXPECT_EQ(gen.size(), g.greedy_ids.size() * g.n_vocab);
  g.logits.insert(g.logits.end(), gen.begin(), gen.end());
  return g;
}

struct Loaded {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Model> model;
};

inline Loaded LoadModel(const std::string& name) {
  Loaded l;
  auto file = gguf::File::Open(FixturePath("models/" + name + ".gguf"));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return l;
  l.file = std::move(*file);
  auto model = Model::Load(*l.file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (model.ok()) l.model = std::move(*model);
  return l;
}

// Runs tokens of sequence `seq` from position `pos0` in chunks: the first `first_chunk`
// tokens as one batch, then `chunk` tokens per batch. Returns logits of every token.
inline std::vector<float> RunChunks(Model& model, const Context& ctx, KvCache& cache,
                                    const std::vector<int32_t>& tokens, size_t first_chunk,
                                    size_t chunk, int seq = 0, int pos0 = 0) {
  const int n_vocab = model.config().n_vocab;
  std::vector<float> out(tokens.size() * n_vocab);
  size_t i = 0;
  while (i < tokens.size()) {
    const size_t n = std::min(tokens.size() - i, i == 0 ? first_chunk : chunk);
    Batch b;
    for (size_t j = 0; j < n; ++j) b.Add(tokens[i + j], pos0 + static_cast<int>(i + j), seq, true);
    const Status s = model.Forward(ctx, b, cache, std::span<float>(out.data() + i * n_vocab, n * n_vocab));
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    i += n;
  }
  return out;
}

// Greedy decoding from the prompt for n_gen tokens (ties to the lowest id).
inline std::vector<int32_t> GreedyDecode(Model& model, const Context& ctx, KvCache& cache,
                                         const std::vector<int32_t>& prompt, size_t n_gen) {
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(n_vocab);
  Batch b;
  for (size_t i = 0; i < prompt.size(); ++i) b.Add(prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size());
  std::vector<int32_t> out;
  int pos = static_cast<int>(prompt.size());
  for (size_t k = 0; k < n_gen; ++k) {
    const Status s = model.Forward(ctx, b, cache, logits);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    int32_t best = 0;
    for (int v = 1; v < n_vocab; ++v) {
      if (logits[v] > logits[best]) best = v;
    }
    out.push_back(best);
    b.Clear();
    b.Add(best, pos++, 0, true);
  }
  return out;
}

struct Diff {
  float max_abs = 0.0f;
  int rows_within = 0;  // rows whose max abs diff is <= the row tolerance
  int rows = 0;
  int first_row_over = -1;  // first row over the row tolerance, -1 if none
  int argmax_agree = 0;     // rows whose argmax equals the golden row's
  float max_before_first_over = 0.0f;
};

inline Diff Compare(const std::vector<float>& got, const std::vector<float>& want, int n_vocab,
                    float row_tol) {
  Diff d;
  EXPECT_EQ(got.size(), want.size());
  d.rows = static_cast<int>(want.size() / n_vocab);
  for (int r = 0; r < d.rows; ++r) {
    float row_max = 0.0f;
    for (int v = 0; v < n_vocab; ++v) {
      const float e = std::fabs(got[r * n_vocab + v] - want[r * n_vocab + v]);
      row_max = std::isnan(e) ? INFINITY : std::max(row_max, e);
    }
    d.max_abs = std::max(d.max_abs, row_max);
    const float* g = got.data() + static_cast<size_t>(r) * n_vocab;
    const float* w = want.data() + static_cast<size_t>(r) * n_vocab;
    d.argmax_agree += std::max_element(g, g + n_vocab) - g == std::max_element(w, w + n_vocab) - w;
    if (row_max <= row_tol && d.first_row_over < 0) {
      d.max_before_first_over = std::max(d.max_before_first_over, row_max);
    }
    d.rows_within += row_max <= row_tol;
    if (row_max > row_tol && d.first_row_over < 0) d.first_row_over = r;
  }
  return d;
}

// Test-name suffix for a fixture-parameterised suite: "tiny-llama-f32" -> "tiny_llama_f32".
inline std::string FixtureParamName(const ::testing::TestParamInfo<const char*>& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace cohort::model::testing
