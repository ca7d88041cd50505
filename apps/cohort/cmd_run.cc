// `cohort run`: generates text from a prompt on this machine, streaming it to stdout, then
// prints one stats line (prompt and generation tokens/s) to stderr.
#include <fmt/format.h>

#include <cstdio>

#include "commands.h"
#include "app_common.h"
#include "core/context.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/serving.h"
#include "parallel/launch.h"
#include "tokenizer/chat_template.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort run: %s\n", status.ToString().c_str());
  return 1;
}

Result<std::string> RenderPrompt(const engine::LoadedModel& model, const RunOptions& options) {
  std::vector<tokenizer::ChatMessage> messages;
  if (!options.system_prompt.empty()) messages.push_back({"system", options.system_prompt});
  messages.push_back({"user", options.prompt});
  if (options.chat_template.empty()) {
    auto rendered = model.RenderChat(messages);
    if (!rendered.ok()) {
      return rendered.status().Annotate("the model's chat template (choose one with --chat-template)");
    }
    return rendered;
  }
  COHORT_ASSIGN_OR_RETURN(tokenizer::ChatTemplate chat, engine::LoadChatTemplate(options.chat_template));
  return model.RenderChat(messages, true, &chat);
}

}  // namespace

int RunCommand(const CommonOptions& common, const RunOptions& options) {
  // --workers / --local-ranks: the same tokenizer over a model spread across workers.
  LocalWorkers spawned;  // declared first: reaped after the model that uses them
  parallel::DistributedModel* dist = nullptr;
  auto loaded = OpenModel(options.model, options.dist, common.threads, &spawned, &dist);
  if (!loaded.ok()) return Fail(loaded.status());
  if (dist != nullptr && common.verbose) std::fprintf(stderr, "%s", dist->Describe().c_str());
  engine::LoadedModel& model = **loaded;

  engine::GenerateOptions gen;
  gen.max_tokens = options.n_predict;
  gen.sampling.temperature = options.temperature;
  gen.sampling.top_k = options.top_k;
  gen.sampling.top_p = options.top_p;
  gen.sampling.min_p = options.min_p;
  gen.sampling.repeat_penalty = options.repeat_penalty;
  gen.sampling.seed = options.seed_set ? options.seed : std::random_device{}();
  gen.stop = options.stop;
  gen.n_ctx = options.n_ctx;
  gen.kv_type = options.kv_type == "f16" ? DType::kF16 : options.kv_type == "q8_0" ? DType::kQ8_0 : DType::kF32;

  std::string prompt = options.prompt;
  if (options.chat) {
    auto rendered = RenderPrompt(model, options);
    if (!rendered.ok()) return Fail(rendered.status());
    prompt = *rendered;
  } else {
    // Like llama.cpp's CLI and llama2.c, echo a plain prompt so the story reads whole.
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
  }

  ThreadPool pool(common.threads);
  Logger log(common.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  engine::Generator generator(model, Context{&pool, &log});
  // After a bare BOS the first SPM piece carries the word's leading space; with nothing
  // printed before it, drop it as llama2.c's run.c does.
  bool drop_space = options.prompt.empty() && !options.chat;
  auto result = generator.GenerateText(prompt, gen, [&](std::string_view text) {
    if (drop_space && !text.empty()) {
      if (text.front() == ' ') text.remove_prefix(1);
      drop_space = false;
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!result.ok()) return Fail(result.status());

  const engine::GenerateResult& r = *result;
  auto rate = [](int tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  const std::string where =
      dist == nullptr ? fmt::format("{} threads", common.threads)
                      : fmt::format("{} ranks, layout {}", options.dist.mpi ? std::string("mpi")
                                                                           : options.dist.local_ranks > 1
                                                                                 ? std::to_string(options.dist.local_ranks)
                                                                                 : "1+" + options.dist.workers,
                                    options.dist.layout);
  std::fprintf(stderr,
               "[stats] prompt %d tokens %.1f tok/s | generation %d tokens %.1f tok/s | finish %s | %s\n",
               r.prompt_tokens, rate(r.prompt_tokens, r.prompt_seconds), r.completion_tokens,
               rate(r.completion_tokens, r.generation_seconds), engine::FinishReasonName(r.finish_reason),
               where.c_str());
  return 0;
}

}  // namespace cohort::app
