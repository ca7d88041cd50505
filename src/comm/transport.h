// The abstract transport every collective runs over: a group of N ranks where any pair can
// exchange byte messages, with every wait bounded by a deadline. TCP, shared memory and MPI
// implement it; algorithms in this folder depend on nothing else.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"

namespace cohort::comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline DeadlineAfter(std::chrono::milliseconds timeout) { return Clock::now() + timeout; }

// How a rank waits for a peer: spin for spin_us, then sched_yield for yield_us, then block in
// the kernel on the very event awaited (a socket's readiness, a futex in the shared ring),
// which wakes without a timer. Measured on the 2-core test machines (ranks, compilers and other
// users sharing the cores): a pure busy-poll stalls for whole scheduler ticks once ranks
// outnumber cores, anything sleeping on a timer pays a ~4 ms wake-up, and even a short pause
// spin costs more than it saves (the peer we wait for may need our core). A rank that sleeps,
// though, pays the wake-up of an idle virtual CPU on every exchange whose peer is late: tensor
// parallelism over 2 processes x 1 thread on the 1B Q4_0 shape (32 all-reduces per token, the
// ranks' halves finishing up to ~1 ms apart) ran at 25.8 tok/s over TCP blocking at once,
// 36.7 yielding 300 us first, 42.0 yielding 1 ms (shm: 37.1 with 200 us, 43.9 with 1 ms).
// So the default yields (gives the core to anyone runnable, so ranks that outnumber cores
// still progress) for 1 ms before sleeping. Every wait is still bounded by its deadline.
struct WaitPolicy {
  int spin_us = 0;     // busy-poll this long before giving up the core
  int yield_us = 1000;  // then sched_yield in a loop this long before blocking
  // Never block: spin and yield until the deadline. Lowest latency when every rank owns a core,
  // harmful when ranks outnumber cores.
  bool busy_poll = false;
};

// One message to send: `data` must stay valid until the Exchange that carries it returns.
struct SendOp {
  int peer = -1;
  uint32_t tag = 0;
  std::span<const std::byte> data;
};

// One message to receive: the peer's message must carry `tag` and exactly data.size() bytes,
// anything else is an error (so a confused or hostile peer never makes us allocate).
struct RecvOp {
  int peer = -1;
  uint32_t tag = 0;
  std::span<std::byte> data;
};

// Messages between one ordered pair of ranks arrive in the order they were sent.
// A transport that returned an error is broken for good (its streams may be mid-message):
// every later call returns that same error.
class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Carries out all sends and receives concurrently and returns when all are done, so
  // exchanges in a ring or a full mesh cannot deadlock on full buffers. At most one send and
  // one receive per peer per call. kTimeout when the deadline passes, kUnavailable when a peer
  // closed its end or died, kCorrupt when a peer sent something malformed.
  virtual Status Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                          Deadline deadline) = 0;

  // Tells the peers we are leaving (they see kUnavailable instead of waiting for a timeout).
  virtual void Close() = 0;

  // From another thread, while this transport is not being closed: makes a blocked or later
  // Exchange fail at once (kUnavailable), so a thread serving a job can be ended and joined.
  // TCP shuts its sockets down; transports without a way to wake a waiter (shm, UCX, MPI)
  // leave it to their deadlines.
  virtual void Interrupt() {}

  Status Send(int peer, uint32_t tag, std::span<const std::byte> data, Deadline deadline) {
    const SendOp op{peer, tag, data};
    return Exchange(std::span<const SendOp>(&op, 1), {}, deadline);
  }
  Status Recv(int peer, uint32_t tag, std::span<std::byte> data, Deadline deadline) {
    const RecvOp op{peer, tag, data};
    return Exchange({}, std::span<const RecvOp>(&op, 1), deadline);
  }
};

// Validates the peer indices of an Exchange for a transport of `size` ranks at `rank`.
// Bad arguments are programmer errors, so this checks rather than returns.
void CheckExchangeArgs(int rank, int size, std::span<const SendOp> sends,
                       std::span<const RecvOp> recvs);

}  // namespace cohort::comm
