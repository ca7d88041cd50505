// The mistakes an operator used to make silently, made visible, each against real `cohort`
// processes on loopback: a second server on a port in use is refused; global options work
// after the subcommand; --version and the defaults in --help; every log line has a time and
// every request a log line; packets with a wrong secret are warned about on both sides with
// the sender's address, as are --peers that never answer and a node that stays alone; and
// POST /v1/instances refuses more nodes than are alive and a layout that is not one (400).
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "../parallel/process_util.h"

namespace cohort::app {
namespace {

using nlohmann::json;
using parallel::testing::Child;
using parallel::testing::CohortBinary;
using parallel::testing::FreePort;
using parallel::testing::ReadFile;
using parallel::testing::RunCohort;
using parallel::testing::TempDir;
using parallel::testing::WaitForInFile;

std::string DemoModel() { return std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf"; }





constexpr const char* kTime = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)";

TEST(Ops, ASecondServerOnAPortInUseIsRefused) {
  const TempDir dir("port");
  const int port = FreePort();
  ASSERT_GT(port, 0);
  Child first = Child::Start({CohortBinary(), "serve", "-m", DemoModel(), "--port", std::to_string(port)},
                             dir / "first.err");
  ASSERT_FALSE(WaitForInFile(dir / "first.err", "listening on http", 20000).empty()) << ReadFile(dir / "first.err");
  // Before the fix cpp-httplib's SO_REUSEPORT let this bind, and the kernel split requests.
  const int code = RunCohort({"serve", "-m", DemoModel(), "--port", std::to_string(port)}, nullptr, dir / "second.err");
  EXPECT_EQ(code, 1) << ReadFile(dir / "second.err");
  EXPECT_NE(ReadFile(dir / "second.err").find("port is in use"), std::string::npos) << ReadFile(dir / "second.err");
  EXPECT_EQ(first.Wait(1), -1) << "the first server must keep running";
}

TEST(Ops, GlobalOptionsWorkAfterTheSubcommand) {
  const TempDir dir("global");
  std::string out;
  // -t and -v after the subcommand (and its positional argument), which CLI11 rejected before.
  EXPECT_EQ(RunCohort({"inspect", DemoModel(), "-t", "1", "-v"}, &out, dir / "err"), 0) << ReadFile(dir / "err");
  EXPECT_NE(out.find("llama"), std::string::npos) << out;
  EXPECT_EQ(RunCohort({"inspect", DemoModel(), "--threads=1"}, &out, dir / "err"), 0) << ReadFile(dir / "err");
  // A mistyped option is still an error, not swallowed by the fall-through.
  EXPECT_NE(RunCohort({"inspect", DemoModel(), "--no-such-option"}, &out, dir / "err"), 0);
}

TEST(Ops, VersionAndDefaultsInHelp) {
  const TempDir dir("help");
  std::string out;
  EXPECT_EQ(RunCohort({"--version"}, &out, dir / "err"), 0);
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(^cohort \d+\.\d+\.\d+)"))) << out;
  EXPECT_EQ(RunCohort({"serve", "--help"}, &out, dir / "err"), 0);
  // The port, the slot count and the KV type, each with its default beside it.
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(--port[^\n]*8080)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(--parallel[^\n]*=4)"))) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(--kv-type[^\n]*f16)"))) << out;
}

TEST(Ops, EveryLogLineIsTimedAndEveryRequestLogged) {
  const TempDir dir("reqlog");
  Child server = Child::Start({CohortBinary(), "serve", "-m", DemoModel(), "--port", "0"}, dir / "err");
  const std::string port = WaitForInFile(dir / "err", R"(listening on http://[^:]+:(\d+))", 20000);
  ASSERT_FALSE(port.empty()) << ReadFile(dir / "err");
  httplib::Client http("127.0.0.1", std::stoi(port));
  http.set_read_timeout(60, 0);
  auto plain = http.Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":12,"temperature":0})",
                         "application/json");
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  auto streamed = http.Post("/v1/completions", R"({"prompt":"Once","max_tokens":8,"stream":true})", "application/json");
  ASSERT_TRUE(streamed);
  auto bad = http.Post("/v1/completions", R"({"prompt":"x","max_tokens":"many"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  const std::string line = std::string(kTime) + R"( \[request\] POST /v1/completions 200 model=stories260K prompt=\d+ )" +
                           R"(cached=\d+ completion=12 ttft_ms=[0-9.]+ tok_s=[0-9.]+ ms=\d+ from=127\.0\.0\.1:\d+)";
  EXPECT_FALSE(WaitForInFile(dir / "err", line, 5000).empty()) << ReadFile(dir / "err");
  // The streamed request's line is written after its last event, with its counts.
  const std::string chat_status = std::to_string(streamed->status);
  EXPECT_EQ(streamed->status, 200);
  EXPECT_FALSE(WaitForInFile(dir / "err", R"(\[request\] POST /v1/completions )" + chat_status +
                                              R"( model=stories260K prompt=\d+ cached=\d+ completion=\d+ ttft_ms=[0-9.]+ tok_s=)",
                             5000).empty())
      << ReadFile(dir / "err");
  EXPECT_FALSE(WaitForInFile(dir / "err", R"(\[request\] POST /v1/completions 400 .*ms=\d+)", 5000).empty())
      << ReadFile(dir / "err");
  server.Kill();
  std::stringstream lines(ReadFile(dir / "err"));
  int n = 0;
  for (std::string l; std::getline(lines, l); ++n) {
    EXPECT_TRUE(std::regex_search(l, std::regex(std::string("^") + kTime + " "))) << "untimed line: " << l;
  }
  EXPECT_GE(n, 4);
}

// Two `cohort node`s with different secrets, each naming the other in --peers, the first
// also naming a port where nobody listens. Started once for the tests below: the silence
// warnings come 10 s after start.
class Discovery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("discovery");
    a_ = FreePort();
    b_ = FreePort();
    nobody_ = FreePort();
    ASSERT_TRUE(a_ > 0 && b_ > 0 && nobody_ > 0);
    auto node = [](int self, const std::string& peers, const std::string& secret, const std::string& name) {
      return new Child(Child::Start({CohortBinary(), "node", "--listen", "127.0.0.1:" + std::to_string(self), "--peers",
                                     peers, "--secret", secret, "--no-multicast", "--no-benchmarks", "--http", "127.0.0.1:0"},
                                    *dir_ / (name + ".err")));
    };
    node_a_ = node(a_, Addr(b_) + "," + Addr(nobody_), "one secret", "a");
    node_b_ = node(b_, Addr(a_), "another secret", "b");
  }
  static void TearDownTestSuite() {
    delete node_a_;
    delete node_b_;
    delete dir_;
  }
  static std::string Addr(int port) { return "127.0.0.1:" + std::to_string(port); }
  static std::string Err(const std::string& name) { return *dir_ / (name + ".err"); }

  static inline TempDir* dir_ = nullptr;
  static inline Child* node_a_ = nullptr;
  static inline Child* node_b_ = nullptr;
  static inline int a_ = 0, b_ = 0, nobody_ = 0;
};

TEST_F(Discovery, AWrongSecretIsWarnedAboutOnBothSidesWithTheSender) {
  const std::string warn = std::string(kTime) + R"( \[warn\] cluster: rejected packets from )";
  EXPECT_FALSE(WaitForInFile(Err("a"), warn + Addr(b_) + ".*different --secret", 15000).empty()) << ReadFile(Err("a"));
  EXPECT_FALSE(WaitForInFile(Err("b"), warn + Addr(a_) + ".*different --secret", 15000).empty()) << ReadFile(Err("b"));
}

TEST_F(Discovery, PeersThatNeverAnswerAreWarnedAbout) {
  const std::string warn = R"(\[warn\] cluster: --peers )";
  EXPECT_FALSE(WaitForInFile(Err("a"), warn + Addr(nobody_) + " has not answered", 20000).empty()) << ReadFile(Err("a"));
  // B's packets reach A but fail its check: B has not answered either, as far as A knows.
  EXPECT_FALSE(WaitForInFile(Err("a"), warn + Addr(b_) + " has not answered", 20000).empty()) << ReadFile(Err("a"));
}

TEST_F(Discovery, ANodeThatStaysAloneIsWarnedAbout) {
  for (const char* name : {"a", "b"}) {
    EXPECT_FALSE(WaitForInFile(Err(name), R"(\[warn\] cluster: this node has been alone for \d+ s)", 20000).empty())
        << ReadFile(Err(name));
  }
}

TEST(Ops, InstancesBeyondTheLiveNodesOrWithAnInvalidLayoutAreRefused) {
  const TempDir dir("instances");
  const int control = FreePort();
  ASSERT_GT(control, 0);
  Child node = Child::Start({CohortBinary(), "-t", "1", "serve", "--cluster", "--listen", "127.0.0.1:" + std::to_string(control),
                             "--port", "0", "--secret", "s", "--no-multicast", "--no-benchmarks",
                             "--models-dir", std::filesystem::path(DemoModel()).parent_path().string()},
                            dir / "err");
  const std::string api = WaitForInFile(dir / "err", R"(API http://127\.0\.0\.1:([0-9]+))", 20000);
  ASSERT_FALSE(api.empty()) << ReadFile(dir / "err");
  httplib::Client http("127.0.0.1", std::stoi(api));
  http.set_read_timeout(30, 0);
  auto post = [&](const json& body) {
    auto r = http.Post("/v1/instances", body.dump(), "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(-1, std::string());
  };
  auto [status, body] = post({{"model", DemoModel()}, {"nodes", 3}});
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(body.find("nodes: 3 asked, but 1 node(s)"), std::string::npos) << body;
  std::tie(status, body) = post({{"model", DemoModel()}, {"layout", "zigzag"}});
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(body.find("layout: unknown layout 'zigzag'"), std::string::npos) << body;
  std::tie(status, body) = post({{"model", DemoModel()}, {"layout", "pp:1,1"}});
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(body.find("more ranks than nodes"), std::string::npos) << body;
  // Refused means recorded nowhere.
  auto list = http.Get("/v1/instances");
  ASSERT_TRUE(list);
  EXPECT_TRUE(json::parse(list->body)["data"].empty()) << list->body;
  // What fits is still placed.
  // Tensor parallelism needs two nodes at least.
  std::tie(status, body) = post({{"model", DemoModel()}, {"layout", "tp"}});
  EXPECT_EQ(status, 400) << body;
  std::tie(status, body) = post({{"model", DemoModel()}, {"layout", "auto"}, {"nodes", 1}, {"wait_s", 30}});
  EXPECT_EQ(status, 201) << body;
}

// What a node shows of its settings in GET /v1/cluster: its id (from --state-dir), name,
// addresses, and the services it publishes (worker and API addresses, memory budget).
json SettingsView(const json& cluster) {
  json members = json::array();
  for (const json& m : cluster["members"]) members.push_back({m["id"], m["name"], m["address"], m["self"]});
  json services = json::object();
  for (const auto& [key, value] : cluster["state"]["models"].items()) {
    if (key.rfind("node:", 0) == 0) services[key] = value;
  }
  return {{"self", cluster["self"]}, {"members", members}, {"services", services}};
}

// Starts `cohort ARGS` (a lone cluster node with API key "k"), waits for its publication
// (`services`: a serve node's services; a `cohort node` publishes none), and returns
// SettingsView of its GET /v1/cluster; the node is stopped again.
json ClusterSettingsOf(const std::vector<std::string>& args, int api_port, const std::string& err, bool services = true) {
  std::vector<std::string> argv = {CohortBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Child node = Child::Start(argv, err);
  httplib::Client http("127.0.0.1", api_port);
  const httplib::Headers key = {{"Authorization", "Bearer k"}};
  json view;
  for (int i = 0; i < 200; ++i) {
    auto r = http.Get("/v1/cluster", key);
    if (r && r->status == 200) {
      view = SettingsView(json::parse(r->body));
      if (!services || !view["services"].empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(node.pid, SIGTERM);
  node.Wait(10000);
  return view;
}

TEST(Ops, AConfigFileGivesTheSameClusterAsItsFlags) {
  const TempDir dir("config");
  const int control = FreePort(), worker = FreePort(), api = FreePort();
  ASSERT_TRUE(control > 0 && worker > 0 && api > 0);
  const std::vector<std::string> flags = {
      "serve", "--cluster", "--listen", "127.0.0.1:" + std::to_string(control), "--worker-listen",
      "127.0.0.1:" + std::to_string(worker), "--port", std::to_string(api), "--secret", "s", "--no-multicast",
      "--no-benchmarks", "--state-dir", dir / "state", "--name", "from-flags", "--max-memory", "3G",
      "--heartbeat-ms", "100", "--suspect-ms", "500", "--dead-ms", "1000", "--api-key", "k", "--api-key", "k2"};
  const json by_flags = ClusterSettingsOf(flags, api, dir / "flags.err");
  ASSERT_FALSE(by_flags["services"].empty()) << ReadFile(dir / "flags.err");
  EXPECT_EQ(by_flags["members"][0][1], "from-flags");
  {
    std::ofstream toml(dir / "cohort.toml");
    toml << "cluster = true\nlisten = \"127.0.0.1:" << control << "\"\nworker-listen = \"127.0.0.1:" << worker
         << "\"\nport = " << api << "\nsecret = \"s\"\nno-multicast = true\nno-benchmarks = true\n"
         << "state-dir = \"" << (dir / "state") << "\"\nname = \"from-flags\"\nmax-memory = \"3G\"\n"
         << "heartbeat-ms = 100\nsuspect-ms = 500\ndead-ms = 1000\napi-key = [\"k\", \"k2\"]\n";
  }
  const json by_file = ClusterSettingsOf({"serve", "--config", dir / "cohort.toml"}, api, dir / "file.err");
  EXPECT_EQ(by_file, by_flags) << ReadFile(dir / "file.err");
  // A COHORT_* variable outranks the file, and a flag outranks both.
  ::setenv("COHORT_NAME", "from-env", 1);
  const json by_env = ClusterSettingsOf({"serve", "--config", dir / "cohort.toml"}, api, dir / "env.err");
  const json by_flag = ClusterSettingsOf({"serve", "--config", dir / "cohort.toml", "--name", "flag"}, api, dir / "flag.err");
  ::unsetenv("COHORT_NAME");
  ASSERT_FALSE(by_env["members"].empty()) << ReadFile(dir / "env.err");
  EXPECT_EQ(by_env["members"][0][1], "from-env");
  ASSERT_FALSE(by_flag["members"].empty()) << ReadFile(dir / "flag.err");
  EXPECT_EQ(by_flag["members"][0][1], "flag");
  // A key that is no flag, and a file that is not TOML, are errors that name the problem.
  {
    std::ofstream(dir / "typo.toml") << "prot = 8080\n";
    std::ofstream(dir / "broken.toml") << "port = = 1\n";
  }
  std::string out;
  EXPECT_NE(RunCohort({"serve", "--config", dir / "typo.toml"}, &out, dir / "typo.err"), 0);
  EXPECT_NE(ReadFile(dir / "typo.err").find("prot"), std::string::npos) << ReadFile(dir / "typo.err");
  EXPECT_NE(RunCohort({"serve", "--config", dir / "broken.toml"}, &out, dir / "broken.err"), 0);
  EXPECT_NE(ReadFile(dir / "broken.err").find("not TOML"), std::string::npos) << ReadFile(dir / "broken.err");
}

// `cohort node --config` and `cohort worker --config` read the same TOML as serve, keys being
// their own flags: a node from a file is the node of its flags, a worker listens where the
// file says, and a key of another command's is refused naming the command.
TEST(Ops, ConfigFilesForNodeAndWorker) {
  const TempDir dir("config-node");
  const int control = FreePort(), http = FreePort(), worker = FreePort();
  ASSERT_TRUE(control > 0 && http > 0 && worker > 0);
  const std::string listen = "127.0.0.1:" + std::to_string(control), http_at = "127.0.0.1:" + std::to_string(http);
  const json by_flags = ClusterSettingsOf({"node", "--listen", listen, "--http", http_at, "--secret", "s", "--no-multicast",
                                           "--no-benchmarks", "--state-dir", dir / "state", "--name", "n-flags",
                                           "--api-key", "k"},
                                          http, dir / "nflags.err", /*services=*/false);
  ASSERT_FALSE(by_flags["members"].empty()) << ReadFile(dir / "nflags.err");
  std::ofstream(dir / "node.toml") << "listen = \"" << listen << "\"\nhttp = \"" << http_at
                                   << "\"\nsecret = \"s\"\nno-multicast = true\nno-benchmarks = true\nstate-dir = \""
                                   << (dir / "state") << "\"\nname = \"n-flags\"\napi-key = [\"k\"]\n";
  const json by_file = ClusterSettingsOf({"node", "--config", dir / "node.toml"}, http, dir / "nfile.err", false);
  EXPECT_EQ(by_file, by_flags) << ReadFile(dir / "nfile.err");

  std::ofstream(dir / "worker.toml") << "listen = \"127.0.0.1:" << worker << "\"\nonce = true\ndata-ports = \"0\"\n";
  Child w = Child::Start({CohortBinary(), "worker", "--config", dir / "worker.toml"}, dir / "worker.err");
  std::string said;
  for (int i = 0; i < 100 && said.find("listening") == std::string::npos; ++i) said += w.ReadLine(100);
  EXPECT_EQ(said, "cohort worker: listening on 127.0.0.1:" + std::to_string(worker)) << ReadFile(dir / "worker.err");
  ::kill(w.pid, SIGTERM);
  w.Wait(5000);
  std::ofstream(dir / "wrong.toml") << "port = 8080\n";  // serve's, not worker's
  std::string out;
  EXPECT_NE(RunCohort({"worker", "--config", dir / "wrong.toml"}, &out, dir / "wrong.err"), 0);
  EXPECT_NE(ReadFile(dir / "wrong.err").find("port"), std::string::npos) << ReadFile(dir / "wrong.err");
}

// The unit file passes systemd's own check (with the binary it names pointed at this build).
TEST(Ops, TheSystemdUnitVerifies) {
  if (::access("/usr/bin/systemd-analyze", X_OK) != 0) GTEST_SKIP() << "no systemd-analyze";
  const TempDir dir("unit");
  std::string unit = ReadFile(std::string(COHORT_SOURCE_DIR) + "/packaging/cohort.service");
  ASSERT_NE(unit.find("ExecStart=/usr/bin/cohort "), std::string::npos);
  unit.replace(unit.find("/usr/bin/cohort"), std::string("/usr/bin/cohort").size(), CohortBinary());
  std::ofstream(dir / "cohort.service") << unit;
  const std::string command = "SYSTEMD_LOG_LEVEL=warning /usr/bin/systemd-analyze verify --man=no " + (dir / "cohort.service") +
                              " > " + (dir / "verify.out") + " 2>&1";
  const int rc = std::system(command.c_str());
  const std::string said = ReadFile(dir / "verify.out");
  EXPECT_EQ(rc, 0) << said;
  // Lines about this unit are findings; others (the host's own units, no running systemd in
  // a container) are not ours.
  std::stringstream lines(said);
  for (std::string l; std::getline(lines, l);) EXPECT_EQ(l.find("cohort.service"), std::string::npos) << l;
}

}  // namespace
}  // namespace cohort::app
