// Offers one worker job as an attacker would, for attack_netns_test.sh: over the secure
// channel keyed by SECRET ("-": plain, no handshake), a job like session.cc's for rank 1 of a
// tp plan over 2 ranks of MODEL, with `threads` set to THREADS and, for KIND "fill", a model
// path the worker does not have (so it would ask for the share to be streamed: a cache
// fill) or, for KIND "scan", data addresses pointing at SCAN_TARGET once admitted.
// Prints one JSON line — {"stage": "connect"|"reply"|"go", "ok": bool, "error": "..."} — and
// exits 0 when the worker refused the job at some stage, 3 when it accepted it.
//
// usage: cluster_attack_job ADDRESS SECRET MODEL THREADS [job|fill|scan] [SCAN_TARGET]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "comm/secure_channel.h"
#include "gguf/gguf.h"
#include "parallel/control_channel.h"
#include "parallel/file_digest.h"
#include "parallel/model_plan.h"

namespace {

using nlohmann::json;
using namespace cohort;

int Report(const char* stage, bool accepted, const std::string& error) {
  std::printf("%s\n", json{{"stage", stage}, {"ok", accepted}, {"error", error}}.dump().c_str());
  return accepted ? 3 : 0;
}

Result<json> JobOf(const std::string& model, int64_t threads, const std::string& kind) {
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(model));
  COHORT_ASSIGN_OR_RETURN(auto plan, parallel::PlanOfLayout(*file, "tp", 2));
  COHORT_ASSIGN_OR_RETURN(std::string sha, parallel::Sha256OfFile(model));
  const std::string path = kind == "fill" ? "/nonexistent/attack/" + sha + ".gguf" : model;
  return json{{"version", 3}, {"n_ranks", 2}, {"rank", 1}, {"model", path}, {"model_sha256", sha},
              {"model_bytes", file->file_size()}, {"plan", plan.ToJson()}, {"threads", threads},
              {"transport", "tcp"}, {"shm_name", "job-0123456789abcdef"}, {"group_id", 42},
              {"link_latency_us", 0}, {"link_bandwidth", 0}, {"setup_timeout_ms", 5000},
              {"comm_timeout_ms", 5000}, {"idle_timeout_ms", 5000}, {"transfer_timeout_ms", 5000}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s ADDRESS SECRET MODEL THREADS [job|fill|scan] [SCAN_TARGET]\n", argv[0]);
    return 2;
  }
  const std::string address = argv[1], secret = argv[2], model = argv[3];
  const int64_t threads = std::strtoll(argv[4], nullptr, 10);
  const std::string kind = argc > 5 ? argv[5] : "job";
  const std::string scan_target = argc > 6 ? argv[6] : "10.0.0.1:22";
  std::optional<comm::ChannelKey> key;
  if (secret != "-") {
    auto derived = comm::DeriveChannelKey(secret);
    if (!derived.ok()) return Report("connect", false, derived.status().ToString());
    key = *derived;
  }
  auto job = JobOf(model, threads, kind);
  if (!job.ok()) {
    std::fprintf(stderr, "cannot build the job: %s\n", job.status().ToString().c_str());
    return 2;
  }
  auto channel = parallel::ControlChannel::Connect(address, std::chrono::seconds(3), key);
  if (!channel.ok()) return Report("connect", false, channel.status().ToString());
  (void)(*channel)->Send(*job, comm::DeadlineAfter(std::chrono::seconds(2)));
  auto reply = (*channel)->ReceiveAny(comm::DeadlineAfter(std::chrono::seconds(10)));
  if (!reply.ok()) return Report("reply", false, reply.status().ToString());
  if (!reply->value("ok", false)) return Report("reply", false, reply->value("error", reply->dump()));
  if (kind != "scan") return Report("reply", true, "");
  // Admitted: point rank 0 at the scan target, as a coordinator's go message would.
  const std::string own = reply->value("data_address", std::string());
  (void)(*channel)->Send({{"addresses", {scan_target, own}}}, comm::DeadlineAfter(std::chrono::seconds(2)));
  auto answer = (*channel)->ReceiveAny(comm::DeadlineAfter(std::chrono::seconds(10)));
  if (!answer.ok()) return Report("go", false, answer.status().ToString());
  const std::string error = answer->value("error", std::string());
  return Report("go", error.empty(), error.empty() ? answer->dump() : error);
}
