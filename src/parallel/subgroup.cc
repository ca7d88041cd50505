// SubgroupTransport; see subgroup.h.
#include "parallel/subgroup.h"

#include "core/check.h"

namespace cohort::parallel {

SubgroupTransport::SubgroupTransport(comm::Transport& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  for (size_t i = 0; i < members_.size(); ++i) {
    COHORT_CHECK(members_[i] >= 0 && members_[i] < parent_.size());
    if (members_[i] == parent_.rank()) rank_ = static_cast<int>(i);
  }
  COHORT_CHECK_GE(rank_, 0);
  sends_.reserve(members_.size());
  recvs_.reserve(members_.size());
}

Status SubgroupTransport::Exchange(std::span<const comm::SendOp> sends,
                                   std::span<const comm::RecvOp> recvs, comm::Deadline deadline) {
  comm::CheckExchangeArgs(rank(), size(), sends, recvs);
  sends_.clear();
  recvs_.clear();
  for (const comm::SendOp& op : sends) sends_.push_back({members_[op.peer], op.tag, op.data});
  for (const comm::RecvOp& op : recvs) recvs_.push_back({members_[op.peer], op.tag, op.data});
  return parent_.Exchange(sends_, recvs_, deadline);
}

}  // namespace cohort::parallel
