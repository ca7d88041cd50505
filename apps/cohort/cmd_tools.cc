// The inspection subcommands: `cohort tokenize`, `cohort logits` and `cohort inspect`.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "core/context.h"
#include "gguf/gguf.h"
#include "model/inspect.h"
#include "model/model.h"
#include "parallel/launch.h"
#include "tokenizer/tokenizer.h"

namespace cohort::app {
namespace {

int Fail(const char* command, const Status& status) {
  std::fprintf(stderr, "cohort %s: %s\n", command, status.ToString().c_str());
  return 1;
}

Result<std::vector<int32_t>> ParseIds(const std::string& text, char separator) {
  std::vector<int32_t> ids;
  std::string item;
  std::istringstream in(text);
  while (separator == ' ' ? static_cast<bool>(in >> item) : static_cast<bool>(std::getline(in, item, separator))) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0' || v < 0 || v > INT32_MAX) {
      return InvalidArgument("'" + item + "' is not a token id");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

}  // namespace

int TokenizeCommand(const CommonOptions& common, const TokenizeOptions& options) {
  auto file = gguf::File::Open(options.model);
  if (!file.ok()) return Fail("tokenize", file.status());
  auto tokenizer = tokenizer::Tokenizer::FromGguf(**file);
  if (!tokenizer.ok()) return Fail("tokenize", tokenizer.status());
  std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());

  if (options.detokenize) {
    auto ids = ParseIds(input, ' ');
    if (!ids.ok()) return Fail("tokenize", ids.status());
    for (int32_t id : *ids) {
      if (id >= (*tokenizer)->n_vocab()) {
        return Fail("tokenize", InvalidArgument(fmt::format("token id {} is outside the vocabulary of {}", id,
                                                            (*tokenizer)->n_vocab())));
      }
    }
    std::string text = (*tokenizer)->Decode(*ids, !options.no_special);
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const bool special = !options.no_special;
  std::vector<int32_t> ids = (*tokenizer)->Encode(input, special, special);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(line), "{}{}", i ? " " : "", ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

int LogitsCommand(const CommonOptions& common, const LogitsOptions& options) {
  auto ids = ParseIds(options.tokens, ',');
  if (!ids.ok()) return Fail("logits", ids.status());
  if (ids->empty()) return Fail("logits", InvalidArgument("--tokens is empty"));
  auto file = gguf::File::Open(options.model);
  if (!file.ok()) return Fail("logits", file.status());
  LocalWorkers spawned;  // declared before the model: reaped after it
  std::unique_ptr<model::Model> owned;
  parallel::DistributedModel* dist = nullptr;  // --workers / --local-ranks (cmd_worker.h)
  if (options.dist.enabled()) {
    DistOptions d = options.dist;
    d.verbose_workers = common.verbose;
    auto started = StartDistributed(d, options.model, **file, common.threads, &spawned);
    if (!started.ok()) return Fail("logits", started.status());
    dist = started->get();
    owned = std::move(*started);
    if (common.verbose) std::fprintf(stderr, "%s", dist->Describe().c_str());
  } else {
    auto loaded = model::Model::Load(**file);
    if (!loaded.ok()) return Fail("logits", loaded.status());
    owned = std::move(*loaded);
  }
  model::Model* model = owned.get();
  const model::ModelConfig& config = model->config();
  for (int32_t id : *ids) {
    if (id >= config.n_vocab) {
      return Fail("logits", InvalidArgument(fmt::format("token id {} is outside the vocabulary of {}", id, config.n_vocab)));
    }
  }
  model::KvCacheOptions kv;
  kv.n_ctx = static_cast<int>(ids->size());
  kv.type = options.kv_type == "f16" ? DType::kF16 : options.kv_type == "q8_0" ? DType::kQ8_0 : DType::kF32;
  auto cache = model->NewKvCache(kv);
  if (!cache.ok()) return Fail("logits", cache.status());

  ThreadPool pool(common.threads);
  Logger log(common.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  Context ctx{&pool, &log};
  const size_t n = ids->size();
  const size_t step = options.n_batch > 0 ? static_cast<size_t>(options.n_batch) : n;
  std::vector<float> logits(n * static_cast<size_t>(config.n_vocab));
  model::Batch batch;
  // --prompt-batch N: the first N ids in one pass, then one id per pass, as llama.cpp's
  // goldens are made (a prompt, then generated tokens).
  const size_t first = options.prompt_batch > 0 ? static_cast<size_t>(options.prompt_batch) : step;
  for (size_t begin = 0; begin < n;) {
    const size_t end = std::min(n, begin + (begin == 0 ? first : options.prompt_batch > 0 ? 1 : step));
    batch.Clear();
    for (size_t i = begin; i < end; ++i) batch.Add((*ids)[i], static_cast<int32_t>(i), 0, true);
    std::span<float> out(logits.data() + begin * config.n_vocab, (end - begin) * config.n_vocab);
    Status status = model->Forward(ctx, batch, **cache, out);
    if (!status.ok()) return Fail("logits", status);
    begin = end;
  }
  if (dist != nullptr && common.verbose) std::fprintf(stderr, "%s", dist->MemoryReport().c_str());
  std::FILE* f = std::fopen(options.output.c_str(), "wb");
  if (f == nullptr) return Fail("logits", IoError("cannot open " + options.output + " for writing"));
  const size_t written = std::fwrite(logits.data(), sizeof(float), logits.size(), f);
  if (std::fclose(f) != 0 || written != logits.size()) {
    return Fail("logits", IoError("short write to " + options.output));
  }
  return 0;
}

int InspectCommand(const CommonOptions& common, const std::string& path, int n_ctx) {
  auto file = gguf::File::Open(path);
  if (!file.ok()) return Fail("inspect", file.status());
  std::fputs(model::DescribeModelFile(**file, n_ctx).c_str(), stdout);
  return 0;
}

}  // namespace cohort::app
