#include "core/transport/tcp/op.h"

#include <utility>

namespace hvd::transport::tcp_internal {

Op::Op(Kind kind, int peer, void* data, size_t len, std::string* out)
    : kind_(kind),
      peer_(peer),
      data_(static_cast<char*>(data)),
      len_(len),
      out_(out) {
  if (kind_ == Kind::kSend) StoreLE64(len_, header);
}

void Op::Complete(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (done_.load(std::memory_order_relaxed)) return;
  status_ = std::move(status);
  done_.store(true, std::memory_order_release);
}

bool Op::AwaitDone(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto is_done = [this] { return done_.load(std::memory_order_acquire); };
  return mu_.AwaitWithDeadline(absl::Condition(&is_done), deadline);
}

absl::Status Op::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

void Op::AddPayloadDone(size_t n) {
  payload_done_ += n;
  bytes_done_.store(payload_done_, std::memory_order_relaxed);
}

void Op::SetAnyLength(size_t len) {
  out_->resize(len);
  data_ = out_->data();
  len_ = len;
}

}  // namespace hvd::transport::tcp_internal
