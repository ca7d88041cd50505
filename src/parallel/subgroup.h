// A Transport over a subset of another transport's ranks: the tensor-parallel group of one
// pipeline stage runs its collectives over it while stages talk over the whole group. It owns
// nothing: the parent transport must outlive it, and Close() leaves the parent open.
#pragma once

#include <vector>

#include "comm/transport.h"

namespace cohort::parallel {

class SubgroupTransport final : public comm::Transport {
 public:
  // `members` are parent ranks in subgroup order; the parent's own rank must be one of them.
  SubgroupTransport(comm::Transport& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const char* name() const override { return parent_.name(); }
  Status Exchange(std::span<const comm::SendOp> sends, std::span<const comm::RecvOp> recvs,
                  comm::Deadline deadline) override;
  void Close() override {}

 private:
  comm::Transport& parent_;
  std::vector<int> members_;
  int rank_ = -1;
  // Peer-translated copies of the caller's ops, sized once (no allocation per exchange).
  std::vector<comm::SendOp> sends_;
  std::vector<comm::RecvOp> recvs_;
};

}  // namespace cohort::parallel
