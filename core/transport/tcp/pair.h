// One authenticated connection to a peer: a FIFO of sends and a FIFO of
// receives over one TCP socket, with no copies beyond the kernel's (a send
// gathers header and payload in one sendmsg; a receive reads straight into
// the caller's buffer).
//
// A pair starts without its connection: ops posted before it arrives wait in
// the FIFOs, the first of them asks the context to connect
// (PairObserver::OnFirstPost), and Attach hands the socket over and starts
// moving them, in order.
//
// Who moves the bytes: whichever thread gets there first. Posting a send
// writes inline until the socket would block; posting a watched receive
// reads whatever has already arrived. After that, ops make progress when
//   - a waiting thread polls them (Poll, from Request::Wait's spin), or
//   - the io thread is watching the direction (an async_wait on the socket,
//     re-armed while the queue is non-empty).
// Sends that would block and receives posted with `watch` are watched at
// once; other receives (small ones: the kernel buffers them) only when
// Watch() is called, which a waiter does before it blocks, so a blocked
// thread never depends on an unwatched op. Small-message round trips thus
// involve no io-thread wakeup at all.
//
// Threading: thread-safe. `send_.mu` guards the send direction, `recv_.mu`
// the receive direction; both are held (send first) only to attach, fail or
// close. The socket is used for reading only under recv_.mu, for writing only
// under send_.mu, and set or closed only under both. I/O failures are reported
// to the PairObserver after the locks are released.
#ifndef HVD_CORE_TRANSPORT_TCP_PAIR_H_
#define HVD_CORE_TRANSPORT_TCP_PAIR_H_

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/transport/tcp/op.h"

namespace hvd::transport::tcp_internal {

// What a Pair tells its context.
class PairObserver {
 public:
  virtual ~PairObserver() = default;
  // An I/O failure, before the Pair fails that direction's ops (so that
  // whoever sees an op fail finds the context failed too). Called with the
  // direction's lock held: must not call back into the Pair.
  virtual void OnPairFailing(const absl::Status& status) = 0;
  // The same failure, once that direction's ops have failed. Called with no
  // Pair lock held.
  virtual void OnPairFailure(absl::Status status) = 0;
  // A receive was queued unwatched (TakeNeedsWatch() is now true). Called
  // with the receive lock held: must not call back into the Pair.
  virtual void OnUnwatchedRecv() = 0;
  // The first op was posted to this pair while it has no connection yet.
  // Called once per pair, with no Pair lock held.
  virtual void OnFirstPost(int peer) = 0;
};

class Pair {
 public:
  // Not connected yet (Attach). `io` (which will hold the socket) and
  // `observer` must outlive the Pair.
  Pair(int rank, int peer, boost::asio::io_context& io,
       PairObserver* observer);
  ~Pair();
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int peer() const { return peer_; }
  // The far end of the pair's connection ("address:port"), as messages
  // name the peer; "not connected" before Attach.
  std::string address() const ABSL_LOCKS_EXCLUDED(address_mu_);
  bool connected() const { return connected_.load(); }

  // Hands over the pair's connected, authenticated socket (of the
  // io_context given at construction) and moves the ops posted so far. A
  // pair that already has one, or is closed, closes `socket`; one that
  // failed tells the peer why first (Fail).
  void Attach(boost::asio::ip::tcp::socket socket);

  void PostSend(std::shared_ptr<Op> op);
  // `watch`: have the io thread complete it even if nobody polls.
  void PostRecv(std::shared_ptr<Op> op, bool watch);

  // Moves bytes for the direction of `op` without blocking, unless another
  // thread is already doing so.
  void Poll(const Op& op);
  // Has the io thread watch every direction with pending ops.
  void Watch();
  // True when some posted receive may be unwatched; cleared by the read.
  bool TakeNeedsWatch() { return needs_watch_.exchange(false); }

  // Fails every pending and future op with `status` (the first one given
  // sticks) and shuts the socket down so the peer notices. Between messages
  // it first tells the peer why (a stop notice, see wire.h), so that a rank
  // waiting on this one learns the real cause, say the rank this one lost.
  void Fail(const absl::Status& status);
  // Fail, then close the socket. The io thread must no longer run.
  void Close(const absl::Status& status);

 private:
  struct Direction {
    absl::Mutex mu;
    std::deque<std::shared_ptr<Op>> queue ABSL_GUARDED_BY(mu);
    bool watched ABSL_GUARDED_BY(mu) = false;  // an async_wait is pending
    bool closed ABSL_GUARDED_BY(mu) = false;   // the socket is gone
    absl::Status error ABSL_GUARDED_BY(mu);    // once set, ops fail with it
  };

  // Each returns the failure it hit after failing the direction's ops.
  absl::Status DoSend() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_.mu);
  absl::Status DoRecv() ABSL_EXCLUSIVE_LOCKS_REQUIRED(recv_.mu);
  // `payload_got`: bytes read past the header into the op's payload.
  absl::Status CheckHeader(Op& op, size_t payload_got)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(recv_.mu);
  absl::Status ReadStopNotice(const Op& op, size_t len, size_t payload_got)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(recv_.mu);
  void SendStopNotice(absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_.mu);
  void WatchSend() ABSL_EXCLUSIVE_LOCKS_REQUIRED(send_.mu);
  void WatchRecv() ABSL_EXCLUSIVE_LOCKS_REQUIRED(recv_.mu);
  // OnFirstPost for the pair's first op while it has no connection.
  void NoteFirstPost();
  void OnWritable(const boost::system::error_code& ec);
  void OnReadable(const boost::system::error_code& ec);
  static void FailLocked(Direction& d, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu);
  absl::Status IoError(absl::string_view what,
                       const boost::system::error_code& ec) const;

  const int rank_;
  const int peer_;
  mutable absl::Mutex address_mu_;  // a leaf: held for no other lock
  std::string address_ ABSL_GUARDED_BY(address_mu_) = "not connected";
  PairObserver* const observer_;
  // Replaced once, by Attach, under both locks.
  boost::asio::ip::tcp::socket socket_;
  Direction send_;
  Direction recv_;
  std::atomic<bool> needs_watch_{false};
  // Set once, by Attach, under both locks: the socket is open. Atomic so
  // that either lock alone (and a message) may read it.
  std::atomic<bool> connected_{false};
  std::atomic<bool> first_post_seen_{false};
};

}  // namespace hvd::transport::tcp_internal

#endif  // HVD_CORE_TRANSPORT_TCP_PAIR_H_
