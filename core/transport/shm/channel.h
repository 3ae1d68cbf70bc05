// One direction between two processes of a host: a byte ring in shared
// memory with its FIFO of posted operations on this side.
//
// Framing: each message is a kSlot-byte header (the payload length, 8 bytes
// little-endian) followed by the payload, padded to a multiple of kSlot.
// Both cursors therefore rest on kSlot boundaries, and a header never wraps.
// Payloads move in pieces of at most `piece_bytes`, each published at once,
// so the reader copies out while the writer is still copying in.
//
// Threading: thread-safe. Progress never blocks: a thread that finds the
// channel busy skips it. Ops complete under the channel lock, exactly once.
#ifndef HVD_CORE_TRANSPORT_SHM_CHANNEL_H_
#define HVD_CORE_TRANSPORT_SHM_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/transport/op_kind.h"
#include "core/transport/shm/copy_pace.h"
#include "core/transport/shm/layout.h"
#include "core/transport/transport.h"

namespace hvd::transport::shm_internal {

struct Ring {
  RingHeader* header;
  char* data;
  size_t bytes;  // capacity, a multiple of kSlot
};

// One posted send or receive.
class Op {
 public:
  using Kind = ::hvd::transport::OpKind;

  // kSend: `data`/`len` is the payload; kRecv: `data` receives exactly `len`
  // bytes, past the caches if `streaming` (StreamingCopy); kRecvAny: `out`
  // is resized to the message.
  Op(Kind kind, int peer, char* data, size_t len, std::string* out,
     bool streaming = false)
      : kind_(kind),
        peer_(peer),
        data_(data),
        len_(len),
        out_(out),
        streaming_(streaming) {}
  // A kRecv of exactly `len` bytes handed to `reducer` straight from the
  // ring (Context::RecvReduce).
  Op(int peer, size_t len, ReceiveReducer reducer)
      : kind_(Kind::kRecv),
        peer_(peer),
        data_(nullptr),
        len_(len),
        out_(nullptr),
        streaming_(false),
        reducer_(std::move(reducer)) {}
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  Kind kind() const { return kind_; }
  int peer() const { return peer_; }
  bool is_send() const { return kind_ == Kind::kSend; }
  size_t len() const { return len_; }
  size_t payload_done() const {
    return payload_done_.load(std::memory_order_relaxed);
  }

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Only meaningful once done().
  const absl::Status& status() const { return status_; }
  // Once, by whoever holds the owning channel's lock (or before the op was
  // ever queued).
  void Complete(absl::Status status) {
    status_ = std::move(status);
    done_.store(true, std::memory_order_release);
  }

 private:
  friend class SendChannel;
  friend class RecvChannel;

  // Moves payload from position *cursor of `ring` while *room allows: into
  // the ring for a send, out of it for a receive, in pieces of at most
  // `piece_bytes`. Each piece advances *cursor and takes from *room (the
  // last piece padded to a slot boundary), then `published()` runs so the
  // caller can hand the piece over to the other side. Returns whether the
  // whole payload has moved. A send copies its pieces as `pace` says (null
  // for a receive). Under the owning channel's lock.
  bool MovePayload(const Ring& ring, size_t piece_bytes, CopyPace* pace,
                   uint64_t* cursor, size_t* room,
                   absl::FunctionRef<void()> published);

  const Kind kind_;
  const int peer_;
  char* data_;
  size_t len_;
  std::string* const out_;
  const bool streaming_;
  ReceiveReducer reducer_;  // Set for a RecvReduce.
  // Transfer state, under the channel lock (payload_done_ is also read by a
  // deadline message, hence atomic).
  bool header_done_ = false;
  std::atomic<size_t> payload_done_{0};
  absl::Status status_;
  std::atomic<bool> done_{false};
};

// The posted ops of one channel, oldest first, and the channel's failure
// (the first one sticks). The owning channel's lock guards it, except
// pending(), which may be read without the lock.
class OpQueue {
 public:
  OpQueue() = default;
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues `op`; once the channel has failed, completes it with the failure
  // instead and returns false.
  bool Push(std::shared_ptr<Op> op);
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  Op& front() const { return *ops_.front(); }
  // Completes the oldest op with OK and drops it.
  void CompleteFront();
  // Fails every queued op, and every later Push, with `status` unless an
  // earlier failure is recorded already (then with that one).
  void Fail(const absl::Status& status);
  bool pending() const { return pending_.load(std::memory_order_relaxed) > 0; }

 private:
  std::deque<std::shared_ptr<Op>> ops_;
  absl::Status error_;
  std::atomic<int> pending_{0};
};

// What a Progress call did.
enum Progressed : int {
  kNothing = 0,
  kMoved = 1,      // bytes went into or out of the ring
  kCompleted = 2,  // at least one op completed
  kBusy = 4,       // another thread held a channel with pending ops
};

// Tells the process that owns `bell` that something changed (wakes it only
// if one of its threads sleeps). Orders the caller's earlier stores before
// the check of `sleepers`.
void RingBell(Doorbell* bell);

// Asks the process of `owner` to move bytes: rings its bell when some thread
// of it polls, else wakes its helper thread.
void Nudge(SegmentHeader* owner);

// This process writes `ring` (which lives in the peer's segment).
class SendChannel {
 public:
  // Reserves bytes [offset, offset + bytes) of the ring's data in /dev/shm
  // (see Segment::Reserve); its error says who and what, and what to do.
  using Reserve = std::function<absl::Status(size_t offset, size_t bytes)>;

  // The channel reserves the ring from its start as its writes first reach
  // each part of it, in steps that double (a page first): a ring that only
  // ever carries small messages holds a page or a few, one that carries
  // bulk data all of it after its first pass. `reserve` runs under the
  // channel lock. Pieces are copied into the ring as a CopyPace of
  // `slow_copy_mbps` says.
  SendChannel(Ring ring, SegmentHeader* peer, size_t piece_bytes,
              size_t slow_copy_mbps, Reserve reserve);
  SendChannel(const SendChannel&) = delete;
  SendChannel& operator=(const SendChannel&) = delete;

  // Queues `op` and writes what fits at once. When the ring cannot be
  // reserved as far as it must be written, fails the channel with
  // `reserve`'s error and sets *failure (the caller fails the context).
  int Post(std::shared_ptr<Op> op, absl::Status* failure);
  // Writes what fits, unless another thread is at it; *failure as for Post.
  int Progress(absl::Status* failure);
  bool pending() const { return queue_.pending(); }
  // Whether a pending op could move bytes now (the ring has room).
  bool can_progress() const;
  // Fails queued and future ops with `status` (the first one sticks).
  void Fail(const absl::Status& status);

 private:
  int ProgressLocked(absl::Status* failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves what `op` can write now of the *free bytes from head_, if not
  // yet reserved, and clips *free to the reserved part. False (the channel
  // failed, *failure set) if /dev/shm refused.
  bool ReserveFor(const Op& op, size_t* free, absl::Status* failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Ring ring_;
  SegmentHeader* const peer_;
  const size_t piece_bytes_;
  const Reserve reserve_;
  absl::Mutex mu_;
  OpQueue queue_;  // under mu_, except queue_.pending()
  uint64_t head_ ABSL_GUARDED_BY(mu_);  // our copy of ring_.header->head
  // Ring data [0, reserved_) is reserved; until it all is, head_ has not
  // wrapped (head_ % ring_.bytes <= reserved_).
  size_t reserved_ ABSL_GUARDED_BY(mu_) = 0;
  CopyPace pace_ ABSL_GUARDED_BY(mu_);
};

// This process reads `ring` (which lives in its own segment).
class RecvChannel {
 public:
  // `self`/`peer` name the ends in error messages.
  RecvChannel(Ring ring, SegmentHeader* peer, size_t piece_bytes, int self,
              int peer_rank);
  RecvChannel(const RecvChannel&) = delete;
  RecvChannel& operator=(const RecvChannel&) = delete;

  // Queues `op` and reads what has arrived. A message whose length differs
  // from a kRecv's fails it and sets *failure (the caller fails the
  // context).
  int Post(std::shared_ptr<Op> op, absl::Status* failure);
  int Progress(absl::Status* failure);
  bool pending() const { return queue_.pending(); }
  // Whether unread bytes wait in the ring.
  bool has_data() const;
  // Whether a pending receive could take bytes a blocked writer waits to
  // have drained.
  bool writer_stuck() const;
  void Fail(const absl::Status& status);

 private:
  int ProgressLocked(absl::Status* failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishTail() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Ring ring_;
  SegmentHeader* const peer_;
  const size_t piece_bytes_;
  const int self_;
  const int peer_rank_;
  absl::Mutex mu_;
  OpQueue queue_;  // under mu_, except queue_.pending()
  uint64_t tail_ ABSL_GUARDED_BY(mu_);  // our copy of ring_.header->tail
};

}  // namespace hvd::transport::shm_internal

#endif  // HVD_CORE_TRANSPORT_SHM_CHANNEL_H_
