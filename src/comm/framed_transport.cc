// FramedTransport: the bookkeeping shared by the TCP and shared-memory transports.
#include "comm/framed_transport.h"

#include <fmt/format.h>

namespace cohort::comm {

FramedTransport::FramedTransport(const char* name, int rank, int size)
    : rank_(rank), name_(name), size_(size) {
  COHORT_CHECK(rank >= 0 && rank < size);
  sends_.reserve(static_cast<size_t>(size));
  recvs_.reserve(static_cast<size_t>(size));
}

Status FramedTransport::BeginExchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  if (!broken_.ok()) return broken_;
  if (closed_) return Unavailable(fmt::format("{} transport is closed", name_));
  CheckExchangeArgs(rank_, size_, sends, recvs);
  sends_.clear();
  recvs_.clear();
  for (const SendOp& op : sends) {
    sends_.push_back({op.peer, EncodeFrameHeader({op.tag, op.data.size()}), op.data, 0});
  }
  for (const RecvOp& op : recvs) recvs_.push_back({op.peer, op.tag, {}, op.data, 0});
  return Status::Ok();
}

Status FramedTransport::Fail(Status status) {
  broken_ = status.Annotate(fmt::format("{} rank {}", name_, rank_));
  return broken_;
}

bool FramedTransport::MarkClosed() {
  if (closed_) return false;
  closed_ = true;
  return true;
}

}  // namespace cohort::comm
