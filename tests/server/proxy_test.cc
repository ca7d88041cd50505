// ForwardRequest (src/server/proxy.cc) against a fake coordinator over loopback: a
// coordinator the membership gives up on ends a forwarded stream with an SSE error event, or a
// plain request with a 503, long before the read timeout; one whose bytes keep arriving is
// never cut off however suspect its heartbeats look, and one the membership sees alive may be
// silent for as long as the read timeout allows.
#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/proxy.h"

namespace cohort::server {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

class ForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The coordinator: /stream sends `chunks_` events `gap_ms_` apart, then hangs while
    // `hang_` (a cut link sends nothing); /plain answers after `plain_ms_`.
    upstream_.Post("/stream", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < chunks_; ++i) {
          const std::string event = "data: {\"n\":" + std::to_string(i) + "}\n\n";
          if (!sink.write(event.data(), event.size())) return false;
          Sleep(gap_ms_);
        }
        sent_ = true;
        while (hang_ && !release_) Sleep(10);
        sink.done();
        return true;
      });
    });
    upstream_.Post("/plain", [this](const httplib::Request&, httplib::Response& res) {
      const auto start = Clock::now();
      while (MsSince(start) < plain_ms_ && !release_) Sleep(10);
      res.set_content("{\"ok\":true}", "application/json");
    });
    // /echo answers with what it was sent: the request target, content type and raw body.
    upstream_.Post("/echo", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(req.target + "\n" + req.get_header_value("Content-Type") + "\n" + req.body, "text/plain");
    });
    // /ndjson streams newline-delimited JSON, as Ollama's routes do.
    upstream_.Post("/ndjson", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/x-ndjson", [this](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < chunks_; ++i) {
          const std::string line = "{\"n\":" + std::to_string(i) + "}\n";
          if (!sink.write(line.data(), line.size())) return false;
          Sleep(gap_ms_);
        }
        sink.done();
        return true;
      });
    });
    up_port_ = upstream_.bind_to_any_port("127.0.0.1");
    up_thread_ = std::thread([this] { upstream_.listen_after_bind(); });
    // The forwarding node.
    auto forward = [this](const httplib::Request& req, httplib::Response& res) {
      ForwardRequest("127.0.0.1:" + std::to_string(up_port_), req, res, options_);
    };
    front_.Post("/stream", forward);
    front_.Post("/plain", forward);
    front_.Post("/echo", forward);
    front_.Post("/ndjson", forward);
    front_port_ = front_.bind_to_any_port("127.0.0.1");
    front_thread_ = std::thread([this] { front_.listen_after_bind(); });
    // Both sockets listen from bind_to_any_port on: a connection waits in the backlog.
    options_.read_timeout_s = 30;
    options_.quiet_ms = 400;
    options_.poll_ms = 50;
  }
  void TearDown() override {
    release_ = true;
    front_.stop();
    upstream_.stop();
    front_thread_.join();
    up_thread_.join();
  }
  static void Sleep(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  httplib::Result Post(const std::string& path) {
    httplib::Client client("127.0.0.1", front_port_);
    client.set_read_timeout(60, 0);
    return client.Post(path.c_str(), "{}", "application/json");
  }

  httplib::Server upstream_, front_;
  int up_port_ = 0, front_port_ = 0;
  std::thread up_thread_, front_thread_;
  ProxyOptions options_;
  int chunks_ = 3;
  int gap_ms_ = 0;
  bool hang_ = false;
  int plain_ms_ = 0;
  std::atomic<bool> sent_{false}, release_{false};
};

TEST_F(ForwardTest, StreamFromACutCoordinatorEndsWithAnErrorEvent) {
  chunks_ = 2;
  hang_ = true;
  // Suspect once the coordinator has gone quiet after its two events.
  options_.upstream_lost = [this] { return sent_ ? std::string("node n1 is suspect") : std::string(); };
  const auto start = Clock::now();
  auto res = Post("/stream");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("data: {\"n\":1}\n\n"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("data: {\"error\""), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("node n1 is suspect"), std::string::npos) << res->body;
  // Within quiet_ms and a poll or two of the silence, not the 30 s read timeout.
  EXPECT_LT(MsSince(start), 3000);
}

TEST_F(ForwardTest, SlowStreamOfASuspectCoordinatorIsNotCut) {
  chunks_ = 8;
  gap_ms_ = 200;  // 1.6 s in all, four times quiet_ms: only the arriving bytes keep it open
  std::atomic<int> asked{0};
  options_.upstream_lost = [&] {
    asked.fetch_add(1);
    return std::string("node n1 is suspect");
  };
  auto res = Post("/stream");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("data: {\"n\":7}\n\n"), std::string::npos) << res->body;
  EXPECT_EQ(res->body.find("error"), std::string::npos) << res->body;
  EXPECT_EQ(asked.load(), 0);  // never silent for quiet_ms, so never even asked
}

TEST_F(ForwardTest, PlainRequestToADeadCoordinatorIs503) {
  plain_ms_ = 20000;
  options_.upstream_lost = [] { return std::string("node n1 is dead"); };
  const auto start = Clock::now();
  auto res = Post("/plain");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("node n1 is dead"), std::string::npos) << res->body;
  EXPECT_LT(MsSince(start), 3000);
}

TEST_F(ForwardTest, SilentButAliveCoordinatorIsWaitedFor) {
  plain_ms_ = 1200;  // three times quiet_ms without a byte; its heartbeats say it is alive
  options_.upstream_lost = [] { return std::string(); };
  auto res = Post("/plain");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "{\"ok\":true}");
}

// `curl -d` sends a form content type: cpp-httplib parses such a body into params as well, and
// the forwarder once re-sent those as a query string, which broke the request line as soon as
// the body held a '?'. The target and the body arrive as sent.
TEST_F(ForwardTest, FormEncodedBodyAndQueryArriveAsSent) {
  httplib::Client client("127.0.0.1", front_port_);
  const std::string body = R"({"prompt": "Why? a=b & c", "max_tokens": 4})";
  auto res = client.Post("/echo?x=1%202&y", body, "application/x-www-form-urlencoded");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "/echo?x=1%202&y\napplication/x-www-form-urlencoded\n" + body);
}

// Ollama's streams are NDJSON, not SSE: they too are passed on as they arrive, with their type.
TEST_F(ForwardTest, NdjsonStreamIsRelayedAsItArrives) {
  chunks_ = 4;
  gap_ms_ = 150;
  httplib::Client client("127.0.0.1", front_port_);
  httplib::Request req;
  req.method = "POST";
  req.path = "/ndjson";
  req.body = "{}";
  req.headers.emplace("Content-Type", "application/json");
  const auto start = Clock::now();
  std::vector<int64_t> arrivals_ms;
  std::string body;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    arrivals_ms.push_back(MsSince(start));
    body.append(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  ASSERT_TRUE(client.send(req, res, error)) << httplib::to_string(error);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(res.get_header_value("Content-Type"), "application/x-ndjson");
  EXPECT_EQ(body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
  ASSERT_GE(arrivals_ms.size(), 2u);
  // The first line came long before the stream ended (4 lines 150 ms apart).
  EXPECT_LT(arrivals_ms.front() + 300, arrivals_ms.back());
}

}  // namespace
}  // namespace cohort::server
