// RelayResumable (src/server/resuming_relay.cc) over loopback, against two serving nodes an
// InstanceRouter hands out by epoch (as a cluster re-places an instance): the first streams
// three tokens and breaks with a server error, the second must be asked to go on from those
// tokens ("cohort_resume") and streams the rest. The client sees one stream: one id, all
// five tokens' text, a resume note, usage counting every token, no token ids; a client error
// from the second (a 4xx) ends the stream with that error; an instance that is not placed
// again ends it with an error event naming why.
#include "server/resuming_relay.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/proxy.h"
#include "moving_router.h"

namespace cohort::server {
namespace {

using nlohmann::json;

std::string Chunk(const std::string& id, const std::string& text, int token) {
  json j = {{"id", id}, {"object", "text_completion"},
            {"choices", {{{"index", 0}, {"text", text}, {"finish_reason", nullptr}, {"token_ids", {token}}}}}};
  return "data: " + j.dump() + "\n\n";
}

class ResumingRelayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Epoch 1: three tokens, then the coordinator ends its requests (a rank died); the
    // router moves the instance to epoch 2 on the second node a moment later.
    first_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      first_headers_ok_ = req.has_header(kRelayedHeader) && req.has_header(kTokenIdsHeader);
      res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
        std::string events = Chunk("cmpl-1", " a", 11) + Chunk("cmpl-1", " b", 12) + Chunk("cmpl-1", " c", 13);
        // As the serving node ends a failed stream: the error event, then [DONE].
        events += R"(data: {"error":{"message":"rank 2 is gone","type":"server_error"}})" "\n\ndata: [DONE]\n\n";
        sink.write(events.data(), events.size());
        sink.done();
        std::thread([this] {
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
          router_.Move(2, second_port_, next_status_);
        }).detach();
        return true;
      });
    });
    second_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      resumed_body_ = json::parse(req.body, nullptr, false);
      if (second_fails_) {
        res.status = 400;
        res.set_content(R"({"error":{"message":"too long","type":"invalid_request_error"}})", "application/json");
        return;
      }
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        json usage = {{"id", "cmpl-2"}, {"choices", json::array()},
                      {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 2}, {"total_tokens", 9}}}};
        json last = {{"id", "cmpl-2"}, {"choices", {{{"index", 0}, {"text", ""}, {"finish_reason", "length"}, {"token_ids", json::array()}}}}};
        std::string events = Chunk("cmpl-2", " d", 14) + Chunk("cmpl-2", " e", 15) + "data: " + last.dump() +
                             "\n\ndata: " + usage.dump() + "\n\ndata: [DONE]\n\n";
        sink.write(events.data(), events.size());
        sink.done();
        return true;
      });
    });
    first_port_ = first_.bind_to_any_port("127.0.0.1");
    second_port_ = second_.bind_to_any_port("127.0.0.1");
    router_.Move(1, first_port_);
    front_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      ResumeOptions options;
      options.resume_wait_s = 3;
      options.poll_ms = 20;
      RelayResumable(router_, "demo", req, res, options);
    });
    front_port_ = front_.bind_to_any_port("127.0.0.1");
    for (httplib::Server* s : {&first_, &second_, &front_}) threads_.emplace_back([s] { s->listen_after_bind(); });
  }
  void TearDown() override {
    for (httplib::Server* s : {&front_, &first_, &second_}) s->stop();
    for (std::thread& t : threads_) t.join();
  }

  std::string Stream() {
    httplib::Client client("127.0.0.1", front_port_);
    client.set_read_timeout(20, 0);
    auto r = client.Post("/v1/completions", R"({"prompt":[1,2,3],"max_tokens":5,"stream":true})", "application/json");
    EXPECT_TRUE(r) << "no answer";
    return r ? r->body : "";
  }

  MovingRouter router_;
  httplib::Server first_, second_, front_;
  int first_port_ = 0, second_port_ = 0, front_port_ = 0;
  std::vector<std::thread> threads_;
  std::atomic<bool> first_headers_ok_{false};
  json resumed_body_;
  bool second_fails_ = false;
  Status next_status_;
};

TEST_F(ResumingRelayTest, ABrokenStreamResumesFromItsTokensOnTheNextPlacement) {
  const std::string body = Stream();
  EXPECT_TRUE(first_headers_ok_);
  // The second node was asked to go on after the three tokens streamed.
  ASSERT_TRUE(resumed_body_.is_object()) << body;
  EXPECT_EQ(resumed_body_[kResumeField]["tokens"], json({11, 12, 13}));
  EXPECT_EQ(resumed_body_["prompt"], json({1, 2, 3}));
  std::string text;
  int resumed_notes = 0;
  size_t at = 0;
  for (size_t end; (end = body.find("\n\n", at)) != std::string::npos; at = end + 2) {
    const std::string event = body.substr(at, end - at);
    if (event.rfind(": cohort-resumed ", 0) == 0) {
      ++resumed_notes;
      const json note = json::parse(event.substr(17));
      EXPECT_EQ(note["after_tokens"], 3);
      EXPECT_EQ(note["epoch"], 2);
      EXPECT_EQ(note["tokens"], json({11, 12, 13}));
      // From the last token before the break to the first after it: the instance moved
      // 150 ms after the break.
      EXPECT_GE(note["pause_ms"].get<int>(), 140) << note.dump();
      EXPECT_NE(note["why"].get<std::string>().find("rank 2 is gone"), std::string::npos);
      continue;
    }
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    if (event == "data: [DONE]") continue;
    const json j = json::parse(event.substr(6));
    EXPECT_FALSE(j.contains("error")) << event;
    EXPECT_EQ(j["id"], "cmpl-1");  // one response id throughout
    if (j.contains("usage")) {
      EXPECT_EQ(j["usage"]["completion_tokens"], 5);
      EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
    }
    for (const json& c : j["choices"]) {
      EXPECT_FALSE(c.contains("token_ids"));
      text += c["text"].get<std::string>();
    }
  }
  EXPECT_EQ(text, " a b c d e");
  EXPECT_EQ(resumed_notes, 1);
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
}

TEST_F(ResumingRelayTest, AClientErrorOnTheResumedPlacementEndsTheStreamWithIt) {
  second_fails_ = true;
  const std::string body = Stream();
  EXPECT_NE(body.find(" c"), std::string::npos);
  EXPECT_NE(body.find("too long"), std::string::npos) << body;
  EXPECT_EQ(body.find("data: [DONE]"), std::string::npos);
}

TEST_F(ResumingRelayTest, NoNextPlacementEndsTheStreamWithWhy) {
  next_status_ = Unavailable("instance demo is unplaced: fits on no tp layout");
  const std::string body = Stream();
  EXPECT_NE(body.find("cannot resume"), std::string::npos) << body;
  EXPECT_NE(body.find("fits on no tp layout"), std::string::npos) << body;
}

TEST(ResumeTokensTest, MalformedResumeFieldsNameTheField) {
  EXPECT_TRUE(ResumeTokensOf(json::object(), 10)->empty());
  EXPECT_EQ(*ResumeTokensOf(json{{kResumeField, {{"tokens", {1, 9}}}}}, 10), (std::vector<int32_t>{1, 9}));
  for (const json& bad : {json{{kResumeField, 3}}, json{{kResumeField, {{"tokens", {10}}}}},
                          json{{kResumeField, {{"tokens", {"a"}}}}}, json{{kResumeField, {{"tokens", {-1}}}}}}) {
    auto r = ResumeTokensOf(bad, 10);
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(kResumeField), std::string::npos);
  }
}

}  // namespace
}  // namespace cohort::server
