#include "core/transport/shm/shm_context_impl.h"

#include "absl/strings/str_cat.h"

namespace hvd::transport::shm_internal {

absl::Status ShmRequest::Wait(absl::Time deadline) {
  if (core_->Wait(*op_, deadline)) return op_->status();
  // len() of a RecvAny is set by the reader once the header is in.
  const std::string progress =
      op_->kind() == Op::Kind::kRecvAny
          ? absl::StrCat(op_->payload_done(), " payload bytes received")
          : absl::StrCat(op_->payload_done(), " of ", op_->len(),
                         " bytes transferred");
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", core_->rank(), ": ", OpKindName(op_->kind()),
      op_->is_send() ? " to rank " : " from rank ", op_->peer(),
      " (shared memory, pid ", core_->peer_pid(op_->peer()),
      ") not complete by the deadline: ", progress));
}

std::unique_ptr<Request> ShmContext::Post(std::shared_ptr<Op> op) {
  core_->Post(op);
  return std::make_unique<ShmRequest>(core_, std::move(op));
}

std::unique_ptr<Request> ShmContext::Send(int peer, const void* data,
                                          size_t len) {
  // The op never writes through the pointer of a send.
  return Post(std::make_shared<Op>(Op::Kind::kSend, peer,
                                   static_cast<char*>(const_cast<void*>(data)),
                                   len, nullptr));
}

std::unique_ptr<Request> ShmContext::Recv(int peer, void* data, size_t len) {
  return Post(std::make_shared<Op>(Op::Kind::kRecv, peer,
                                   static_cast<char*>(data), len, nullptr));
}

std::unique_ptr<Request> ShmContext::RecvStreaming(int peer, void* data,
                                                   size_t len) {
  return Post(std::make_shared<Op>(Op::Kind::kRecv, peer,
                                   static_cast<char*>(data), len, nullptr,
                                   /*streaming=*/true));
}

std::unique_ptr<Request> ShmContext::RecvReduce(int peer, size_t len,
                                                ReceiveReducer reducer) {
  return Post(std::make_shared<Op>(peer, len, std::move(reducer)));
}

std::unique_ptr<Request> ShmContext::RecvAny(int peer, std::string* out) {
  return Post(
      std::make_shared<Op>(Op::Kind::kRecvAny, peer, nullptr, 0, out));
}

void ShmContext::Abort(absl::Status reason) {
  if (reason.ok()) reason = absl::AbortedError("Abort() called with OK status");
  core_->Fail(std::move(reason));
}

std::string ShmContext::PeerAddress(int peer) const {
  if (!core_->connected(peer)) return std::string();
  return absl::StrCat("shm:pid", core_->peer_pid(peer));
}

}  // namespace hvd::transport::shm_internal
