#include "core/transport/tcp/tcp_context_impl.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/common/cpu_relax.h"

namespace hvd::transport::tcp_internal {

TcpRequest::TcpRequest(std::shared_ptr<Core> core, std::shared_ptr<Op> op,
                       Pair* pair)
    : core_(std::move(core)), op_(std::move(op)), pair_(pair) {}

absl::Status TcpRequest::Wait(absl::Time deadline) {
  if (!op_->done() && pair_ != nullptr) {
    // A reply microseconds away is cheaper to poll for than to sleep on:
    // on the 2-core VM a small round trip takes ~10 us polling and ~85 us
    // when both sides sleep (see tcp_context.h).
    const absl::Time spin_end =
        std::min(deadline, absl::Now() + core_->tuning().spin);
    do {  // at least once, so a past deadline still takes what has arrived
      pair_->Poll(*op_);
      if (op_->done()) break;
      CpuRelax();
    } while (absl::Now() < spin_end);
    if (!op_->done()) {
      core_->WatchAll();
      op_->AwaitDone(deadline);
    }
  }
  if (!op_->done()) return DeadlineError();
  return op_->status();
}

bool TcpRequest::Done() {
  if (op_->done()) return true;
  if (pair_ != nullptr) pair_->Poll(*op_);
  if (op_->done()) return true;
  core_->WatchAll();  // the caller may not poll again soon
  return op_->done();
}

absl::Status TcpRequest::DeadlineError() const {
  // len() of a RecvAny is set by the pair's reader: not read here.
  const std::string progress =
      op_->kind() == Op::Kind::kRecvAny
          ? absl::StrCat(op_->bytes_done(), " payload bytes received")
          : absl::StrCat(op_->bytes_done(), " of ", op_->len(),
                         " bytes transferred");
  const bool connected = pair_->connected();
  const std::string connection =
      connected
          ? std::string()
          : absl::StrCat(" (not connected yet: rank ", op_->peer(),
                         op_->peer() > core_->rank()
                             ? " has not dialed this rank back)"
                             : " could not be reached yet)");
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", core_->rank(), ": ", OpKindName(op_->kind()),
      op_->is_send() ? " to rank " : " from rank ", op_->peer(),
      connected ? absl::StrCat(" (", pair_->address(), ")") : std::string(),
      " not complete by the deadline: ", progress, connection));
}

TcpContext::TcpContext(std::shared_ptr<Core> core) : core_(std::move(core)) {}

TcpContext::~TcpContext() { core_->Shutdown(); }

std::unique_ptr<Request> TcpContext::Post(std::shared_ptr<Op> op, bool watch) {
  Pair* pair = core_->pair(op->peer());
  if (absl::Status failed = core_->FailureIfAny(); !failed.ok()) {
    op->Complete(std::move(failed));  // failed before the pairs heard of it
  } else if (pair == nullptr) {
    op->Complete(absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank(), ": ", OpKindName(op->kind()), " with peer ",
        op->peer(), ", which is not another rank of this size-", size(),
        " context")));
  } else if (op->is_send()) {
    pair->PostSend(op);
  } else {
    pair->PostRecv(op, watch);
  }
  return std::make_unique<TcpRequest>(core_, std::move(op), pair);
}

std::unique_ptr<Request> TcpContext::Send(int peer, const void* data,
                                          size_t len) {
  // The op never writes through the pointer of a send.
  return Post(std::make_shared<Op>(Op::Kind::kSend, peer,
                                   const_cast<void*>(data), len, nullptr),
              true);
}

std::unique_ptr<Request> TcpContext::Recv(int peer, void* data, size_t len) {
  return Post(std::make_shared<Op>(Op::Kind::kRecv, peer, data, len, nullptr),
              len >= core_->tuning().lazy_recv_bytes);
}

std::unique_ptr<Request> TcpContext::RecvAny(int peer, std::string* out) {
  // Control messages: small, so buffered by the kernel until polled.
  return Post(std::make_shared<Op>(Op::Kind::kRecvAny, peer, nullptr, 0, out),
              core_->tuning().lazy_recv_bytes == 0);
}

void TcpContext::Abort(absl::Status reason) {
  if (reason.ok()) reason = absl::AbortedError("Abort() called with OK status");
  core_->Fail(std::move(reason));
}

absl::Status TcpContext::status() const { return core_->status(); }

std::string TcpContext::PeerAddress(int peer) const {
  const Pair* pair = core_->pair(peer);
  return pair != nullptr ? pair->address() : std::string();
}

}  // namespace hvd::transport::tcp_internal
