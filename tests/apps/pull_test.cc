// `cohort pull` against an HTTP server in this test: a transfer the server breaks off
// half-way is resumed with a Range request and the file is the original, byte for byte; a
// file whose bytes differ from its published SHA-256 (Hugging Face's X-Linked-Etag) is
// refused and nothing of it is kept; OWNER/REPO:FILE names Hugging Face's resolve URL; and a
// bare OWNER/REPO is listed through the hub's model API (--hub: this server): its one GGUF is
// pulled, several are an error naming them unless --quant picks one.
#include <httplib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../parallel/process_util.h"
#include "parallel/file_digest.h"
#include "server/model_pull.h"

namespace cohort::server {
namespace {

using parallel::testing::Child;
using parallel::testing::CohortBinary;
namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Serves /cut.gguf (the first plain GET breaks off half-way; later ones, and ranges, are
// whole) and /bad.gguf (one byte changed, published with the real file's digest).
class FileServer {
 public:
  explicit FileServer(std::string bytes, std::string sha256) : bytes_(std::move(bytes)), sha256_(std::move(sha256)) {
    server_.Get("/cut.gguf", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ranges_.push_back(req.get_header_value("Range"));
      }
      if (!req.has_header("Range") && !cut_once_.exchange(true)) {
        const size_t half = bytes_.size() / 2;
        res.set_content_provider(bytes_.size(), "application/octet-stream",
                                 [this, half](size_t offset, size_t length, httplib::DataSink& sink) {
                                   if (offset >= half) return false;  // the connection drops
                                   sink.write(bytes_.data() + offset, std::min(length, half - offset));
                                   return true;
                                 });
        return;
      }
      res.set_content(bytes_, "application/octet-stream");
    });
    server_.Get("/bad.gguf", [this](const httplib::Request&, httplib::Response& res) {
      std::string corrupt = bytes_;
      corrupt[corrupt.size() / 3] ^= 0x40;
      res.set_header("X-Linked-Etag", "\"" + sha256_ + "\"");
      res.set_content(corrupt, "application/octet-stream");
    });
    // The hub's model API and resolve URLs (Hugging Face's shapes): "one" holds one GGUF,
    // "many" two quantizations, "none" only a README; anything else is a 404.
    const auto listing = [](std::vector<std::string> files) {
      std::string siblings;
      for (const std::string& f : files) {
        if (!siblings.empty()) siblings += ',';
        siblings += "{\"rfilename\":\"";
        siblings += f;
        siblings += "\"}";
      }
      return "{\"id\":\"x\",\"siblings\":[" + siblings + "]}";
    };
    listings_ = {{"one", listing({"README.md", "one.Q4_0.gguf"})},
                 {"many", listing({"README.md", "many-Q4_K_M.gguf", "many-Q8_0.gguf", "config.json"})},
                 {"none", listing({"README.md"})}};
    server_.Get(R"(/api/models/owner/([a-z]+))", [this](const httplib::Request& req, httplib::Response& res) {
      auto it = listings_.find(req.matches[1].str());
      if (it == listings_.end()) {
        res.status = 404;
        res.set_content("{\"error\":\"Repository not found\"}", "application/json");
        return;
      }
      res.set_content(it->second, "application/json");
    });
    server_.Get(R"(/owner/([a-z]+)/resolve/main/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (req.method == "GET") resolved_.push_back(req.matches[2].str());  // not the digest's HEAD
      }
      res.set_header("X-Linked-Etag", "\"" + sha256_ + "\"");
      res.set_content(bytes_, "application/octet-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FileServer() {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }
  std::vector<std::string> ranges() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ranges_;
  }
  std::vector<std::string> resolved() {  // files fetched through /owner/REPO/resolve/main/
    std::lock_guard<std::mutex> lock(mutex_);
    return resolved_;
  }

 private:
  std::string bytes_, sha256_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> cut_once_{false};
  std::mutex mutex_;
  std::vector<std::string> ranges_;
  std::vector<std::string> resolved_;
  std::map<std::string, std::string> listings_;
};

// Runs `cohort pull ARGS`; its exit code, stdout and stderr.
int Pull(const std::vector<std::string>& args, const std::string& err_path, std::string* out) {
  std::vector<std::string> argv = {CohortBinary(), "pull"};
  argv.insert(argv.end(), args.begin(), args.end());
  Child c = Child::Start(argv, err_path);
  std::string text;
  int code = -1;
  for (int i = 0; i < 600 && code < 0; ++i) {
    text += c.ReadLine(50);
    code = c.Wait(1);
  }
  text += c.ReadLine(200);
  *out = text;
  return code;
}

class PullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("cohort-pull-" + std::to_string(::getpid()))).string();
    fs::create_directories(dir_);
    model_ = std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf";
    bytes_ = ReadFile(model_);
    ASSERT_GT(bytes_.size(), 100000u);
    auto sha = parallel::Sha256OfFile(model_);
    ASSERT_TRUE(sha.ok());
    sha_ = *sha;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir_, model_, bytes_, sha_;
};

TEST_F(PullTest, ABrokenTransferIsResumedAndVerified) {
  FileServer server(bytes_, sha_);
  std::string out;
  const int code = Pull({server.Url("/cut.gguf"), "--models-dir", dir_ + "/models", "--sha256", sha_}, dir_ + "/err", &out);
  ASSERT_EQ(code, 0) << ReadFile(dir_ + "/err") << out;
  EXPECT_EQ(ReadFile(dir_ + "/models/cut.gguf"), bytes_);
  EXPECT_FALSE(fs::exists(dir_ + "/models/cut.gguf.part"));
  // The second request asked for the rest only: the half the first one delivered.
  const std::vector<std::string> ranges = server.ranges();
  ASSERT_GE(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "bytes=" + std::to_string(bytes_.size() / 2) + "-");
  EXPECT_NE(ReadFile(dir_ + "/err").find("resuming"), std::string::npos) << ReadFile(dir_ + "/err");
  EXPECT_NE(out.find("verified"), std::string::npos) << out;
  // Not a terminal: progress comes as plain lines, the last one at 100%.
  EXPECT_NE(ReadFile(dir_ + "/err").find("100.0%"), std::string::npos) << ReadFile(dir_ + "/err");
  // Pulled again: the file is there with its digest; nothing is fetched.
  const size_t requests = server.ranges().size();
  ASSERT_EQ(Pull({server.Url("/cut.gguf"), "--models-dir", dir_ + "/models", "--sha256", sha_}, dir_ + "/err", &out), 0);
  EXPECT_EQ(server.ranges().size(), requests);
  EXPECT_NE(out.find("have "), std::string::npos) << out;
}

TEST_F(PullTest, AFileThatDoesNotMatchItsPublishedDigestIsRefused) {
  FileServer server(bytes_, sha_);
  std::string out;
  const int code = Pull({server.Url("/bad.gguf"), "--models-dir", dir_ + "/models"}, dir_ + "/err", &out);
  EXPECT_EQ(code, 1);
  const std::string err = ReadFile(dir_ + "/err");
  EXPECT_NE(err.find("not the expected " + sha_), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ + "/models/bad.gguf"));
  EXPECT_FALSE(fs::exists(dir_ + "/models/bad.gguf.part"));
  // A wrong --sha256 for a good file is refused the same way.
  EXPECT_EQ(Pull({server.Url("/cut.gguf"), "--models-dir", dir_ + "/m2", "--sha256", std::string(64, 'a')}, dir_ + "/err",
                 &out), 1);
  EXPECT_FALSE(fs::exists(dir_ + "/m2/cut.gguf"));
}

TEST_F(PullTest, ABareRepoPullsItsOnlyGgufOrNamesTheChoices) {
  FileServer server(bytes_, sha_);
  const std::string hub = server.Url("");
  std::string out;
  // One GGUF: pulled, verified, and said which.
  ASSERT_EQ(Pull({"owner/one", "--hub", hub, "--models-dir", dir_ + "/models"}, dir_ + "/err", &out), 0)
      << ReadFile(dir_ + "/err") << out;
  EXPECT_EQ(ReadFile(dir_ + "/models/one.Q4_0.gguf"), bytes_);
  EXPECT_NE(ReadFile(dir_ + "/err").find("owner/one: pulling one.Q4_0.gguf (its only GGUF file)"), std::string::npos)
      << ReadFile(dir_ + "/err");
  EXPECT_NE(out.find("verified"), std::string::npos) << out;
  // Two: nothing fetched, a non-zero exit, both names and how to choose.
  EXPECT_EQ(Pull({"owner/many", "--hub", hub, "--models-dir", dir_ + "/m2"}, dir_ + "/err", &out), 1);
  std::string err = ReadFile(dir_ + "/err");
  EXPECT_NE(err.find("owner/many has 2 GGUF files: many-Q4_K_M.gguf, many-Q8_0.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("--quant"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ + "/m2"));
  // --quant (any case) picks one of them.
  ASSERT_EQ(Pull({"owner/many", "--quant", "q8_0", "--hub", hub, "--models-dir", dir_ + "/m2"}, dir_ + "/err", &out), 0)
      << ReadFile(dir_ + "/err");
  EXPECT_EQ(ReadFile(dir_ + "/m2/many-Q8_0.gguf"), bytes_);
  EXPECT_FALSE(fs::exists(dir_ + "/m2/many-Q4_K_M.gguf"));
  EXPECT_NE(ReadFile(dir_ + "/err").find("pulling many-Q8_0.gguf (matches --quant q8_0)"), std::string::npos);
  // A hint that matches nothing, a repository without GGUF files, one that does not exist.
  EXPECT_EQ(Pull({"owner/many", "--quant", "Q2_K", "--hub", hub, "--models-dir", dir_ + "/m3"}, dir_ + "/err", &out), 1);
  EXPECT_NE(ReadFile(dir_ + "/err").find("no GGUF of owner/many matches --quant Q2_K"), std::string::npos);
  EXPECT_EQ(Pull({"owner/none", "--hub", hub, "--models-dir", dir_ + "/m3"}, dir_ + "/err", &out), 1);
  EXPECT_NE(ReadFile(dir_ + "/err").find("owner/none has no .gguf file"), std::string::npos) << ReadFile(dir_ + "/err");
  EXPECT_EQ(Pull({"owner/gone", "--hub", hub, "--models-dir", dir_ + "/m3"}, dir_ + "/err", &out), 1);
  EXPECT_NE(ReadFile(dir_ + "/err").find("owner/gone: no such repository"), std::string::npos) << ReadFile(dir_ + "/err");
  EXPECT_FALSE(fs::exists(dir_ + "/m3"));
  EXPECT_EQ(server.resolved(), (std::vector<std::string>{"one.Q4_0.gguf", "many-Q8_0.gguf"}));
}

TEST(PullUrl, HuggingFaceNamesAndBadSources) {
  auto url = PullUrlOf("unsloth/Qwen3-0.6B-GGUF:Qwen3-0.6B-Q4_0.gguf");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(*url, "https://huggingface.co/unsloth/Qwen3-0.6B-GGUF/resolve/main/Qwen3-0.6B-Q4_0.gguf");
  EXPECT_EQ(*PullUrlOf("http://h:1/x.gguf"), "http://h:1/x.gguf");
  EXPECT_FALSE(PullUrlOf("just-a-name").ok());
  EXPECT_FALSE(PullUrlOf("owner/repo").ok());  // listed first (ChooseRepoFile), not a URL
  EXPECT_TRUE(IsBareRepo("owner/repo"));
  EXPECT_FALSE(IsBareRepo("owner/repo:f.gguf"));
  EXPECT_FALSE(IsBareRepo("a/b/c"));
  EXPECT_FALSE(IsBareRepo("/repo"));
  EXPECT_EQ(*PullUrlOf("o/r:f.gguf", "http://mirror:9"), "http://mirror:9/o/r/resolve/main/f.gguf");
  PullOptions o;
  o.source = "ftp://h/x.gguf";
  o.dest_dir = "/tmp";
  EXPECT_EQ(PullModel(o).status().code(), StatusCode::kInvalidArgument);
  o.source = "http://h/x.gguf";
  o.sha256 = "xyz";
  EXPECT_EQ(PullModel(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::server
