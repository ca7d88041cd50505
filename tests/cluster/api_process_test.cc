// The cluster's HTTP surfaces as real processes on loopback: `cohort node --api-key` refuses
// changes to the agreed state without the key, and an instance placed through POST
// /v1/instances on two `cohort serve --cluster` nodes runs exactly the ShardPlan the planner
// scored — a plan whose routed experts are split by columns included — and answers; before
// that, POST /v1/plan previews the same choice and the dashboard's files are served.
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "../parallel/process_util.h"

namespace cohort::cluster {
namespace {

using nlohmann::json;
using parallel::testing::Child;
using parallel::testing::CohortBinary;
using parallel::testing::FreePort;
using parallel::testing::ReadFile;
using parallel::testing::TempDir;
using parallel::testing::WaitForInFile;





TEST(NodeApi, ChangesNeedTheKey) {
  const TempDir dir("node-api");
  const int control = FreePort();
  ASSERT_GT(control, 0);
  Child node = Child::Start({CohortBinary(), "node", "--listen", "127.0.0.1:" + std::to_string(control), "--http",
                             "127.0.0.1:0", "--api-key", "sekrit", "--no-multicast", "--no-benchmarks", "--secret",
                             "s", "--state-dir", dir},
                            dir + "/node.err");
  const std::string line = node.ReadLine(10000);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex("http://127\\.0\\.0\\.1:([0-9]+)/v1/cluster"))) << line;
  httplib::Client http("127.0.0.1", std::stoi(m[1]));
  const std::string change = R"({"op":"put_placement","key":"x","value":{"model":"m"}})";

  auto no_key = http.Post("/v1/cluster/changes", change, "application/json");
  ASSERT_TRUE(no_key);
  EXPECT_EQ(no_key->status, 401);
  EXPECT_EQ(json::parse(no_key->body)["error"]["code"], "invalid_api_key");
  auto wrong = http.Post("/v1/cluster/changes", {{"Authorization", "Bearer sekrit2"}}, change, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto read = http.Get("/v1/cluster");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->status, 401);  // the node's view names its peers: not for strangers either
  auto page = http.Get("/");     // the dashboard's page holds nothing secret; its data needs the key
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<title>cohort dashboard</title>"), std::string::npos);

  // Refused changes changed nothing; the key's holder changes the state.
  const httplib::Headers key = {{"Authorization", "Bearer sekrit"}};
  auto before = http.Get("/v1/cluster", key);
  ASSERT_TRUE(before);
  ASSERT_EQ(before->status, 200);
  EXPECT_FALSE(json::parse(before->body)["state"]["placements"].contains("x"));
  auto ok = http.Post("/v1/cluster/changes", key, change, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto after = http.Get("/v1/cluster", key);
  ASSERT_TRUE(after);
  EXPECT_TRUE(json::parse(after->body)["state"]["placements"].contains("x"));
  auto bad = http.Post("/v1/cluster/changes", key, R"({"op":"nonsense"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
}

// The dashboard's page is open (it holds no secret), its data routes are not; POST /v1/plan
// refuses bad input naming the field, and for a good one lists the planner's layouts with
// figures per node and the one placing would choose, placing nothing. Returns the preview of
// `model` as "tp:1,1" on 2 nodes.
json ExpectPreviewAndDashboard(httplib::Client& http, const httplib::Headers& key, const std::string& model) {
  auto page = http.Get("/");
  EXPECT_TRUE(page && page->status == 200 && page->get_header_value("Content-Type").starts_with("text/html") &&
              page->body.find("/dashboard/app.js") != std::string::npos);
  auto script = http.Get("/dashboard/app.js");
  EXPECT_TRUE(script && script->status == 200 &&
              script->get_header_value("Content-Type").starts_with("text/javascript"));
  auto missing = http.Get("/dashboard/nothing.js");
  EXPECT_TRUE(missing && missing->status == 401);  // unknown paths still need the key
  const json good = {{"model", model}, {"layout", "tp:1,1"}, {"nodes", 2}};
  auto no_key = http.Post("/v1/plan", good.dump(), "application/json");
  EXPECT_TRUE(no_key && no_key->status == 401);
  const std::pair<json, std::string> bad[] = {
      {json::object(), "model"}, {{{"model", 5}}, "model"}, {{{"model", model}, {"nodes", -1}}, "nodes"},
      {{{"model", model}, {"layout", 3}}, "layout"}, {{{"model", model}, {"layout", "tp:1,x"}}, "layout"}};
  for (const auto& [body, field] : bad) {
    auto r = http.Post("/v1/plan", key, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 400 && r->body.find(field) != std::string::npos)
        << body.dump() << " -> " << (r ? r->body : "no answer");
  }
  auto r = http.Post("/v1/plan", key, good.dump(), "application/json");
  if (!r || r->status != 200) {
    ADD_FAILURE() << "POST /v1/plan: " << (r ? r->body : "no answer");
    return json::object();
  }
  const json preview = json::parse(r->body);
  EXPECT_EQ(preview["live_nodes"], 2);
  EXPECT_FALSE(preview["candidates"].empty());
  for (const json& c : preview["candidates"]) {
    EXPECT_GT(c["gen_tok_s"].get<double>(), 0) << c.dump();
    for (const json& rank : c["ranks"]) EXPECT_GT(rank["weight_bytes"].get<double>(), 0) << c.dump();
  }
  auto instances = http.Get("/v1/instances", key);
  EXPECT_TRUE(instances && json::parse(instances->body)["data"].empty()) << "a preview placed something";
  return preview;
}

TEST(ClusterApi, ThePlannedPlanIsThePlanThatRuns) {
  const TempDir dir("cluster-api");
  const std::string model = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-qwen3moe-f32.gguf";
  const int a = FreePort(), b = FreePort();
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  ASSERT_NE(a, b);
  auto serve = [&](int self, int peer, const std::string& name) {
    return Child::Start({CohortBinary(), "-t", "1", "serve", "--cluster", "--listen", "127.0.0.1:" + std::to_string(self),
                         "--peers", "127.0.0.1:" + std::to_string(peer), "--port", "0", "--secret", "s",
                         "--no-multicast", "--no-benchmarks", "--state-dir", dir + "/" + name, "--api-key", "k",
                         "--models-dir", std::string(COHORT_TEST_DATA) + "/fixtures/models"},
                        dir + "/" + name + ".err");
  };
  Child na = serve(a, b, "a");
  Child nb = serve(b, a, "b");
  const std::string api = WaitForInFile(dir + "/a.err", "API http://127\\.0\\.0\\.1:([0-9]+)", 10000);
  ASSERT_FALSE(api.empty()) << ReadFile(dir + "/a.err");
  httplib::Client http("127.0.0.1", std::stoi(api));
  http.set_read_timeout(90, 0);
  const httplib::Headers key = {{"Authorization", "Bearer k"}};
  // Both nodes must have joined before "tp:1,1" (two ranks, experts split by columns) fits.
  for (int i = 0; i < 100; ++i) {
    auto c = http.Get("/v1/cluster", key);
    if (c && c->status == 200 && json::parse(c->body)["members"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const json preview = ExpectPreviewAndDashboard(http, key, model);
  const json request = {{"model", model}, {"layout", "tp:1,1"}, {"nodes", 2}, {"wait_s", 60}};
  auto placed = http.Post("/v1/instances", key, request.dump(), "application/json");
  ASSERT_TRUE(placed);
  ASSERT_EQ(placed->status, 201) << placed->body;
  const json instance = json::parse(placed->body);
  ASSERT_EQ(instance["state"], "ready") << instance.dump(2);
  // What the planner scored and what the two ranks run: the same plan, experts by columns.
  ASSERT_TRUE(instance["shard_plan"].is_object()) << instance.dump(2);
  EXPECT_EQ(instance["shard_plan"]["expert_split"], "columns") << instance["shard_plan"].dump(2);
  EXPECT_EQ(instance["running_plan"], instance["shard_plan"]);
  EXPECT_EQ(instance["ranks"].size(), 2u);
  // The preview named the plan the leader then chose.
  EXPECT_EQ(preview["choice"]["plan"], instance["plan"]) << preview.dump(2);

  // It answers through either node: the coordinator serves it from its own front, the other
  // relays to it.
  for (const std::string& err : {std::string("a.err"), std::string("b.err")}) {
    const std::string port = WaitForInFile(dir + "/" + err, "API http://127\\.0\\.0\\.1:([0-9]+)", 1000);
    httplib::Client node("127.0.0.1", std::stoi(port));
    node.set_read_timeout(60, 0);
    const json completion = {{"prompt", "hello"}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}};
    auto answer = node.Post("/v1/completions", key, completion.dump(), "application/json");
    ASSERT_TRUE(answer);
    ASSERT_EQ(answer->status, 200) << answer->body;
    EXPECT_EQ(json::parse(answer->body)["usage"]["completion_tokens"], 4);
  }
}

}  // namespace
}  // namespace cohort::cluster
