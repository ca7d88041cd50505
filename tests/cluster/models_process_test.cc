// Model management from the CLI against a 3-node `cohort serve --cluster` on loopback:
// `cohort models` lists the file one node's models directory holds, `cohort load` runs it
// on the three nodes, `cohort ps` shows it from another node, the instance is back after all
// three nodes restart (instances.json in their state directories), `cohort rm` refuses a
// model in use, and after `cohort unload` removes it and deletes the file on its node.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
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
using parallel::testing::RunCohort;
namespace fs = std::filesystem;

class ModelsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("cohort-models-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_ + "/a/models");
    fs::copy_file(std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf", dir_ + "/a/models/stories260K.gguf");
    for (int& p : control_) p = FreePort();
    for (int& p : http_) p = FreePort();
  }
  void TearDown() override {
    for (auto& n : nodes_) n.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void StartAll() {
    const char* names[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; ++i) {
      std::string peers;
      for (int j = 0; j < 3; ++j) {
        if (j == i) continue;
        if (!peers.empty()) peers += ',';
        peers += "127.0.0.1:";
        peers += std::to_string(control_[j]);
      }
      nodes_[i] = std::make_unique<Child>(Child::Start(
          {CohortBinary(), "-t", "1", "serve", "--cluster", "--listen", "127.0.0.1:" + std::to_string(control_[i]),
           "--peers", peers, "--port", std::to_string(http_[i]), "--secret", "s", "--no-multicast", "--no-benchmarks",
           "--state-dir", dir_ + "/" + names[i], "--api-key", "k"},
          dir_ + "/" + names[i] + ".err"));
    }
  }
  void StopAll() {
    for (auto& n : nodes_) {
      if (n && n->pid > 0) ::kill(n->pid, SIGTERM);
    }
    for (auto& n : nodes_) {
      if (n) {
        EXPECT_EQ(n->Wait(15000), 0);
      }
      n.reset();
    }
  }
  std::vector<std::string> Api(int i) {
    return {"--api", "http://127.0.0.1:" + std::to_string(http_[i]), "--api-key", "k"};
  }
  // `cohort CMD ARGS --api node i`: exit code, stdout in *out.
  int Run(const std::string& cmd, std::vector<std::string> args, int i, std::string* out) {
    args.insert(args.begin(), cmd);
    for (const std::string& a : Api(i)) args.push_back(a);
    return RunCohort(args, out, dir_ + "/cli.err", 60000);
  }
  // Polls `cohort ps --json` on node i until `ok` holds for its list (or timeout_s).
  bool WaitForPs(int i, const std::function<bool(const json&)>& ok, int timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::string out;
    while (std::chrono::steady_clock::now() < end) {
      if (Run("ps", {"--json"}, i, &out) == 0) {
        const json j = json::parse(out, nullptr, false);
        if (j.is_object() && ok(j["data"])) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }
  bool WaitForModels(int i, size_t count, int timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::string out;
    while (std::chrono::steady_clock::now() < end) {
      if (Run("models", {"--json"}, i, &out) == 0) {
        const json j = json::parse(out, nullptr, false);
        if (j.is_object() && j["data"].size() == count) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return false;
  }

  std::string dir_;
  int control_[3] = {};
  int http_[3] = {};
  std::unique_ptr<Child> nodes_[3];
};

bool ReadyOnThree(const json& list) {
  return list.size() == 1 && list[0]["state"] == "ready" && list[0]["ranks"].size() == 3;
}

TEST_F(ModelsCli, ListLoadRestartUnloadRemove) {
  StartAll();
  // The models directory of node a is registered at start.
  ASSERT_TRUE(WaitForModels(1, 1, 30)) << ReadFile(dir_ + "/a.err");
  std::string out;
  ASSERT_EQ(Run("models", {}, 2, &out), 0) << ReadFile(dir_ + "/cli.err");
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(stories260K\s+[0-9.]+ MB\s+[0-9a-f]{12}\s+\S+\s+-)"))) << out;
  // Wait until all three nodes are members before asking for three.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int code = 1;
  while (code != 0 && std::chrono::steady_clock::now() < end) {
    code = Run("load", {"stories260K", "--nodes", "3", "--wait", "120"}, 1, &out);
    if (code != 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(code, 0) << out << ReadFile(dir_ + "/cli.err") << ReadFile(dir_ + "/a.err");
  EXPECT_NE(out.find("ready"), std::string::npos) << out;
  ASSERT_TRUE(WaitForPs(2, ReadyOnThree, 30));
  ASSERT_EQ(Run("ps", {}, 0, &out), 0);
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(stories260K\s+stories260K\s+ready\s+\S+\s+\S+,\S+,\S+\s+[0-9.]+ MB)"))) << out;

  // All three stop and start again: the instance comes back from their state directories.
  StopAll();
  EXPECT_TRUE(fs::exists(dir_ + "/a/instances.json"));
  StartAll();
  ASSERT_TRUE(WaitForPs(0, ReadyOnThree, 90)) << ReadFile(dir_ + "/a.err") << ReadFile(dir_ + "/b.err");

  // In use: refused, and the file stays.
  EXPECT_EQ(Run("rm", {"stories260K"}, 1, &out), 1);
  EXPECT_NE(ReadFile(dir_ + "/cli.err").find("unload it first"), std::string::npos) << ReadFile(dir_ + "/cli.err");
  EXPECT_TRUE(fs::exists(dir_ + "/a/models/stories260K.gguf"));
  ASSERT_EQ(Run("unload", {"stories260K"}, 2, &out), 0) << ReadFile(dir_ + "/cli.err");
  ASSERT_TRUE(WaitForPs(0, [](const json& l) { return l.empty(); }, 20));
  ASSERT_EQ(Run("rm", {"stories260K"}, 1, &out), 0) << ReadFile(dir_ + "/cli.err");
  EXPECT_TRUE(WaitForModels(0, 0, 20));
  // Node a deletes its copy; b and c delete the shares they were streamed.
  for (int i = 0; i < 100 && fs::exists(dir_ + "/a/models/stories260K.gguf"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(fs::exists(dir_ + "/a/models/stories260K.gguf")) << ReadFile(dir_ + "/a.err");
  for (const char* n : {"b", "c"}) {
    std::error_code ec;
    int shares = 0;
    for (int i = 0; i < 50; ++i) {
      shares = 0;
      for (const auto& e : fs::directory_iterator(dir_ + "/" + n + "/cache", ec)) shares += e.path().extension() == ".gguf";
      if (shares == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(shares, 0) << n;
  }
  // A model that is not there is a 404 with its name.
  EXPECT_EQ(Run("rm", {"stories260K"}, 1, &out), 1);
  EXPECT_NE(ReadFile(dir_ + "/cli.err").find("no model 'stories260K'"), std::string::npos);
}

}  // namespace
}  // namespace cohort::cluster
