// ForwardRequest: one node relays an API request to the instance's coordinator; see
// cluster_api.h. The upstream request runs on its own thread and hands what it receives to the
// client's handler through a Relay, so the status line is chosen only once the coordinator's
// is known, and an event stream is passed on as it arrives.
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster_api.h"

namespace cohort::app {
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
};

std::string ErrorBody(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr},
                                   {"code", "unavailable"}}}}
      .dump();
}

void RunUpstream(std::shared_ptr<Relay> relay, std::string upstream, httplib::Request up,
                 int read_timeout_s) {
  httplib::Client client("http://" + upstream);
  client.set_connection_timeout(3, 0);
  client.set_read_timeout(read_timeout_s, 0);
  client.set_write_timeout(10, 0);
  up.response_handler = [relay](const httplib::Response& r) {
    std::lock_guard<std::mutex> lock(relay->mutex);
    relay->status = r.status;
    relay->content_type = r.get_header_value("Content-Type");
    relay->headers = true;
    relay->changed.notify_all();
    return true;
  };
  up.content_receiver = [relay](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(relay->mutex);
    if (relay->abandoned) return false;
    relay->chunks.emplace_back(data, n);
    relay->changed.notify_all();
    return true;
  };
  httplib::Response response;
  httplib::Error error = httplib::Error::Success;
  const bool ok = client.send(up, response, error);
  std::lock_guard<std::mutex> lock(relay->mutex);
  relay->done = true;
  if (!ok) relay->error = httplib::to_string(error);
  relay->changed.notify_all();
}

}  // namespace

void ForwardRequest(const std::string& upstream, const httplib::Request& req, httplib::Response& res,
                    int read_timeout_s) {
  httplib::Request up;
  up.method = req.method;
  up.path = req.path;
  if (!req.params.empty()) {
    up.path.push_back('?');
    up.path.append(httplib::detail::params_to_query_str(req.params));
  }
  for (const char* name : {"Authorization", "Content-Type", "Accept"}) {
    if (req.has_header(name)) up.headers.emplace(name, req.get_header_value(name));
  }
  up.body = req.body;
  auto relay = std::make_shared<Relay>();
  // The thread holds only the relay; a client that leaves early does not wait for it.
  std::thread(RunUpstream, relay, upstream, std::move(up), read_timeout_s).detach();

  std::unique_lock<std::mutex> lock(relay->mutex);
  relay->changed.wait(lock, [&] { return relay->headers || relay->done; });
  if (!relay->headers) {
    res.status = 503;
    res.set_content(ErrorBody("the instance's coordinator " + upstream + " cannot be reached: " + relay->error), kJson);
    return;
  }
  if (relay->status != 200 || relay->content_type.rfind("text/event-stream", 0) != 0) {
    relay->changed.wait(lock, [&] { return relay->done; });
    std::string body;
    for (const std::string& c : relay->chunks) body += c;
    if (!relay->error.empty()) {
      res.status = 503;
      res.set_content(ErrorBody("the instance's coordinator " + upstream + " went away: " + relay->error), kJson);
      return;
    }
    res.status = relay->status;
    res.set_content(body, relay->content_type.empty() ? kJson : relay->content_type);
    return;
  }
  lock.unlock();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [relay, upstream](size_t, httplib::DataSink& sink) {
        std::deque<std::string> chunks;
        bool done = false;
        std::string error;
        {
          std::unique_lock<std::mutex> l(relay->mutex);
          relay->changed.wait(l, [&] { return relay->done || !relay->chunks.empty(); });
          chunks.swap(relay->chunks);
          done = relay->done;
          error = relay->error;
        }
        for (const std::string& c : chunks) {
          if (!sink.write(c.data(), c.size())) {
            std::lock_guard<std::mutex> l(relay->mutex);
            relay->abandoned = true;
            return false;
          }
        }
        if (!done) return true;
        if (!error.empty()) {
          // The coordinator went away mid-stream: say so in the stream, then end it.
          const std::string event =
              "data: " + ErrorBody("the instance's coordinator " + upstream + " went away: " + error) + "\n\n";
          sink.write(event.data(), event.size());
        }
        sink.done();
        return true;
      },
      [relay](bool) {
        std::lock_guard<std::mutex> l(relay->mutex);
        relay->abandoned = true;
      });
}

}  // namespace cohort::app
