#include "core/transport/shm/channel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/transport/shm/futex.h"

namespace hvd::transport::shm_internal {
namespace {

void StoreLE64(char* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<char>(v >> (8 * i));
}

uint64_t LoadLE64(const char* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(at[i])) << (8 * i);
  }
  return v;
}

}  // namespace

void RingBell(Doorbell* bell) {
  // Pairs with the sleeper's sleepers.fetch_add before its last check: either
  // it sees our stores, or we see it counted (see Core::Wait).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_relaxed) == 0) return;
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&bell->seq);
}

// ---- sending --------------------------------------------------------------

SendChannel::SendChannel(Ring ring, Doorbell* peer_bell, size_t piece_bytes)
    : ring_(ring),
      peer_bell_(peer_bell),
      piece_bytes_(piece_bytes),
      head_(ring.header->head.load(std::memory_order_relaxed)) {}

int SendChannel::Post(std::shared_ptr<Op> op) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) {
    op->Complete(error_);
    return kCompleted;
  }
  queue_.push_back(std::move(op));
  pending_.fetch_add(1, std::memory_order_relaxed);
  // Ops behind an unfinished one are written when it is.
  return queue_.size() == 1 ? ProgressLocked() : kNothing;
}

int SendChannel::Progress() {
  if (!pending()) return kNothing;
  if (!mu_.TryLock()) return kBusy;
  const int result = ProgressLocked();
  mu_.Unlock();
  return result;
}

int SendChannel::ProgressLocked() {
  int result = kNothing;
  const size_t cap = ring_.bytes;
  uint64_t tail = ring_.header->tail.load(std::memory_order_acquire);
  while (!queue_.empty()) {
    Op& op = *queue_.front();
    size_t free = cap - (head_ - tail);
    if (!op.header_done_) {
      if (free < kSlot) break;
      StoreLE64(ring_.data + head_ % cap, op.len_);
      head_ += kSlot;
      free -= kSlot;
      op.header_done_ = true;
      result |= kMoved;
    }
    size_t done = op.payload_done_.load(std::memory_order_relaxed);
    while (done < op.len_ && free > 0) {
      const size_t offset = head_ % cap;
      const size_t n = std::min({op.len_ - done, free, cap - offset,
                                 piece_bytes_});
      std::memcpy(ring_.data + offset, op.data_ + done, n);
      done += n;
      // Only the last piece may end off a slot boundary: pad it (free and
      // cap - offset are multiples of kSlot, so the padding fits).
      const size_t advance = done == op.len_ ? RoundUp(n, kSlot) : n;
      head_ += advance;
      free -= advance;
      op.payload_done_.store(done, std::memory_order_relaxed);
      ring_.header->head.store(head_, std::memory_order_release);
      RingBell(peer_bell_);
      result |= kMoved;
    }
    if (done < op.len_) break;
    if (op.len_ == 0) {
      ring_.header->head.store(head_, std::memory_order_release);
      RingBell(peer_bell_);
    }
    op.Complete(absl::OkStatus());
    queue_.pop_front();
    pending_.fetch_sub(1, std::memory_order_relaxed);
    result |= kCompleted;
  }
  return result;
}

void SendChannel::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
  for (auto& op : queue_) op->Complete(error_);
  pending_.fetch_sub(static_cast<int>(queue_.size()),
                     std::memory_order_relaxed);
  queue_.clear();
}

// ---- receiving ------------------------------------------------------------

RecvChannel::RecvChannel(Ring ring, Doorbell* peer_bell, size_t piece_bytes,
                         int self, int peer)
    : ring_(ring),
      peer_bell_(peer_bell),
      piece_bytes_(piece_bytes),
      self_(self),
      peer_(peer),
      tail_(ring.header->tail.load(std::memory_order_relaxed)) {}

int RecvChannel::Post(std::shared_ptr<Op> op, absl::Status* failure) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) {
    op->Complete(error_);
    return kCompleted;
  }
  queue_.push_back(std::move(op));
  pending_.fetch_add(1, std::memory_order_relaxed);
  return queue_.size() == 1 ? ProgressLocked(failure) : kNothing;
}

int RecvChannel::Progress(absl::Status* failure) {
  if (!pending()) return kNothing;
  if (!mu_.TryLock()) return kBusy;
  const int result = ProgressLocked(failure);
  mu_.Unlock();
  return result;
}

bool RecvChannel::has_data() const {
  // The producer only moves head forward; reading our own tail racily is
  // fine for this hint.
  return ring_.header->head.load(std::memory_order_acquire) !=
         ring_.header->tail.load(std::memory_order_relaxed);
}

int RecvChannel::ProgressLocked(absl::Status* failure) {
  int result = kNothing;
  const size_t cap = ring_.bytes;
  uint64_t head = ring_.header->head.load(std::memory_order_acquire);
  while (!queue_.empty()) {
    Op& op = *queue_.front();
    size_t avail = head - tail_;
    if (!op.header_done_) {
      if (avail < kSlot) break;
      const uint64_t len = LoadLE64(ring_.data + tail_ % cap);
      if (op.kind_ == Op::Kind::kRecvAny) {
        op.out_->resize(len);
        op.data_ = op.out_->data();
        op.len_ = len;
      } else if (len != op.len_) {
        *failure = absl::InternalError(absl::StrCat(
            "rank ", self_, ": message from rank ", peer_,
            " (shared memory) is ", len,
            " bytes but the receive posted for it expects ", op.len_,
            " bytes"));
        FailLocked(*failure);
        return result | kCompleted;
      }
      tail_ += kSlot;
      avail -= kSlot;
      op.header_done_ = true;
      result |= kMoved;
    }
    size_t done = op.payload_done_.load(std::memory_order_relaxed);
    while (done < op.len_ && avail > 0) {
      const size_t offset = tail_ % cap;
      const size_t n = std::min({op.len_ - done, avail, cap - offset,
                                 piece_bytes_});
      std::memcpy(op.data_ + done, ring_.data + offset, n);
      done += n;
      const size_t advance = done == op.len_ ? RoundUp(n, kSlot) : n;
      tail_ += advance;
      avail -= advance;
      op.payload_done_.store(done, std::memory_order_relaxed);
      ring_.header->tail.store(tail_, std::memory_order_release);
      RingBell(peer_bell_);
      result |= kMoved;
    }
    if (done < op.len_) break;
    if (op.len_ == 0) {
      ring_.header->tail.store(tail_, std::memory_order_release);
      RingBell(peer_bell_);
    }
    op.Complete(absl::OkStatus());
    queue_.pop_front();
    pending_.fetch_sub(1, std::memory_order_relaxed);
    result |= kCompleted;
  }
  return result;
}

void RecvChannel::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  FailLocked(status);
}

void RecvChannel::FailLocked(const absl::Status& status) {
  if (error_.ok()) error_ = status;
  for (auto& op : queue_) op->Complete(error_);
  pending_.fetch_sub(static_cast<int>(queue_.size()),
                     std::memory_order_relaxed);
  queue_.clear();
}

}  // namespace hvd::transport::shm_internal
