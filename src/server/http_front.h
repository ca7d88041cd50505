// HardenedServer: cpp-httplib's Server with the connection handling a public API needs and
// Debian's compiled cpp-httplib 0.11 lacks. Its listen backlog is compiled in at 5, so a
// burst of clients got TCP resets: RaiseBacklog() calls listen() again on the bound socket
// (Linux takes the new backlog). Its reads are bounded per read only, so a client sending a
// byte now and then held a connection forever (slow-loris): here one request's line, headers
// and body must arrive within a deadline. And TLS (OpenSSL, TLS 1.2+) is done here, with the
// handshake under the same deadline. Requests themselves are parsed and routed by cpp-httplib
// (Server::process_request); only the socket under them is ours.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "core/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace cohort::server {

struct FrontOptions {
  int backlog = 1024;            // pending connections the kernel queues (capped by somaxconn)
  int request_deadline_s = 30;   // a request's line, headers and body, from its first byte
  // Connections that have sent nothing yet, each waiting in a thread for its first bytes;
  // one more gets a 100 ms grace and is then closed, so a flood of silent connections takes this
  // many threads, and the others a moment each, and the rest go on serving.
  int silent_connections_max = 16;
  std::string tls_cert;          // PEM chain; with tls_key, the server speaks only TLS
  std::string tls_key;           // PEM private key
  Status Validate() const;
};

class HardenedServer final : public httplib::Server {
 public:
  // Fails on a certificate or key OpenSSL cannot load (or that do not match).
  static Result<std::unique_ptr<HardenedServer>> Create(const FrontOptions& options);
  ~HardenedServer() override;

  // After bind_to_port / bind_to_any_port: the backlog of options.backlog.
  Status RaiseBacklog();
  bool tls() const { return ctx_ != nullptr; }
  // From a handler: the connection closes after this response. A request refused before its
  // body was read (401, 429 in the pre-routing check) leaves that body in the socket, where
  // it would be parsed as the next request.
  static void CloseAfterThisResponse();
  // Serves a connection accepted by another listener (the relay port, relay_channel.h) with
  // this server's routes and limits, TLS under `ctx` (null: plain) with its handshake within
  // `handshake_s`; closes `sock`. Ends with the server, like its own connections.
  bool ServeConnection(socket_t sock, SSL_CTX* ctx, int handshake_s);

 private:
  explicit HardenedServer(const FrontOptions& options) : options_(options) {}
  bool process_and_close_socket(socket_t sock) override;
  // Waits for the next request of a kept-alive connection; false when it closes, stays
  // quiet past the keep-alive timeout, or the server stops.
  bool AwaitRequest(socket_t sock, bool tls_pending) const;
  // A fresh connection's first bytes: at once, or after a wait in one of the
  // silent_connections_max waiting places (or a short grace when none is free); false when
  // nothing came.
  bool AwaitFirstBytes(socket_t sock);

  const FrontOptions options_;
  SSL_CTX* ctx_ = nullptr;
  std::atomic<int> silent_{0};  // connections waiting for their first bytes
};

}  // namespace cohort::server
