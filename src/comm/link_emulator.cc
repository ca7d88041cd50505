// Delivery thread of the link emulation (see link_emulator.h).
#include "comm/link_emulator.h"

#include <algorithm>

#include "comm/socket_util.h"

namespace cohort::comm {
namespace {
// Timer sleeps overshoot by tens of microseconds; wake this early and spin the rest.
constexpr auto kSpinWindow = std::chrono::microseconds(300);
constexpr auto kWriteTimeout = std::chrono::seconds(30);
}  // namespace

LinkEmulator::LinkEmulator(const LinkEmulation& link, std::vector<int> fds)
    : link_(link), fds_(std::move(fds)), link_free_at_(fds_.size(), Clock::time_point{}) {
  thread_ = std::thread([this] { DeliveryLoop(); });
}

LinkEmulator::~LinkEmulator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void LinkEmulator::Enqueue(int peer, std::span<const std::byte> header,
                           std::span<const std::byte> payload) {
  const size_t bytes = header.size() + payload.size();
  std::lock_guard<std::mutex> lock(mutex_);
  Frame frame;
  if (!spare_buffers_.empty()) {
    frame.bytes = std::move(spare_buffers_.back());
    spare_buffers_.pop_back();
  }
  frame.bytes.resize(bytes);
  std::copy(header.begin(), header.end(), frame.bytes.begin());
  std::copy(payload.begin(), payload.end(), frame.bytes.begin() + header.size());
  const auto now = Clock::now();
  auto start = std::max(now, link_free_at_[peer]);
  if (link_.bandwidth_bytes_per_s > 0) {
    start += std::chrono::nanoseconds(static_cast<int64_t>(
        static_cast<double>(bytes) * 1e9 / static_cast<double>(link_.bandwidth_bytes_per_s)));
  }
  link_free_at_[peer] = start;
  frame.due = start + std::chrono::microseconds(link_.latency_us);
  frame.sequence = next_sequence_++;
  frame.peer = peer;
  queue_.push(std::move(frame));
  ++in_flight_;
  wake_.notify_one();
}

Status LinkEmulator::status() {
  std::lock_guard<std::mutex> lock(mutex_);
  return status_;
}

void LinkEmulator::Flush(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait_until(lock, deadline, [this] { return in_flight_ == 0; });
}

void LinkEmulator::DeliveryLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto due = queue_.top().due;
    const auto now = Clock::now();
    if (due - now > kSpinWindow) {
      wake_.wait_until(lock, due - kSpinWindow);
      continue;
    }
    if (now < due) {
      lock.unlock();
      sched_yield();
      lock.lock();
      continue;
    }
    Frame frame = std::move(const_cast<Frame&>(queue_.top()));
    queue_.pop();
    const bool failed = !status_.ok();
    lock.unlock();
    Status written = failed ? Status::Ok()
                            : WriteAll(fds_[frame.peer], frame.bytes, DeadlineAfter(kWriteTimeout));
    lock.lock();
    if (!written.ok() && status_.ok()) {
      status_ = written.Annotate("link emulation: to rank " + std::to_string(frame.peer));
    }
    spare_buffers_.push_back(std::move(frame.bytes));
    if (--in_flight_ == 0) drained_.notify_all();
  }
}

}  // namespace cohort::comm
