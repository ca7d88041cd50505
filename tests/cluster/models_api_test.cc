// POST /v1/instances names untrusted files (issue 23): on a real `cohort serve --cluster` node
// with --models-dir, every file outside the models directory, every symlink leading out of it,
// every file that is not regular or not GGUF — /etc/shadow, `../` paths, a symlink to a secret,
// a FIFO, /proc/self/pagemap, a 0-byte file, a text file — is refused with a 4xx within
// 100 ms, and no answer holds a byte of the file or an absolute path. A model in the directory
// is still placed by its name.
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
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





void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

TEST(ModelsApi, FilesOutsideTheModelsDirectoryAreRefusedQuickly) {
  const TempDir dir("models-api");
  const std::string models = dir + "/models";
  std::filesystem::create_directories(models);
  const std::string fixture = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";
  std::filesystem::copy_file(fixture, models + "/good.gguf");
  // A secret outside, with recognisable bytes, and ways to reach it from inside.
  const std::string secret_text = "root:$6$SECRETHASHBYTES:19000:0:99999:7:::\n";
  WriteText(dir + "/secret.txt", secret_text);
  std::filesystem::create_symlink(dir + "/secret.txt", models + "/link-out.gguf");
  std::filesystem::create_symlink("/proc/self/pagemap", models + "/pagemap.gguf");
  ASSERT_EQ(::mkfifo((models + "/fifo.gguf").c_str(), 0600), 0);
  WriteText(models + "/empty.gguf", "");
  WriteText(models + "/notes.gguf", "TEXTBYTES this is not a model, but it is long enough to have a header\n");

  const int control = FreePort();
  ASSERT_GT(control, 0);
  Child node = Child::Start({CohortBinary(), "-t", "1", "serve", "--cluster", "--listen",
                             "127.0.0.1:" + std::to_string(control), "--port", "0", "--secret", "s",
                             "--no-multicast", "--no-benchmarks", "--state-dir", dir + "/state",
                             "--models-dir", models, "--api-key", "k"},
                            dir + "/node.err");
  const std::string api = WaitForInFile(dir + "/node.err", "API http://127\\.0\\.0\\.1:([0-9]+)", 10000);
  ASSERT_FALSE(api.empty()) << ReadFile(dir + "/node.err");
  httplib::Client http("127.0.0.1", std::stoi(api));
  http.set_read_timeout(10, 0);
  const httplib::Headers key = {{"Authorization", "Bearer k"}};

  const std::vector<std::string> hostile = {
      "/etc/shadow",        "/etc/passwd",          "../secret.txt",   "../../../../etc/passwd",
      "link-out.gguf",      "link-out",             models + "/link-out.gguf", "fifo",
      models + "/fifo.gguf", "/proc/self/pagemap",  "pagemap",         "empty",
      "notes",              dir + "/secret.txt",    "/dev/zero",       "good.gguf/../../secret.txt",
      std::string(5000, 'a')};
  for (const std::string& name : hostile) {
    const auto start = std::chrono::steady_clock::now();
    auto res = http.Post("/v1/instances", key, json({{"model", name}}).dump(), "application/json");
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_TRUE(res) << name << ": no answer";
    EXPECT_GE(res->status, 400) << name << ": " << res->body;
    EXPECT_LT(res->status, 500) << name << ": " << res->body;
    EXPECT_LT(ms, 100.0) << name;
    for (const std::string& leak : {std::string("SECRETHASH"), std::string("TEXTBYTES"), std::string("root:"),
                                    dir.path, std::string("0x")}) {
      EXPECT_EQ(res->body.find(leak), std::string::npos) << name << " leaks '" << leak << "': " << res->body;
    }
  }
  // Nothing was registered by those requests.
  auto cluster = http.Get("/v1/cluster", key);
  ASSERT_TRUE(cluster);
  EXPECT_EQ(cluster->body.find("secret"), std::string::npos);
  // The model in the directory is offered by name.
  auto good = http.Post("/v1/instances", key, json({{"model", "good"}}).dump(), "application/json");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 201) << good->body;
}

}  // namespace
}  // namespace cohort::cluster
