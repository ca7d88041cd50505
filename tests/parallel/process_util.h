// Child processes for the cluster tests: run the cohort binary with arguments, optionally
// reading the first line it prints (a worker's address), and kill or reap it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
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

}  // namespace cohort::parallel::testing
