// What a component needs from its surroundings, passed in instead of read from globals, so
// several nodes can live in one test process.
#pragma once

#include "core/clock.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace cohort {

struct Context {
  ThreadPool* pool = nullptr;  // borrowed; never null once set up
  Logger* log = nullptr;       // borrowed; never null once set up
  // Borrowed; never null. The real clock unless a test injects a ManualClock.
  const Clock* clock = &Clock::Real();
};

}  // namespace cohort
