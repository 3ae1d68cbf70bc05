// The data-plane interface every collective algorithm is written against.
// Implementations live in subfolders (tcp/, shm/, and rdma/ at the top level);
// an algorithm never includes them.
//
// Model: a Context connects `size` ranks, every pair directly. Messages between
// two ranks are delivered in the order they were sent, and a receive matches
// the next message from that peer, so callers that issue the same sequence of
// operations on every rank need no tags.
#ifndef HVD_CORE_TRANSPORT_TRANSPORT_H_
#define HVD_CORE_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hvd::transport {

// One posted send or receive. Wait() may be called once, from any thread,
// and again after it returned DeadlineExceeded.
class Request {
 public:
  virtual ~Request() = default;
  // OK when the transfer finished. DeadlineExceeded naming the peer and byte
  // count if `deadline` passes first: the request stays posted, and may be
  // waited for again (a later deadline) or given up (the context is then
  // unusable and should be aborted). After Context::Abort, or when the
  // peer's connection failed, the recorded error naming the peer.
  virtual absl::Status Wait(absl::Time deadline) = 0;
  // True once Wait() would return without blocking.
  virtual bool Done() = 0;
};

// A request that failed before it reached a transport: Wait() returns the
// failure.
class FailedRequest final : public Request {
 public:
  explicit FailedRequest(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait(absl::Time) override { return status_; }
  bool Done() override { return true; }

 private:
  const absl::Status status_;
};

// Takes a message's bytes as they arrive (Context::RecvReduce) instead of a
// buffer that receives them: called with each piece's offset in the
// message, the piece and its length, once per piece, in order, the pieces
// covering the message. Every piece starts a multiple of
// kReducePieceAlignment bytes into the message, so a message of whole
// elements of up to that size arrives in whole elements. Runs on whichever
// thread moves the transport's bytes, never twice at once for one message.
using ReceiveReducer =
    absl::AnyInvocable<void(size_t offset, const char* piece, size_t bytes)>;
inline constexpr size_t kReducePieceAlignment = 64;

// The longest message RecvAny accepts: control messages (negotiation) are
// kilobytes to megabytes even for large jobs.
inline constexpr size_t kMaxRecvAnyBytes = size_t{256} << 20;

// Thread-safe. Destroying a Context closes its connections; requests still
// posted then fail with Cancelled.
class Context {
 public:
  virtual ~Context() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `len` bytes to `peer`. `data` must stay valid and unchanged until
  // the request completes.
  virtual std::unique_ptr<Request> Send(int peer, const void* data,
                                        size_t len) = 0;

  // Receives the next message from `peer` into `data`, which must hold
  // exactly that message: a message of another length fails the request and
  // the context with Internal naming both lengths.
  virtual std::unique_ptr<Request> Recv(int peer, void* data, size_t len) = 0;

  // Recv for bytes this rank will not read again soon (the last a large
  // collective writes into its output): a transport that copies them into
  // `data` may do so past the caches (StreamingCopy), which saves reading
  // each destination line before it is overwritten. Otherwise as Recv.
  virtual std::unique_ptr<Request> RecvStreaming(int peer, void* data,
                                                 size_t len) {
    return Recv(peer, data, len);
  }

  // Whether RecvReduce works for messages from `peer`: a transport that
  // holds received bytes in memory of its own (shared memory) can hand them
  // over from there, saving their copy into a receive buffer. Elsewhere the
  // caller receives with Recv and combines the bytes itself.
  virtual bool ReducesOnReceive(int peer) const { return false; }

  // Receives the next message from `peer`, exactly `len` bytes (a message
  // of another length fails as for Recv), handing it to `reducer` piece by
  // piece as it arrives. The request owns `reducer`, completes once the
  // last piece was handed over, and never calls it after that. Where
  // !ReducesOnReceive(peer) it fails with Unimplemented.
  virtual std::unique_ptr<Request> RecvReduce(int peer, size_t len,
                                              ReceiveReducer reducer) {
    return std::make_unique<FailedRequest>(absl::UnimplementedError(
        "this transport cannot reduce bytes as they arrive"));
  }

  // Receives the next message from `peer`, of any length up to
  // kMaxRecvAnyBytes, into `*out` (resized to fit). For control messages
  // whose size the receiver cannot know. A longer one fails the request and
  // the context: the stream is corrupt or the peer is not an hvd rank, and
  // its length is not reserved.
  virtual std::unique_ptr<Request> RecvAny(int peer, std::string* out) = 0;

  // Fails every pending and future request with `reason` and wakes all
  // waiters. Idempotent: the first reason is kept. Returns, to every caller,
  // only once the pending requests have failed: what they pointed at may
  // then be freed.
  virtual void Abort(absl::Status reason) = 0;

  // OK, or the first failure recorded (peer lost, Abort, ...).
  virtual absl::Status status() const = 0;

  // Human-readable address of `peer`'s endpoint, for error messages. A
  // transport that connects lazily knows it once connected (TCP: the far
  // end of the pair's connection, "not connected" before).
  virtual std::string PeerAddress(int peer) const = 0;
};

}  // namespace hvd::transport

#endif  // HVD_CORE_TRANSPORT_TRANSPORT_H_
