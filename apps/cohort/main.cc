// cohort command-line entry point: parses the command line with CLI11 and dispatches to the
// subcommands (commands.h; synth is model/synth.h).
#include <CLI/CLI.hpp>

#include <cstdio>

#include "cmd_bench.h"
#include "config_file.h"
#include "cmd_models.h"
#include "cmd_node.h"
#include "cmd_plan.h"
#include "cmd_serve.h"
#include "cmd_worker.h"
#include "commands.h"
#include "core/thread_pool.h"
#include "kernels/quant.h"
#include "model/synth.h"

namespace {

void AddModelOption(CLI::App* cmd, std::string* model) {
  cmd->add_option("-m,--model", *model, "GGUF model file (default: the built-in demo model)");
}

std::string ResolveModel(const std::string& given) {
  return given.empty() ? cohort::app::DefaultModelPath() : given;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cohort::app;
  CLI::App app{"cohort: LLM inference on one machine or a cluster of ordinary ones"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cohort ") + COHORT_VERSION);
  // Every option's default is shown in --help, and subcommands (which inherit both settings)
  // hand the options they do not know to this level: `cohort serve -t 2` works as `cohort
  // -t 2 serve` does.
  app.option_defaults()->always_capture_default();
  app.fallthrough();
  CommonOptions common;
  app.add_option("-t,--threads", common.threads, "worker threads (0: all cores)");
  app.add_flag("-v,--verbose", common.verbose, "log progress to stderr");

  RunOptions run;
  CLI::App* run_cmd = app.add_subcommand("run", "generate text from a prompt, streamed to stdout");
  AddModelOption(run_cmd, &run.model);
  run_cmd->add_option("-p,--prompt", run.prompt, "prompt text");
  run_cmd->add_option("-n,--n-predict", run.n_predict, "tokens to generate")->check(CLI::Range(0, 1 << 20));
  run_cmd->add_option("--temp", run.temperature, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  run_cmd->add_option("--top-k", run.top_k, "top-k (0 = off)")->check(CLI::Range(0, 1 << 30));
  run_cmd->add_option("--top-p", run.top_p, "top-p")->check(CLI::Range(0.0, 1.0));
  run_cmd->add_option("--min-p", run.min_p, "min-p")->check(CLI::Range(0.0, 1.0));
  run_cmd->add_option("--repeat-penalty", run.repeat_penalty, "repetition penalty (1 = off)");
  run_cmd->add_option("--seed", run.seed, "sampling seed")->each([&](const std::string&) { run.seed_set = true; });
  run_cmd->add_flag("--chat", run.chat, "wrap the prompt in the model's chat template");
  run_cmd->add_option("--chat-template", run.chat_template, "template name (llama3, chatml, deepseek3, mistral) or Jinja file");
  run_cmd->add_option("--system", run.system_prompt, "system message for --chat");
  run_cmd->add_option("-c,--ctx", run.n_ctx, "context length (default: the model's)");
  run_cmd->add_option("--kv-type", run.kv_type, "KV cache type: f32, f16 or q8_0")->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  run_cmd->add_option("--stop", run.stop, "stop string (repeatable)");
  AddDistOptions(run_cmd, &run.dist);

  LogitsOptions logits;
  CLI::App* logits_cmd = app.add_subcommand("logits", "teacher-force token ids and write every position's logits");
  AddModelOption(logits_cmd, &logits.model);
  logits_cmd->add_option("--tokens", logits.tokens, "comma-separated token ids")->required();
  logits_cmd->add_option("-o,--output", logits.output, "output file: float32 LE [n_tokens][n_vocab]")->required();
  logits_cmd->add_option("-b,--batch", logits.n_batch, "tokens per forward pass (0 = all at once)");
  logits_cmd->add_option("--prompt-batch", logits.prompt_batch, "the first N tokens in one pass, then one per pass");
  logits_cmd->add_option("--kv-type", logits.kv_type, "KV cache type: f32, f16 or q8_0")->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  AddDistOptions(logits_cmd, &logits.dist);

  TokenizeOptions tok;
  CLI::App* tok_cmd = app.add_subcommand("tokenize", "stdin text -> token ids (or back with --detokenize)");
  AddModelOption(tok_cmd, &tok.model);
  tok_cmd->add_flag("--no-special", tok.no_special, "add no BOS/EOS; special-token text is plain text");
  tok_cmd->add_flag("--detokenize", tok.detokenize, "read ids, print text");

  std::string inspect_model;
  int inspect_ctx = 0;
  CLI::App* inspect_cmd = app.add_subcommand("inspect", "print a GGUF's architecture, tensors and memory needs");
  inspect_cmd->add_option("model", inspect_model, "GGUF file")->required();
  inspect_cmd->add_option("-c,--ctx", inspect_ctx, "context length for the KV-cache estimate (default: the model's)");

  cohort::model::SynthOptions synth;
  CLI::App* synth_cmd = app.add_subcommand("synth", "write a random-weight GGUF of a real model's shape (its text is noise)");
  synth_cmd->add_option("--arch", synth.arch, "architecture (checked against the shape)");
  synth_cmd->add_option("--shape", synth.shape, "llama-3.2-1b, qwen3-0.6b, qwen3-1.7b, qwen3-30b-a3b-mini, deepseek-v3-mini, glm-4.5-air(-mini), minimax-m2(-mini)")->required();
  synth_cmd->add_option("--type", synth.type, "weight type or mixture (q4_0, q8_0, q4_k_m, ...)");
  synth_cmd->add_flag("--pure", synth.pure, "every matrix in --type, as llama-quantize --pure");
  synth_cmd->add_option("--layers", synth.n_layer_override, "fewer layers than the shape (small test models)");
  synth_cmd->add_option("--seed", synth.seed, "random seed");
  synth_cmd->add_option("--vocab-dir", synth.vocab_dir, "folder of llama.cpp vocab-only GGUFs");
  synth_cmd->add_option("--vocab", synth.vocab_file, "a GGUF whose tokenizer to use instead of the shape's");
  synth_cmd->add_option("--imatrix", synth.imatrix,
                        "llama-imatrix's GGUF for this shape: IQ4_NL/IQ4_XS matrices are quantized against it");
  synth_cmd->add_option("-o,--output", synth.output, "output GGUF")->required();

  WorkerOptions worker;
  CLI::App* worker_cmd = AddWorkerCommand(app, &worker);

  PlanOptions plan;
  CLI::App* plan_cmd = AddPlanCommand(app, &plan);

  ServeOptions serve;
  CLI::App* serve_cmd = AddServeCommand(app, &serve);

  BenchOptions bench;
  CLI::App* bench_cmd = AddBenchCommand(app, &bench);

  NodeOptions node;
  CLI::App* node_cmd = AddNodeCommand(app, &node);
  AddConfigFile(&app, {serve_cmd, worker_cmd, node_cmd});

  ManageOptions manage;
  const ManageCommands manage_cmds = AddManageCommands(app, &manage);

  CLI11_PARSE(app, argc, argv);
  // A forced SIMD level this CPU cannot run is a mistake to say, not to run past.
  if (const cohort::Status simd = cohort::kernels::SimdOverrideStatus(); !simd.ok()) {
    std::fprintf(stderr, "cohort: %s\n", simd.message().c_str());
    return 2;
  }
  if (common.threads <= 0) common.threads = DefaultThreads();

  if (*run_cmd) {
    run.model = ResolveModel(run.model);
    return RunCommand(common, run);
  }
  if (*logits_cmd) {
    logits.model = ResolveModel(logits.model);
    return LogitsCommand(common, logits);
  }
  if (*tok_cmd) {
    tok.model = ResolveModel(tok.model);
    return TokenizeCommand(common, tok);
  }
  if (*worker_cmd) return WorkerCommand(worker, common.verbose);
  if (*plan_cmd) return PlanCommand(plan);
  if (*serve_cmd) {
    serve.model = ResolveModel(serve.model);
    serve.threads = common.threads;
    serve.verbose = common.verbose;
    return ServeCommand(serve);
  }
  if (*bench_cmd) return BenchCommand(bench);
  if (manage_cmds.Chosen()) return ManageCommand(manage_cmds, manage);
  if (*node_cmd) { node.verbose = common.verbose; return NodeCommand(node); }
  if (*inspect_cmd) return InspectCommand(common, inspect_model, inspect_ctx);
  if (*synth_cmd) {
    if (synth.vocab_dir.empty()) synth.vocab_dir = std::string(COHORT_SOURCE_DIR) + "/build/external/vocab";
    cohort::ThreadPool pool(common.threads);
    cohort::Status status = cohort::model::Synthesize(synth, &pool);
    if (!status.ok()) {
      std::fprintf(stderr, "cohort synth: %s\n", status.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "cohort synth: wrote %s (random weights: its text is noise)\n", synth.output.c_str());
    return 0;
  }
  return 2;
}
