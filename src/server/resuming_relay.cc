// RelayResumable; see resuming_relay.h. A producer thread runs the attempts (one upstream
// request per placement) and hands the events meant for the client to the client's handler
// through a Resumable, like proxy.cc's Relay: the status line is chosen once the first
// attempt's is known, and the handler pumps events as they come. The producer rewrites each
// chunk so the client sees one response: the first attempt's id throughout, no repeated chat
// role, usage counting every generated token, and no token ids (it keeps those itself). Before
// a resumed attempt's first event it sends an SSE comment (ignored by clients) saying after
// how many tokens, with which tokens, on which epoch and after how long a pause it resumed.
#include "server/resuming_relay.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "server/api_response.h"
#include "server/http_server.h"
#include "server/proxy.h"
#include "server/relay_channel.h"

namespace cohort::server {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// What the producer and the client's handler share.
struct Resumable {
  std::mutex mutex;
  std::condition_variable changed;
  bool headers = false;         // the first attempt's status is known
  int status = 0;
  std::string content_type;
  std::string plain_body;       // a first answer that is not an event stream
  std::deque<std::string> events;  // for the client, in order
  bool done = false;            // nothing more comes
  bool abandoned = false;       // the client went away
  std::shared_ptr<httplib::ClientImpl> client;    // the attempt in flight (to stop it)
  std::function<std::string()> upstream_lost;     // of the attempt in flight (remote only)
  Clock::time_point last_heard = Clock::now();
  std::string cut_why;          // the handler gave up on the attempt in flight
  std::thread producer;         // joined by the destructor

  void Stop(std::unique_lock<std::mutex>& lock) {  // stops the attempt in flight
    std::shared_ptr<httplib::ClientImpl> c = client;
    lock.unlock();
    if (c != nullptr) c->stop();
    lock.lock();
  }
  ~Resumable() {
    {
      std::unique_lock<std::mutex> lock(mutex);
      abandoned = true;
      Stop(lock);
    }
    changed.notify_all();
    if (producer.joinable()) producer.join();
  }
};

// The request as the producer sends it, and what it learnt so far.
struct Progress {
  std::string path;
  json body;
  httplib::Headers headers;
  std::vector<int32_t> tokens;   // generated and relayed to the client
  std::string id;                // the first attempt's response id
  int attempt = 0;
  size_t resumed_at = 0;         // tokens generated before the attempt in flight
  Clock::time_point last_token = Clock::now();
  std::string why_resumed;
  uint64_t epoch = 0;
};

// One attempt's outcome.
struct Attempt {
  int status = 0;
  bool stream = false;
  bool finished = false;   // [DONE] passed
  bool sent = false;       // an event of this attempt reached the client's queue
  json error;              // an error event from the serving node
  std::string buffer;      // a partial SSE event
  std::string body;        // a non-stream answer (resumed attempts)
};

std::string ErrorEventOf(const std::string& message) {
  ApiError e;
  e.http_status = 503;
  e.type = "server_error";
  e.code = "unavailable";
  e.message = message;
  return ErrorEvent(e);
}

// Rewrites one chunk of the attempt in flight for the client; false to drop it.
bool RewriteChunk(Progress& p, json& j) {
  if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
    json& choice = (*c)[0];
    if (auto ids = choice.find("token_ids"); ids != choice.end()) {
      for (const json& t : *ids) {
        if (t.is_number_integer()) p.tokens.push_back(t.get<int32_t>());
      }
      if (!ids->empty()) p.last_token = Clock::now();
      choice.erase(ids);
    }
    if (p.attempt > 0 && choice.contains("delta") && choice["delta"].is_object()) {
      json& delta = choice["delta"];
      if (delta.contains("role")) {  // the resumed response's opening chunk: already sent
        delta.erase("role");
        if (delta.value("content", std::string()).empty() && choice["finish_reason"].is_null()) return false;
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object() && p.resumed_at > 0) {
    const int64_t k = static_cast<int64_t>(p.resumed_at);
    (*u)["completion_tokens"] = u->value("completion_tokens", int64_t{0}) + k;
    (*u)["prompt_tokens"] = u->value("prompt_tokens", int64_t{0}) - k;
  }
  if (j.contains("id")) {
    if (p.id.empty()) p.id = j.value("id", std::string());
    j["id"] = p.id;
  }
  return true;
}

// Handles one SSE event of the attempt in flight (under the Resumable's lock).
void OnEvent(Resumable& r, Progress& p, Attempt& a, const std::string& event) {
  const std::string prefix = "data: ";
  if (event.rfind(prefix, 0) != 0) return;  // comments and other fields: not passed on
  const std::string payload = event.substr(prefix.size());
  const Clock::time_point last_token = p.last_token;  // before this event's tokens move it
  std::string out;
  if (payload == "[DONE]") {
    if (!a.error.is_null()) return;  // the end of a failed response: the error decides
    a.finished = true;
    out = "data: [DONE]\n\n";
  } else {
    json j = json::parse(payload, nullptr, false);
    if (j.is_object() && j.contains("error")) {
      a.error = j;  // decided on when the attempt ends
      return;
    }
    if (j.is_object() && !RewriteChunk(p, j)) return;
    out = prefix + (j.is_discarded() ? payload : j.dump()) + "\n\n";
  }
  if (!a.sent && p.attempt > 0) {
    const json note = {{"after_tokens", p.resumed_at}, {"tokens", std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + static_cast<std::ptrdiff_t>(p.resumed_at))},
                       {"epoch", p.epoch}, {"why", p.why_resumed},
                       {"pause_ms", std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_token).count()}};
    r.events.push_back(": cohort-resumed " + note.dump() + "\n\n");
  }
  a.sent = true;
  r.events.push_back(std::move(out));
}

// Sends the request to `target`'s API once; what came back is in the returned Attempt.
Attempt RunAttempt(Resumable& r, Progress& p, const RouteTarget& target, const ResumeOptions& options) {
  Attempt a;
  std::shared_ptr<httplib::ClientImpl> client = MakeRelayClient(target.api, options.key);
  client->set_connection_timeout(3, 0);
  client->set_read_timeout(options.read_timeout_s, 0);
  client->set_write_timeout(10, 0);
  httplib::Request up;
  up.method = "POST";
  up.path = p.path;
  up.headers = p.headers;
  json body = p.body;
  p.resumed_at = p.tokens.size();
  if (!p.tokens.empty()) body[kResumeField] = {{"tokens", p.tokens}};
  up.body = body.dump();
  up.response_handler = [&](const httplib::Response& resp) {
    std::lock_guard<std::mutex> lock(r.mutex);
    a.status = resp.status;
    a.stream = resp.status == 200 && resp.get_header_value("Content-Type").rfind("text/event-stream", 0) == 0;
    r.last_heard = Clock::now();
    if (p.attempt == 0) {
      r.status = resp.status;
      r.content_type = resp.get_header_value("Content-Type");
      r.headers = true;
      r.changed.notify_all();
    }
    return true;
  };
  up.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.abandoned || !r.cut_why.empty()) return false;
    r.last_heard = Clock::now();
    if (!a.stream) {
      (p.attempt == 0 ? r.plain_body : a.body).append(data, n);
      return true;
    }
    a.buffer.append(data, n);
    for (size_t end; (end = a.buffer.find("\n\n")) != std::string::npos;) {
      OnEvent(r, p, a, a.buffer.substr(0, end));
      a.buffer.erase(0, end + 2);
    }
    r.changed.notify_all();
    return true;
  };
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.abandoned) return a;
    r.client = client;
    r.upstream_lost = target.upstream_lost;
    r.cut_why.clear();
    r.last_heard = Clock::now();
  }
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client->send(up, response, error);
  std::lock_guard<std::mutex> lock(r.mutex);
  r.client.reset();
  r.upstream_lost = nullptr;
  if (!ok && a.error.is_null()) {
    a.error = {{"error", {{"message", r.cut_why.empty() ? httplib::to_string(error) : r.cut_why}, {"type", "server_error"}}}};
  }
  return a;
}

// Waits for the instance's next placement after `failed_epoch`: its route, or why none came.
Result<RouteTarget> NextPlacement(Resumable& r, InstanceRouter& router, const std::string& model,
                                  uint64_t failed_epoch, const ResumeOptions& options) {
  const auto deadline = Clock::now() + std::chrono::seconds(options.resume_wait_s);
  Status last = Unavailable("no placement yet");
  while (Clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      if (r.abandoned) return Cancelled("the client went away");
    }
    Result<RouteTarget> t = router.Route(model);
    if (t.ok() && t->epoch > failed_epoch && !t->api.empty()) return t;
    if (!t.ok()) {
      last = t.status();
      if (NoPlacementComing(last)) return last;
    }
    std::unique_lock<std::mutex> lock(r.mutex);
    r.changed.wait_for(lock, std::chrono::milliseconds(std::max(options.poll_ms, 10)), [&] { return r.abandoned; });
  }
  return Unavailable("the instance was not placed again within " + std::to_string(options.resume_wait_s) +
                     " s: " + last.message());
}

// The error object of an attempt's error event (null when it ended without one).
json ErrorOf(const Attempt& a) {
  if (!a.error.is_object() || !a.error.contains("error") || !a.error["error"].is_object()) return nullptr;
  return a.error["error"];
}

// Whether an attempt broke as a lost node breaks it (the stream cut off, a server error, a
// 5xx answer) rather than with an error the client must see (a 4xx: the request itself).
bool LostNode(const Attempt& a) {
  if (!a.stream) return a.status == 0 || a.status >= 500;
  const json e = ErrorOf(a);
  return e.is_null() || e.value("type", std::string()) == "server_error";
}

std::string WhyBroke(const Attempt& a) {
  if (const json e = ErrorOf(a); !e.is_null()) {
    const json m = e.value("message", json());
    return m.is_string() ? m.get<std::string>() : e.dump();
  }
  if (!a.stream) return "HTTP " + std::to_string(a.status) + (a.body.empty() ? "" : ": " + a.body);
  return "the stream ended early";
}

void Finish(Resumable& r, std::string last_event) {
  std::lock_guard<std::mutex> lock(r.mutex);
  if (!last_event.empty()) r.events.push_back(std::move(last_event));
  r.done = true;
  r.changed.notify_all();
}

void Produce(Resumable* r, InstanceRouter* router, std::string model, Progress p, RouteTarget target,
             ResumeOptions options) {
  for (;; ++p.attempt) {
    p.epoch = target.epoch;
    Attempt a = RunAttempt(*r, p, target, options);
    if (p.attempt == 0 && !a.stream) return Finish(*r, "");  // answered like a relay: status and body
    if (a.finished) return Finish(*r, "");
    {
      std::lock_guard<std::mutex> lock(r->mutex);
      if (r->abandoned) return;
    }
    const std::string why = WhyBroke(a);
    if (!LostNode(a)) return Finish(*r, a.error.is_null() ? ErrorEventOf(why) : "data: " + a.error.dump() + "\n\n");
    if (p.attempt >= options.max_resumes) return Finish(*r, ErrorEventOf("gave up after " + std::to_string(p.attempt) + " resumes: " + why));
    // A 5xx answer instead of a stream (a node whose view of the placement lags) lost
    // nothing at this epoch: the same placement may be tried again, a moment later.
    const uint64_t failed_epoch = a.stream || target.epoch == 0 ? target.epoch : target.epoch - 1;
    if (!a.stream) {
      std::unique_lock<std::mutex> lock(r->mutex);
      r->changed.wait_for(lock, std::chrono::milliseconds(std::max(options.poll_ms, 10)), [&] { return r->abandoned; });
    }
    Result<RouteTarget> next = NextPlacement(*r, *router, model, failed_epoch, options);
    if (!next.ok()) return Finish(*r, ErrorEventOf("lost the instance's node (" + why + ") and cannot resume: " + next.status().message()));
    p.why_resumed = why;
    target = std::move(*next);
  }
}

// Waits with `lock` until `ready`; meanwhile gives up on an attempt whose serving node the
// membership no longer sees alive and that was silent for options.quiet_ms (the producer
// then resumes elsewhere).
template <typename Ready>
void WaitWatching(Resumable& r, std::unique_lock<std::mutex>& lock, const ResumeOptions& options, Ready ready) {
  const auto poll = std::chrono::milliseconds(std::max(options.poll_ms, 10));
  const auto quiet = std::chrono::milliseconds(options.quiet_ms);
  while (!r.changed.wait_for(lock, poll, ready)) {
    if (!r.upstream_lost || !r.cut_why.empty() || Clock::now() - r.last_heard < quiet) continue;
    std::function<std::string()> lost = r.upstream_lost;
    lock.unlock();
    const std::string why = lost();  // takes the node's lock: not under ours
    lock.lock();
    if (!why.empty() && r.upstream_lost && Clock::now() - r.last_heard >= quiet) {
      r.cut_why = why;
      r.Stop(lock);
    }
  }
}

void PumpEvents(std::shared_ptr<Resumable> r, const ResumeOptions& options, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [r, options](size_t, httplib::DataSink& sink) {
        std::deque<std::string> events;
        bool done = false;
        {
          std::unique_lock<std::mutex> lock(r->mutex);
          WaitWatching(*r, lock, options, [&] { return r->done || !r->events.empty(); });
          events.swap(r->events);
          done = r->done;
        }
        for (const std::string& e : events) {
          if (!sink.write(e.data(), e.size())) return false;  // the client left: the release stops it
        }
        if (done) sink.done();
        return true;
      },
      [r](bool) {
        std::unique_lock<std::mutex> lock(r->mutex);
        if (!r->done) {
          r->abandoned = true;
          r->Stop(lock);
          r->changed.notify_all();
        }
      });
}

}  // namespace

Result<std::vector<int32_t>> ResumeTokensOf(const json& body, int32_t n_vocab) {
  std::vector<int32_t> out;
  auto it = body.find(kResumeField);
  if (it == body.end() || it->is_null()) return out;
  if (!it->is_object() || !it->contains("tokens") || !(*it)["tokens"].is_array()) {
    return InvalidArgument(std::string(kResumeField) + ": must be an object with \"tokens\": an array of token ids");
  }
  for (const json& t : (*it)["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      return InvalidArgument(std::string(kResumeField) + ".tokens: " + t.dump() + " is not a token id of this model");
    }
    out.push_back(t.get<int32_t>());
  }
  return out;
}

void RelayResumable(InstanceRouter& router, const std::string& model, const httplib::Request& req,
                    httplib::Response& res, const ResumeOptions& options) {
  Result<RouteTarget> first = router.Route(model);
  if (!first.ok()) return SendStatus(res, first.status());
  Progress p;
  p.path = req.path;
  p.body = json::parse(req.body, nullptr, false);
  for (const char* name : {"Authorization", "Content-Type"}) {
    if (req.has_header(name)) p.headers.emplace(name, req.get_header_value(name));
  }
  p.headers.emplace(kRelayedHeader, "1");
  p.headers.emplace(kTokenIdsHeader, "1");
  auto r = std::make_shared<Resumable>();
  r->producer = std::thread(Produce, r.get(), &router, model, std::move(p), std::move(*first), options);
  std::unique_lock<std::mutex> lock(r->mutex);
  WaitWatching(*r, lock, options, [&] { return r->headers || r->done; });
  if (!r->headers) {  // never reached the serving node
    lock.unlock();
    r.reset();  // joins the producer, which has ended
    return SendStatus(res, Unavailable("the node serving the instance cannot be reached"));
  }
  if (r->status != 200 || r->content_type.rfind("text/event-stream", 0) != 0) {
    WaitWatching(*r, lock, options, [&] { return r->done; });
    res.status = r->status;
    res.set_content(r->plain_body, r->content_type.empty() ? "application/json" : r->content_type);
    return;
  }
  lock.unlock();
  PumpEvents(std::move(r), options, res);
}

}  // namespace cohort::server
