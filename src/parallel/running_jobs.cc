// RunningJobs; see running_jobs.h.
#include "parallel/running_jobs.h"

#include <sys/socket.h>

namespace cohort::parallel {

RunningJobs::Registration::Registration(RunningJobs* jobs, int fd, comm::Transport* transport)
    : jobs_(jobs), fd_(fd), transport_(transport) {
  if (jobs_ != nullptr) jobs_->Add(fd_, transport_);
}

RunningJobs::Registration::~Registration() {
  if (jobs_ != nullptr) jobs_->Remove(fd_, transport_);
}

void RunningJobs::Add(int fd, comm::Transport* transport) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd >= 0) fds_.insert(fd);
  if (transport != nullptr) transports_.insert(transport);
  if (!interrupted_) return;
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (transport != nullptr) transport->Interrupt();
}

void RunningJobs::Remove(int fd, comm::Transport* transport) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = fds_.find(fd); it != fds_.end()) fds_.erase(it);
  if (auto it = transports_.find(transport); it != transports_.end()) transports_.erase(it);
}

void RunningJobs::Interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  interrupted_ = true;
  // Under the lock: a job removes its registration (under it too) before it closes them.
  for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  for (comm::Transport* t : transports_) t->Interrupt();
}

bool RunningJobs::interrupted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return interrupted_;
}

}  // namespace cohort::parallel
