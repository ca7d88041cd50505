// The relay channel between cluster nodes (src/server/relay_channel.h) over loopback, on a
// real HttpServer: a request with the cluster's key is served by the node's routes (its API
// key still checked there), through ForwardRequest too; a client with another key, a plain
// HTTP client, a TLS client without the key and a host the listener does not admit reach no
// route at all.
#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "comm/secure_channel.h"
#include "core/log.h"
#include "server/http_server.h"
#include "server/proxy.h"
#include "server/relay_channel.h"

namespace cohort::server {
namespace {

comm::ChannelKey KeyOf(const std::string& secret) { return comm::DeriveChannelKey(secret).value(); }

class RelayChannelTest : public ::testing::Test {
 protected:
  void StartNode(std::function<bool(const std::string&)> admit_host = nullptr) {
    ServerOptions o;
    o.port = 0;
    o.api_keys = {"client-key"};
    o.relay_key = KeyOf("the cluster secret");
    o.relay_listen = "127.0.0.1:0";
    o.relay_admit_host = std::move(admit_host);
    o.request_log = false;
    node_ = std::make_unique<HttpServer>(o, log_);
    node_->routes().Post("/echo", [this](const httplib::Request& req, httplib::Response& res) {
      ++served_;
      res.set_content(req.body, "text/plain");
    });
    ASSERT_TRUE(node_->Bind().ok());
    node_->Start();
    relay_ = "127.0.0.1:" + std::to_string(node_->relay_port());
  }
  void TearDown() override {
    if (node_ != nullptr) (void)node_->Stop();
  }

  // POST /echo over `client`: the status, or 0 when no answer came.
  static int Post(httplib::ClientImpl& client, const std::string& api_key, std::string* body = nullptr) {
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(3, 0);
    httplib::Headers headers = {{"Authorization", "Bearer " + api_key}};
    auto res = client.Post("/echo", headers, "the prompt", "text/plain");
    if (!res) return 0;
    if (body != nullptr) *body = res->body;
    return res->status;
  }

  Logger log_{LogLevel::kError};
  std::unique_ptr<HttpServer> node_;
  std::string relay_;
  std::atomic<int> served_{0};
};

TEST_F(RelayChannelTest, TheClusterKeyReachesTheRoutesWhichStillCheckTheApiKey) {
  StartNode();
  auto client = MakeRelayClient(relay_, KeyOf("the cluster secret"));
  std::string body;
  EXPECT_EQ(Post(*client, "client-key", &body), 200);
  EXPECT_EQ(body, "the prompt");
  EXPECT_EQ(Post(*MakeRelayClient(relay_, KeyOf("the cluster secret")), "another-key"), 401);
  EXPECT_EQ(served_.load(), 1);
}

TEST_F(RelayChannelTest, ForwardRequestGoesOverTheChannel) {
  StartNode();
  httplib::Server front;
  ProxyOptions proxy;
  proxy.key = KeyOf("the cluster secret");
  front.Post("/echo", [&](const httplib::Request& req, httplib::Response& res) { ForwardRequest(relay_, req, res, proxy); });
  const int port = front.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { front.listen_after_bind(); });
  httplib::ClientImpl client("127.0.0.1", port);
  std::string body;
  EXPECT_EQ(Post(client, "client-key", &body), 200);
  EXPECT_EQ(body, "the prompt");
  // Without the key the relay is plain HTTP, which the relay port does not answer: a 503.
  proxy.key.reset();
  EXPECT_EQ(Post(client, "client-key"), 503);
  front.stop();
  serving.join();
  EXPECT_EQ(served_.load(), 1);
}

TEST_F(RelayChannelTest, NoOtherClientReachesARoute) {
  StartNode();
  EXPECT_EQ(Post(*MakeRelayClient(relay_, KeyOf("another secret")), "client-key"), 0);
  EXPECT_EQ(Post(*MakeRelayClient(relay_, std::nullopt), "client-key"), 0);  // plain HTTP
  httplib::SSLClient tls("127.0.0.1", node_->relay_port());                  // TLS, no key
  tls.enable_server_certificate_verification(false);
  EXPECT_EQ(Post(tls, "client-key"), 0);
  EXPECT_EQ(served_.load(), 0);
  // The node still serves its members.
  EXPECT_EQ(Post(*MakeRelayClient(relay_, KeyOf("the cluster secret")), "client-key"), 200);
}

TEST_F(RelayChannelTest, AHostNotAdmittedIsClosedBeforeTheHandshake) {
  StartNode([](const std::string& host) { return host == "10.9.9.9"; });
  EXPECT_EQ(Post(*MakeRelayClient(relay_, KeyOf("the cluster secret")), "client-key"), 0);
  EXPECT_EQ(served_.load(), 0);
}

}  // namespace
}  // namespace cohort::server
