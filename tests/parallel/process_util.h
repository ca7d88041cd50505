// Child processes for the cluster tests: run the cohort binary with arguments, optionally
// reading the first line it prints (a worker's address), and kill or reap it; and what the
// process tests share around them: a free port, a child's stderr file read and waited on, a
// scratch folder.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace cohort::parallel::testing {

inline std::string CohortBinary() { return std::string(COHORT_BINARY_DIR) + "/bin/cohort"; }

struct Child {
  pid_t pid = -1;
  int out_fd = -1;  // the child's stdout, when captured

  Child() = default;
  Child(Child&& o) noexcept : pid(o.pid), out_fd(o.out_fd) { o.pid = o.out_fd = -1; }
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;

  // Starts `argv[0] argv[1..]`; stdout goes to a pipe, stderr to `stderr_path` if given.
  static Child Start(const std::vector<std::string>& args, const std::string& stderr_path = "") {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Child();
    Child c;
    c.pid = ::fork();
    if (c.pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      if (!stderr_path.empty()) {
        const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0) ::dup2(err, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    c.out_fd = fds[0];
    return c;
  }

  // The next line of stdout, or "" after timeout_ms.
  std::string ReadLine(int timeout_ms) {
    std::string line;
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{out_fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char ch;
      if (::read(out_fd, &ch, 1) != 1 || ch == '\n') break;
      line += ch;
    }
    return line;
  }

  // Waits up to timeout_ms; returns the exit status (or -1 when still running).
  int Wait(int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    int status = 0;
    while (std::chrono::steady_clock::now() < end) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      ::usleep(2000);
    }
    return -1;
  }

  void Kill() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }

  ~Child() {
    Kill();
    if (out_fd >= 0) ::close(out_fd);
  }
};

// A port free for both TCP and UDP now (a node's control address takes both); -1 if none.
inline int FreePort() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::getsockname(tcp, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(tcp);
      continue;
    }
    const int udp = ::socket(AF_INET, SOCK_DGRAM, 0);
    const bool both = ::bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    ::close(udp);
    ::close(tcp);
    if (both) return ntohs(a.sin_port);
  }
  return -1;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits until `pattern` occurs in the file a child writes its stderr to: its first group, or
// the whole match, or "" on timeout.
inline std::string WaitForInFile(const std::string& path, const std::string& pattern, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::smatch m;
  const std::regex re(pattern);
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = ReadFile(path);
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

// Runs `cohort ARGS` to its end, or for at most timeout_ms: its exit code (-1 if it had not
// ended) and stdout, whole, into *out when given (stderr into `err_path`).
inline int RunCohort(const std::vector<std::string>& args, std::string* out, const std::string& err_path,
                     int timeout_ms = 30000) {
  std::vector<std::string> argv = {CohortBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  Child c = Child::Start(argv, err_path);
  std::string text;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int code = -1;
  while (code < 0 && std::chrono::steady_clock::now() < end) {
    text += c.ReadLine(100) + "\n";
    code = c.Wait(1);
  }
  // The rest of its output, to the end of the pipe (blank lines included).
  char buf[4096];
  for (ssize_t n; (n = ::read(c.out_fd, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  if (out != nullptr) *out = text;
  return code;
}

// A scratch folder, removed with what the nodes left in it.
struct TempDir {
  explicit TempDir(const std::string& tag)
      : path((std::filesystem::temp_directory_path() / ("cohort-" + tag + "-" + std::to_string(::getpid()))).string()) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  operator std::string() const { return path; }
  std::string operator+(const std::string& tail) const { return path + tail; }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  const std::string path;
};

}  // namespace cohort::parallel::testing
