// Communicator bookkeeping (see communicator.h).
#include "comm/communicator.h"

namespace cohort::comm {

Status CommOptions::Validate() const {
  if (timeout.count() <= 0) return InvalidArgument("comm timeout must be positive");
  return Status::Ok();
}

Communicator::Communicator(std::unique_ptr<Transport> transport, CommOptions options)
    : transport_(std::move(transport)), options_(options) {
  COHORT_CHECK(transport_ != nullptr);
  send_ops_.reserve(transport_->size());
  recv_ops_.reserve(transport_->size());
}

Communicator::~Communicator() { transport_->Close(); }

std::span<std::byte> Communicator::Scratch(size_t bytes) {
  constexpr size_t kAlign = 64;
  if (scratch_.size() < bytes) {
    scratch_storage_.assign(bytes + kAlign, std::byte{0});
    const auto address = reinterpret_cast<uintptr_t>(scratch_storage_.data());
    const size_t pad = (kAlign - address % kAlign) % kAlign;
    scratch_ = std::span<std::byte>(scratch_storage_.data() + pad, bytes);
  }
  return scratch_.first(bytes);
}

}  // namespace cohort::comm
