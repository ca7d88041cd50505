// HardenedServer; see http_front.h. The streams below follow cpp-httplib's SocketStream and
// SSLSocketStream (poll, then read or write), with the request deadline added to every read.
#include "server/http_front.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include <fmt/format.h>

namespace cohort::server {
namespace {

using Clock = std::chrono::steady_clock;

// Set by a handler on the thread serving its connection (CloseAfterThisResponse).
thread_local bool close_after_response = false;

std::string OpenSslError() {
  char text[256];
  ERR_error_string_n(ERR_get_error(), text, sizeof(text));
  return text;
}

// Polls `fd` for `events` up to `ms` (at most; 0: look only).
bool PollFor(int fd, short events, int64_t ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, ms)));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

void AddressOf(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  const int got = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                       : ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (got != 0) return;
  char text[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
    port = ntohs(a->sin6_port);
  }
  ip = text;
}

// One request's stream over a non-blocking socket, plain or TLS. Reads fail once the
// request's deadline has passed; writes are bounded per write, as cpp-httplib's are.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(int fd, SSL* ssl, int64_t read_ms, int64_t write_ms, Clock::time_point deadline)
      : fd_(fd), ssl_(ssl), read_ms_(read_ms), write_ms_(write_ms), deadline_(deadline) {}

  bool is_readable() const override {
    if (ssl_ != nullptr && SSL_pending(ssl_) > 0) return true;
    return PollFor(fd_, POLLIN, read_ms_);
  }
  // Writable, and the client has not hung up (a streaming response stops then).
  bool is_writable() const override {
    if (!PollFor(fd_, POLLOUT, write_ms_)) return false;
    if (!PollFor(fd_, POLLIN, 0)) return true;
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n != 0 && !(n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

  ssize_t read(char* ptr, size_t size) override {
    for (;;) {
      const bool pending = ssl_ != nullptr && SSL_pending(ssl_) > 0;
      if (!pending && !WaitRead()) return -1;
      if (ssl_ == nullptr) {
        const ssize_t n = ::recv(fd_, ptr, size, 0);
        if (n >= 0) return n;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return -1;
      }
      const int n = SSL_read(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n > 0) return n;
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_READ) continue;
      if (err == SSL_ERROR_WANT_WRITE && PollFor(fd_, POLLOUT, write_ms_)) continue;
      return err == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      if (!PollFor(fd_, POLLOUT, write_ms_)) return -1;
      if (ssl_ == nullptr) {
        const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
        if (n >= 0) return n;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
        return -1;
      }
      const int n = SSL_write(ssl_, ptr, static_cast<int>(std::min<size_t>(size, 1 << 30)));
      if (n > 0) return n;
      const int err = SSL_get_error(ssl_, n);
      if (err == SSL_ERROR_WANT_WRITE) continue;
      if (err == SSL_ERROR_WANT_READ && PollFor(fd_, POLLIN, read_ms_)) continue;
      return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { AddressOf(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { AddressOf(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  // Readable before both the read timeout and the request's deadline.
  bool WaitRead() const {
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) return false;
    return PollFor(fd_, POLLIN, std::min(read_ms_, left));
  }

  const int fd_;
  SSL* const ssl_;
  const int64_t read_ms_, write_ms_;
  const Clock::time_point deadline_;
};

// The TLS handshake of a fresh connection, within `deadline`.
bool AcceptTls(SSL* ssl, int fd, Clock::time_point deadline) {
  for (;;) {
    const int n = SSL_accept(ssl);
    if (n == 1) return true;
    const int err = SSL_get_error(ssl, n);
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    if (err == SSL_ERROR_WANT_READ && PollFor(fd, POLLIN, left)) continue;
    if (err == SSL_ERROR_WANT_WRITE && PollFor(fd, POLLOUT, left)) continue;
    return false;  // not TLS (plain HTTP to this port), or a failed handshake
  }
}

}  // namespace

Status FrontOptions::Validate() const {
  if (backlog < 16 || backlog > 65535) return InvalidArgument("the listen backlog must be in [16, 65535]");
  if (request_deadline_s < 1 || request_deadline_s > 3600) {
    return InvalidArgument("the request deadline must be in [1, 3600] s");
  }
  if (tls_cert.empty() != tls_key.empty()) return InvalidArgument("--tls-cert and --tls-key go together");
  if (silent_connections_max < 1 || silent_connections_max > 4096) {
    return InvalidArgument("silent connections must be in [1, 4096]");
  }
  return Status::Ok();
}

Result<std::unique_ptr<HardenedServer>> HardenedServer::Create(const FrontOptions& options) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<HardenedServer> server(new HardenedServer(options));
  if (options.tls_cert.empty()) return server;
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("TLS: " + OpenSslError());
  server->ctx_ = ctx;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(ctx, options.tls_cert.c_str()) != 1) {
    return InvalidArgument("--tls-cert: cannot load the certificate: " + OpenSslError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, options.tls_key.c_str(), SSL_FILETYPE_PEM) != 1) {
    return InvalidArgument("--tls-key: cannot load the private key: " + OpenSslError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("--tls-key does not match --tls-cert");
  }
  return server;
}

HardenedServer::~HardenedServer() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

Status HardenedServer::RaiseBacklog() {
  const socket_t fd = svr_sock_;
  if (fd == INVALID_SOCKET) return Internal("the HTTP server is not bound");
  // Linux applies a second listen() to a listening socket as a new backlog.
  if (::listen(fd, options_.backlog) != 0) {
    return IoError(fmt::format("listen backlog {}: {}", options_.backlog, std::strerror(errno)));
  }
  return Status::Ok();
}

void HardenedServer::CloseAfterThisResponse() { close_after_response = true; }

bool HardenedServer::AwaitRequest(socket_t sock, bool tls_pending) const {
  if (tls_pending) return true;
  const auto until = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
  // In slices, so a server that stops does not wait on its idle connections.
  while (svr_sock_ != INVALID_SOCKET) {
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    if (PollFor(sock, POLLIN, std::min<int64_t>(left, 100))) return true;
  }
  return false;
}

bool HardenedServer::AwaitFirstBytes(socket_t sock) {
  if (PollFor(sock, POLLIN, 0)) return true;  // a client sends its request (or hello) at once
  if (silent_.fetch_add(1) >= options_.silent_connections_max) {
    silent_.fetch_sub(1);
    // No waiting place is free. A client that connected a moment ago may not have sent yet
    // (one of a burst of 64, or a real client among a flood's connections): it gets a short
    // grace; a silent flooder costs a thread only that long, then is closed (nothing was sent,
    // so nothing is lost but the connection).
    constexpr int kGraceMs = 100;
    return PollFor(sock, POLLIN, kGraceMs);
  }
  const bool readable = AwaitRequest(sock, false);
  silent_.fetch_sub(1);
  return readable;
}

bool HardenedServer::process_and_close_socket(socket_t sock) {
  return ServeConnection(sock, ctx_, options_.request_deadline_s);
}

bool HardenedServer::ServeConnection(socket_t sock, SSL_CTX* ctx, int handshake_s) {
  const int flags = ::fcntl(sock, F_GETFL);
  const bool nonblocking = flags >= 0 && ::fcntl(sock, F_SETFL, flags | O_NONBLOCK) == 0;
  const int64_t read_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
  const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
  SSL* ssl = nullptr;
  bool ok = nonblocking && AwaitFirstBytes(sock);
  if (ok && ctx != nullptr) {
    ssl = SSL_new(ctx);
    ok = ssl != nullptr && SSL_set_fd(ssl, sock) == 1 &&
         AcceptTls(ssl, sock, Clock::now() + std::chrono::seconds(handshake_s));
  }
  bool ret = false;
  for (size_t left = keep_alive_max_count_; ok && left > 0 && svr_sock_ != INVALID_SOCKET; --left) {
    if (!AwaitRequest(sock, ssl != nullptr && SSL_pending(ssl) > 0)) break;
    DeadlineStream stream(sock, ssl, read_ms, write_ms,
                          Clock::now() + std::chrono::seconds(options_.request_deadline_s));
    bool closed = false;
    close_after_response = false;
    ret = process_request(stream, /*close_connection=*/left == 1, closed, nullptr);
    if (!ret || closed || close_after_response) break;
  }
  if (ssl != nullptr) {
    if (ok) SSL_shutdown(ssl);
    SSL_free(ssl);
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ret;
}

}  // namespace cohort::server
