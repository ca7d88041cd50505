// ConnectionProbe against real TCP connections on 127.0.0.1: it finds the server side of a
// connection by its addresses, stays quiet while the client is there (also with unread
// pipelined bytes), and reports the client gone after a close or a reset.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "server/connection_probe.h"

namespace cohort::server {
namespace {

struct Connection {
  int listener = -1, client = -1, server = -1;
  ConnectionAddress address;
  ~Connection() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

int PortOf(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  EXPECT_EQ(peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                 : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  return ntohs(a.sin_port);
}

void Connect(Connection& c) {
  c.listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(c.listener, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(c.listener, 1), 0);
  a.sin_port = htons(static_cast<uint16_t>(PortOf(c.listener, false)));
  c.client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(c.client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  c.server = accept(c.listener, nullptr, nullptr);
  ASSERT_GE(c.server, 0);
  c.address = {"127.0.0.1", PortOf(c.server, false), "127.0.0.1", PortOf(c.server, true)};
}

// Polls for up to a second: the peer's FIN or RST arrives asynchronously.
bool GoneWithin1s(const ConnectionProbe& probe) {
  for (int i = 0; i < 100; ++i) {
    if (probe.ClientGone()) return true;
    usleep(10000);
  }
  return false;
}

TEST(ConnectionProbe, FindsTheConnectionAndSeesTheClientClose) {
  Connection c;
  Connect(c);
  const ConnectionProbe probe = ConnectionProbe::Find(c.address);
  ASSERT_TRUE(probe.found());
  EXPECT_EQ(probe.fd(), c.server);
  EXPECT_FALSE(probe.ClientGone());
  // Bytes of a next request waiting to be read are no hang-up, and the peek leaves them.
  ASSERT_EQ(send(c.client, "GET", 3, 0), 3);
  usleep(20000);
  EXPECT_FALSE(probe.ClientGone());
  char buf[4] = {};
  ASSERT_EQ(recv(c.server, buf, sizeof(buf), MSG_DONTWAIT), 3);
  EXPECT_EQ(std::string(buf, 3), "GET");
  close(c.client);
  c.client = -1;
  EXPECT_TRUE(GoneWithin1s(probe));
}

TEST(ConnectionProbe, SeesAReset) {
  Connection c;
  Connect(c);
  const ConnectionProbe probe = ConnectionProbe::Find(c.address);
  ASSERT_TRUE(probe.found());
  linger hard{1, 0};  // close with RST, as a killed client's kernel may
  ASSERT_EQ(setsockopt(c.client, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)), 0);
  close(c.client);
  c.client = -1;
  EXPECT_TRUE(GoneWithin1s(probe));
}

TEST(ConnectionProbe, UnknownConnectionIsNeverGone) {
  Connection c;
  Connect(c);
  ConnectionAddress other = c.address;
  other.remote_port = other.remote_port == 1 ? 2 : 1;
  const ConnectionProbe probe = ConnectionProbe::Find(other);
  EXPECT_FALSE(probe.found());
  EXPECT_FALSE(probe.ClientGone());
  EXPECT_FALSE(ConnectionProbe::Find({}).found());
}

}  // namespace
}  // namespace cohort::server
