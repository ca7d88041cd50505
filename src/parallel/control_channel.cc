// ControlChannel; see control_channel.h.
#include "parallel/control_channel.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "comm/socket_util.h"

namespace cohort::parallel {

Result<std::unique_ptr<ControlChannel>> ControlChannel::Connect(const std::string& address,
                                                                std::chrono::milliseconds timeout,
                                                                const std::optional<comm::ChannelKey>& key) {
  COHORT_ASSIGN_OR_RETURN(sockaddr_in addr, comm::ParseAddress(address));
  const comm::Deadline deadline = comm::DeadlineAfter(timeout);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return IoError(std::string("socket: ") + std::strerror(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      COHORT_RETURN_IF_ERROR(comm::SetNonBlocking(fd));
      COHORT_RETURN_IF_ERROR(comm::ConfigureStreamSocket(fd, false, 0));
      if (!key.has_value()) return std::make_unique<ControlChannel>(fd);
      auto session = comm::Handshake(fd, comm::HandshakeRole::kClient, *key, deadline);
      if (!session.ok()) {
        ::close(fd);
        if (session.status().code() == StatusCode::kUnavailable) {
          // A worker closes a connection from a host it does not admit before the handshake.
          return Unavailable("worker " + address + " closed the connection in the handshake (" +
                             session.status().message() + "); a worker closes those from hosts it does not admit "
                             "(not a member, or not in its --allow-coordinator)");
        }
        return session.status().Annotate("worker " + address);
      }
      return std::make_unique<ControlChannel>(fd, std::move(*session));
    }
    const int err = errno;
    ::close(fd);
    if (comm::Clock::now() >= deadline) {
      return Unavailable(fmt::format("cannot reach worker {}: {}", address, std::strerror(err)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

ControlChannel::~ControlChannel() { comm::CloseFd(&fd_); }

void ControlChannel::DrainUntilClosed(comm::Deadline deadline) {
  ::shutdown(fd_, SHUT_WR);
  uint8_t buf[64 << 10];
  while (comm::PollOne(fd_, POLLIN, deadline).ok()) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
  }
}

bool ControlChannel::Readable() const {
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

Status ControlChannel::Send(const nlohmann::json& message, comm::Deadline deadline) {
  const std::string text = message.dump();
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  return SendBytes({p, text.size()}, deadline);
}

Status ControlChannel::SendBytes(std::span<const uint8_t> bytes, comm::Deadline deadline) {
  if (bytes.size() > kMessageBytesMax) return InvalidArgument("control message too long");
  if (session_ != nullptr) return comm::WriteRecord(fd_, *session_, std::as_bytes(bytes), &record_, deadline);
  uint8_t len[4];
  for (int i = 0; i < 4; ++i) len[i] = static_cast<uint8_t>(bytes.size() >> (8 * i));
  COHORT_RETURN_IF_ERROR(comm::WriteAll(fd_, std::as_bytes(std::span(len)), deadline));
  return comm::WriteAll(fd_, std::as_bytes(bytes), deadline);
}

Status ControlChannel::ReceiveBytes(std::vector<uint8_t>* bytes, comm::Deadline deadline) {
  if (session_ != nullptr) {
    COHORT_ASSIGN_OR_RETURN(const size_t n, comm::ReadRecord(fd_, *session_, &record_, kMessageBytesMax, deadline));
    const auto* p = reinterpret_cast<const uint8_t*>(record_.data());
    bytes->assign(p, p + n);
    return Status::Ok();
  }
  uint8_t len[4];
  COHORT_RETURN_IF_ERROR(comm::ReadAll(fd_, std::as_writable_bytes(std::span(len)), deadline));
  size_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<size_t>(len[i]) << (8 * i);
  if (n > kMessageBytesMax) return Corrupt(fmt::format("control message of {} bytes", n));
  bytes->resize(n);
  return comm::ReadAll(fd_, std::as_writable_bytes(std::span(*bytes)), deadline);
}

Result<nlohmann::json> ControlChannel::Receive(comm::Deadline deadline) {
  COHORT_ASSIGN_OR_RETURN(nlohmann::json j, ReceiveAny(deadline));
  if (const Status reported = PeerError(j); !reported.ok()) return reported;
  return j;
}

Status ControlChannel::PeerError(const nlohmann::json& message) {
  if (!message.contains("error")) return Status::Ok();
  return Unavailable("peer reports: " + message.value("error", std::string("(no text)")));
}

Result<nlohmann::json> ControlChannel::ReceiveAny(comm::Deadline deadline) {
  std::vector<uint8_t> raw;
  COHORT_RETURN_IF_ERROR(ReceiveBytes(&raw, deadline));
  const std::string text(raw.begin(), raw.end());
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Corrupt("control message is not a JSON object");
  return j;
}

}  // namespace cohort::parallel
