// The secure channel (secure_channel.h) on real sockets: the handshake between two ends that
// share a secret, records that round-trip, and every way a stranger or a man in the middle
// might get in — a tampered byte, a replayed, reordered or dropped record, another secret, no
// secret, garbage, a replayed handshake, a downgrade of the cipher — failing with an error.
// Then the TCP transport over it: a keyed group reduces correctly, a group whose ranks hold
// different secrets (or one none) never forms.
#include "comm/secure_channel.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <poll.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>

#include "comm/all_reduce.h"
#include "comm/communicator.h"
#include "comm/local_group.h"
#include "comm/socket_util.h"
#include "comm/tcp_transport.h"

namespace cohort::comm {
namespace {

using Session = std::unique_ptr<SecureSession>;

Deadline Soon() { return DeadlineAfter(std::chrono::seconds(5)); }

ChannelKey Key(const char* secret) {
  auto key = DeriveChannelKey(secret);
  COHORT_CHECK(key.ok());
  return *key;
}

// A connected pair of non-blocking stream sockets.
struct Pair {
  Fd a, b;
  Pair() {
    int fds[2];
    COHORT_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
    a = Fd(fds[0]);
    b = Fd(fds[1]);
    COHORT_CHECK(SetNonBlocking(fds[0]).ok() && SetNonBlocking(fds[1]).ok());
  }
};

// Runs the client on a.fd and the server on b.fd at once.
std::pair<Result<Session>, Result<Session>> HandshakeBoth(Pair& p, const ChannelKey& client_key,
                                                          const ChannelKey& server_key, bool client_chacha = false) {
  Result<Session> server = Unavailable("not run");
  std::thread t([&] { server = Handshake(p.b.get(), HandshakeRole::kServer, server_key, Soon()); });
  Result<Session> client = Handshake(p.a.get(), HandshakeRole::kClient, client_key, Soon(), client_chacha);
  if (!client.ok()) ::shutdown(p.a.get(), SHUT_RDWR);  // the server sees the hang-up
  t.join();
  return {std::move(client), std::move(server)};
}

std::vector<std::byte> Bytes(const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

TEST(SecureChannel, HandshakeAgreesAndRecordsRoundTripBothWays) {
  for (bool chacha : {false, true}) {
    Pair p;
    auto [client, server] = HandshakeBoth(p, Key("s3cret"), Key("s3cret"), chacha);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    EXPECT_EQ((*client)->cipher(), (*server)->cipher());
    if (chacha) {
      EXPECT_EQ((*client)->cipher(), Cipher::kChaCha20Poly1305);
    }
    std::vector<std::byte> scratch, buffer;
    for (int i = 0; i < 3; ++i) {
      const auto text = Bytes("Patient Jane Doe, MRN " + std::to_string(i));
      ASSERT_TRUE(WriteRecord(p.a.get(), **client, text, &scratch, Soon()).ok());
      auto n = ReadRecord(p.b.get(), **server, &buffer, 1 << 20, Soon());
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      EXPECT_EQ(std::vector<std::byte>(buffer.begin(), buffer.begin() + *n), text);
      ASSERT_TRUE(WriteRecord(p.b.get(), **server, text, &scratch, Soon()).ok());
      n = ReadRecord(p.a.get(), **client, &buffer, 1 << 20, Soon());
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      EXPECT_EQ(std::vector<std::byte>(buffer.begin(), buffer.begin() + *n), text);
    }
  }
}

// The ciphertext does not contain the plaintext, and the reused buffers do not grow.
TEST(SecureChannel, SealHidesThePlaintextAndOpensInPlace) {
  for (Cipher cipher : {Cipher::kAes256Gcm, Cipher::kChaCha20Poly1305}) {
    if (cipher == Cipher::kAes256Gcm && !AesGcmAvailable()) continue;
    auto tx = SecureSession::ForTest(cipher, Key("a"), Key("b"));
    auto rx = SecureSession::ForTest(cipher, Key("b"), Key("a"));
    std::vector<std::byte> plain = Bytes(std::string(1000, 'x') + "prompt");
    std::vector<std::byte> wire(plain.size() + kSealTagBytes);
    const std::byte ad[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
    tx->Seal(ad, plain, wire);
    EXPECT_EQ(std::search(wire.begin(), wire.end(), plain.end() - 6, plain.end()), wire.end());
    std::span<std::byte> data(wire.data(), plain.size());
    ASSERT_TRUE(rx->Open(ad, data, std::span<const std::byte, kSealTagBytes>(wire.data() + plain.size(), 16)).ok());
    EXPECT_TRUE(std::equal(data.begin(), data.end(), plain.begin()));
  }
}

// Two records sealed by `tx`, as they went on the wire.
struct Sealed {
  std::vector<std::byte> first, second;
};
Sealed SealTwo(SecureSession& tx, const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  Sealed s{std::vector<std::byte>(a.size() + kSealTagBytes), std::vector<std::byte>(b.size() + kSealTagBytes)};
  tx.Seal({}, a, s.first);
  tx.Seal({}, b, s.second);
  return s;
}

Status OpenCopy(SecureSession& rx, std::vector<std::byte> wire, std::span<const std::byte> ad = {}) {
  const size_t n = wire.size() - kSealTagBytes;
  return rx.Open(ad, std::span<std::byte>(wire.data(), n),
                 std::span<const std::byte, kSealTagBytes>(wire.data() + n, kSealTagBytes));
}

TEST(SecureChannel, TamperedByteFailsWithACorruptStatus) {
  auto tx = SecureSession::ForTest(Cipher::kChaCha20Poly1305, Key("a"), Key("b"));
  auto rx = SecureSession::ForTest(Cipher::kChaCha20Poly1305, Key("b"), Key("a"));
  std::vector<std::byte> wire(64 + kSealTagBytes);
  tx->Seal({}, std::vector<std::byte>(64, std::byte{7}), wire);
  for (size_t at : {size_t{0}, size_t{63}, size_t{64}, wire.size() - 1}) {  // ciphertext and tag
    std::vector<std::byte> bad = wire;
    bad[at] ^= std::byte{1};
    const Status st = OpenCopy(*rx, bad);
    EXPECT_EQ(st.code(), StatusCode::kCorrupt) << at;
    EXPECT_NE(st.message().find("failed authentication"), std::string::npos) << st.ToString();
  }
  // Altered authenticated data (a frame header) fails too.
  const std::byte ad[1] = {std::byte{9}};
  EXPECT_FALSE(OpenCopy(*rx, wire, ad).ok());
  EXPECT_TRUE(OpenCopy(*rx, wire).ok());  // the untouched record still opens: nothing advanced
}

TEST(SecureChannel, ReplayedReorderedAndDroppedRecordsFail) {
  auto tx = SecureSession::ForTest(Cipher::kChaCha20Poly1305, Key("a"), Key("b"));
  const Sealed s = SealTwo(*tx, Bytes("one"), Bytes("two"));
  {
    auto rx = SecureSession::ForTest(Cipher::kChaCha20Poly1305, Key("b"), Key("a"));
    ASSERT_TRUE(OpenCopy(*rx, s.first).ok());
    EXPECT_EQ(OpenCopy(*rx, s.first).code(), StatusCode::kCorrupt);  // replayed
  }
  {
    auto rx = SecureSession::ForTest(Cipher::kChaCha20Poly1305, Key("b"), Key("a"));
    EXPECT_EQ(OpenCopy(*rx, s.second).code(), StatusCode::kCorrupt);  // reordered (or the first dropped)
    EXPECT_TRUE(OpenCopy(*rx, s.first).ok());
    EXPECT_TRUE(OpenCopy(*rx, s.second).ok());
  }
}

TEST(SecureChannel, WrongSecretIsRefusedByBothEnds) {
  Pair p;
  auto [client, server] = HandshakeBoth(p, Key("right"), Key("wrong"));
  ASSERT_FALSE(client.ok());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(client.status().message().find("secret"), std::string::npos) << client.status().ToString();
}

// A client that speaks the plain protocol (no secret): its first bytes are a job's length
// prefix and JSON. The server refuses after reading only the handshake's fixed 40 bytes.
TEST(SecureChannel, PlainOrGarbageSpeakerIsRefusedBeforeAnythingIsParsed) {
  for (const std::string& first : {std::string("\x2b\x00\x00\x00{\"version\":3,\"rank\":1,\"threads\":2147483647}", 47),
                                   std::string(40, '\xff'), std::string(4096, 'A')}) {
    Pair p;
    ASSERT_TRUE(WriteAll(p.a.get(), std::as_bytes(std::span(first.data(), first.size())), Soon()).ok());
    auto server = Handshake(p.b.get(), HandshakeRole::kServer, Key("s"), Soon());
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.status().code(), StatusCode::kCorrupt);
    EXPECT_NE(server.status().message().find("authentication failed"), std::string::npos);
  }
  // And one that says nothing is cut off at the deadline, not waited for.
  Pair p;
  auto server = Handshake(p.b.get(), HandshakeRole::kServer, Key("s"), DeadlineAfter(std::chrono::milliseconds(100)));
  EXPECT_EQ(server.status().code(), StatusCode::kTimeout);
}

// Records what the client sent in a good handshake (M1, M3 and a record), then replays those
// bytes to a fresh server: its fresh key pair makes the old proof worthless.
TEST(SecureChannel, ReplayedHandshakeIsRefused) {
  Pair good;
  auto [client, server] = HandshakeBoth(good, Key("s"), Key("s"));
  ASSERT_TRUE(client.ok() && server.ok());
  // The client's bytes as the server's socket received them are gone; capture them by
  // running a client against a recording socket pair instead.
  Pair rec;
  Result<Session> recorded_client = Unavailable("");
  std::vector<std::byte> client_bytes;
  std::thread relay([&] {
    // Acts as the server towards the client while passing bytes to a real server.
    Pair upstream;
    Result<Session> real = Unavailable("");
    std::thread srv([&] { real = Handshake(upstream.b.get(), HandshakeRole::kServer, Key("s"), Soon()); });
    std::byte buf[256];
    const Deadline end = Soon();
    size_t to_server = 0;
    while (Clock::now() < end && to_server < 40 + 32) {
      if (PollOne(rec.b.get(), POLLIN, DeadlineAfter(std::chrono::milliseconds(20))).ok()) {
        const ssize_t n = ::recv(rec.b.get(), buf, sizeof(buf), 0);
        if (n > 0) {
          client_bytes.insert(client_bytes.end(), buf, buf + n);
          (void)WriteAll(upstream.a.get(), std::span<const std::byte>(buf, n), Soon());
          to_server += static_cast<size_t>(n);
        }
      }
      if (PollOne(upstream.a.get(), POLLIN, DeadlineAfter(std::chrono::milliseconds(1))).ok()) {
        const ssize_t n = ::recv(upstream.a.get(), buf, sizeof(buf), 0);
        if (n > 0) (void)WriteAll(rec.b.get(), std::span<const std::byte>(buf, n), Soon());
      }
    }
    srv.join();
    EXPECT_TRUE(real.ok()) << real.status().ToString();
  });
  recorded_client = Handshake(rec.a.get(), HandshakeRole::kClient, Key("s"), Soon());
  relay.join();
  ASSERT_TRUE(recorded_client.ok()) << recorded_client.status().ToString();
  ASSERT_EQ(client_bytes.size(), size_t{72});

  Pair replay;
  ASSERT_TRUE(WriteAll(replay.a.get(), client_bytes, Soon()).ok());
  auto victim = Handshake(replay.b.get(), HandshakeRole::kServer, Key("s"), Soon());
  ASSERT_FALSE(victim.ok());
  EXPECT_EQ(victim.status().code(), StatusCode::kCorrupt);
}

// A man in the middle clears the client's "I have AES" bit to force the other cipher: the
// server's proof covers the bits it saw, so the client refuses.
TEST(SecureChannel, CipherDowngradeIsDetected) {
  Pair client_side, server_side;
  Result<Session> server = Unavailable("");
  std::thread srv([&] { server = Handshake(server_side.b.get(), HandshakeRole::kServer, Key("s"), Soon()); });
  std::thread mitm([&] {
    std::byte m1[40];
    ASSERT_TRUE(ReadAll(client_side.b.get(), m1, Soon()).ok());
    m1[6] ^= std::byte{1};  // caps
    ASSERT_TRUE(WriteAll(server_side.a.get(), m1, Soon()).ok());
    std::byte m2[72];
    ASSERT_TRUE(ReadAll(server_side.a.get(), m2, Soon()).ok());
    m2[6] &= std::byte{0xfe};
    (void)WriteAll(client_side.b.get(), m2, Soon());
    ::shutdown(server_side.a.get(), SHUT_RDWR);
  });
  auto client = Handshake(client_side.a.get(), HandshakeRole::kClient, Key("s"), Soon());
  mitm.join();
  srv.join();
  EXPECT_FALSE(client.ok());
  EXPECT_FALSE(server.ok());
}

TEST(SecureChannel, OversizedRecordLengthIsRefusedBeforeReadingIt) {
  Pair p;
  auto [client, server] = HandshakeBoth(p, Key("s"), Key("s"));
  ASSERT_TRUE(client.ok() && server.ok());
  const std::byte len[4] = {std::byte{0xff}, std::byte{0xff}, std::byte{0xff}, std::byte{0x7f}};
  ASSERT_TRUE(WriteAll(p.a.get(), len, Soon()).ok());
  std::vector<std::byte> buffer;
  auto n = ReadRecord(p.b.get(), **server, &buffer, 1 << 20, Soon());
  EXPECT_EQ(n.status().code(), StatusCode::kCorrupt);
  EXPECT_TRUE(buffer.empty());  // nothing allocated for the claim
}

TEST(SecureTcpGroup, KeyedGroupAllReducesAndMixedSecretsNeverConnect) {
  TcpOptions base;
  base.key = Key("cluster");
  auto group = MakeLocalTcpGroup(3, base);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& t : *group) comms.push_back(std::make_unique<Communicator>(std::move(t)));
  const std::vector<Status> st = RunOnRanks(3, [&](int rank) -> Status {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{70000}}) {
      std::vector<float> v(n, static_cast<float>(rank + 1));
      COHORT_RETURN_IF_ERROR(AllReduceSum(*comms[rank], v));
      for (float x : v) {
        if (x != 6.0f) return Internal("wrong sum");
      }
    }
    return Status::Ok();
  });
  for (const Status& s : st) EXPECT_TRUE(s.ok()) << s.ToString();
}

// Rank 1 holds another secret (or none): the rendezvous fails with an authentication error
// within its bound, never a group that talks past itself.
TEST(SecureTcpGroup, RankWithAnotherSecretOrNoneIsRefused) {
  for (bool none : {false, true}) {
    auto l0 = TcpListener::Bind("127.0.0.1:0");
    auto l1 = TcpListener::Bind("127.0.0.1:0");
    ASSERT_TRUE(l0.ok() && l1.ok());
    TcpOptions o;
    o.addresses = {(*l0)->address(), (*l1)->address()};
    o.connect_timeout = std::chrono::milliseconds(1500);
    o.key = Key("right");
    TcpOptions o1 = o;
    o1.rank = 1;
    if (none) {
      o1.key.reset();
    } else {
      o1.key = Key("wrong");
    }
    Result<std::unique_ptr<Transport>> r0 = Unavailable(""), r1 = Unavailable("");
    std::thread t0([&] { r0 = ConnectTcpGroup(o, std::move(*l0)); });
    r1 = ConnectTcpGroup(o1, std::move(*l1));
    t0.join();
    EXPECT_FALSE(r0.ok());
    EXPECT_FALSE(r1.ok());
    if (!none) {
      EXPECT_NE(r1.status().message().find("authentication failed"), std::string::npos) << r1.status().ToString();
    }
  }
}

// A keyed 2-rank group whose one link runs through a relay that flips one payload byte of
// the first data frame from rank 1: rank 0's receive fails authentication (and says so)
// instead of handing the altered bytes up.
TEST(SecureTcpGroup, FrameAlteredOnTheWireFailsTheReceive) {
  auto l0 = TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(l0.ok());
  auto relay_listener = TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(relay_listener.ok());
  const std::string rank0_address = (*l0)->address();
  // Rank 1 sends 72 handshake bytes and a 44-byte sealed hello, then the frame's 24-byte header.
  constexpr size_t kFlipAt = 72 + 44 + 24 + 10;
  std::thread relay([&] {
    Fd from, to;
    if (!PollOne((*relay_listener)->fd(), POLLIN, Soon()).ok()) return;
    from = Fd(::accept4((*relay_listener)->fd(), nullptr, nullptr, SOCK_CLOEXEC));
    auto addr = SocketAddress::Parse(rank0_address);
    auto c = ConnectTcp(*addr, Soon());
    if (!from.valid() || !c.ok()) return;
    to = std::move(*c);
    (void)SetNonBlocking(from.get());
    size_t forwarded = 0;
    std::byte buf[4096];
    const Deadline end = Soon();
    while (Clock::now() < end) {
      pollfd p[2] = {{from.get(), POLLIN, 0}, {to.get(), POLLIN, 0}};
      if (::poll(p, 2, 20) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = ::recv(from.get(), buf, sizeof(buf), 0);
        if (n <= 0) break;
        if (forwarded <= kFlipAt && kFlipAt < forwarded + static_cast<size_t>(n)) buf[kFlipAt - forwarded] ^= std::byte{4};
        forwarded += static_cast<size_t>(n);
        if (!WriteAll(to.get(), std::span<const std::byte>(buf, static_cast<size_t>(n)), Soon()).ok()) break;
      }
      if (p[1].revents != 0) {
        const ssize_t n = ::recv(to.get(), buf, sizeof(buf), 0);
        if (n <= 0) break;
        if (!WriteAll(from.get(), std::span<const std::byte>(buf, static_cast<size_t>(n)), Soon()).ok()) break;
      }
    }
  });
  TcpOptions o;
  o.addresses = {(*relay_listener)->address(), "127.0.0.1:1"};  // rank 1 reaches rank 0 via the relay
  o.key = Key("cluster");
  o.connect_timeout = std::chrono::milliseconds(3000);
  TcpOptions o1 = o;
  o1.rank = 1;
  Result<std::unique_ptr<Transport>> r0 = Unavailable(""), r1 = Unavailable("");
  std::thread t0([&] { r0 = ConnectTcpGroup(o, std::move(*l0)); });
  r1 = ConnectTcpGroup(o1);
  t0.join();
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  std::vector<std::byte> out(1000, std::byte{0x5a}), in(1000);
  ASSERT_TRUE((*r1)->Send(0, 7, out, Soon()).ok());
  const Status got = (*r0)->Recv(1, 7, in, Soon());
  EXPECT_EQ(got.code(), StatusCode::kCorrupt) << got.ToString();
  EXPECT_NE(got.message().find("failed authentication"), std::string::npos) << got.ToString();
  EXPECT_EQ(std::count(in.begin(), in.end(), std::byte{0x5a}), 0);  // nothing altered reached us
  (*r0)->Close();
  (*r1)->Close();
  relay.join();
}

}  // namespace
}  // namespace cohort::comm
