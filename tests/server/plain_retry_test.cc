// A plain (non-streamed) request on a cluster that loses the node serving it
// (HttpServer::ServeDialect), over loopback: a real HttpServer whose router hands out
// upstream nodes by epoch, as a cluster re-places an instance. The first node answers 503 (its
// model failed), and a moment later the instance is placed again on the second node: the client
// gets the second node's answer and X-Cohort-Retries: 1. A 4xx passes through untried, and an
// instance that is gone ends the wait with the 503 at once.
#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/log.h"
#include "server/http_server.h"
#include "server/router.h"
#include "moving_router.h"

namespace cohort::server {
namespace {

using Clock = std::chrono::steady_clock;

class PlainRetryTest : public ::testing::Test {
 protected:
  // The first node answers `first_status` with `first_body`, then (for a 503) the router moves
  // the instance to epoch 2 on the second node, or to `next` when that is not ok.
  void Start(int first_status, const std::string& first_body, Status next = Status::Ok()) {
    first_.Post("/v1/completions", [=, this](const httplib::Request&, httplib::Response& res) {
      ++first_calls_;
      res.status = first_status;
      res.set_content(first_body, "application/json");
      if (first_status == 503) {
        std::thread([this, next] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          router_.Move(2, second_port_, next);
        }).detach();
      }
    });
    second_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      ++second_calls_;
      second_body_ = req.body;
      res.set_content(R"({"id":"cmpl-2","choices":[{"index":0,"text":" the end","finish_reason":"length"}]})",
                      "application/json");
    });
    first_port_ = first_.bind_to_any_port("127.0.0.1");
    second_port_ = second_.bind_to_any_port("127.0.0.1");
    router_.Move(1, first_port_);
    ServerOptions o;
    o.port = 0;
    o.api_keys = {"client-key"};
    o.request_log = false;
    node_ = std::make_unique<HttpServer>(o, log_);
    node_->ServeInstances(router_, /*single_model=*/false);
    auto port = node_->Bind();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    node_port_ = *port;
    node_->Start();
    for (httplib::Server* s : {&first_, &second_}) threads_.emplace_back([s] { s->listen_after_bind(); });
  }
  void TearDown() override {
    if (node_ != nullptr) (void)node_->Stop();
    for (httplib::Server* s : {&first_, &second_}) s->stop();
    for (std::thread& t : threads_) t.join();
  }

  httplib::Result Post(const std::string& body) {
    httplib::Client client("127.0.0.1", node_port_);
    client.set_read_timeout(30, 0);
    return client.Post("/v1/completions", {{"Authorization", "Bearer client-key"}}, body, "application/json");
  }

  static constexpr const char* kBody = R"({"model":"demo","prompt":"Once","max_tokens":3,"temperature":0})";
  static constexpr const char* kLost =
      R"({"error":{"message":"the model failed: rank 2 is gone","type":"server_error","code":"unavailable"}})";

  Logger log_{LogLevel::kError};
  MovingRouter router_;
  httplib::Server first_, second_;
  int first_port_ = 0, second_port_ = 0, node_port_ = 0;
  std::unique_ptr<HttpServer> node_;
  std::vector<std::thread> threads_;
  std::atomic<int> first_calls_{0}, second_calls_{0};
  std::string second_body_;
};

TEST_F(PlainRetryTest, ALostPlacementIsTriedAgainOnTheNextOne) {
  Start(503, kLost);
  auto r = Post(kBody);
  ASSERT_TRUE(r) << "no answer";
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find(" the end"), std::string::npos) << r->body;
  EXPECT_EQ(r->get_header_value("X-Cohort-Retries"), "1");
  EXPECT_EQ(first_calls_.load(), 1);
  EXPECT_EQ(second_calls_.load(), 1);
  EXPECT_EQ(second_body_, kBody);  // the request again, whole
}

TEST_F(PlainRetryTest, AClientErrorIsAnsweredUntried) {
  Start(400, R"({"error":{"message":"max_tokens: too many","type":"invalid_request_error"}})");
  auto r = Post(kBody);
  ASSERT_TRUE(r) << "no answer";
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_FALSE(r->has_header("X-Cohort-Retries"));
  EXPECT_EQ(second_calls_.load(), 0);
}

TEST_F(PlainRetryTest, AnInstanceThatIsGoneEndsTheWaitWithThe503) {
  Start(503, kLost, NotFound("no model instance on this cluster"));
  const auto start = Clock::now();
  auto r = Post(kBody);
  ASSERT_TRUE(r) << "no answer";
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("rank 2 is gone"), std::string::npos) << r->body;
  EXPECT_FALSE(r->has_header("X-Cohort-Retries"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(second_calls_.load(), 0);
}

}  // namespace
}  // namespace cohort::server
