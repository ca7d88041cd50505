// Holds outgoing TCP frames until their emulated arrival time and then writes them, so one
// host can imitate a link with added latency and limited bandwidth (see LinkEmulation).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <span>
#include <thread>
#include <vector>

#include "comm/tcp_transport.h"

namespace cohort::comm {

class LinkEmulator {
 public:
  // fds are borrowed (fds[peer]); the owner keeps them open until this object is gone.
  LinkEmulator(const LinkEmulation& link, std::vector<int> fds);
  ~LinkEmulator();
  LinkEmulator(const LinkEmulator&) = delete;
  LinkEmulator& operator=(const LinkEmulator&) = delete;

  // Copies the frame and schedules it; never blocks on the network.
  void Enqueue(int peer, std::span<const std::byte> header, std::span<const std::byte> payload);
  // The first write error of the delivery thread, or Ok.
  Status status();
  // Waits (bounded) until every queued frame has been written.
  void Flush(Deadline deadline);

 private:
  struct Frame {
    Clock::time_point due;
    uint64_t sequence = 0;  // FIFO among frames due at the same instant
    int peer = -1;
    std::vector<std::byte> bytes;
    bool operator>(const Frame& other) const {
      return due != other.due ? due > other.due : sequence > other.sequence;
    }
  };

  void DeliveryLoop();

  LinkEmulation link_;
  std::vector<int> fds_;
  std::vector<Clock::time_point> link_free_at_;  // per peer: when the emulated wire is idle
  std::priority_queue<Frame, std::vector<Frame>, std::greater<Frame>> queue_;
  std::vector<std::vector<std::byte>> spare_buffers_;  // reused so steady state does not allocate
  uint64_t next_sequence_ = 0;
  int in_flight_ = 0;
  Status status_;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable drained_;
  std::thread thread_;
};

}  // namespace cohort::comm
