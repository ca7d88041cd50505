// Scheduler: continuous batching. One engine thread owns the model and a KV cache with one
// slot per concurrent sequence; every step it runs a single Forward over the next token of
// each decoding sequence plus chunks of newly admitted prompts, then samples each sequence
// with its own Sampler and applies the token through its own SequenceStep (the Generator's
// rules for text, stop strings and limits). Requests join between steps, wait in a
// bounded queue when every slot is busy, and free their slot when they finish or are cancelled.
// A finished request's rows (and a hybrid model's states at block ends) go to the prefix cache
// (prefix_cache.h), and a new request starts from the longest cached prefix of its prompt. Beside decoding sequences a step takes only a
// chunk of a long prompt (chunked prefill), sized so the streams' next token stays prompt.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/context.h"
#include "core/status.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/prefix_cache.h"

namespace cohort::engine {

inline constexpr int64_t kCacheRamAuto = -1;
// The prefix cache's budget when none is given: a quarter of the memory available now
// (MemAvailable), at most 8 GiB (llama-server's --cache-ram default).
int64_t DefaultCacheRam();

struct SchedulerOptions {
  int32_t n_parallel = 4;      // sequence slots: requests generating at the same time
  int32_t n_ctx = 0;           // positions per slot (0: the model's training context)
  int32_t max_queue = 64;      // requests waiting for a slot; Submit fails past this
  int32_t n_batch = 512;       // tokens per Forward (decode tokens first, then prompt chunks); >= n_parallel
  DType kv_type = DType::kF16;
  // Prefix cache (prefix_cache.h): the KV rows of finished requests kept for later requests
  // that start with the same tokens, within this many bytes. kCacheRamAuto: DefaultCacheRam();
  // 0: off. Always off for a model spread over ranks (LoadedModel::in_process).
  int64_t cache_ram_bytes = kCacheRamAuto;
  int32_t cache_block_tokens = 16;  // positions per cached block (a multiple of 4, see scheduler.cc)
  // Chunked prefill: while other sequences decode, a step takes at most this many prompt
  // tokens (0: sized every step from measured step times so that a step costs at most
  // prefill_step_factor times a decode-only step; see scheduler.cc). A prompt alone takes the
  // whole n_batch.
  int32_t prefill_chunk = 0;
  double prefill_step_factor = 2.0;
  // A model spread over processes does not recover from a failed forward (a peer died or
  // its link was cut): when set, the first failure also ends every queued request and
  // refuses new ones (kUnavailable), so nothing waits on a model that can no longer run.
  bool stop_on_forward_error = false;
  Status Validate() const;
};

// One request as the scheduler runs it. Uses options.max_tokens, sampling, stop, ignore_eos
// and top_logprobs; kv_type, n_ctx and n_batch are the scheduler's.
struct ScheduledRequest {
  std::vector<int32_t> prompt;  // token ids, BOS included when wanted
  GenerateOptions options;
};

// What a request produced since the caller last took its output.
struct RequestOutput {
  std::string text;               // final text (UTF-8, never part of a stop string)
  std::vector<int32_t> tokens;    // sampled tokens (an end-of-generation token included)
  std::vector<Logprobs> logprobs; // one per token when top_logprobs >= 0
  bool done = false;
  Status status;                  // when done: Ok, or why the request failed
  FinishReason finish_reason = FinishReason::kLength;
  int stop_index = -1;
  int32_t prompt_tokens = 0;
  int32_t cached_tokens = 0;      // prompt tokens whose rows came from the prefix cache
  int32_t completion_tokens = 0;  // tokens generated so far (all of them once done)

  // Moves `more` after this output.
  void Append(RequestOutput&& more);
};

// The caller's side of a submitted request, shared with the engine thread.
class RequestHandle {
 public:
  // Waits until there is output (or the request is done) and moves it into `out`, replacing
  // its content. False when the timeout passed with nothing new.
  bool Wait(RequestOutput& out, std::chrono::milliseconds timeout);
  // Stops the generation at the next step and frees its slot (a client went away).
  void Cancel();
  bool cancelled() const;

 private:
  friend class Scheduler;
  void Post(RequestOutput&& output);

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  RequestOutput pending_;
  bool has_output_ = false;
  bool cancelled_ = false;
};

// Counters since start (totals) and the current state.
struct SchedulerStats {
  int32_t slots_total = 0;
  int32_t slots_active = 0;
  int32_t queue_depth = 0;
  uint64_t requests_admitted = 0;
  uint64_t requests_finished = 0;   // any end, cancels and failures included
  uint64_t requests_cancelled = 0;
  uint64_t prompt_tokens = 0;       // prompt tokens evaluated
  uint64_t prompt_tokens_cached = 0;  // prompt tokens taken from the prefix cache instead
  // The prefix cache (all 0 when it is off).
  int64_t prefix_cache_bytes = 0;
  int64_t prefix_cache_bytes_max = 0;
  int64_t prefix_cache_blocks = 0;
  uint64_t prefix_cache_lookups = 0;   // admitted requests that looked
  uint64_t prefix_cache_hits = 0;      // ... and found at least one block
  int32_t prefill_chunk = 0;           // prompt tokens per step beside decoding streams, now
  uint64_t completion_tokens = 0;   // tokens sampled
  uint64_t forward_passes = 0;
};

// What GET /slots shows of a slot.
struct SlotInfo {
  int32_t id = 0;
  bool is_processing = false;
  int32_t n_saved = 0;  // tokens whose rows its last request left in the prefix cache
};

class Scheduler {
 public:
  // `model` must outlive the scheduler; ctx.pool is used only by the engine thread.
  Scheduler(LoadedModel& model, const Context& ctx, const SchedulerOptions& options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Allocates the KV cache (n_parallel slots of n_ctx) and starts the engine thread.
  Status Start();
  // Finishes every queued and running request with kUnavailable and joins the thread.
  void Stop();

  // Queues a request. kInvalidArgument for bad options or tokens, kOutOfRange for a prompt
  // that leaves no room in a slot, kResourceExhausted when the queue is full, kUnavailable
  // when stopped. A request with max_tokens 0 is done at once.
  Result<std::shared_ptr<RequestHandle>> Submit(ScheduledRequest request);
  // Queues `requests` together, all or none (the n choices of one API request): one engine
  // step admits every one that finds a free slot, so they generate side by side rather than
  // the first running alone while the others are still being queued. The handles in order.
  Result<std::vector<std::shared_ptr<RequestHandle>>> SubmitAll(std::vector<ScheduledRequest> requests);

  SchedulerStats stats() const;
  // Ok, or why the model failed (set by a failed forward under stop_on_forward_error).
  Status failure() const;
  int32_t n_ctx() const { return n_ctx_; }
  const SchedulerOptions& options() const { return options_; }

  // Slots and their saved prefixes (llama-server's /slots; server/slot_routes.h). A slot's saved
  // prefix is what its last request left in the prefix cache: the chain of blocks of that
  // request's tokens still held. These run on the engine thread between steps and wait for it;
  // kInvalidArgument for a slot id out of range, kUnsupported when the prefix cache is off,
  // kUnavailable when stopped.
  Result<std::vector<SlotInfo>> Slots();
  // Copies of slot id's saved prefix (PrefixCache::Export).
  Result<std::vector<PrefixBlockData>> ExportSlot(int32_t id);
  // Adds `blocks` (checked against prefix_cache()'s sizes) to the prefix cache as slot id's
  // saved prefix; returns the positions held.
  Result<int32_t> ImportSlot(int32_t id, std::vector<PrefixBlockData> blocks);
  // Drops slot id's saved prefix from the prefix cache, but blocks other chains extend; returns
  // the positions it had.
  Result<int32_t> EraseSlot(int32_t id);
  // The embedding of `tokens`, one sequence tokenized as the caller wants it: the model's
  // final hidden states (Model::ForwardHidden) pooled by `pooling` (kMean, kCls or kLast),
  // n_embd floats, not normalized. Runs in a free slot, reserved meanwhile (waiting for one
  // while all are busy), on the engine thread between steps, n_batch tokens at a time, so
  // running streams advance between chunks; one embedding at a time. kInvalidArgument for bad
  // tokens or pooling, kOutOfRange past n_ctx, kUnavailable when stopped.
  Result<std::vector<float>> Embed(std::span<const int32_t> tokens, model::Pooling pooling);

  // The prefix cache (null: off). Off the engine thread only its sizes may be read
  // (block_tokens, block_bytes, state_bytes: fixed at Start).
  const PrefixCache* prefix_cache() const { return prefix_cache_.get(); }

 private:
  struct Slot;
  struct Queued {
    ScheduledRequest request;
    std::shared_ptr<RequestHandle> handle;
  };

  Status CheckRequest(const ScheduledRequest& request) const;
  // Runs `task` on the engine thread between steps and waits for it; kUnavailable when the
  // scheduler is stopped or stops first.
  Status RunOnEngine(std::function<void()> task);
  // The tasks queued so far, on the engine thread.
  void RunTasks();
  // kInvalidArgument unless id names a slot; kUnsupported when the prefix cache is off.
  Status CheckSlotAction(int32_t id) const;
  void Loop();
  // Moves queued requests into free slots; false when stopping.
  bool Admit();
  void StartSlot(Slot& slot, Queued&& queued);
  void BuildBatch();
  void ProcessLogits();
  // Draws the slot's next token (and logprobs) from its row of logits and accepts it into
  // its sampler; touches nothing but the slot, so slots may sample on different threads.
  void SampleSlot(Slot& slot, std::span<const float> logits);
  // The engine thread's part of a step: records the sampled token, emits text, finishes.
  void StepSlot(Slot& slot);
  void FinishSlot(Slot& slot, FinishReason reason, RequestOutput&& out, Status status = {});
  void FailAll(const Status& status);
  // Ends every queued request with `status`.
  void FailQueued(const Status& status);
  // Keeps the slot's rows in the prefix cache (before the slot is reused).
  void SaveSlot(Slot& slot);
  // A model with a recurrent state: where the slot's prompt chunks end so that the prefix
  // cache can keep the state there (scheduler.cc), and after a forward, the states of slots
  // that stand on a block boundary.
  void PlanCheckpoints(Slot& slot);
  void KeepStates();
  // Learns step costs from one forward's time and resizes prefill_chunk_ (adaptive mode).
  void MeasureStep(double seconds, int n_decode, int n_prompt);

  LoadedModel& model_;
  Context ctx_;
  SchedulerOptions options_;
  int32_t n_ctx_ = 0;
  std::unique_ptr<model::KvCache> cache_;
  std::unique_ptr<PrefixCache> prefix_cache_;  // null: off
  int32_t prefill_chunk_ = 0;        // prompt tokens per step beside decoding streams
  double decode_step_s_ = 0.0;       // moving average of decode-only steps (0: none yet)
  double prompt_token_s_ = 0.0;      // moving average of one prompt token's share of a step
  double prompt_alone_s_ = 0.0;      // moving average of a token's share of a prompt-alone step
  int mixed_steps_ = 0;              // steps of streams and prompt chunks since a streams-only one
  int last_decode_ = 0;              // this step's decode rows and prompt tokens
  int last_prompt_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  model::Batch batch_;
  std::vector<float> logits_;  // [n_parallel][n_vocab]
  std::vector<Slot*> sampling_;  // scratch: the slots sampled this step
  std::thread thread_;

  std::mutex embed_mutex_;     // one Embed at a time
  mutable std::mutex mutex_;   // guards queue_, stopping_, stats_
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  std::deque<std::function<void()>> tasks_;  // RunOnEngine's
  bool stopping_ = false;
  bool started_ = false;
  Status failure_;             // the forward failure that stopped the model, if any
  SchedulerStats stats_;
};

}  // namespace cohort::engine
