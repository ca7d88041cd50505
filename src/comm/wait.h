// The spin → yield → block schedule every transport follows while a peer has not answered
// (see WaitPolicy in transport.h for why).
#pragma once

#include <sched.h>

#include "comm/transport.h"

namespace cohort::comm {

class Backoff {
 public:
  explicit Backoff(const WaitPolicy& policy) : policy_(policy), idle_since_(Clock::now()) {}

  // Something moved: start the schedule over.
  void Progressed() { idle_since_ = Clock::now(); }

  // Called after a round that moved nothing. Spins or yields as the schedule says and returns
  // false, or returns true when the caller should now block in the kernel.
  bool ShouldBlock() {
    const auto idle_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - idle_since_).count();
    if (idle_us < policy_.spin_us) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      return false;
    }
    if (policy_.busy_poll || idle_us < policy_.spin_us + policy_.yield_us) {
      sched_yield();
      return false;
    }
    return true;
  }

 private:
  WaitPolicy policy_;
  Clock::time_point idle_since_;
};

}  // namespace cohort::comm
