// The relay channel; see relay_channel.h. OpenSSL's PSK callbacks, which TLS 1.3 uses as an
// external PSK for a SHA-256 suite: the server has no certificate, so a client that does not
// offer the key (or offers another) fails the handshake; a client checks nothing but the key
// (httplib's certificate check is off: there is no certificate, and the PSK binds the server).
#include "server/relay_channel.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "server/http_front.h"

namespace cohort::server {
namespace {

constexpr char kIdentity[] = "cohort-relay-1";
constexpr char kPurpose[] = "cohort api relay v1";
// TLS 1.3 suites on SHA-256, the hash OpenSSL's PSK callbacks key in TLS 1.3.
constexpr char kSuites[] = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";

// Where an SSL_CTX keeps the relay key it was made with.
int KeyIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

const comm::ChannelKey* KeyOf(SSL* ssl) {
  return static_cast<const comm::ChannelKey*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), KeyIndex()));
}

unsigned int ClientPsk(SSL* ssl, const char*, char* identity, unsigned int identity_max, unsigned char* psk,
                       unsigned int psk_max) {
  const comm::ChannelKey* key = KeyOf(ssl);
  if (key == nullptr || identity_max < sizeof(kIdentity) || psk_max < key->bytes.size()) return 0;
  std::memcpy(identity, kIdentity, sizeof(kIdentity));
  std::memcpy(psk, key->bytes.data(), key->bytes.size());
  return static_cast<unsigned int>(key->bytes.size());
}

unsigned int ServerPsk(SSL* ssl, const char* identity, unsigned char* psk, unsigned int psk_max) {
  const comm::ChannelKey* key = KeyOf(ssl);
  if (key == nullptr || identity == nullptr || std::strcmp(identity, kIdentity) != 0) return 0;
  if (psk_max < key->bytes.size()) return 0;
  std::memcpy(psk, key->bytes.data(), key->bytes.size());
  return static_cast<unsigned int>(key->bytes.size());
}

// TLS 1.3 only, no compression, no tickets (nothing resumes outside the PSK).
void ConfigureContext(SSL_CTX* ctx, const comm::ChannelKey* key) {
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET);
  SSL_CTX_set_ciphersuites(ctx, kSuites);
  SSL_CTX_set_ex_data(ctx, KeyIndex(), const_cast<comm::ChannelKey*>(key));
}

// An SSLClient that offers the relay key and expects no certificate.
class PskClient final : public httplib::SSLClient {
 public:
  PskClient(const std::string& host, int port, const comm::ChannelKey& key)
      : httplib::SSLClient(host, port), key_(RelayKeyOf(key)) {
    SSL_CTX* ctx = ssl_context();
    ConfigureContext(ctx, &key_);
    SSL_CTX_set_psk_client_callback(ctx, ClientPsk);
    enable_server_certificate_verification(false);
  }
  ~PskClient() override { OPENSSL_cleanse(key_.bytes.data(), key_.bytes.size()); }

 private:
  comm::ChannelKey key_;
};

std::string PeerHost(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.sin_family != AF_INET) return "";
  char text[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return text;
}

}  // namespace

comm::ChannelKey RelayKeyOf(const comm::ChannelKey& cluster_key) { return comm::DeriveSubKey(cluster_key, kPurpose); }

std::shared_ptr<httplib::ClientImpl> MakeRelayClient(const std::string& upstream,
                                                     const std::optional<comm::ChannelKey>& key) {
  const size_t colon = upstream.rfind(':');
  const std::string host = colon == std::string::npos ? upstream : upstream.substr(0, colon);
  const int port = colon == std::string::npos ? 80 : std::atoi(upstream.c_str() + colon + 1);
  if (!key.has_value()) return std::make_shared<httplib::ClientImpl>(host, port);
  return std::make_shared<PskClient>(host, port, *key);
}

Result<std::unique_ptr<RelayListener>> RelayListener::Bind(const RelayListenerOptions& options,
                                                           HardenedServer& routes) {
  if (options.connections_max < 1 || options.connections_max > 4096) {
    return InvalidArgument("relay connections must be in [1, 4096]");
  }
  COHORT_ASSIGN_OR_RETURN(comm::SocketAddress addr, comm::SocketAddress::Parse(options.listen));
  std::unique_ptr<RelayListener> listener(new RelayListener(options, routes));
  auto fd = comm::ListenTcp(addr, 256);
  if (!fd.ok()) return fd.status().Annotate("relay listener " + options.listen);
  listener->listen_fd_ = std::move(*fd);
  socklen_t len = sizeof(addr.addr);
  ::getsockname(listener->listen_fd_.get(), reinterpret_cast<sockaddr*>(&addr.addr), &len);
  listener->port_ = addr.port();
  COHORT_RETURN_IF_ERROR(comm::SetNonBlocking(listener->listen_fd_.get()));
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Internal("relay TLS: cannot make a context");
  listener->ctx_ = ctx;
  listener->key_ = RelayKeyOf(options.key);
  ConfigureContext(ctx, &listener->key_);
  SSL_CTX_set_psk_server_callback(ctx, ServerPsk);
  return listener;
}

RelayListener::~RelayListener() {
  Stop();
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  OPENSSL_cleanse(key_.bytes.data(), key_.bytes.size());
}

void RelayListener::Start() {
  if (accept_thread_.joinable()) return;
  pool_ = std::make_unique<httplib::ThreadPool>(static_cast<size_t>(options_.connections_max));
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void RelayListener::Stop() {
  if (stop_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  if (pool_ != nullptr) pool_->shutdown();  // after the connections in service ended
}

void RelayListener::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    comm::Fd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    if (options_.admit_host && !options_.admit_host(PeerHost(fd.get()))) continue;  // closed: not a member
    if (active_.load() >= options_.connections_max) continue;                         // closed: all busy
    ++active_;
    const int sock = fd.Release();
    pool_->enqueue([this, sock] {
      routes_.ServeConnection(sock, ctx_, options_.handshake_timeout_s);
      --active_;
    });
  }
}

}  // namespace cohort::server
