// InstanceRunner; see cluster_runner.h.
#include "cluster_runner.h"
#include "app_common.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "gguf/gguf.h"
#include "parallel/session.h"
#include "server/http_server.h"
#include "tokenizer/chat_template.h"

namespace cohort::app {
namespace {

constexpr int kDefaultMaxCtx = 4096;

}  // namespace

Result<std::unique_ptr<InstanceRunner>> InstanceRunner::Start(const cluster::Instance& instance,
                                                              const RunnerOptions& options, Logger& log) {
  if (instance.ranks.empty()) return InvalidArgument("instance " + instance.id + " has no ranks");
  std::unique_ptr<InstanceRunner> r(new InstanceRunner());
  r->epoch_ = instance.epoch;
  if (instance.ranks.size() == 1) {
    COHORT_ASSIGN_OR_RETURN(r->file_model_, engine::LoadedModel::Open(instance.model_path));
  } else {
    // Only the header, the tokenizer and rank 0's share: the coordinator does not load the
    // whole model.
    COHORT_ASSIGN_OR_RETURN(r->file_, gguf::File::Open(instance.model_path));
    parallel::SessionOptions s;
    s.model_path = instance.model_path;
    s.model_sha256 = instance.model_sha256;  // known: the coordinator does not hash it again
    s.layout = instance.session_layout;
    s.shares = instance.shares;
    for (size_t i = 1; i < instance.ranks.size(); ++i) s.workers.push_back(instance.ranks[i].worker);
    s.worker_threads = std::max(1, options.worker_threads);
    s.setup_timeout = options.setup_timeout;
    s.comm_timeout = options.comm_timeout;
    s.link.latency_us = options.link_latency_us;
    s.link.bandwidth_bytes_per_s = options.link_bandwidth_Bps;
    COHORT_ASSIGN_OR_RETURN(r->session_, parallel::Session::Start(s, *r->file_));
    COHORT_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::FromGguf(*r->file_));
    std::unique_ptr<tokenizer::ChatTemplate> templ;
    if (auto source = r->file_->GetString("tokenizer.chat_template"); source.ok()) {
      if (auto parsed = tokenizer::ChatTemplate::Parse(std::string(*source)); parsed.ok()) {
        templ = std::make_unique<tokenizer::ChatTemplate>(std::move(*parsed));
      }
    }
    r->dist_model_ = engine::LoadedModel::FromParts(
        nullptr, std::move(tokenizer), std::make_unique<BorrowedModel>(r->session_->executor()),
        std::move(templ));
  }
  COHORT_RETURN_IF_ERROR(r->StartServing(instance, options, log));
  return r;
}

Status InstanceRunner::StartServing(const cluster::Instance& instance, const RunnerOptions& options,
                                    Logger& log) {
  engine::LoadedModel& model = dist_model_ != nullptr ? *dist_model_ : *file_model_;
  if (!options.chat_template.empty()) {
    COHORT_ASSIGN_OR_RETURN(auto parsed, LoadChatTemplate(options.chat_template));
    chat_template_ = std::make_unique<tokenizer::ChatTemplate>(std::move(parsed));
  }
  pool_ = std::make_unique<ThreadPool>(std::max(1, options.threads));
  engine::SchedulerOptions sched;
  sched.n_parallel = options.parallel;
  const int train_ctx = model.config().n_ctx_train;
  sched.n_ctx = options.ctx > 0 ? options.ctx : std::min(train_ctx > 0 ? train_ctx : kDefaultMaxCtx, kDefaultMaxCtx);
  sched.stop_on_forward_error = dist_model_ != nullptr;
  scheduler_ = std::make_unique<engine::Scheduler>(model, Context{pool_.get(), &log}, sched);
  COHORT_RETURN_IF_ERROR(scheduler_->Start());
  server::ServerOptions http = options.http;
  http.host = options.host;
  http.port = 0;
  http.model_name = instance.model;
  const tokenizer::ChatTemplate* templ =
      chat_template_ != nullptr ? chat_template_.get() : model.chat_template();
  server_ = std::make_unique<server::HttpServer>(model, *scheduler_, templ, http, log);
  COHORT_ASSIGN_OR_RETURN(int port, server_->Bind());
  api_ = options.host + ":" + std::to_string(port);
  serve_thread_ = std::thread([this, &log] {
    const Status st = server_->Serve();
    if (!st.ok()) log.Error("instance server: {}", st.ToString());
  });
  return Status::Ok();
}

Status InstanceRunner::failure() const {
  return scheduler_ != nullptr ? scheduler_->failure() : Status::Ok();
}

InstanceRunner::~InstanceRunner() {
  if (server_ != nullptr) server_->Stop();
  if (serve_thread_.joinable()) serve_thread_.join();
  server_.reset();
  if (scheduler_ != nullptr) scheduler_->Stop();
  scheduler_.reset();
  dist_model_.reset();
  session_.reset();  // stops the workers: they free their shards
  file_model_.reset();
  file_.reset();
}

}  // namespace cohort::app
