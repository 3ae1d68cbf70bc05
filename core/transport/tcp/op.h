// The state of one posted send or receive, shared by the Request the caller
// holds and the Pair queue that moves its bytes.
//
// Threading: the transfer fields are touched only by the thread holding the
// owning Pair's lock for that direction (send or receive). Completion is
// published once through `done_` (spinning waiters read it lock-free) and
// `mu_` (blocking waiters sleep on it).
#ifndef HVD_CORE_TRANSPORT_TCP_OP_H_
#define HVD_CORE_TRANSPORT_TCP_OP_H_

#include "core/transport/op_kind.h"
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/transport/tcp/wire.h"

namespace hvd::transport::tcp_internal {

class Op {
 public:
  using Kind = ::hvd::transport::OpKind;

  // kSend: `data`/`len` is the payload. kRecv: `data` must receive exactly
  // `len` bytes. kRecvAny: `out` is resized to the message.
  Op(Kind kind, int peer, void* data, size_t len, std::string* out);
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  Kind kind() const { return kind_; }
  int peer() const { return peer_; }
  bool is_send() const { return kind_ == Kind::kSend; }

  bool done() const { return done_.load(std::memory_order_acquire); }
  // Records the result and wakes every waiter; later calls are ignored.
  void Complete(absl::Status status);
  // Blocks until done or `deadline`; true if done.
  bool AwaitDone(absl::Time deadline);
  // The result; only meaningful once done().
  absl::Status status() const;

  // Payload bytes moved so far and expected in total (for messages).
  size_t bytes_done() const {
    return bytes_done_.load(std::memory_order_relaxed);
  }
  size_t len() const { return len_; }

  // ---- transfer state: owner Pair's direction lock held -------------------

  // The header bytes: filled by the constructor for sends, by reads for
  // receives.
  unsigned char header[kHeaderBytes] = {};
  size_t header_done = 0;  // header bytes moved

  // Where the payload goes (receives) or comes from (sends); for kRecvAny
  // valid only once the header is in and SetAnyLength() was called.
  char* payload() const { return data_; }
  size_t payload_done() const { return payload_done_; }
  void AddPayloadDone(size_t n);
  // kRecvAny: sizes `*out` to `len` and points the payload at it.
  void SetAnyLength(size_t len);

 private:
  const Kind kind_;
  const int peer_;
  char* data_;
  size_t len_;
  std::string* const out_;
  size_t payload_done_ = 0;
  std::atomic<size_t> bytes_done_{0};  // mirror of payload_done_ for messages

  std::atomic<bool> done_{false};
  mutable absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_OP_H_
