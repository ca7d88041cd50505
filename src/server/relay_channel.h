// The channel API requests are relayed on between the nodes of a cluster: HTTP over TLS 1.3
// with an external pre-shared key derived from the cluster secret (comm::DeriveSubKey), and no
// certificates. Both ends prove the key in the handshake (the PSK binder, then Finished), the
// (EC)DHE exchange under it gives each connection fresh keys, so a LAN attacker without the
// secret can neither read a relayed prompt or API key, nor pose as either node, nor replay a
// recorded connection. Each node serves its own routes on a second port for it (RelayListener),
// so the client-facing port stays as configured: plain HTTP, or TLS with --tls-cert.
#pragma once

#include <httplib.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "comm/secure_channel.h"
#include "comm/socket_util.h"
#include "core/status.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace cohort::server {

class HardenedServer;

// The PSK of the relay: never the data plane's key itself.
comm::ChannelKey RelayKeyOf(const comm::ChannelKey& cluster_key);

// A client for one relayed request to `upstream` (host:port): over the relay channel keyed by
// `key` (the cluster's data-plane key; RelayKeyOf is applied here), or plain HTTP without one
// (`cohort serve` tests, loopback relays in unit tests).
std::shared_ptr<httplib::ClientImpl> MakeRelayClient(const std::string& upstream,
                                                     const std::optional<comm::ChannelKey>& key);

struct RelayListenerOptions {
  std::string listen;                // host:port (port 0: any free one)
  comm::ChannelKey key;              // the cluster's data-plane key
  // Hosts a connection may come from (the members'); a connection from another is closed
  // before its handshake, so a flood of strangers costs one accept each. Unset: any host.
  std::function<bool(const std::string& host)> admit_host;
  int connections_max = 64;          // connections served at once; more are closed at accept
  int handshake_timeout_s = 5;       // a connection that has not finished its TLS handshake
};

// Accepts the relay channel's connections and serves them with `routes`' handlers (the
// node's one route table). Requests on it are checked like any other: the API key the client
// sent travels inside the channel, and the serving node checks it.
class RelayListener {
 public:
  static Result<std::unique_ptr<RelayListener>> Bind(const RelayListenerOptions& options, HardenedServer& routes);
  ~RelayListener();
  RelayListener(const RelayListener&) = delete;
  RelayListener& operator=(const RelayListener&) = delete;

  int port() const { return port_; }
  void Start();
  // Stops accepting and waits for the connections in service.
  void Stop();

 private:
  RelayListener(const RelayListenerOptions& options, HardenedServer& routes) : options_(options), routes_(routes) {}
  void AcceptLoop();

  const RelayListenerOptions options_;
  HardenedServer& routes_;
  comm::Fd listen_fd_;
  int port_ = 0;
  comm::ChannelKey key_;  // the PSK; ctx_ points at it
  SSL_CTX* ctx_ = nullptr;
  std::unique_ptr<httplib::ThreadPool> pool_;
  std::atomic<int> active_{0};
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
};

}  // namespace cohort::server
