#include "core/transport/shm/channel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/common/little_endian.h"
#include "core/common/streaming_copy.h"
#include "core/transport/shm/futex.h"
#include "core/transport/transport.h"

namespace hvd::transport::shm_internal {

void RingBell(Doorbell* bell) {
  // Pairs with the sleeper's sleepers.fetch_add before its last check: either
  // it sees our stores, or we see it counted (see Core::Wait).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (bell->sleepers.load(std::memory_order_relaxed) == 0) return;
  bell->seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&bell->seq);
}

void Nudge(SegmentHeader* owner) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (owner->pollers.load(std::memory_order_relaxed) > 0) {
    RingBell(&owner->bell);
    return;
  }
  owner->helper_seq.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&owner->helper_seq);
}

// Both cursors rest on slot boundaries and a payload starts on one, so every
// piece of a payload starts a multiple of kSlot bytes into it: whole
// elements for a ReceiveReducer.
static_assert(kSlot % kReducePieceAlignment == 0);

bool Op::MovePayload(const Ring& ring, size_t piece_bytes, CopyPace* pace,
                     uint64_t* cursor, size_t* room,
                     absl::FunctionRef<void()> published) {
  size_t done = payload_done_.load(std::memory_order_relaxed);
  while (done < len_ && *room > 0) {
    const size_t offset = *cursor % ring.bytes;
    const size_t n =
        std::min({len_ - done, *room, ring.bytes - offset, piece_bytes});
    if (is_send()) {
      PacedCopy(*pace, ring.data + offset, data_ + done, n);
    } else if (reducer_) {
      reducer_(done, ring.data + offset, n);
    } else if (streaming_) {
      StreamingCopy(data_ + done, ring.data + offset, n);
    } else {
      std::memcpy(data_ + done, ring.data + offset, n);
    }
    done += n;
    // Only the last piece may end off a slot boundary: pad it (*room and
    // ring.bytes - offset are multiples of kSlot, so the padding fits).
    const size_t advance = done == len_ ? RoundUp(n, kSlot) : n;
    *cursor += advance;
    *room -= advance;
    payload_done_.store(done, std::memory_order_relaxed);
    published();
  }
  return done == len_;
}

bool OpQueue::Push(std::shared_ptr<Op> op) {
  if (!error_.ok()) {
    op->Complete(error_);
    return false;
  }
  ops_.push_back(std::move(op));
  pending_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void OpQueue::CompleteFront() {
  ops_.front()->Complete(absl::OkStatus());
  ops_.pop_front();
  pending_.fetch_sub(1, std::memory_order_relaxed);
}

void OpQueue::Fail(const absl::Status& status) {
  if (error_.ok()) error_ = status;
  for (auto& op : ops_) op->Complete(error_);
  pending_.fetch_sub(static_cast<int>(ops_.size()), std::memory_order_relaxed);
  ops_.clear();
}

// ---- sending --------------------------------------------------------------

SendChannel::SendChannel(Ring ring, SegmentHeader* peer, size_t piece_bytes,
                         size_t slow_copy_mbps, Reserve reserve)
    : ring_(ring),
      peer_(peer),
      piece_bytes_(piece_bytes),
      reserve_(std::move(reserve)),
      head_(ring.header->head.load(std::memory_order_relaxed)),
      pace_(slow_copy_mbps) {}

int SendChannel::Post(std::shared_ptr<Op> op, absl::Status* failure) {
  absl::MutexLock lock(&mu_);
  if (!queue_.Push(std::move(op))) return kCompleted;
  // Ops behind an unfinished one are written when it is.
  return queue_.size() == 1 ? ProgressLocked(failure) : kNothing;
}

int SendChannel::Progress(absl::Status* failure) {
  if (!pending()) return kNothing;
  if (!mu_.TryLock()) return kBusy;
  const int result = ProgressLocked(failure);
  mu_.Unlock();
  return result;
}

bool SendChannel::ReserveFor(const Op& op, size_t* free,
                             absl::Status* failure) {
  const size_t cap = ring_.bytes;
  if (reserved_ == cap) return true;
  // Until all of the ring is reserved the writer has not wrapped: what it
  // writes next starts at `at`, and what it may write now ends by `end`.
  const size_t at = head_ % cap;
  const size_t need = (op.header_done_ ? 0 : kSlot) +
                      RoundUp(op.len_ - op.payload_done(), kSlot);
  const size_t end = std::min(cap, at + std::min(*free, need));
  if (end > reserved_) {
    // Writing an unreserved page of a full /dev/shm would raise SIGBUS.
    const size_t to = std::min(cap, std::max(RoundUp(end, kPage),
                                             2 * reserved_));
    if (absl::Status s = reserve_(reserved_, to - reserved_); !s.ok()) {
      *failure = s;
      queue_.Fail(s);
      return false;
    }
    reserved_ = to;
  }
  if (reserved_ < cap) *free = std::min(*free, reserved_ - at);
  return true;
}

int SendChannel::ProgressLocked(absl::Status* failure) {
  int result = kNothing;
  const size_t cap = ring_.bytes;
  while (true) {
    uint64_t tail = ring_.header->tail.load(std::memory_order_acquire);
    while (!queue_.empty()) {
      Op& op = queue_.front();
      size_t free = cap - (head_ - tail);
      if (!ReserveFor(op, &free, failure)) return result | kCompleted;
      if (!op.header_done_) {
        if (free < kSlot) break;
        StoreLE64(op.len_, ring_.data + head_ % cap);
        head_ += kSlot;
        free -= kSlot;
        op.header_done_ = true;
        result |= kMoved;
      }
      const bool complete = op.MovePayload(
          ring_, piece_bytes_, &pace_, &head_, &free,
          [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            ring_.header->head.store(head_, std::memory_order_release);
            RingBell(&peer_->bell);
            result |= kMoved;
          });
      if (!complete) break;
      if (op.len_ == 0) {
        ring_.header->head.store(head_, std::memory_order_release);
        RingBell(&peer_->bell);
      }
      queue_.CompleteFront();
      result |= kCompleted;
    }
    std::atomic<uint32_t>& waiting = ring_.header->writer_waiting;
    if (queue_.empty()) {
      if (waiting.load(std::memory_order_relaxed) != 0) {
        waiting.store(0, std::memory_order_relaxed);
      }
      return result;
    }
    // Blocked on a full ring: have the reader tell us when it makes room,
    // and make sure somebody over there drains (its helper, if nobody
    // polls). Then look again: it may have made room before it saw the
    // flag (both sides store, then load, sequentially consistent).
    if (waiting.load(std::memory_order_relaxed) == 0) {
      waiting.store(1, std::memory_order_seq_cst);
      Nudge(peer_);
    }
    tail = ring_.header->tail.load(std::memory_order_seq_cst);
    if (cap - (head_ - tail) < kSlot) return result;
  }
}

bool SendChannel::can_progress() const {
  if (!pending()) return false;
  const uint64_t head = ring_.header->head.load(std::memory_order_relaxed);
  const uint64_t tail = ring_.header->tail.load(std::memory_order_acquire);
  return ring_.bytes - (head - tail) >= kSlot;
}

void SendChannel::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  queue_.Fail(status);
}

// ---- receiving ------------------------------------------------------------

RecvChannel::RecvChannel(Ring ring, SegmentHeader* peer, size_t piece_bytes,
                         int self, int peer_rank)
    : ring_(ring),
      peer_(peer),
      piece_bytes_(piece_bytes),
      self_(self),
      peer_rank_(peer_rank),
      tail_(ring.header->tail.load(std::memory_order_relaxed)) {}

int RecvChannel::Post(std::shared_ptr<Op> op, absl::Status* failure) {
  absl::MutexLock lock(&mu_);
  if (!queue_.Push(std::move(op))) return kCompleted;
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

bool RecvChannel::writer_stuck() const {
  return pending() &&
         ring_.header->writer_waiting.load(std::memory_order_acquire) != 0 &&
         has_data();
}

void RecvChannel::PublishTail() {
  ring_.header->tail.store(tail_, std::memory_order_seq_cst);
  // Only a blocked writer waits for room.
  if (ring_.header->writer_waiting.load(std::memory_order_seq_cst) != 0) {
    Nudge(peer_);
  }
}

int RecvChannel::ProgressLocked(absl::Status* failure) {
  int result = kNothing;
  const size_t cap = ring_.bytes;
  uint64_t head = ring_.header->head.load(std::memory_order_acquire);
  while (!queue_.empty()) {
    Op& op = queue_.front();
    size_t avail = head - tail_;
    if (!op.header_done_) {
      if (avail < kSlot) break;
      const uint64_t len = LoadLE64(ring_.data + tail_ % cap);
      if (op.kind_ == Op::Kind::kRecvAny && len > kMaxRecvAnyBytes) {
        *failure = absl::InternalError(absl::StrCat(
            "rank ", self_, ": control message from rank ", peer_rank_,
            " (shared memory) claims ", len, " bytes, more than the ",
            kMaxRecvAnyBytes, " allowed; the segment is corrupt"));
        queue_.Fail(*failure);
        return result | kCompleted;
      }
      if (op.kind_ == Op::Kind::kRecvAny) {
        op.out_->resize(len);
        op.data_ = op.out_->data();
        op.len_ = len;
      } else if (len != op.len_) {
        *failure = absl::InternalError(absl::StrCat(
            "rank ", self_, ": message from rank ", peer_rank_,
            " (shared memory) is ", len,
            " bytes but the receive posted for it expects ", op.len_,
            " bytes"));
        queue_.Fail(*failure);
        return result | kCompleted;
      }
      tail_ += kSlot;
      avail -= kSlot;
      op.header_done_ = true;
      result |= kMoved;
    }
    const bool complete =
        op.MovePayload(ring_, piece_bytes_, /*pace=*/nullptr, &tail_, &avail,
                       [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                         PublishTail();
                         result |= kMoved;
                       });
    if (!complete) break;
    if (op.len_ == 0) PublishTail();
    queue_.CompleteFront();
    result |= kCompleted;
  }
  return result;
}

void RecvChannel::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  queue_.Fail(status);
}

}  // namespace hvd::transport::shm_internal
