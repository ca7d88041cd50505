// ForwardRequest; see proxy.h. The upstream request runs on a thread of its own that hands
// what it receives to the client's handler through a Relay, so the status line is chosen only
// once the upstream's is known, and an event stream is passed on as it arrives. The Relay
// owns that thread: when the client's side lets go of it (answered, or gone), the upstream
// request is stopped and the thread joined. While it waits, the client's side asks the
// membership whether the upstream is still there, so a node cut off the network fails the
// request within the suspect timeout, not the read timeout.
#include "server/proxy.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/relay_channel.h"

namespace cohort::server {
namespace {

constexpr const char* kJson = "application/json";

// What the upstream thread received so far, shared with the client's handler.
struct Relay {
  std::mutex mutex;
  std::condition_variable changed;
  bool headers = false;      // status and content type are known
  int status = 0;
  std::string content_type;
  std::deque<std::string> chunks;
  bool done = false;         // the upstream request ended
  std::string error;         // why it ended early ("" when it completed)
  bool abandoned = false;    // the client went away: stop reading upstream
  std::chrono::steady_clock::time_point last_heard = std::chrono::steady_clock::now();
  std::shared_ptr<httplib::ClientImpl> client;  // while the upstream request runs (to stop it)
  std::thread upstream;      // runs the upstream request; joined by the destructor

  ~Relay();
};

// Ends the upstream request: the client left, or the upstream is given up on.
void Abandon(Relay& relay, std::unique_lock<std::mutex>& lock) {
  relay.abandoned = true;
  std::shared_ptr<httplib::ClientImpl> client = relay.client;
  lock.unlock();
  if (client != nullptr) client->stop();  // wakes a read blocked on a silent socket
  lock.lock();
}

Relay::~Relay() {
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (!done) Abandon(*this, lock);
  }
  if (upstream.joinable()) upstream.join();
}

// Waits with `lock` until `ready`, or until the upstream is given up on: the membership says
// it is suspect or dead AND nothing came from it for options.quiet_ms (bytes arriving mean it
// is alive, whatever its heartbeats say). Returns why it was given up on, or "".
template <typename Ready>
std::string WaitUpstream(Relay& relay, std::unique_lock<std::mutex>& lock, const ProxyOptions& options,
                         Ready ready) {
  if (!options.upstream_lost) {
    relay.changed.wait(lock, ready);
    return "";
  }
  const auto poll = std::chrono::milliseconds(std::max(options.poll_ms, 10));
  const auto quiet = std::chrono::milliseconds(options.quiet_ms);
  while (!relay.changed.wait_for(lock, poll, ready)) {
    if (std::chrono::steady_clock::now() - relay.last_heard < quiet) continue;
    lock.unlock();
    std::string why = options.upstream_lost();  // takes the node's lock: not under ours
    lock.lock();
    if (ready()) return "";
    if (!why.empty() && std::chrono::steady_clock::now() - relay.last_heard >= quiet) return why;
  }
  return "";
}

std::string ErrorBody(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr},
                                   {"code", "unavailable"}}}}
      .dump();
}

// "the instance's coordinator HOST:PORT went away: why"
std::string Why(const std::string& upstream, const char* what, const std::string& why) {
  std::string text = "the instance's coordinator ";
  text += upstream;
  text += ' ';
  text += what;
  text += ": ";
  text += why;
  return text;
}

void RunUpstream(Relay* relay, const std::string& upstream, httplib::Request up, int read_timeout_s,
                 std::optional<comm::ChannelKey> key) {
  std::shared_ptr<httplib::ClientImpl> client = MakeRelayClient(upstream, key);
  client->set_url_encode(false);  // the target is relayed as it came, already encoded
  client->set_connection_timeout(3, 0);
  client->set_read_timeout(read_timeout_s, 0);
  client->set_write_timeout(10, 0);
  {
    std::lock_guard<std::mutex> lock(relay->mutex);
    if (relay->abandoned) {
      relay->done = true;
      return;
    }
    relay->client = client;
  }
  up.response_handler = [relay](const httplib::Response& r) {
    std::lock_guard<std::mutex> lock(relay->mutex);
    relay->last_heard = std::chrono::steady_clock::now();
    relay->status = r.status;
    relay->content_type = r.get_header_value("Content-Type");
    relay->headers = true;
    relay->changed.notify_all();
    return true;
  };
  up.content_receiver = [relay](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(relay->mutex);
    if (relay->abandoned) return false;
    relay->last_heard = std::chrono::steady_clock::now();
    relay->chunks.emplace_back(data, n);
    relay->changed.notify_all();
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client->send(up, response, error);
  std::lock_guard<std::mutex> lock(relay->mutex);
  relay->client.reset();
  relay->done = true;
  if (!ok) relay->error = httplib::to_string(error);
  relay->changed.notify_all();
}

// The request exactly as the client sent it: its target (path and query) byte for byte, and
// its body raw. Not req.params: cpp-httplib parses a form-encoded body (what `curl -d` sends)
// into params as well, and re-sending those as a query string made a request line the
// upstream refused once the body held a '?'.
httplib::Request UpstreamRequest(const httplib::Request& req) {
  httplib::Request up;
  up.method = req.method;
  up.path = req.target.empty() ? req.path : req.target;
  for (const char* name : {"Authorization", "x-api-key", "anthropic-version", "Content-Type", "Accept"}) {
    if (req.has_header(name)) up.headers.emplace(name, req.get_header_value(name));
  }
  up.headers.emplace(kRelayedHeader, "1");
  up.body = req.body;
  return up;
}

// Answers passed on piece by piece as they arrive: server-sent events (OpenAI, Anthropic, the
// Responses API) and newline-delimited JSON (Ollama's streams).
bool IsStream(const std::string& content_type) {
  return content_type.rfind("text/event-stream", 0) == 0 || content_type.rfind("application/x-ndjson", 0) == 0;
}

// Streams what the upstream sends on to the client as it arrives.
void RelayStream(std::shared_ptr<Relay> relay, const std::string& upstream, const ProxyOptions& options,
                 httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  const std::string content_type = relay->content_type;
  const bool sse = content_type.rfind("text/event-stream", 0) == 0;
  res.set_chunked_content_provider(
      content_type,
      [relay, upstream, options, sse](size_t, httplib::DataSink& sink) {
        std::deque<std::string> chunks;
        bool done = false;
        std::string error;
        {
          std::unique_lock<std::mutex> l(relay->mutex);
          error = WaitUpstream(*relay, l, options, [&] { return relay->done || !relay->chunks.empty(); });
          if (!error.empty()) {
            Abandon(*relay, l);
            done = true;
          } else {
            chunks.swap(relay->chunks);
            done = relay->done;
            error = relay->error;
          }
        }
        for (const std::string& c : chunks) {
          if (!sink.write(c.data(), c.size())) {
            std::unique_lock<std::mutex> l(relay->mutex);
            Abandon(*relay, l);
            return false;
          }
        }
        if (!done) return true;
        if (!error.empty()) {
          // The upstream went away mid-stream: say so in the stream, then end it.
          std::string event = sse ? "data: " : "";
          event += ErrorBody(Why(upstream, "went away", error));
          event += sse ? "\n\n" : "\n";
          sink.write(event.data(), event.size());
        }
        sink.done();
        return true;
      },
      [relay](bool) {
        std::unique_lock<std::mutex> l(relay->mutex);
        if (!relay->done) Abandon(*relay, l);
      });
}

}  // namespace

void ForwardRequest(const std::string& upstream, const httplib::Request& req, httplib::Response& res,
                    const ProxyOptions& options) {
  auto relay = std::make_shared<Relay>();
  relay->upstream =
      std::thread(RunUpstream, relay.get(), upstream, UpstreamRequest(req), options.read_timeout_s, options.key);

  std::unique_lock<std::mutex> lock(relay->mutex);
  std::string lost = WaitUpstream(*relay, lock, options, [&] { return relay->headers || relay->done; });
  if (!lost.empty() || !relay->headers) {
    if (!lost.empty()) Abandon(*relay, lock);
    res.status = 503;
    res.set_content(ErrorBody(lost.empty() ? Why(upstream, "cannot be reached", relay->error)
                                           : Why(upstream, "went away", lost)),
                    kJson);
    return;
  }
  if (relay->status != 200 || !IsStream(relay->content_type)) {
    lost = WaitUpstream(*relay, lock, options, [&] { return relay->done; });
    if (!lost.empty()) Abandon(*relay, lock);
    if (!lost.empty() || !relay->error.empty()) {
      res.status = 503;
      res.set_content(ErrorBody(Why(upstream, "went away", lost.empty() ? relay->error : lost)), kJson);
      return;
    }
    std::string body;
    for (const std::string& c : relay->chunks) body += c;
    res.status = relay->status;
    res.set_content(body, relay->content_type.empty() ? kJson : relay->content_type);
    return;
  }
  lock.unlock();
  RelayStream(std::move(relay), upstream, options, res);
}

}  // namespace cohort::server
