// RunningJobs: the jobs a worker is serving, so the service that runs them can end them all
// at once when it stops, rather than wait for each coordinator to stop its job or fall
// silent. A job registers its control connection and, once connected, its data transport;
// Interrupt() shuts them down, and every job registered later is interrupted at once.
#pragma once

#include <mutex>
#include <set>

#include "comm/transport.h"

namespace cohort::parallel {

class RunningJobs {
 public:
  // Keeps `fd` / `transport` interruptible while it lives; both must outlive it.
  class Registration {
   public:
    Registration(RunningJobs* jobs, int fd, comm::Transport* transport);
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;

   private:
    RunningJobs* jobs_;
    int fd_;
    comm::Transport* transport_;
  };

  void Interrupt();
  bool interrupted() const;

 private:
  void Add(int fd, comm::Transport* transport);
  void Remove(int fd, comm::Transport* transport);

  mutable std::mutex mutex_;
  bool interrupted_ = false;
  std::multiset<int> fds_;
  std::multiset<comm::Transport*> transports_;
};

}  // namespace cohort::parallel
